"""SWE-bench evaluation reports give mini-swe-agent trajectories (which record no reward) their reward."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import formats_fixtures as fx
import pytest

import ares_viewer
from ares_viewer.analysis import ending, plots
from ares_viewer.formats.sidecars import verdicts
from testdata import synthetic

DJANGO = "swebench-gpt4o-v1/django__django-11099"
ASTROPY = "swebench-sonnet/astropy__astropy-12907"


@pytest.fixture
def mini_run(tmp_path) -> pathlib.Path:
    folder = tmp_path / "mini"
    shutil.copytree(fx.MINI, folder)
    return folder


def _rewards(run: ares_viewer.Run) -> dict[str, float | None]:
    frame = run.episodes.set_index("episode_id")["total_reward"]
    return {k: (None if v != v else v) for k, v in frame.items()}


def test_unscored_trajectories_are_neither_successes_nor_failures(mini_run):
    run = ares_viewer.open_run(mini_run)
    assert _rewards(run) == {DJANGO: None, ASTROPY: None}
    stats = run.stats()
    assert stats["success_rate"] is None and stats["unscored"] == 2
    (bar,) = plots.success_by_task(run.episodes).data
    assert all(x != x for x in bar.x) and all(t == "0/0, 1 unscored" for t in bar.text)


def test_a_harness_report_in_the_run_scores_its_instances(mini_run):
    report = mini_run / "evaluation" / "gpt-4o.swebench-run.json"
    report.parent.mkdir()
    report.write_text(json.dumps(fx.harness_report(resolved=["django__django-11099"],
                                                unresolved=["astropy__astropy-12907"]), indent=2))
    run = ares_viewer.open_run(mini_run)
    assert _rewards(run) == {DJANGO: 1.0, ASTROPY: 0.0}
    # The verdict column says where each reward came from: the verdict and its report.
    assert run.episodes.set_index("episode_id")["verdict"].to_dict() == {
        DJANGO: "resolved (gpt-4o.swebench-run.json)", ASTROPY: "unresolved (gpt-4o.swebench-run.json)"}
    # The report names no run of these two: applied by location, and the run says so.
    assert any("applied by location to 2 runs" in message for _, message in run.warnings)
    assert run.reports == {str(report): {"django__django-11099": "resolved", "astropy__astropy-12907": "unresolved"}}
    assert run.skipped == 0 and not run.errors  # the report is recognized, not "something else"
    assert run.stats()["success_rate"] == 0.5 and run.stats()["unscored"] == 0
    episode = run.episode(DJANGO)
    assert episode.total_reward == 1.0
    assert episode.metadata["verdict"] == "resolved" and episode.metadata["verdict_report"] == str(report)
    # The file itself is unchanged, and loading it alone (no run, no report) gives no reward.
    assert ares_viewer.load_episode(episode.path).total_reward is None

    # A later evaluation (the report rewritten) is picked up on reopening; the cache does not hide it.
    report.write_text(json.dumps(fx.harness_report(resolved=["django__django-11099", "astropy__astropy-12907"])))
    os.utime(report, ns=(report.stat().st_atime_ns, report.stat().st_mtime_ns + 10**9))
    assert _rewards(ares_viewer.open_run(mini_run)) == {DJANGO: 1.0, ASTROPY: 1.0}


@pytest.mark.parametrize(("lists", "expected"), [
    ({"empty": ["astropy__astropy-12907"]}, 0.0),
    ({"error": ["astropy__astropy-12907"]}, 0.0),
    ({"incomplete": ["astropy__astropy-12907"]}, None),  # not evaluated: still unscored
    ({"resolved": ["sympy__sympy-20590"]}, None),  # another instance
])
def test_every_verdict_of_the_harness(mini_run, lists, expected):
    (mini_run / "report.json").write_text(json.dumps(fx.harness_report(**lists)))
    assert _rewards(ares_viewer.open_run(mini_run))[ASTROPY] == expected


def test_two_reports_that_disagree_are_an_error_and_score_nothing(mini_run):
    (mini_run / "a-report.json").write_text(json.dumps(fx.harness_report(resolved=["astropy__astropy-12907"])))
    (mini_run / "b-report.json").write_text(json.dumps(fx.harness_report(unresolved=["astropy__astropy-12907"])))
    run = ares_viewer.open_run(mini_run)
    assert _rewards(run)[ASTROPY] is None
    (error,) = run.errors
    assert error.path.endswith("b-report.json") and "a-report.json" in error.reason and "disagree" in error.reason


def test_episodes_with_their_own_reward_are_never_overridden(tmp_path):
    """ARES attempts record their reward, and several attempts share one task: a report never touches them."""
    scored = synthetic.episode_dict(actions=3, seed=5, reward=0.0)
    errored = synthetic.episode_dict(actions=3, seed=6, ending="errored")  # no LAST record, no reward
    for doc in (scored, errored):
        synthetic.write_episode(tmp_path, doc)
    (tmp_path / "report.json").write_text(json.dumps(fx.harness_report(resolved=[scored["task_name"]])))
    run = ares_viewer.open_run(tmp_path)
    assert _rewards(run) == {scored["episode_id"]: 0.0, errored["episode_id"]: None}
    verdict = run.episodes.set_index("episode_id")["verdict"]
    assert verdict[scored["episode_id"]] == "recorded in the episode" and verdict.isna()[errored["episode_id"]]
    assert run.stats()["success_rate"] == 0.0  # the errored attempt failed: it is not "unscored"


def test_sniff_is_strict():
    assert verdicts.sniff(fx.harness_report(resolved=["a"]))
    assert verdicts.sniff({"resolved_ids": ["a"], "unresolved_ids": []})  # sb-cli's shorter report
    assert not verdicts.sniff({"resolved_ids": ["a"]})
    assert not verdicts.sniff({"resolved_ids": "a", "unresolved_ids": []})
    assert not verdicts.sniff([{"resolved_ids": []}])


def _mini(folder: pathlib.Path, run_id: str, instance: str) -> None:
    """A trajectory of ``instance`` in run-batch's layout: ``{folder}/{run_id}/{instance}/{instance}.traj.json``."""
    path = folder / run_id / instance / f"{instance}.traj.json"
    path.parent.mkdir(parents=True)
    path.write_text(fx.MINI_V1.read_text())


