"""Two runs compared task by task (``ares_viewer.compare_runs``): lost, gained and changed tasks, exact tests, and
two sides of one run split by a column; and the ``compare-runs`` command."""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import demo_runs
import pytest

import ares_viewer
from ares_viewer.analysis import aggregate_plots, compare_runs
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parent.parent
MATH_RL = REPO / "tests" / "fixtures" / "tinker" / "math-rl"


@pytest.fixture
def demo(tmp_path) -> tuple[pathlib.Path, dict[str, dict[str, str]]]:
    return tmp_path, demo_runs.write(tmp_path)


def _write(folder: pathlib.Path, plan: dict[str, list[float | dict | None]]) -> None:
    """Episodes per task: a reward (None: finished, never scored), or an error (a dict: errored with it)."""
    folder.mkdir(parents=True)
    seed = 0
    for task, results in plan.items():
        for result in results:
            seed += 1
            if isinstance(result, dict):
                doc = synthetic.episode_dict(task_name=task, actions=2, seed=seed, ending="errored")
                doc["error"] = result
            else:
                doc = synthetic.episode_dict(task_name=task, actions=2, seed=seed, reward=result)
            synthetic.write_episode(folder, doc)


def test_the_task_the_second_run_never_solved_is_lost_and_pairs_its_failure_with_the_best_attempt(demo):
    root, ids = demo
    found = ares_viewer.compare_runs(root / "run-b", root / "run-a")
    assert found.labels == ("run-b", "run-a")
    # run-b solved calc-3 once; run-a only errored at it
    assert list(found.lost()["task_name"]) == ["calc__calc-3"]
    assert found.gained().empty
    assert found.counts()["lost"] == 1 and found.counts()["tasks"] == 3
    (failing_side, failing), (best_side, best) = found.pair("calc__calc-3")
    assert (failing_side.run.location, failing) == (str(root / "run-a"), ids["run-a"]["errored"])
    assert (best_side.run.location, best) == (str(root / "run-b"), ids["run-b"]["solved3"])
    # calc-1: the same task solved on both sides; B's failed attempt against A's shortest solved one
    assert found.pair("calc__calc-1")[0][1] == ids["run-a"]["failed"]
    assert found.pair("calc__calc-1")[1][1] == ids["run-b"]["solved"]
    # the overall rates, as each run's stats() counts them
    assert found.overall_a["rate"] == pytest.approx(2 / 3) and found.overall_b["rate"] == pytest.approx(2 / 5)
    # a truncated attempt where there was a plain failure: its behaviour changed (12 actions against 5)
    changed = found.changed().set_index("task_name")["changes"]
    assert any(c.startswith("actions 5.0 → 12.0") for c in changed["calc__calc-2"])
    assert any("top failure" in c for c in changed["calc__calc-2"])
    # run-a's attempts errored and were truncated where run-b's only failed: those causes grew
    shift = found.failure_shift().set_index("reason")
    assert shift.loc["truncated: hit its step or token limit", "change"] == pytest.approx(1 / 5)
    assert shift.loc["completed, not solved (reward ≤ 0)", "change"] == pytest.approx(1 / 5 - 1 / 3)
    # the figures: one dot per task, its task as customdata to pick it; the causes that moved
    dots = aggregate_plots.task_differences(found.tasks, found.labels)
    assert sorted(t for trace in dots.data for t in trace.customdata) == [f"calc__calc-{i}" for i in (1, 2, 3)]
    assert len(aggregate_plots.failure_shift(found.failure_shift(), found.labels).data[0].x) == 3


def test_a_significant_drop_is_lost_even_when_both_runs_solved_the_task(tmp_path):
    _write(tmp_path / "a", {"steady": [1.0] * 19 + [0.0], "drops": [1.0] * 19 + [0.0], "same": [1.0, 0.0] * 10})
    _write(tmp_path / "b", {"steady": [1.0] * 18 + [0.0] * 2, "drops": [1.0] * 3 + [0.0] * 17, "same": [0.0, 1.0] * 10})
    found = compare_runs.compare_runs(tmp_path / "a", tmp_path / "b")
    rows = found.tasks.set_index("task_name")
    assert rows.loc["drops", "status"] == compare_runs.LOST  # 19/20 to 3/20: no noise
    assert rows.loc["drops", "q_value"] < 0.001
    assert rows.loc["steady", "status"] == compare_runs.SAME  # 19/20 to 18/20 is noise
    assert rows.loc["drops", "difference"] == pytest.approx(-0.8)
    assert rows.loc["drops", "low"] < -0.8 < rows.loc["drops", "high"] < 0
    assert found.tasks["task_name"].iloc[0] == "drops"  # the most significant first
    assert found.sign_test == compare_runs.SignTest(better=0, worse=2, ties=1, p_value=0.5)
    assert found.significance(found.lost()) is None  # a significant drop needs no warning


def test_a_lost_list_without_a_significant_difference_says_so_in_words(demo):
    """Solved once on A, never on B, one attempt each: listed as lost, but q = 1, and the list says so."""
    root, _ = demo
    found = ares_viewer.compare_runs(root / "run-b", root / "run-a")
    assert list(found.lost()["task_name"]) == ["calc__calc-3"] and found.lost()["q_value"].min() >= 0.05
    words = found.significance(found.lost())
    assert words.startswith("No difference here is significant: every q ≥ 0.05 (the smallest is 1)")
    assert found.significance(found.gained()) is None  # an empty list needs no words
    assert found.to_dict()["significance"] == {"lost": words, "gained": None}


