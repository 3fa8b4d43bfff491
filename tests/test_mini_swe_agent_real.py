"""Trajectories written by the real mini-swe-agent package (its deterministic models, its Docker environment).

The session fixture runs ``tests/producers/mini_swe_agent_runs.py`` against the real Docker engine; a few small
files it wrote are also kept in ``tests/fixtures/mini-swe-agent-real`` so the format stays covered without Docker.
"""

from __future__ import annotations

import pathlib

import pytest

import ares_viewer

KEPT = pathlib.Path(__file__).resolve().parent / "fixtures" / "mini-swe-agent-real"
RUN = "deterministic-run"


@pytest.fixture(scope="session")
def mini_runs(mini_swe_agent_runs) -> pathlib.Path:
    """A run folder of real mini-swe-agent trajectories, generated once per session."""
    return mini_swe_agent_runs.folder


@pytest.fixture(scope="session")
def run(mini_runs) -> ares_viewer.Run:
    return ares_viewer.open_run(mini_runs)


def test_every_trajectory_is_read_with_its_exit_status_and_costs(run):
    assert not run.errors and not run.warnings
    rows = run.episodes.set_index("episode_id")
    assert rows["outcome"].to_dict() == {
        f"{RUN}/text-submitted": "completed", f"{RUN}/text-timeout": "completed",
        f"{RUN}/toolcall-submitted": "completed", f"{RUN}/toolcall-exception": "errored",
        f"{RUN}/toolcall-limits": "truncated", f"{RUN}/responses-submitted": "completed",
        f"{RUN}/toolcall-two-calls": "completed", f"{RUN}/text-two-commands": "completed"}
    assert rows["exit_status"].to_dict()[f"{RUN}/toolcall-limits"] == "LimitsExceeded"
    assert rows.loc[f"{RUN}/toolcall-exception", "error"] == "RuntimeError: provider connection reset"
    # Costs: every model call is billed, the format error's included (mini-swe-agent's instance_cost).
    assert rows.loc[f"{RUN}/text-submitted", "total_cost"] == pytest.approx(0.04)
    assert rows.loc[f"{RUN}/text-timeout", "total_cost"] == pytest.approx(0.04)
    assert rows.loc[f"{RUN}/toolcall-submitted", "total_cost"] == pytest.approx(0.06)
    for episode_id in rows.index:
        episode = run.episode(episode_id)
        assert episode.total_cost == pytest.approx(episode.metadata["model_stats"]["instance_cost"])
        # mini-swe-agent counts the call that raised among its api_calls; it answered nothing. The commands of
        # one call share its context.
        raised = episode.outcome == "errored"
        assert len({s.context_index for s in episode.actions}) == episode.metadata["api_calls"] - raised
        assert episode.num_actions == rows.loc[episode_id, "num_actions"]


