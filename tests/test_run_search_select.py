"""Which episodes a run-wide search covers, and its one budget across them, on the demo run's real episodes.

The budget test copies episodes without their snapshots: every branch fails at its restore, before any container
(no Docker needed), so the search's own accounting is what is checked: one rollout budget over all episodes, a
rerun that carries on, an episode whose branches all fail one way stops taking the budget."""

from __future__ import annotations

import json
import shutil

import pytest
from test_counterfactual import DEMO, SOLVED, WRONG_FIX

from ares_viewer import counterfactual
from ares_viewer.counterfactual import branching, run_search
from ares_viewer.runs.run import open_run

FLAT = "e53da836-e11a-422f-ae90-9e861f7e5d0b"
ERRORED = "c03d1292-fb4b-4aab-acee-f25250a93f54"  # ended errored: no reward, neither failed nor solved


def ids(episodes):
    return {e.episode_id for e in episodes}


def test_failed_solved_all_ids_task_and_flag_choose_the_episodes():
    run = open_run(DEMO)
    failed, solved, every = (ids(run_search.select(run, which)) for which in ("failed", "solved", "all"))
    assert len(failed) == 4 and len(solved) == 5 and len(every) == 10
    assert ERRORED in every and ERRORED not in failed | solved  # an unknown reward is neither
    assert ids(run_search.select(run, "failed", task="textkit__slugify-accents")) == {WRONG_FIX}
    assert ids(run_search.select(run, f"{WRONG_FIX},{SOLVED}")) == {WRONG_FIX, SOLVED}
    assert ids(run_search.select(run, "failed", flag="no_tests_before_submit")) == {WRONG_FIX}
    with pytest.raises(ValueError, match="not in it: nope"):
        run_search.select(run, "nope")
    with pytest.raises(ValueError, match="no behaviour flag 'made_up'"):
        run_search.select(run, "failed", flag="made_up")


def test_one_rollout_budget_spans_the_episodes_and_a_rerun_carries_on(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    for episode in (WRONG_FIX, FLAT, SOLVED):
        shutil.copy(DEMO / f"{episode}.json", root)
    seen = []
    first = counterfactual.search_run(open_run(root), lambda messages, system: "unused", episodes="failed",
                                      budget=branching.Budget(max_rollouts=3, parallel=1), progress=seen.append)
    assert (first.new, first.stopped) == (3, "budget")
    assert [p.episode_id for p in seen] == [WRONG_FIX, FLAT, WRONG_FIX]  # dealt round robin, coarse first
    assert all(p.branch.failure == "restore" and "no snapshot" in p.branch.error for p in seen)
    assert [p.done for p in seen] == [1, 2, 3] and all(p.planned >= p.done for p in seen)
    assert first.status == {WRONG_FIX: "failing", FLAT: "pending"}
    again = counterfactual.search_run(open_run(root), lambda messages, system: "unused", episodes="failed",
                                      budget=branching.Budget(max_rollouts=10, parallel=1))
    assert again.stopped == "done" and again.status == {WRONG_FIX: "failing", FLAT: "failing"}
    assert len(again.searches[WRONG_FIX].branches) == 2  # nothing more spent on an episode that cannot branch
    calls = json.loads(again.state_file.read_text())["calls"]
    assert [c["new"] for c in calls] == [3, again.new] and [c["stopped"] for c in calls] == ["budget", "done"]
    assert "all 2 call(s) on these episodes: " + f"{3 + again.new} branch(es)" in again.account()[1]
    assert sorted(p.name for p in root.iterdir()) == sorted(f"{e}.json" for e in (WRONG_FIX, FLAT, SOLVED))
    with pytest.raises(TypeError, match="unexpected option"):
        counterfactual.search_run(open_run(root), lambda messages, system: "unused", sample=3)
