"""The pure rules of the per-episode search strategies (``counterfactual.strategies``): what each samples next and
what it concludes, on value curves whose decisive step is known."""

from __future__ import annotations

import pathlib
import random

import pytest

from ares_viewer.counterfactual import strategies, values


def _search(strategy, value_of, steps, terminal=None, samples=4, batch=2, seed=0):
    """Run ``strategy`` against a simulated policy whose V at step k is ``value_of(k)``: the conclusion and the
    branches it asked for, by step."""
    rng = random.Random(seed)
    rewards: dict[int, list[float | None]] = {}
    end = None if terminal is None else values.terminal(*terminal)
    for _ in range(100):
        wanted = strategies.next_batch(strategy, strategies.Plan(rewards, steps, end, samples, batch))
        if not wanted:
            break
        for step in wanted:
            rewards.setdefault(step, []).append(float(rng.random() < value_of(step)))
    else:
        raise AssertionError(f"{strategy} did not end")
    curve = sorted(strategies.Plan(rewards, steps, end).curve().values(), key=lambda e: e.step)
    return strategies.verdict(strategy, curve, rewards, looks=strategies.looks(len(steps), samples, batch)), rewards


@pytest.mark.parametrize("strategy", ["adaptive", "spectrum", "bisect"])
@pytest.mark.parametrize("planted", [1, 4, 8])
def test_each_strategy_names_a_planted_drop_early_middle_and_late_with_fewer_branches_than_exhaustive(
    strategy, planted
):
    steps = list(range(9))
    found, rewards = _search(strategy, lambda k: 1.0 if k < planted else 0.0, steps, terminal=(9, 0.0))
    assert found is not None and (found.step, found.sure) == (planted, True) and found.change < 0
    assert sum(map(len, rewards.values())) < 4 * len(steps)


@pytest.mark.parametrize("strategy", ["adaptive", "spectrum"])
def test_a_rise_in_a_solved_episode_is_named_as_the_step_that_made_the_fix(strategy):
    found, _ = _search(strategy, lambda k: 0.0 if k < 3 else 1.0, list(range(6)), terminal=(6, 1.0))
    assert (found.step, found.sure) == (3, True) and found.change > 0


@pytest.mark.parametrize("strategy", ["adaptive", "spectrum"])
@pytest.mark.parametrize("value", [0.0, 1.0])
def test_no_step_is_named_when_v_does_not_depend_on_the_state_and_one_branch_a_step_is_enough(strategy, value):
    steps = list(range(7))
    found, rewards = _search(strategy, lambda k: value, steps, terminal=(7, value))
    assert found is None
    assert {step: len(r) for step, r in rewards.items()} == dict.fromkeys(steps, 1)


def test_adaptive_adds_samples_only_to_the_ends_of_the_unsure_change_and_stops_at_the_cap():
    plan = strategies.Plan({0: [1.0], 1: [1.0], 2: [0.0], 3: [0.0]}, [0, 1, 2, 3], values.terminal(4, 0.0), 4, 2)
    assert strategies.next_batch("adaptive", plan) == [1, 1, 2, 2]
    sure = strategies.Plan({0: [1.0], 1: [1.0] * 4, 2: [0.0] * 4, 3: [0.0]}, [0, 1, 2, 3], None, 4, 2)
    assert strategies.next_batch("adaptive", sure) == []  # 4 of 4 against 0 of 4: the intervals separate
    # At the cap an unsure change is left; the next largest change that can still move gets the samples.
    capped = strategies.Plan({0: [1.0], 1: [1.0, 1.0, 1.0, 0.0], 2: [0.0] * 4, 3: [0.0] * 4}, [0, 1, 2, 3], None,
                             4, 2)
    assert strategies.next_batch("adaptive", capped) == [0, 0]


def test_failed_branches_are_retried_a_bounded_number_of_times():
    plan = strategies.Plan({0: [None] * 8, 1: [None] * 3}, [0, 1], None, 4, 2)
    assert plan.room(0) == 0 and plan.room(1) == 4
    assert strategies.next_batch("adaptive", plan) == [1]  # step 0 tried 8 times: no more