def test_text_protocol_commands_outputs_and_return_codes(run):
    episode = run.episode(f"{RUN}/text-submitted")
    steps = episode.actions
    assert [s.command.split(" && ")[0] for s in steps] == [
        "mkdir -p /tmp/repo", "cd /tmp/repo", "cd /tmp/repo", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert steps[0].thought == "THOUGHT: Look at the code first."
    assert steps[0].output == "def add(a, b):\n    return a - b\n" and steps[0].returncode == 0
    assert steps[1].output == "5\n"
    assert steps[2].returncode == 3 and steps[2].output == ""
    # The submission is the last command's output (mini-swe-agent ends on an exit message holding it).
    assert "+    return a + b" in steps[3].output and steps[3].output == episode.metadata["submission"]
    assert episode.landmarks()[0] == (3, "first failed command (rc 3)")


def test_tool_calling_commands_and_outputs(run):
    episode = run.episode(f"{RUN}/toolcall-submitted")
    steps = episode.actions
    assert [s.tool_calls[0].call_id for s in steps] == ["call_1", "call_2", "call_3"]
    assert steps[1].command.startswith("cd /tmp/repo && sed -i") and steps[1].output == "5\n"
    assert steps[1].thought == "Fix the operator."
    assert [m.role for m in episode.context(2)][-2:] == ["assistant", "tool"]


def test_a_timed_out_command_is_its_steps_output_with_a_badge(run):
    episode = run.episode(f"{RUN}/text-timeout")
    step = episode.step(1)
    assert step.returncode == -1 and step.failure == "timed out"
    assert "timed out after 2 seconds" in step.output
    assert step.command_time >= 2.0


def test_a_format_error_is_a_step_of_its_own(run):
    episode = run.episode(f"{RUN}/text-timeout")
    step = episode.step(2)
    assert step.format_error and step.command is None
    assert step.response.count("```mswea_bash_command") == 2  # the rejected response, kept by mini-swe-agent
    assert "Expected exactly 1 action, found 2." in step.output
    assert step.cost == pytest.approx(0.01)
    assert episode.step(3).output == "def add(a, b):\n    return a - b\n"


def test_an_exception_exit_and_a_step_limit(run):
    crashed = run.episode(f"{RUN}/toolcall-exception")
    assert crashed.outcome == "errored" and crashed.num_actions == 1
    assert "Linux" in crashed.step(1).output
    limited = run.episode(f"{RUN}/toolcall-limits")
    assert limited.truncated and [s.command for s in limited.actions] == ["pwd", "ls /"]
    assert limited.metadata["truncated_by"] == "step or cost limit (LimitsExceeded)"


def test_model_time_and_command_time_are_separate(run):
    episode = run.episode(f"{RUN}/text-timeout")
    timed = episode.step(1)
    assert timed.model_time is None  # nothing before the first response records a time
    assert timed.command_time >= 2.0  # the command ran until the 2 s timeout
    after = episode.step(3)
    assert after.model_time >= 0.3  # the scripted model latency (0.3 s), from the previous result
    assert after.model_time < timed.command_time  # the timed-out command is not charged to the model
    # The slow command is charged to the step that ran it, not to the next one.
    frame = episode.steps_frame().set_index("index")
    assert frame.loc[1, "command_time"] == timed.command_time and frame.loc[1, "duration"] == timed.command_time


def test_the_timed_out_step_is_the_slowest_landmark():
    # On the kept files, recorded on a quiet machine: a fresh run's other commands may take seconds under load.
    episode = ares_viewer.open_run(KEPT).episode(f"{RUN}/text-timeout")
    timed = episode.step(1)
    assert timed.command_time >= 2.0 and 0.3 <= episode.step(3).model_time < 2.0
    assert episode.step(3).command_time < timed.command_time
    assert any("slowest step" in why for index, why in episode.landmarks() if index == 1)


def test_kept_fixtures_read_like_freshly_generated_ones():
    run = ares_viewer.open_run(KEPT)
    assert not run.errors and len(run) == 3
    timed_out = run.episode(f"{RUN}/text-timeout").step(1)
    assert timed_out.failure == "timed out" and "timed out after 2 seconds" in timed_out.output


def test_cli_badges_a_timed_out_command(capsys):
    from ares_viewer import cli

    path = KEPT / RUN / "text-timeout" / "text-timeout.traj.json"
    assert cli.main(["show", str(path), "--step", "1"]) == 0
    out = capsys.readouterr().out
    assert "returncode: -1  [TIMED OUT]" in out and "timed out after 2 seconds" in out
    assert "time: model" in out
    assert cli.main(["show", str(path)]) == 0
    assert "[timed out]" in capsys.readouterr().out


def test_index_rows_agree_with_parsed_trajectories(run):
    for row in run.episodes.to_dict("records"):
        expected = run.episode(row["episode_id"]).summary()
        for key, value in expected.items():
            if value is None:
                assert row[key] is None or row[key] != row[key], key
            else:
                assert row[key] == pytest.approx(value) if isinstance(value, float) else row[key] == value, key


def test_why_each_real_trajectory_ended_names_its_cause_with_its_source(mini_runs, tmp_path):
    """Real mini-swe-agent trajectories with the per-instance reports a SWE-bench harness keeps beside them
    (``logs/<instance>/report.json``): every ending names its cause and where it read it."""
    import json
    import shutil

    from ares_viewer.analysis import ending

    shutil.copytree(mini_runs, tmp_path / "trajs")
    report = tmp_path / "logs" / "text-submitted" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"text-submitted": {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
        "tests_status": {"FAIL_TO_PASS": {"success": ["tests/test_calc.py::test_add"], "failure": []},
                         "PASS_TO_PASS": {"success": [], "failure": ["tests/test_calc.py::test_sub"]}}}}))
    run = ares_viewer.open_run(tmp_path)
    submitted = ending.of(run.episode(f"{RUN}/text-submitted"))
    assert "the SWE-bench evaluation says unresolved" in submitted.explanation
    assert "tests/test_calc.py::test_sub" in submitted.explanation and str(report) in submitted.explanation
    crashed = run.episode(f"{RUN}/toolcall-exception")
    assert "provider connection reset" in ending.of(crashed).explanation  # the error itself, from the file
    blame = dict(zip(run.failures()["reason"], run.failures()["blame"], strict=True))
    assert [who for reason, who in blame.items() if "connection reset" in reason] == ["infrastructure"]
    assert [who for reason, who in blame.items() if reason.startswith("truncated")] == ["agent"]
    assert run.stats()["infrastructure_failures"] == 1
