"""A run-wide decisive-step search on real recorded episodes with real containers, the real verifiers and the
seeded policy over HTTP that the decisive tests use (``sample_runs/decisive_branches.py``).

The run holds three of the demo run's episodes: the slugify wrong-fix one (failed; its action 2 is the planted
decisive step), a failed statskit one (the policy only knows the slugify fix: every branch fails, V never changes:
no decisive step) and a solved slugify one (not chosen by ``--episodes failed``). The search is interrupted by a
crash of its driver after a few branches, then ``ares-viewer branch RUN --episodes failed`` carries on from what was
stored and finishes within its one budget.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import uuid

import chat_server
import pytest
from test_counterfactual import DEMO, SOLVED, WRONG_FIX
from test_decisive_branches import Policy

from ares_viewer import counterfactual
from ares_viewer.counterfactual import branching, run_search
from ares_viewer.runs.run import open_run

REPO = pathlib.Path(__file__).resolve().parent.parent
SESSION = f"pytest-{uuid.uuid4().hex[:10]}"
FLAT = "e53da836-e11a-422f-ae90-9e861f7e5d0b"
TASKS = ("textkit__slugify-accents", "statskit__mean-empty")


def _run(root: pathlib.Path) -> pathlib.Path:
    """The three episodes, their snapshots and their tasks' verifier recipes, without the shipped branches."""
    root.mkdir()
    for episode in (WRONG_FIX, FLAT, SOLVED):
        shutil.copy(DEMO / f"{episode}.json", root)
        for folder in (DEMO / "snapshots").glob(f"{episode}*"):
            shutil.copytree(folder, root / "snapshots" / folder.name)
    for task in TASKS:
        shutil.copytree(DEMO / "tasks" / task, root / "tasks" / task)
    return root


def _logged(cache: pathlib.Path) -> dict[str, list[dict]]:
    logs = {}
    for log in (cache / "branches").glob("*/branches.jsonl"):
        logs[log.parent.name[:8]] = [json.loads(line) for line in log.read_text().splitlines()]
    return logs


class CrashError(RuntimeError):
    pass


def test_a_crashed_run_search_resumes_from_the_command_and_names_each_failed_episodes_decisive_step(
    engine, tmp_path, monkeypatch
):
    root = _run(tmp_path / "run")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(cache))
    env = {**os.environ, "PYTHONPATH": str(REPO), "ARES_VIEWER_CACHE": str(cache)}
    with chat_server.serve(Policy(seed=11)) as server:
        client = counterfactual.openai_client(server.base_url, "policy")
        seen = []

        def crash(p):
            seen.append(p)
            if len(seen) == 3:
                raise CrashError("the driver died")

        with pytest.raises(CrashError):
            counterfactual.search_run(open_run(root), client, episodes="failed",
                                      budget=branching.Budget(parallel=2, snapshots=False),
                                      max_steps=4, docker_client=engine, session=SESSION, progress=crash)
        kept = _logged(cache)
        assert sum(map(len, kept.values())) >= 3
        # Coarse values first: the first branches went to both failed episodes, never to the solved one.
        assert {p.episode_id for p in seen[:2]} == {WRONG_FIX, FLAT} and seen[0].episodes == 2
        assert seen[-1].planned >= 3 and seen[-1].eta_s is not None
        [account] = (cache / run_search.STATE_DIRNAME).glob("*.json")
        [crashed] = json.loads(account.read_text())["calls"]
        assert crashed["ended"] is None and crashed["new"] >= 3
        command = [sys.executable, "-m", "ares_viewer.cli", "branch", str(root), "--episodes", "failed",
                   "--endpoint", server.base_url, "--model", "policy", "--max-steps", "4", "--parallel", "2",
                   "--max-rollouts", "30", "--no-snapshots", "--export-stepwise", str(tmp_path / "prm.jsonl")]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    logs = _logged(cache)
    for key, lines in kept.items():  # nothing stored before the crash is lost or redone
        assert logs[key][: len(lines)] == lines
    assert set(logs) == {WRONG_FIX[:8], FLAT[:8]}  # the solved episode was never branched
    out = done.stdout
    assert f"{WRONG_FIX[:10]} textkit__slugify-accents     failed   decisive        2   -1.00 yes   edit" in out
    assert f"{FLAT[:10]} statskit__mean-empty         failed   no change       -       - -     -" in out
    assert SOLVED[:10] not in out
    assert "all 2 call(s) on these episodes" in out and "stopped: done" in out
    # The bar: branches done of about how many, episodes settled, the time left.
    assert "episodes settled · ~" in done.stderr and "left ·" in done.stderr
    calls = json.loads(account.read_text())["calls"]
    assert calls[1]["stopped"] == "done" and calls[1]["new"] == sum(map(len, logs.values())) - crashed["new"]
    assert sum(c["new"] for c in calls) == sum(map(len, logs.values()))
    # Spectrum per episode: 8 branches on the wrong fix against 16 exhaustive; on the flat episode its coarse pass
    # only (one branch a step, every one failed: no change, nothing more to sample).
    flat_steps = branching.branchable_steps(open_run(root).episode(FLAT))
    assert len(logs[WRONG_FIX[:8]]) <= 12 and len(logs[FLAT[:8]]) == len(flat_steps)
    rows = [json.loads(line) for line in (tmp_path / "prm.jsonl").read_text().splitlines()]
    assert any(2 in r["steps"] and r["labels"][r["steps"].index(2)] is False for r in rows)
    # A branch opens as an ordinary episode; the run folder is as it was.
    report = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "branch", str(root), "--report", "--json"],
                            capture_output=True, text=True, env=env, timeout=300, check=False)
    assert report.returncode == 0, report.stderr
    shown = {e["episode_id"]: e for e in json.loads(report.stdout)["episodes"]}
    assert shown[WRONG_FIX]["decisive_step"] == 2 and shown[FLAT]["state"] == "no change"
    assert shown[SOLVED]["state"] == "not searched"
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
