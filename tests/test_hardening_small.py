"""The smaller hardening cases of issue #45, one test (or a few) per case, grouped by mechanism.

docs/security.md ("Smaller cases") lists each mechanism beside its test here.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time
import unicodedata
import uuid

import chat_server
import formats_fixtures as fx
import pytest
from test_counterfactual import DEMO, WRONG_FIX
from test_decisive_branches import Policy

from ares_viewer import cli, counterfactual, fsdiff, review
from ares_viewer.analysis import compare_runs
from ares_viewer.analysis.behaviours import registry, snapshot_cache
from ares_viewer.counterfactual import branching
from ares_viewer.review import labelschema
from ares_viewer.runs import run as run_module
from ares_viewer.runs.run import load_episode
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parent.parent
SESSION = f"pytest-{uuid.uuid4().hex[:10]}"

# --- A label schema's score bounds are finite numbers ------------------------------------------------------------


@pytest.mark.parametrize(
    "bounds",
    [
        '"min": -Infinity, "max": 5',
        '"min": 0, "max": Infinity',
        '"min": NaN, "max": 5',
        '"min": 0, "max": 1e999',
        '"min": 0, "max": ' + "9" * 400,
    ],
    ids=["-inf", "inf", "nan", "1e999", "int-past-float"],
)
def test_a_score_with_an_infinite_or_nan_bound_is_refused_at_parse(bounds):
    text = '{"fields": [{"name": "severity", "kind": "score", ' + bounds + "}]}"
    with pytest.raises(labelschema.SchemaError, match="'severity': a score needs finite numbers"):
        labelschema.LabelSchema.parse(text)
    as_dict = json.loads(text)
    with pytest.raises(labelschema.SchemaError, match="finite numbers"):
        labelschema.LabelSchema.parse(as_dict)


def test_a_finite_score_schema_exports_as_strict_json():
    parsed = labelschema.LabelSchema.parse({"fields": [{"name": "severity", "kind": "score", "min": -2.5, "max": 5}]})
    exported = json.dumps(parsed.to_dict(), allow_nan=False)
    assert "Infinity" not in exported and "NaN" not in exported
    assert parsed.field("severity").clean(5) == 5.0
    with pytest.raises(labelschema.SchemaError, match=r"between -2\.5 and 5"):
        parsed.field("severity").clean(math.inf)


# --- A token budget counts every call: no usage, or a total of 0, is counted by the call's size -------------------


@pytest.mark.parametrize(
    "usage",
    [{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, None],
    ids=["total-0", "no-usage"],
)
def test_an_endpoint_reporting_zero_or_no_tokens_does_not_disable_the_token_budget(
    engine, tmp_path, monkeypatch, usage
):
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    with chat_server.serve(Policy(seed=11)) as server:
        server.usage = usage
        client = counterfactual.openai_client(server.base_url, "policy")
        searched = branching.search(parent, client, steps=[1], samples=6, max_steps=4, docker_client=engine,
                                    budget=branching.Budget(parallel=1, token_budget=1000, snapshots=False),
                                    session=SESSION)  # no per-step snapshots: the budget does not depend on them
    assert searched.stopped == "token budget" and searched.new < 6
    assert searched.tokens is None  # what was spent stays unknown, never 0
    assert "token budget of 1,000 counted each such call as its size" in searched.note
    [branch] = [b for b in searched.branches if not b.supplied]
    assert branch.tokens is None and branch.counted_tokens >= 1000
    saved = next(b for b in branching.load(parent).branches if not b.supplied)
    assert saved.counted_tokens == branch.counted_tokens  # the log keeps what the budget counted


# --- Branches are never stored inside the run's tree ---------------------------------------------------------------


@pytest.mark.parametrize("where", [".", "elsewhere/branches"], ids=["the-run-top", "a-folder-in-the-run"])
def test_branches_to_a_folder_of_the_run_is_refused_when_episodes_sit_one_folder_down(tmp_path, capsys, where):
    run = tmp_path / "run"
    (run / "trial-1").mkdir(parents=True)
    shutil.copy(DEMO / f"{WRONG_FIX}.json", run / "trial-1" / f"{WRONG_FIX}.json")
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    argv = ["branch", str(run), WRONG_FIX, "--branches-to", str(run / where), "--max-rollouts", "0",
            "--endpoint", "http://127.0.0.1:9/v1", "--model", "policy"]
    assert cli.main(argv) == 1
    error = capsys.readouterr().err
    assert "branches are never written into the run folder" in error and "list as the run's episodes" in error
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before  # nothing written into the run
    assert run_module.Run(run, use_cache=False).episode_ids == [WRONG_FIX]


# --- compare-runs says when task names differ only by case, spaces, Unicode form or a look-alike letter -----------

NFD_TASK = unicodedata.normalize("NFD", "café__menu")


def write_similar_runs(root):
    """Two runs whose tasks are the same ones typed differently on B: a trailing space, case, NFD, a Cyrillic а."""
    names = {"a": ["calc__calc-1", "Calc__calc-2", "café__menu", "path__join"],
             "b": ["calc__calc-1 ", "calc__calc-2", NFD_TASK, "p\u0430th__join"]}
    for side, tasks in names.items():
        (root / f"similar-{side}").mkdir(parents=True)
        for seed, task in enumerate(tasks, 1):
            synthetic.write_episode(root / f"similar-{side}",
                                    synthetic.episode_dict(task_name=task, actions=2, reward=1.0, seed=seed))
    return root / "similar-a", root / "similar-b"


def test_compare_runs_warns_which_task_names_collide(tmp_path, capsys):
    a, b = write_similar_runs(tmp_path)
    assert cli.main(["compare-runs", str(a), str(b)]) == 0
    shown = capsys.readouterr().out
    warnings = [line for line in shown.splitlines() if line.startswith("warning: task names")]
    assert len(warnings) == 4, shown
    assert "'calc__calc-1' and 'calc__calc-1 ' differ only by case, spaces" in shown
    assert "'Calc__calc-2' and 'calc__calc-2'" in shown
    assert "'cafe\\u0301__menu' and 'caf\\xe9__menu'" in shown
    assert "'path__join' and 'p\\u0430th__join'" in shown
    assert all("compared as different tasks" in w for w in warnings)
    assert compare_runs.similar_task_names(["calc__calc-1", "calc__calc-2", "other"]) == []


# --- A SWE-bench summary whose counts contradict its id lists scores nothing -------------------------------------

DJANGO, ASTROPY = "django__django-11099", "astropy__astropy-12907"  # the instances of the mini fixture's two runs


@pytest.mark.parametrize(
    ("lists", "counts", "said"),
    [
        ({"unresolved": [ASTROPY]}, {"resolved_instances": 1}, "resolved_instances 1, resolved_ids lists 0"),
        ({"resolved": [DJANGO], "unresolved": [ASTROPY]}, {"resolved_instances": 0},
         "resolved_instances 0, resolved_ids lists 1"),
    ],
    ids=["count-without-ids", "ids-without-count"],
)
def test_a_summary_whose_counts_contradict_its_id_lists_scores_nothing_and_warns(tmp_path, lists, counts, said):
    run_folder = tmp_path / "mini"
    shutil.copytree(fx.MINI, run_folder)
    report = run_folder / "report.json"
    report.write_text(json.dumps({**fx.harness_report(**lists), **counts}))
    run = run_module.open_run(run_folder)
    rewards = run.episodes.set_index("episode_id")["total_reward"]
    assert rewards.isna().all(), rewards  # unknown: neither 1.0 nor 0.0
    warned = [message for path, message in run.warnings if path == str(report) and "counts contradict" in message]
    assert warned == [f"its counts contradict its id lists ({said}): the report cannot say which list is wrong, so "
                      "none of its instances gets a reward"]
    assert run.stats()["unscored"] == 2


# --- Snapshot flags are keyed by the snapshots too ---------------------------------------------------------------

PAGER_EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # touched_tests_files at step 9 (tests/test_snapshot_cache.py)


def _snapshot_flags(run) -> set[tuple[str, str, int]]:
    _, evidence = snapshot_cache.table(run)
    return {(row.flag, row.episode_id, row.step) for row in evidence.itertuples()}


class _Counting:
    def __init__(self) -> None:
        self.read: list[str] = []

    def __call__(self, episode):
        self.read.append(episode.episode_id)
        return fsdiff.paths_by_step(episode)


@pytest.mark.parametrize("snapshots_of", [snapshot_cache.per_step_folders, fsdiff.snapshot_folders],
                         ids=["per-step-layout", "snapshots-find"])
def test_a_changed_snapshot_is_flagged_again_not_served_from_the_cache(tmp_path, monkeypatch, snapshots_of):
    demo = pathlib.Path(shutil.copytree(DEMO, tmp_path / "demo-run"))
    run = run_module.open_run(demo)
    snapshot_cache.update(run, _Counting(), workers=1, snapshots_of=snapshots_of)
    assert ("touched_tests_files", PAGER_EXPLORER, 9) in _snapshot_flags(run)

    # Step 9's snapshot rewritten to record no change since step 8 (the episode file is untouched).
    steps = demo / "snapshots" / PAGER_EXPLORER
    manifest = json.loads((steps / "step_0008" / "manifest.json").read_text())
    (steps / "step_0009" / "manifest.json").write_text(json.dumps({**manifest, "step_index": 9}, indent=2))
    again = _Counting()
    fresh = run_module.open_run(demo)
    assert snapshot_cache.covered(fresh) == 9  # the changed episode is no longer covered
    assert snapshot_cache.update(fresh, again, workers=1, snapshots_of=snapshots_of) == 1
    assert again.read == [PAGER_EXPLORER]
    assert ("touched_tests_files", PAGER_EXPLORER, 9) not in _snapshot_flags(fresh)
    assert snapshot_cache.findings(fresh, fresh.episode(PAGER_EXPLORER), again, snapshots_of) == registry.findings(
        registry.SNAPSHOTS, fresh.episode(PAGER_EXPLORER), fsdiff.paths_by_step(fresh.episode(PAGER_EXPLORER)))
    # Ground truth: a cache that never saw the old snapshot gives the same flags.
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "other-cache"))
    uncached = run_module.open_run(demo, use_cache=False)
    snapshot_cache.update(uncached, fsdiff.paths_by_step, workers=1)
    assert _snapshot_flags(uncached) == _snapshot_flags(fresh)


# --- Four busy writers refuse no note: a writer never barges past those waiting ----------------------------------

BUSY_WRITER = """
import os, sys
from ares_viewer import review
db, run, stop = sys.argv[1:4]
store = review.open_store(db)
added = refused = 0
while not os.path.exists(stop):
    try:
        store.add(run, "ep", 1, author=f"bot-{os.getpid()}", text=f"note {added}")
        added += 1
    except review.ReviewError:
        refused += 1
