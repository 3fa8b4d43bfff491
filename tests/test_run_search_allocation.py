"""How a run-wide search shares its one budget across episodes (pure logic: ``counterfactual.allocation``)."""

from __future__ import annotations

import random

from ares_viewer.counterfactual import allocation, strategies, values


def state(key, steps, rewards, terminal=None, failures=()):
    """An episode with branches ``rewards`` (step -> list of rewards, None for a failure) and its terminal value."""
    curve = {s: values.estimate(s, r) for s, r in rewards.items()}
    if terminal is not None:
        curve[terminal[0]] = values.terminal(*terminal)
    tried = {s: len(r) for s, r in rewards.items()}
    counted = {s: sum(1 for x in r if x is not None) for s, r in rewards.items()}
    return allocation.EpisodeState(key, tuple(steps), curve, tried, counted, tuple(failures),
                                   {s: tuple(r) for s, r in rewards.items()})


def settle(outcome, steps, *, samples=4, batch=2, seed=0, terminal=0.0):
    """Run the rule alone on one episode whose branch from step k succeeds as ``outcome(k, rng)`` says, until it
    settles: its status, the spectrum's verdict and the branches spent."""
    rng, rewards = random.Random(seed), {}
    while True:
        now = state("x", range(steps), rewards, terminal=(steps, terminal))
        made = allocation.plan([now], samples=samples, batch=batch)
        if not made.jobs:
            found = strategies.verdict(strategies.SPECTRUM, list(now.curve.values()), now.rewards,
                                       looks=strategies.looks(steps, samples, batch))
            return made.status["x"], found, sum(len(r) for r in rewards.values())
        for _, step in made.jobs:
            rewards.setdefault(step, []).append(outcome(step, rng))


def test_every_episode_gets_coarse_values_before_any_gets_a_second_branch_and_jobs_are_dealt_round_robin():
    a = state("a", range(3), {}, terminal=(3, 0.0))
    b = state("b", range(2), {}, terminal=(2, 0.0))
    first = allocation.plan([a, b], samples=4, batch=2)
    assert first.jobs == (("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2))  # the spectrum's coarse pass each
    # "a" already has its coarse values and a drop to refine; "b" has no value yet: "b"'s coarse pass comes first.
    a2 = state("a", range(3), {0: [1.0], 1: [1.0], 2: [0.0]}, terminal=(3, 0.0))
    assert allocation.plan([a2, b], samples=4, batch=2).jobs[0] == ("b", 0)


def test_the_episode_with_the_largest_unresolved_change_gets_samples_first_and_settled_ones_none():
    drop = state("drop", range(5), {0: [1.0], 1: [1.0], 2: [0.0], 3: [0.0], 4: [0.0]}, terminal=(5, 0.0))
    flat = state("flat", range(5), {s: [0.0] for s in range(5)}, terminal=(5, 0.0))  # one outcome everywhere
    half = state("half", range(5), {0: [1.0], 1: [0.0], 2: [1.0], 3: [0.0], 4: [0.0]}, terminal=(5, 0.0))
    made = allocation.plan([half, flat, drop], samples=4, batch=2)
    assert made.status == {"half": "pending", "flat": "no change", "drop": "pending"}
    assert [k for k, _ in made.jobs][:2] == ["drop", "half"]
    # the spectrum's candidate is action 2 (the fall): it tops up the states on either side of it
    assert {s for k, s in made.jobs if k == "drop"} == {1, 2}


def test_a_change_gets_samples_until_sure_or_capped():
    sure = state("x", range(3), {0: [1.0] * 4, 1: [1.0] * 4, 2: [0.0] * 4}, terminal=(3, 0.0))
    assert allocation.status(sure, 4, 2) == "sure" and allocation.plan([sure], samples=4, batch=2).jobs == ()
    mixed = state("x", range(3), {0: [1.0, 0.0, 1.0, 0.0], 1: [1.0, 0.0, 0.0, 1.0], 2: [0.0, 1.0, 0.0, 0.0]},
                  terminal=(3, 0.0))
    assert allocation.status(mixed, 4, 2) == "capped"  # every step at `samples`, the change still unsure


def test_a_planted_drop_is_named_sure_and_a_state_independent_episode_is_never_claimed():
    planted = settle(lambda k, rng: float(rng.random() < (0.9 if k < 3 else 0.1)), 6)
    assert planted[0] == "sure" and planted[1].step == 3 and planted[1].change < 0
    assert planted[2] < 6 * 4  # fewer branches than the exhaustive search's `samples` a step
    flat = settle(lambda k, rng: 0.0, 6)  # the policy never succeeds from any state: no change, no step
    assert flat == ("no change", None, 6)
    for seed in range(10):  # a coin whatever the state: never a sure decisive step
        status, found, _ = settle(lambda k, rng: float(rng.random() < 0.5), 6, seed=seed)
        assert status in ("no change", "capped") and (found is None or not found.sure)


def test_failed_branches_are_retried_a_bounded_number_of_times_and_one_reason_everywhere_stops_an_episode():
    half_failed = state("x", range(3), {0: [None, 1.0]}, terminal=(3, 0.0))
    assert allocation.plan([half_failed], samples=4, batch=2).status["x"] == "pending"
    broken = state("y", range(3), {0: [None, None]}, terminal=(3, 0.0), failures=("restore", "restore"))
    assert allocation.status(broken, 4, 2) == "failing"
    none = state("z", (), {}, terminal=(0, 0.0))
    assert allocation.status(none, 4, 2) == "no steps"
    assert allocation.plan([broken, none], samples=4, batch=2).jobs == ()
    capped = state("w", range(2), {0: [None] * 7 + [1.0], 1: [None] * 8}, terminal=(2, 0.0), failures=("a", "b"))
    assert allocation.plan([capped], samples=4, batch=2).jobs == ()  # 2 * samples tries a step at most


def test_the_estimate_of_what_is_left_counts_pending_episodes_only():
    pending = state("a", range(8), {}, terminal=(8, 0.0))
    flat = state("b", range(5), {s: [0.0] for s in range(5)}, terminal=(5, 0.0))
    assert allocation.estimate_left([flat], samples=4, batch=2) == 0
    assert allocation.estimate_left([pending, flat], samples=4, batch=2) == 8 + 2 * 2
