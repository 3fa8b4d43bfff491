"""``ares-viewer branch RUN --episodes failed`` on the planted suite's small part (recorded through real ARES once per
session, conftest's ``planted_suite``), through the real CLI, real containers and the suite's policy over HTTP
(``recover=0``, one model for the run: conftest's ``searched_planted_suite``): the search picks the failed
episodes only, and ``--report --json`` names the planted step where a drop is planted and "no change" where none
is, never giving that one a step. The run folder is left as recorded. Fails in CI without the ARES venv or the
engine (conftest).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ares_viewer.counterfactual import branching
from ares_viewer.runs.run import load_episode

pytestmark = [pytest.mark.docker, pytest.mark.ares]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(searched, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ares_viewer.cli", "branch", str(searched.run), *args],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": REPO, "ARES_VIEWER_CACHE": str(searched.cache)})


def test_the_run_wide_search_settles_each_failed_episode_within_fewer_rollouts_than_exhaustive(searched_planted_suite):
    s = searched_planted_suite
    drop, flat = s.entries["statskit-drop-delete"], s.entries["units-none-reads"]
    search = json.loads(s.done.stdout)["search"]
    # the failed episodes only (the rise and the solved one with none are not searched), each settled
    assert search["status"] == {drop["episode_id"]: "sure", flat["episode_id"]: "no change"}, s.done.stderr[-2000:]
    assert not search["failures"] and search["stopped"] == "done"
    exhaustive = sum(4 * len(branching.branchable_steps(load_episode(s.run / e["file"]))) for e in (drop, flat))
    assert 0 < search["new"] < exhaustive  # the shared budget spent less than 4 branches a step everywhere
    assert s.untouched, "the search wrote into the run folder"
    assert "episodes settled" in s.done.stderr  # the progress bar


def test_the_report_names_the_planted_step_and_no_change_where_none_is_planted(searched_planted_suite):
    s = searched_planted_suite
    drop, flat = s.entries["statskit-drop-delete"], s.entries["units-none-reads"]
    done = _cli(s, "--report", "--episodes", "failed", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert "search" not in report  # a report runs no branch
    rows = {r["episode_id"]: r for r in report["episodes"]}
    assert set(rows) == {drop["episode_id"], flat["episode_id"]}
    lost = rows[drop["episode_id"]]
    assert (lost["state"], lost["decisive_step"], lost["sure"], lost["direction"]) == (
        "decisive", drop["planted"], True, "drop"), lost["finding"]
    assert lost["kind"] == "delete" and lost["command"].startswith("git rm -q statskit/__init__.py")
    assert lost["where"] == drop["position"] and lost["link"].endswith(f"episode={drop['episode_id']}&step=1")
    none = rows[flat["episode_id"]]
    assert (none["state"], none["decisive_step"], none["kind"], none["change"]) == ("no change", None, None, None)
    assert none["finding"].startswith("No decisive step (spectrum)")  # the rule the run-wide search wrote
    states = {(r["outcome"], r["state"]): r["episodes"] for r in report["summary"]["states"]}
    assert states == {("failed", "decisive"): 1, ("failed", "no change"): 1}
    kinds = {r["kind"]: r["lost (failed, drop)"] for r in report["summary"]["kinds"]}
    assert kinds["delete"] == 1 and sum(kinds.values()) == 1  # no step counted for the flat one
    everything = _cli(s, "--report")  # the whole run as text: the solved episodes were not searched
    assert everything.returncode == 0, everything.stderr[-2000:]
    assert everything.stdout.count("not searched") >= 2 and "delete" in everything.stdout