def test_unscored_and_infrastructure_failures_stay_out_of_the_rates(tmp_path):
    timeout = {"type": "APITimeoutError", "message": "Request timed out."}
    _write(tmp_path / "a", {"t": [1.0, 0.0]})
    _write(tmp_path / "b", {"t": [1.0, 0.0, None, timeout, timeout]})
    found = compare_runs.compare_runs(tmp_path / "a", tmp_path / "b")
    row = found.tasks.iloc[0]
    assert (row["attempts_b"], row["judged_b"], row["unscored_b"], row["infrastructure_b"]) == (5, 2, 1, 2)
    assert row["rate_b"] == 0.5 and row["status"] == compare_runs.SAME
    stats = ares_viewer.open_run(tmp_path / "b").stats()
    assert found.overall_b["rate"] == stats["success_rate"] and found.overall_b["judged"] == stats["judged"]


def test_two_iterations_of_one_tinker_run_compare_by_their_column():
    run = ares_viewer.open_run(MATH_RL)
    found = ares_viewer.compare_runs(run, by="iteration", sides=(0, 10))
    assert found.labels == ("iteration=0", "iteration=10")
    per_side = run.query("SELECT iteration, count(*) FROM episodes GROUP BY ALL").fetchall()
    assert {found.overall_a["episodes"], found.overall_b["episodes"]} <= {n for _, n in per_side}
    assert found.overall_a["episodes"] == dict(per_side)[0]
    assert found.overall_a["episodes"] + found.overall_b["episodes"] == len(run)
    # its only two values are the default sides
    assert ares_viewer.compare_runs(run, by="iteration").tasks.equals(found.tasks)
    task = found.tasks["task_name"].iloc[0]
    pair = found.pair(task)
    if pair is not None:  # each episode comes from its side's iteration
        for side, episode_id in pair:
            (iteration,) = run.query("SELECT iteration FROM episodes WHERE episode_id = ?", [episode_id]).fetchall()[0]
            assert iteration == side.value


def test_a_sides_attempts_at_listed_tasks_are_its_episodes_of_those_tasks_only():
    """What a review queue of a compare-runs list holds: one side's attempts at the listed tasks, in run order,
    none from the other side of a split run and none at another task."""
    run = ares_viewer.open_run(MATH_RL)
    found = ares_viewer.compare_runs(run, by="iteration", sides=(0, 10))
    task = str(found.tasks["task_name"].iloc[0])
    want = run.query(
        "SELECT episode_id FROM episodes WHERE iteration = 10 AND task_name = ? ORDER BY _seq", [task]
    ).fetchall()
    assert want and found.b.episode_ids([task]) == [str(i) for (i,) in want]
    assert set(found.a.episode_ids([task])).isdisjoint(found.b.episode_ids([task]))
    assert found.b.episode_ids(["no such task"]) == [] and found.b.episode_ids([]) == []


def test_a_column_without_two_values_or_no_such_column_is_said_plainly(demo):
    root, _ = demo
    with pytest.raises(compare_runs.CompareError, match="no column 'model'"):
        compare_runs.compare_runs(root / "run-a", by="model")
    with pytest.raises(compare_runs.CompareError, match="'task_name' holds more than two value"):
        compare_runs.compare_runs(root / "run-a", by="task_name")


def test_fisher_exact_and_benjamini_hochberg_match_their_textbook_values():
    assert compare_runs.fisher_exact(1, 9, 11, 3) == pytest.approx(0.002759, abs=1e-6)  # R's fisher.test
    assert compare_runs.fisher_exact(3, 1, 1, 3) == pytest.approx(0.4857, abs=1e-4)  # the lady tasting tea
    assert compare_runs.fisher_exact(5, 0, 5, 0) == 1.0
    q = compare_runs.benjamini_hochberg([0.01, 0.04, 0.03, 0.005, math.nan])
    assert list(q[:4]) == pytest.approx([0.02, 0.04, 0.04, 0.02]) and math.isnan(q[4])
    low, high = compare_runs.wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)


def test_the_command_prints_the_lost_task_and_its_json(demo):
    root, _ = demo
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ares_viewer.cli", "compare-runs", str(root / "run-b"), str(root / "run-a")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "3 tasks: 1 lost, 0 gained" in done.stdout
    assert "lost (1;" in done.stdout and "  calc__calc-3  100% of 1 → 0% of 1" in done.stdout
    lost = done.stdout.split("lost (1;", 1)[1].split("gained (0;", 1)[0]
    assert "No difference here is significant: every q ≥ 0.05" in lost
    as_json = subprocess.run(
        [sys.executable, "-m", "ares_viewer.cli", "compare-runs", str(root / "run-b"), str(root / "run-a"), "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    found = json.loads(as_json.stdout)
    assert found["counts"]["lost"] == 1
    assert [t["task_name"] for t in found["tasks"] if t["status"] == "lost"] == ["calc__calc-3"]
    wrong = subprocess.run(
        [sys.executable, "-m", "ares_viewer.cli", "compare-runs", str(root / "run-b"), "--by", "nope"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert wrong.returncode == 1 and "has no column 'nope'" in wrong.stderr


def test_a_side_with_no_judged_episode_has_no_bar_and_says_so_never_0_percent():
    judged = {"rate": 0.5, "low": 0.2, "high": 0.8, "successes": 2, "judged": 4}
    none = {"rate": None, "low": None, "high": None, "successes": 0, "judged": 0}
    fig = aggregate_plots.side_rates([("A", judged), ("B", none)])
    assert list(fig.data[0].y) == [0.5]
    assert list(fig.data[1].y) == [None]  # no bar: a rate of 0% would say the side failed every episode
    assert [a.text for a in fig.layout.annotations] == ["– (no judged episode)"]