def test_two_runs_in_one_folder_take_their_own_reports(tmp_path):
    """``output/<run_id>/...`` with ``<model>.<run_id>.json`` beside: each run is scored by its own report only."""
    for run_id in ("run-a", "run-b", "run-c"):
        _mini(tmp_path / "output", run_id, "django__django-11099")
    (tmp_path / "output" / "gpt-4.1.run-a.json").write_text(json.dumps(fx.harness_report(
        resolved=["django__django-11099"])))
    (tmp_path / "output" / "deepseek.run-b.json").write_text(json.dumps(fx.harness_report(
        unresolved=["django__django-11099"])))
    run = ares_viewer.open_run(tmp_path)
    assert _rewards(run) == {"run-a/django__django-11099": 1.0, "run-b/django__django-11099": 0.0,
                             "run-c/django__django-11099": None}  # no report names run-c: unscored
    assert run.episodes.set_index("episode_id")["verdict"].to_dict()["run-b/django__django-11099"] == (
        "unresolved (deepseek.run-b.json)")
    assert not run.errors
    # Opening one run alone still finds its report when the report lies inside it.
    inside = tmp_path / "output" / "run-a" / "gpt-4.1.run-a.json"
    inside.write_text((tmp_path / "output" / "gpt-4.1.run-a.json").read_text())
    assert _rewards(ares_viewer.open_run(tmp_path / "output" / "run-a")) == {"run-a/django__django-11099": 1.0}


def test_a_report_naming_no_run_inside_one_run_scores_that_run_alone(tmp_path):
    """A report that names no run, kept inside one run's folder, is that run's: its sibling in the same output
    folder stays unscored. Before, an absolute path's run folder began with three slashes and the report's with
    two, so the report climbed to the output folder and scored both runs."""
    for run_id in ("run-a", "run-b"):
        _mini(tmp_path / "output", run_id, "django__django-11099")
    (tmp_path / "output" / "run-a" / "report.json").write_text(json.dumps(fx.harness_report(
        resolved=["django__django-11099"])))
    run = ares_viewer.open_run(tmp_path)
    assert _rewards(run) == {"run-a/django__django-11099": 1.0, "run-b/django__django-11099": None}
    assert not [m for _, m in run.warnings if "applied by location" in m]
    assert verdicts.run_folder("/data/output/run-a/x/x.traj.json", "x") == "/data/output/run-a"
    assert verdicts.run_folder("/data/output/run-a/x.traj.json", "x") == "/data/output/run-a"


