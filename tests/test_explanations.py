"""One explanation per episode, the same in the run's table, ``failures`` (default and ``--clusters``) and the
episode's ending: on real mini-swe-agent trajectories with the per-instance reports a SWE-bench harness writes
(``logs/<instance>/report.json``), on the public real run (a summary report only) and on the sample run.

Before, ``failures`` said "completed, not solved (reward ≤ 0)" for every failed episode, ``--clusters`` "completed,
nothing failed" for one whose report names a broken PASS_TO_PASS test, and both cut the sample's root cause before
"is not running"."""

from __future__ import annotations

import pathlib
import shutil

import formats_fixtures as fx
import pytest

import ares_viewer
from ares_viewer.cli import main

HERE = pathlib.Path(__file__).resolve().parent
KEPT = HERE / "fixtures" / "mini-swe-agent-real"
REAL = pathlib.Path("/work/shared/real-runs/mswea2-deepseek-chat-dev")
SAMPLE = HERE.parent / "sample_runs" / "demo-run"
RUN = "deterministic-run"
# instance -> (target tests still failing, tests the patch broke)
REPORTS = {"toolcall-submitted": ([], ["tests/test_calc.py::test_sub"]),
           "text-timeout": (["tests/test_calc.py::test_add"], [])}


@pytest.fixture
def reported(tmp_path) -> pathlib.Path:
    shutil.copytree(KEPT, tmp_path / "trajs")
    for instance, (still, broken) in REPORTS.items():
        fx.write_instance_report(tmp_path, instance, still_failing=still, broken=broken)
    return tmp_path


def _out(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_failures_names_each_failed_episodes_tests_by_default_and_in_clusters(reported, capsys):
    default = _out(capsys, "failures", str(reported))
    clusters = _out(capsys, "failures", "--clusters", str(reported))
    for instance, (still, broken) in REPORTS.items():
        for test in still + broken:
            for out in (default, clusters):
                line = next(x for x in out.splitlines() if f"{RUN}/{instance}" in x and test in x)
                assert line
    assert "nothing failed" not in clusters
    assert "passed before, broken by the patch: tests/test_calc.py::test_sub" in clusters
    assert "provider connection reset" in default and "provider connection reset" in clusters


def test_the_run_table_why_and_the_failure_groups_are_the_episodes_explanations(reported):
    run = ares_viewer.open_run(reported)
    why = dict(zip(run.episodes.episode_id, run.queries.page(columns=["why"], limit=100)["why"], strict=True))
    reasons = {i: r for r, ids in zip(run.failures()["reason"], run.failures()["episode_ids"], strict=True)
               for i in ids}
    for instance, (still, broken) in REPORTS.items():
        episode = run.episode(f"{RUN}/{instance}")
        end = ares_viewer.ending.of(episode)
        assert why[episode.episode_id] == end.why == reasons[episode.episode_id]
        assert [t.name for t in end.failing_tests] == still + broken
        assert {t.source for t in end.failing_tests} == {str(reported / "logs" / instance / "report.json")}
        for test in still + broken:
            assert test in end.why


def test_a_summary_report_names_itself_as_the_reason(capsys):
    if not REAL.is_dir():
        pytest.skip("the public real run is not on this machine")
    default = _out(capsys, "failures", str(REAL))
    clusters = _out(capsys, "failures", "--clusters", str(REAL))
    assert "the SWE-bench evaluation says unresolved (" in default and "deepseek_chat_dev.json" in default
    assert "[report] the SWE-bench evaluation says unresolved" in clusters and "last failing command" not in clusters


def test_the_samples_root_cause_is_whole_in_both_outputs(capsys):
    for args in (("failures",), ("failures", "--clusters")):
        out = _out(capsys, *args, str(SAMPLE))
        (line,) = [x for x in out.splitlines() if "Client Error" in x]
        assert "is not running" in line, line
