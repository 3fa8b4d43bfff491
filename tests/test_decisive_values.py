"""The pure part of the decisive-step search: Wilson intervals, the decisive step, where a bisection probes."""

from __future__ import annotations

import pytest

from ares_viewer.counterfactual import values


def test_wilson_matches_the_textbook_interval_and_stays_inside_0_1():
    low, high = values.wilson(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert values.wilson(0, 4)[0] == 0.0 and values.wilson(4, 4)[1] == 1.0
    assert values.wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="5 successes out of 4"):
        values.wilson(5, 4)


def test_four_samples_each_way_tell_a_sure_drop_but_three_do_not():
    assert values.separated(values.estimate(1, [1.0] * 4), values.estimate(2, [0.0] * 4))
    assert not values.separated(values.estimate(1, [1.0] * 3), values.estimate(2, [0.0] * 3))


def test_a_failed_branch_is_not_a_reward_of_zero():
    est = values.estimate(3, [1.0, None, 1.0, None])
    assert est.value == 1.0 and est.n == 2 and est.failed == 2
    assert values.estimate(3, [None, None]).value is None


def test_the_decisive_step_is_the_largest_change_with_its_size_and_certainty():
    curve = [
        values.estimate(0, [1, 1, 1, 0]),
        values.estimate(1, [1, 1, 1, 1]),
        values.estimate(2, [0, 0, 0, 0]),
        values.estimate(3, [0, 0, 0, 0]),
        values.terminal(4, 0.0),
    ]
    found = values.decisive(curve)
    assert (found.step, found.before, found.change, found.sure) == (2, 1, -1.0, True)
    rise = values.decisive([values.estimate(0, [0, 0]), values.estimate(5, [1, 0]), values.terminal(6, 1.0)])
    assert rise.step == 5 and rise.change == 0.5 and not rise.sure  # a tie goes to the earlier step
    assert values.decisive([values.estimate(0, [1])]) is None


def _probe_until_done(true_value, steps, terminal=None, samples=4):
    curve = {} if terminal is None else {terminal[0]: values.terminal(*terminal)}
    probed = []
    for _ in range(50):
        wanted, done = values.next_probe(curve, steps)
        if done:
            return curve, probed
        for s in wanted:
            probed.append(s)
            n = (curve[s].n if s in curve else 0) + samples
            curve[s] = values.estimate(s, [true_value(s)] * n)
    raise AssertionError("the bisection did not end")


def test_bisection_finds_a_drop_in_a_long_episode_probing_few_steps():
    curve, probed = _probe_until_done(lambda s: 1.0 if s < 23 else 0.0, list(range(40)), terminal=(40, 0.0))
    assert values.decisive(list(curve.values())).step == 23
    assert len(set(probed)) <= 8


def test_bisection_adds_samples_to_an_adjacent_pair_that_is_not_yet_sure():
    curve = {
        0: values.estimate(0, [1, 1]),
        1: values.estimate(1, [1, 1]),
        2: values.estimate(2, [0, 0]),
        3: values.terminal(3, 0.0),
    }
    assert values.next_probe(curve, [0, 1, 2]) == ([1, 2], False)
    curve[1], curve[2] = values.estimate(1, [1] * 4), values.estimate(2, [0] * 4)
    assert values.next_probe(curve, [0, 1, 2]) == ([], True)


def test_bisection_stops_when_v_does_not_change_between_the_ends():
    curve = {0: values.estimate(0, [1, 1]), 5: values.estimate(5, [1, 1])}
    assert values.next_probe(curve, list(range(6))) == ([], True)
    assert values.next_probe({}, list(range(6))) == ([0, 5], False)


def test_the_bundled_sample_exports_as_process_reward_rows_in_jsonl_and_parquet(tmp_path):
    import json
    import pathlib

    import pyarrow.parquet as pq

    from ares_viewer.counterfactual import branching, process_rewards
    from ares_viewer.runs.run import load_episode

    demo = pathlib.Path(__file__).resolve().parent.parent / "sample_runs" / "demo-run"
    episode = load_episode(demo / "aefe890e-4268-4666-90b5-dd09d3259e06.json")
    assert process_rewards.write([episode], tmp_path / "labels.jsonl") == 4
    rows = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert [(r["step"], r["V"], r["n"]) for r in rows] == [(0, 1.0, 4), (1, 1.0, 4), (2, 0.0, 4), (3, 0.0, 4)]
    wrong = rows[2]  # action 2, the wrong fix, labelled with the value it left
    assert wrong["action"] == episode.step(2).response and wrong["messages"][-1] == episode.context(2)[-1].to_dict()
    assert rows[0]["action"] is None and len(wrong["branch_ids"]) == 4
    assert set(wrong["branch_ids"]) == {b.episode_id for b in branching.load(episode).of_step(2)}
    assert process_rewards.write([episode], tmp_path / "labels.parquet") == 4
    table = pq.read_table(tmp_path / "labels.parquet").to_pylist()
    assert [r["V"] for r in table] == [1.0, 1.0, 0.0, 0.0]
    assert json.loads(table[2]["messages"]) == wrong["messages"] and table[2]["branch_ids"] == wrong["branch_ids"]
    with pytest.raises(ValueError, match=r"labels\.csv: process-reward data is written as \.jsonl or \.parquet"):
        process_rewards.write([episode], tmp_path / "labels.csv")


def test_no_step_is_decisive_when_v_does_not_change_and_the_sentence_says_so():
    # #43 defect 3: a 2-branch search from step 3 (0 of 2 solved) of a reward-0 episode.
    curve = [values.estimate(3, [0.0, 0.0]), values.terminal(4, 0.0)]
    assert values.decisive(curve) is None
    assert values.describe(curve) == (
        "No change found: V is 0.00 at steps 3 and 4 (the intervals overlap: more samples could still show a "
        "change), so no step is decisive."
    )
    drop = [values.estimate(1, [1.0] * 4), values.estimate(2, [0.0] * 4), values.terminal(4, 0.0)]
    assert values.describe(drop) == "Decisive step 2: a drop of 1.00 in V from step 1 (the intervals separate)."
    assert values.describe([values.estimate(3, [0.0, None])]) == (
        "No decisive step yet: fewer than two steps have a value."
    )