def test_per_instance_harness_reports_count(tmp_path):
    _mini(tmp_path / "output", "run-7", "django__django-11099")
    _mini(tmp_path / "output", "run-7", "astropy__astropy-12907")
    _mini(tmp_path / "output", "other", "astropy__astropy-12907")
    logs = tmp_path / "logs" / "run_evaluation" / "run-7" / "gpt-4o"
    (logs / "django__django-11099").mkdir(parents=True)
    (logs / "django__django-11099" / "report.json").write_text(json.dumps({"django__django-11099": {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": True,
        "tests_status": {"FAIL_TO_PASS": {"success": ["test_x"], "failure": []}}}}))
    (logs / "astropy__astropy-12907").mkdir()
    (logs / "astropy__astropy-12907" / "report.json").write_text(json.dumps({  # a copy flattened to the inner object
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
        "tests_status": {}}))
    run = ares_viewer.open_run(tmp_path)
    assert not run.errors
    assert _rewards(run) == {"run-7/django__django-11099": 1.0, "run-7/astropy__astropy-12907": 0.0,
                             "other/astropy__astropy-12907": None}
    assert len(run.reports) == 2


def test_a_report_kept_as_logs_instance_report_json_beside_trajs_scores_its_trajectory_with_its_tests(tmp_path):
    """A common copy of the harness's logs: ``logs/<instance>/report.json`` beside ``trajs/``. Before, it was
    refused with a warning a user could not act on; and its tests_status was thrown away."""
    _mini(tmp_path, "trajs", "astropy__astropy-12907")
    report = tmp_path / "logs" / "astropy__astropy-12907" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"astropy__astropy-12907": {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
        "tests_status": {"FAIL_TO_PASS": {"success": ["test_separable"], "failure": []},
                         "PASS_TO_PASS": {"success": ["test_a"], "failure": ["test_compound_model"]}}}}))
    run = ares_viewer.open_run(tmp_path)
    assert not run.errors and not [n for n in run.warnings if "not applied" in str(n)]
    assert _rewards(run) == {"trajs/astropy__astropy-12907": 0.0}
    # the episode fixed its target test but broke another: the ending says so, and where it read it
    end = ending.of(run.episode("trajs/astropy__astropy-12907"))
    assert "1 test(s) that passed before broken (test_compound_model)" in end.explanation
    assert "1 target test(s) fixed" in end.explanation and str(report) in end.explanation


def test_a_report_that_cannot_be_applied_says_what_would_make_it_apply(tmp_path):
    _mini(tmp_path / "a", "run-1", "astropy__astropy-12907")
    far = tmp_path / "b" / "c" / "d" / "e" / "report.json"
    far.parent.mkdir(parents=True)
    far.write_text(json.dumps(fx.harness_report(resolved=["astropy__astropy-12907"])))
    notes = [str(n) for n in ares_viewer.open_run(tmp_path).warnings if "not applied" in str(n)]
    assert notes and "logs/run_evaluation/<run_id>/<model>/<instance>/report.json" in notes[0]


def test_the_tests_that_unresolved_instances_failed_are_grouped_over_the_run(tmp_path):
    from ares_viewer.analysis import failing_tests

    for instance in ("astropy__astropy-12907", "django__django-11099"):
        broken = ["test_compound"]
        _mini(tmp_path, "trajs", instance)
        report = tmp_path / "logs" / instance / "report.json"
        report.parent.mkdir(parents=True)
        report.write_text(json.dumps({instance: {
            "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
            "tests_status": {"FAIL_TO_PASS": {"success": [], "failure": [f"test_{instance[:6]}"]},
                             "PASS_TO_PASS": {"success": [], "failure": broken}}}}))
    frame = failing_tests.of_run(ares_viewer.open_run(tmp_path))
    top = frame.iloc[0]
    assert (top["test"], top["how"], top["episodes"]) == ("test_compound", failing_tests.BROKEN, 2)
    assert sorted(frame["test"][1:]) == ["test_astrop", "test_django"]
    assert set(frame["how"][1:]) == {failing_tests.STILL_FAILING}


def test_a_report_listing_an_instance_as_resolved_and_unresolved_warns_and_scores_nothing(mini_run):
    report = mini_run / "report.json"
    report.write_text(json.dumps(fx.harness_report(resolved=["astropy__astropy-12907", "django__django-11099"],
                                                unresolved=["astropy__astropy-12907"])))
    run = ares_viewer.open_run(mini_run)
    assert _rewards(run) == {DJANGO: 1.0, ASTROPY: None}  # unknown: never 1.0 (the first list) nor 0.0
    assert run.episodes.set_index("episode_id")["verdict"].isna()[ASTROPY]
    warned = [(path, message) for path, message in run.warnings if "contradicts itself" in message]
    assert warned == [(str(report), "lists astropy__astropy-12907 as resolved and unresolved at once: the report "
                                    "contradicts itself, so it keeps no reward")]
    assert run.stats()["unscored"] == 1