def test_the_spectrum_ranks_the_action_all_failing_branches_share_and_no_passing_one_does():
    rewards = {0: [1.0, 1.0], 1: [1.0, 1.0], 2: [0.0, 0.0], 3: [0.0]}
    scores = strategies.spectrum_scores(rewards)
    assert max(scores, key=scores.get) == 2 and scores[2] == pytest.approx(1.0)
    assert scores[1] < scores[2] and scores[3] < scores[2]
    assert strategies.spectrum_scores({0: [1.0], 1: [1.0]}) == {}  # one outcome: nothing separates
    # The verdict pools the branches on either side of the candidate: 4 of 4 before step 2, 0 of 3 from it on
    # (not yet sure for a search of 7 looks); the episode's recorded failure at its end and one more branch make
    # it 0 of 5 (then sure).
    found = strategies.verdict("spectrum", [], rewards, looks=7)
    assert (found.step, found.before, found.change, found.sure) == (2, 1, -1.0, False)
    ended = strategies.verdict("spectrum", [values.terminal(4, 0.0)], {**rewards, 3: [0.0, 0.0]}, looks=7)
    assert (ended.step, ended.sure) == (2, True)


def test_unknown_strategy_names_are_refused():
    with pytest.raises(ValueError, match="strategy 'random': expected one of bisect, adaptive, spectrum"):
        strategies.next_batch("random", strategies.Plan({}, [0, 1]))


def test_the_change_interval_is_newcombes_hybrid_score_interval():
    # Newcombe (1998), Statistics in Medicine 17:873, table II example (a): 56/70 against 48/80, method 10.
    low, high = strategies.change_interval(values.estimate(0, [1.0] * 48 + [0.0] * 32),
                                           values.estimate(1, [1.0] * 56 + [0.0] * 14))
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)
    assert strategies.change_interval(values.estimate(0, []), values.estimate(1, [1.0])) == (-1.0, 1.0)
    # A recorded outcome is one execution: 1 of 1 against 0 of 1 is no evidence of a change.
    low, high = strategies.change_interval(values.terminal(0, 1.0), values.terminal(1, 0.0))
    assert low < 0 < high
    assert strategies.corrected(4) == pytest.approx(1 - 0.05 / 4) and strategies.corrected(0) == values.CONFIDENCE


def test_the_spectrum_corrects_for_the_splits_and_looks_it_tests():
    # 4 of 4 before the candidate, 0 of 3 from it on: sure when this one test (of 3 candidate splits) is all the
    # search makes; not once the level also covers the 7 looks of a search of 7 steps x 4 samples.
    rewards = {0: [1.0, 1.0], 1: [1.0, 1.0], 2: [0.0, 0.0], 3: [0.0]}
    assert strategies.looks(7, 4, 2) == 7 and strategies.looks(5, 8, 2) == 10 and strategies.looks(3, 1, 2) == 1
    assert strategies.verdict("spectrum", [], rewards).sure
    many = strategies.verdict("spectrum", [], rewards, looks=strategies.looks(7, 4, 2))
    assert (many.step, many.sure) == (2, False)


@pytest.mark.parametrize("samples", [4, 8])
def test_the_spectrum_rarely_claims_a_step_when_success_does_not_depend_on_the_state(samples):
    # The suite's coin policy: V is 0.5 at every step of a truncated episode (no recorded outcome). Without the
    # correction (separate 95% Wilson intervals for whichever split looked best, at every look) 13 and 12 of these
    # 200 seeded searches claimed a decisive step; with it, at most about the 5% the family's level allows.
    claimed = 0
    for seed in range(200):
        found, _ = _search("spectrum", lambda k: 0.5, list(range(5)), samples=samples, seed=seed)
        claimed += found is not None and found.sure
    assert claimed <= 10, claimed


def test_a_spectrum_search_says_its_own_verdict_not_the_neighbouring_steps_rule():
    from ares_viewer.counterfactual import branching

    rewards = {0: [1.0, 1.0], 1: [1.0, 0.0], 2: [0.0, 0.0], 3: [0.0]}
    curve = tuple(sorted(strategies.Plan(rewards, [0, 1, 2, 3], values.terminal(4, 0.0)).curve().values(),
                         key=lambda e: e.step))
    found = strategies.verdict("spectrum", curve, rewards, looks=1)
    search = branching.Search(pathlib.Path("branches"), curve, found, (), strategy="spectrum")
    said = search.describe()
    assert said.startswith(f"Decisive step {found.step} (spectrum): a drop of {abs(found.change):.2f}") and (
        "corrected" in said)
    flat = branching.Search(pathlib.Path("branches"), curve, None, (), strategy="spectrum")
    assert flat.describe().startswith("No decisive step (spectrum)")
    # The exhaustive rule keeps its words (the largest change between neighbouring steps).
    assert branching.Search(pathlib.Path("branches"), curve, values.decisive(curve), ()).describe().startswith(
        "Decisive step 1: a drop of 0.50 in V from step 0")