print(added, refused, flush=True)
"""


def test_four_writers_adding_back_to_back_starve_no_fifth_writer(tmp_path):
    db, run, stop = tmp_path / "review.sqlite", tmp_path / "run", tmp_path / "stop"
    run.mkdir()
    review.open_store(db).close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", BUSY_WRITER, str(db), str(run), str(stop)],
                                stdout=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    refused, waited = [], []
    try:
        deadline = time.monotonic() + 60
        while len(review.open_store(db, read_only=True).find(run)) < 200:
            assert time.monotonic() < deadline, "the writers did not start"
            time.sleep(0.1)
        # A reviewer with a short patience (0.3 s): before, 8 of 40 notes waited longer and were refused.
        store = review.open_store(db, timeout=0.3)
        for n in range(40):
            started = time.monotonic()
            try:
                store.add(run, "ep", 3, author="reviewer", text=f"added under load {n}")
            except review.ReviewError as exc:
                refused.append(str(exc))
            waited.append(time.monotonic() - started)
            time.sleep(0.05)
    finally:
        stop.touch()
        counts = [w.communicate(timeout=60)[0].split() for w in writers]
    assert refused == [], (len(refused), refused[:1], max(waited))
    assert all(int(added) > 0 and int(failed) == 0 for added, failed in counts), counts
    assert len(review.open_store(db).find(run, step=3)) == 40
