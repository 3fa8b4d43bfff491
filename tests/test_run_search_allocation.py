"""How a run-wide search shares its one budget across episodes (pure logic: ``counterfactual.allocation``)."""

from __future__ import annotations

from ares_viewer.counterfactual import allocation, values


def state(key, steps, rewards, terminal=None, failures=()):
    """An episode with branches ``rewards`` (step -> list of rewards, None for a failure) and its terminal value."""
    curve = {s: values.estimate(s, r) for s, r in rewards.items()}
    if terminal is not None:
        curve[terminal[0]] = values.terminal(*terminal)
    tried = {s: len(r) for s, r in rewards.items()}
    counted = {s: sum(1 for x in r if x is not None) for s, r in rewards.items()}
    return allocation.EpisodeState(key, tuple(steps), curve, tried, counted, tuple(failures))


def test_every_episode_gets_coarse_values_before_any_gets_a_second_probe_and_jobs_are_dealt_round_robin():
    a = state("a", range(6), {}, terminal=(6, 0.0))
    b = state("b", range(4), {}, terminal=(4, 0.0))
    first = allocation.plan([a, b], samples=4, batch=2)
    assert first.jobs == (("a", 0), ("b", 0), ("a", 0), ("b", 0))
    # "a" already has a drop to refine; "b" has no value yet: "b"'s coarse probe comes first.
    a2 = state("a", range(6), {0: [1.0, 1.0]}, terminal=(6, 0.0))
    assert allocation.plan([a2, b], samples=4, batch=2).jobs[0] == ("b", 0)


def test_the_episode_with_the_largest_unresolved_change_gets_samples_first_and_settled_ones_none():
    drop = state("drop", range(5), {0: [1.0, 1.0]}, terminal=(5, 0.0))  # V falls 1 -> 0 somewhere in 1..4
    flat = state("flat", range(5), {0: [0.0, 0.0]}, terminal=(5, 0.0))  # no change between its ends
    half = state("half", range(5), {0: [1.0, 0.0]}, terminal=(5, 0.0))
    made = allocation.plan([half, flat, drop], samples=4, batch=2)
    assert made.status == {"half": "pending", "flat": "no change", "drop": "pending"}
    assert [k for k, _ in made.jobs] == ["drop", "half", "drop", "half"]
    assert {s for k, s in made.jobs if k == "drop"} == {2}  # the middle of 1..4, bisected


def test_a_change_between_adjacent_steps_gets_samples_until_sure_or_capped():
    unsure = state("x", range(3), {0: [1.0, 1.0], 1: [1.0, 1.0], 2: [0.0, 0.0]}, terminal=(3, 0.0))
    assert allocation.plan([unsure], samples=4, batch=2).jobs == (("x", 1), ("x", 1), ("x", 2), ("x", 2))
    sure = state("x", range(3), {0: [1.0] * 2, 1: [1.0] * 4, 2: [0.0] * 4}, terminal=(3, 0.0))
    assert allocation.status(sure, 4, 2) == "sure" and allocation.plan([sure], samples=4, batch=2).jobs == ()
    mixed = state("x", range(3), {0: [1.0] * 2, 1: [1.0, 1.0, 0.0, 1.0], 2: [0.0, 1.0, 0.0, 0.0]},
                  terminal=(3, 0.0))
    assert allocation.status(mixed, 4, 2) == "capped"  # at `samples` each, the intervals still overlap


def test_failed_branches_are_retried_a_bounded_number_of_times_and_one_reason_everywhere_stops_an_episode():
    half_failed = state("x", range(3), {0: [None, 1.0]}, terminal=(3, 0.0))
    assert allocation.plan([half_failed], samples=4, batch=2).status["x"] == "pending"
    broken = state("y", range(3), {0: [None, None]}, terminal=(3, 0.0), failures=("restore", "restore"))
    assert allocation.status(broken, 4, 2) == "failing"
    none = state("z", (), {}, terminal=(0, 0.0))
    assert allocation.status(none, 4, 2) == "no steps"
    assert allocation.plan([broken, none], samples=4, batch=2).jobs == ()


def test_the_estimate_of_what_is_left_counts_pending_episodes_only():
    pending = state("a", range(8), {}, terminal=(8, 0.0))
    flat = state("b", range(5), {0: [0.0, 0.0]}, terminal=(5, 0.0))
    assert allocation.estimate_left([flat], samples=4, batch=2) == 0
    assert allocation.estimate_left([pending, flat], samples=4, batch=2) == (2 + 3) * 2
