"""Runs inside runs: a folder holding several runs has a ``run_id`` column, ``LOCATION::RUN_ID`` opens one of them,
and a mini-swe-agent run folder opened alone applies the SWE-bench reports kept beside ``output/``.

Real files first: ``fixtures/mini-swe-agent-batch`` holds two public mini-swe-agent runs of one model on the same
two instances, in ``run-batch``'s published layout, with each run's summary report two folders above it
(SOURCES.md): marshmallow-1359 resolved in both, sqlfluff-1733 resolved in ``deepseek_chat_dev`` only.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import ares_viewer
from ares_viewer.analysis import compare_runs
from ares_viewer.runs.index import subruns

REPO = pathlib.Path(__file__).resolve().parent.parent
BATCH = REPO / "tests" / "fixtures" / "mini-swe-agent-batch"
DEV, RERUN = "deepseek_chat_dev", "deepseek_chat_dev_rerun"
SQLFLUFF, MARSHMALLOW = "sqlfluff__sqlfluff-1733", "marshmallow-code__marshmallow-1359"
MATH_RL = REPO / "tests" / "fixtures" / "tinker" / "math-rl"


def test_a_folder_holding_two_runs_names_each_episodes_run():
    run = ares_viewer.open_run(BATCH)
    rows = run.episodes.set_index("episode_id")
    assert rows["run_id"].to_dict() == {f"{DEV}/{MARSHMALLOW}": DEV, f"{DEV}/{SQLFLUFF}": DEV,
                                        f"{RERUN}/{MARSHMALLOW}": RERUN, f"{RERUN}/{SQLFLUFF}": RERUN}
    assert "run_id" in run.queries.columns
    # each run's own figures, as each opened alone counts them
    assert run.per_run() == [
        {"run_id": DEV, "episodes": 2, "judged": 2, "successes": 2, "success_rate": 1.0, "unscored": 0,
         "infrastructure": 0},
        {"run_id": RERUN, "episodes": 2, "judged": 2, "successes": 1, "success_rate": 0.5, "unscored": 0,
         "infrastructure": 0}]
    for figures in run.per_run():
        alone = ares_viewer.open_run(f"{BATCH}::{figures['run_id']}").stats()
        assert (alone["success_rate"], alone["judged"]) == (figures["success_rate"], figures["judged"])
    # each run scored by its own report, as the folder's index already did
    assert rows.loc[f"{DEV}/{SQLFLUFF}", "total_reward"] == 1.0
    assert rows.loc[f"{RERUN}/{SQLFLUFF}", "total_reward"] == 0.0


def test_a_sub_run_is_opened_by_its_run_id_and_sees_only_its_episodes():
    rerun = ares_viewer.open_run(f"{BATCH}::{RERUN}")
    assert (rerun.folder, rerun.run_id) == (str(BATCH), RERUN)
    assert sorted(rerun.episode_ids) == [f"{RERUN}/{MARSHMALLOW}", f"{RERUN}/{SQLFLUFF}"]
    assert rerun.stats()["success_rate"] == 0.5 and rerun.stats()["episodes"] == 2
    assert f"{DEV}/{SQLFLUFF}" not in rerun
    with pytest.raises(ares_viewer.LocationError, match=f"no such run; the runs of .*: {DEV}, {RERUN}"):
        ares_viewer.open_run(f"{BATCH}::nope")


def test_compare_runs_takes_two_sub_runs_of_one_folder():
    found = ares_viewer.compare_runs(f"{BATCH}::{DEV}", f"{BATCH}::{RERUN}")
    assert found.labels == (DEV, RERUN)
    assert (found.overall_a["judged"], found.overall_a["rate"]) == (2, 1.0)
    assert (found.overall_b["judged"], found.overall_b["rate"]) == (2, 0.5)
    assert list(found.lost()["task_name"]) == [SQLFLUFF]
    # the same as splitting the folder by its run_id column
    split = ares_viewer.compare_runs(BATCH, by="run_id")
    assert split.labels == (f"run_id={DEV}", f"run_id={RERUN}")
    assert list(split.lost()["task_name"]) == [SQLFLUFF]


def test_the_two_run_folders_as_published_find_their_reports_beside_output():
    """``compare-runs output/<a> output/<b>``: each run folder alone finds ``<model>.<run_id>.json`` two folders up
    (before, both sides read "0 judged, 2 unscored" and said nothing of where the reports are)."""
    found = ares_viewer.compare_runs(BATCH / "output" / DEV, BATCH / "output" / RERUN)
    assert (found.overall_a["judged"], found.overall_a["unscored"], found.overall_a["rate"]) == (2, 0, 1.0)
    assert (found.overall_b["judged"], found.overall_b["unscored"], found.overall_b["rate"]) == (2, 0, 0.5)
    assert list(found.lost()["task_name"]) == [SQLFLUFF]
    alone = ares_viewer.open_run(BATCH / "output" / RERUN)
    verdicts = alone.episodes.set_index("task_name")["verdict"].to_dict()
    assert verdicts == {MARSHMALLOW: f"resolved (deepseek__deepseek-chat.{RERUN}.json)",
                        SQLFLUFF: f"unresolved (deepseek__deepseek-chat.{RERUN}.json)"}
    assert alone.missing_reports == [] and "run_id" not in alone.queries.columns
    # the episode page's reading of it: the report's verdict and its file
    episode = alone.episode(f"{RERUN}/{SQLFLUFF}")
    assert episode.total_reward == 0.0 and episode.metadata["verdict_report"].endswith(f".{RERUN}.json")


def test_a_run_folder_without_its_report_says_where_it_looked(tmp_path):
    out = tmp_path / "output"
    shutil.copytree(BATCH / "output" / DEV, out / DEV)
    run = ares_viewer.open_run(out / DEV)
    assert run.stats()["judged"] == 0
    (folder, message), = run.missing_reports
    assert folder == str(out / DEV)
    assert message.startswith(f"no evaluation report names run {DEV} (<model>.{DEV}.json): looked in "
                              f"{out / DEV}, {out} and {tmp_path}; its 2 trajectory(ies) keep no reward (unscored)")
    assert (folder, message) not in run.warnings  # a run of other tasks has no report: not a problem of its files
    # the report put where it said: found
    shutil.copy(BATCH / f"deepseek__deepseek-chat.{DEV}.json", tmp_path)
    found = ares_viewer.open_run(out / DEV)  # the same index, a table made again: the folder above changed
    assert found.stats()["judged"] == 2 and found.missing_reports == []


def test_the_command_compares_sub_runs_and_says_where_reports_were_looked_for(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ares_viewer.cli", "compare-runs", *args], capture_output=True,
                              text=True, env=env)

    done = command(f"{BATCH}::{DEV}", f"{BATCH}::{RERUN}")
    assert done.returncode == 0, done.stderr
    assert f"A: {DEV}: 100% solved of 2 judged episodes" in done.stdout
    assert f"B: {RERUN}: 50% solved of 2 judged episodes" in done.stdout
    assert f"  {SQLFLUFF}  100% of 1 → 0% of 1" in done.stdout
    shutil.copytree(BATCH / "output" / DEV, tmp_path / DEV)
    unscored = command(str(tmp_path / DEV), str(BATCH / "output" / RERUN))
    assert "0 judged episodes (2 in all; 2 unscored left out)" in unscored.stdout
    assert f"no evaluation report names run {DEV} (<model>.{DEV}.json): looked in {tmp_path / DEV}" in unscored.stdout
    as_json = json.loads(command(str(tmp_path / DEV), str(BATCH / "output" / RERUN), "--json").stdout)
    assert as_json["missing_reports"]["a"][0].startswith(f"no evaluation report names run {DEV}")
    assert as_json["missing_reports"]["b"] == []
    wrong = command(f"{BATCH}::nope", f"{BATCH}::{RERUN}")
    assert wrong.returncode == 2 and "no such run" in wrong.stderr


def test_tinker_log_folders_of_iteration_folders_are_runs_of_their_folder(tmp_path):
    for name in ("math-rl-a", "math-rl-b"):
        shutil.copytree(MATH_RL, tmp_path / name)
    run = ares_viewer.open_run(tmp_path)
    assert sorted(run.queries.values("run_id", limit=5)) == ["math-rl-a", "math-rl-b"]
    one = ares_viewer.open_run(f"{tmp_path}::math-rl-b")
    assert len(one) == len(ares_viewer.open_run(MATH_RL)) and len(run) == 2 * len(one)
    assert "run_id" not in ares_viewer.open_run(MATH_RL).queries.columns  # one log folder: one run, no column


def test_inspect_logs_in_one_folder_are_a_run_each(tmp_path):
    from testdata import inspect_logs

    inspect_logs.write_logs(tmp_path, "eval", epochs=2)
    inspect_logs.write_logs(tmp_path, "json")
    run = ares_viewer.open_run(tmp_path)
    frame = run.episodes
    logs = sorted({pathlib.Path(p).stem for p in frame["path"]})
    assert sorted(set(frame["run_id"])) == logs and len(logs) == 2
    for log in logs:
        one = ares_viewer.open_run(f"{tmp_path}::{log}")
        assert {pathlib.Path(p).stem for p in one.episodes["path"]} == {log}


def test_only_a_run_id_after_the_separator_makes_a_sub_run():
    assert subruns.split("runs/batch::deepseek_chat_dev") == ("runs/batch", "deepseek_chat_dev")
    assert subruns.split("simplecache::s3://bucket/run") == ("simplecache::s3://bucket/run", None)
    assert subruns.split("zip://run/*.json::/data/runs.zip") == ("zip://run/*.json::/data/runs.zip", None)
    assert subruns.split("runs/batch") == ("runs/batch", None)
    assert subruns.split("::x") == ("::x", None)


def test_a_compare_side_of_a_sub_run_is_labelled_by_its_run_id():
    side = compare_runs.Side(ares_viewer.open_run(f"{BATCH}::{DEV}"))
    assert side.label == DEV


def test_a_big_runs_folders_are_kept_beside_its_index_and_its_sub_run_reads_the_same(monkeypatch, tmp_path):
    """Past ``IN_MEMORY_ROWS`` the table is a view over the partitions: the run folders are worked out once per index
    state and kept beside it, and a sub-run reads the same episodes as a small one."""
    from ares_viewer.runs.index import table

    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(table, "IN_MEMORY_ROWS", 0)
    big = ares_viewer.open_run(f"{BATCH}::{RERUN}")
    assert sorted(big.episode_ids) == [f"{RERUN}/{MARSHMALLOW}", f"{RERUN}/{SQLFLUFF}"]
    assert big.stats()["success_rate"] == 0.5
    assert len(list(big.index_store.folder.glob("run-folders-*.json"))) == 1
    calls = []
    monkeypatch.setattr(subruns, "run_folders", lambda con: calls.append(con) or [])
    again = ares_viewer.open_run(BATCH)  # another table of the same parts: the kept folders, not a query
    assert again.run_ids == (DEV, RERUN) and not calls
