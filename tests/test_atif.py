"""ATIF in (plain files and harbor trial folders) and out (any episode), validated with the ``atif`` models."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import atif_fixtures as af
import formats_fixtures as fx
import pytest
import reasoning_fixtures as rf

import ares_viewer
from ares_viewer import cli
from ares_viewer.analysis import ending
from ares_viewer.formats.export import atif_export
from testdata import synthetic

KEPT_MINI = pathlib.Path(__file__).resolve().parent / "fixtures" / "mini-swe-agent-real"


@pytest.fixture(scope="module")
def atif_models(installed):
    return installed("atif", "pip install -e '.[test]'")


def test_fixtures_follow_the_published_schema(atif_models):
    atif_models.Trajectory.model_validate(af.trajectory())


def test_plain_atif_file(tmp_path):
    path = tmp_path / "run" / "trajectory-1.json"
    path.parent.mkdir()
    path.write_text(json.dumps(af.trajectory()))
    run = ares_viewer.open_run(tmp_path)
    assert not run.errors and run.episodes["format"].tolist() == ["atif"]
    episode = run.episode("c2f1a3b4-5d6e-4f70-8a9b-0c1d2e3f4a5b")
    assert episode.outcome == "completed" and episode.total_reward is None
    assert episode.system_prompt == "You are an AI assistant solving command-line tasks."
    assert episode.task_name.startswith("Create a file called hello.txt")
    assert episode.num_actions == 3
    first, second, last = episode.actions
    assert first.reasoning == af.REASONING and first.command == "ls -la /app" and first.output == "total 0\n"
    assert first.usage.prompt_tokens == 520 and first.cost == pytest.approx(0.0023)
    assert first.extra["logprobs"] == [-0.01, -0.2, -0.05]  # per-token logprobs kept for reviewers
    assert second.usage.cached_prompt_tokens == 512 and second.dt == pytest.approx(5.0)
    assert last.command is None and last.response == "Done: hello.txt exists."
    assert [m.role for m in episode.context(3)] == ["user", "assistant", "tool", "assistant", "tool"]
    assert episode.total_cost == pytest.approx(0.0038)
    assert episode.metadata["model"] == "anthropic/claude-sonnet-4-5"


def test_harbor_trial_folders_take_their_result_and_verifier_reward(tmp_path):
    af.write_job(tmp_path / "jobs")
    run = ares_viewer.open_run(tmp_path / "jobs")
    assert not run.errors
    rows = run.episodes.set_index("episode_id")
    passed, failed = f"{af.JOB}/{af.TRIAL}", f"{af.JOB}/{af.FAILED_TRIAL}"
    assert rows.loc[passed, "total_reward"] == 1.0 and rows.loc[passed, "outcome"] == "completed"
    assert rows.loc[passed, "task_name"] == "hello-world" and rows.loc[passed, "duration_s"] == 20.0
    assert rows.loc[passed, "verdict"] == "verifier (result.json)"
    assert rows.loc[failed, "outcome"] == "errored"
    assert rows.loc[failed, "error"] == "AgentTimeoutError: Agent execution timed out after 600 seconds"
    assert run.stats()["success_rate"] == 0.5  # the errored trial failed: it is not unscored
    episode = run.episode(passed)
    assert episode.total_reward == 1.0 and episode.metadata["harbor_trial"]["rewards"] == {"reward": 1.0}
    assert episode.actions[0].reasoning == af.REASONING
    # Every row agrees with its opened episode.
    for episode_id, row in rows.iterrows():
        summary = run.episode(episode_id).summary()
        reward = None if row["total_reward"] != row["total_reward"] else row["total_reward"]
        assert (row["outcome"], reward, row["task_name"]) == (summary["outcome"], summary["total_reward"],
                                                               summary["task_name"])


def test_a_result_written_after_the_trajectory_is_picked_up(tmp_path):
    trial = af.write_trial(tmp_path / "jobs" / af.JOB, af.TRIAL, reward=0.0, with_result=False)
    episode_id = f"{af.JOB}/{af.TRIAL}"
    before = ares_viewer.open_run(tmp_path / "jobs").episodes.set_index("episode_id").loc[episode_id]
    assert before["total_reward"] != before["total_reward"]  # no reward yet
    (trial / "result.json").write_text(json.dumps(af.result(af.TRIAL, reward=0.0)))
    after = ares_viewer.open_run(tmp_path / "jobs")
    assert after.episodes.set_index("episode_id").loc[episode_id, "total_reward"] == 0.0
    assert after.episode(episode_id).outcome == "completed"


def _validated(atif_models, document: dict) -> object:
    return atif_models.Trajectory.model_validate(document)


def test_atif_round_trips_through_the_models(tmp_path, atif_models):
    original = af.trajectory()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(original))
    exported = atif_export.to_atif(ares_viewer.load_episode(path))
    trajectory = _validated(atif_models, exported)
    agents_in = [s for s in original["steps"] if s["source"] == "agent"]
    agents_out = [s for s in trajectory.steps if s.source == "agent"]
    assert len(agents_out) == len(agents_in)
    for before, after in zip(agents_in, agents_out, strict=True):
        assert after.message == before["message"]
        assert after.reasoning_content == before.get("reasoning_content")
        assert [(c.tool_call_id, c.function_name, c.arguments) for c in after.tool_calls or []] == [
            (c["tool_call_id"], c["function_name"], c["arguments"]) for c in before.get("tool_calls", [])]
        results = before.get("observation", {}).get("results", [])
        assert [(r.source_call_id, r.content) for r in (after.observation.results if after.observation else [])] == [
            (r["source_call_id"], r["content"]) for r in results]
        assert after.metrics.prompt_tokens == before["metrics"]["prompt_tokens"]
        assert after.metrics.cost_usd == pytest.approx(before["metrics"]["cost_usd"])
    assert agents_out[0].metrics.logprobs == [-0.01, -0.2, -0.05]
    assert trajectory.steps[0].source == "system" and trajectory.steps[1].source == "user"
    # Reading the export gives the same episode again.
    again = tmp_path / "again.json"
    again.write_text(json.dumps(exported))
    first, second = ares_viewer.load_episode(path), ares_viewer.load_episode(again)
    assert [(s.response, s.reasoning, s.command, s.output) for s in first.steps] == [
        (s.response, s.reasoning, s.command, s.output) for s in second.steps]


def test_every_format_exports_to_valid_atif(tmp_path, atif_models):
    root = tmp_path / "all"
    synthetic.write_run(root / "ares", 2, actions=3)
    fx.copy_tree(fx.TINKER, root / "tinker")
    fx.copy_tree(fx.RAY, root / "ray")
    fx.copy_tree(fx.MINI, root / "mini")
    shutil.copytree(KEPT_MINI, root / "mini-real")
    rf.write(root / "reasoning")
    af.write_job(root / "harbor")
    run = ares_viewer.open_run(root)
    assert set(run.episodes["format"]) == {"ares", "tinker", "ray", "mini-swe-agent", "atif"}
    for episode in run:
        trajectory = _validated(atif_models, atif_export.to_atif(episode))
        assert len([s for s in trajectory.steps if s.source == "agent" and s.llm_call_count != 0]) == \
            episode.num_actions, episode.episode_id
    timed_out = atif_export.to_atif(run.episode("deterministic-run/text-timeout"))
    step = next(s for s in timed_out["steps"] if s.get("extra", {}).get("step_index") == 1)
    assert step["extra"]["failure"] == "timed out" and step["extra"]["returncode"] == -1
    deepseek = atif_export.to_atif(run.episode("deepseek-run/calc__calc-1"))
    assert any(s.get("reasoning_content") == rf.DEEPSEEK_REASONING for s in deepseek["steps"])


def test_cli_exports_atif(tmp_path, capsys, atif_models):
    af.write_job(tmp_path / "jobs")
    out = tmp_path / "out"
    assert cli.main(["export", str(tmp_path / "jobs"), "--format", "atif", "--out", str(out)]) == 0
    written = sorted(os.listdir(out))
    assert written == sorted(f"{af.JOB}_{t}.json" for t in (af.TRIAL, af.FAILED_TRIAL))
    for name in written:
        document = json.loads((out / name).read_text())
        _validated(atif_models, document)
    single = tmp_path / "one.json"
    assert cli.main(["export", str(tmp_path / "jobs"), "--format", "atif", "--episode", f"{af.JOB}/{af.TRIAL}",
                     "--out", str(single)]) == 0
    assert json.loads(single.read_text())["extra"]["total_reward"] == 1.0
    assert cli.main(["export", str(tmp_path / "jobs"), "--format", "atif", "--out", str(tmp_path / "x.json")]) == 2
    assert "give --episode" in capsys.readouterr().err


def test_cli_export_keeps_episodes_whose_ids_make_the_same_file_name(tmp_path, capsys, atif_models):
    # "run 1" and "run:1" both become run_1.json as file names: neither may overwrite the other.
    ids = ["run 1", "run:1", "RUN_1"]
    for n, episode_id in enumerate(ids):
        doc = synthetic.episode_dict(seed=n, actions=2)
        doc["episode_id"] = episode_id
        (tmp_path / "run").mkdir(exist_ok=True)
        (tmp_path / "run" / f"episode-{n}.json").write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert cli.main(["export", str(tmp_path / "run"), "--format", "atif", "--out", str(out)]) == 0
    written = sorted(os.listdir(out))
    assert len(written) == 3 and "wrote 3 ATIF trajectories" in capsys.readouterr().err
    found = sorted(json.loads((out / name).read_text())["session_id"] for name in written)
    assert found == sorted(ids)


def test_only_result_json_is_a_trials_result(tmp_path):
    """Another file of a result's shape in the trial folder (a copy, the agent's own) never overrides result.json."""
    trial = af.write_trial(tmp_path / "jobs" / af.JOB, af.TRIAL, reward=0.0)
    forged = af.result(af.TRIAL, reward=1.0)
    for name in ("result.backup.json", "zz-result.json", "verifier/result.json"):
        (trial / name).write_text(json.dumps(forged))
    run = ares_viewer.open_run(tmp_path / "jobs")
    episode_id = f"{af.JOB}/{af.TRIAL}"
    row = run.episodes.set_index("episode_id").loc[episode_id]
    assert row["total_reward"] == 0.0 and row["verdict"] == "verifier (result.json)"
    episode = run.episode(episode_id)
    assert episode.total_reward == 0.0
    assert episode.metadata["harbor_trial"]["result_path"] == str(trial / "result.json")


def test_a_failed_trial_names_the_tests_its_verifier_output_names(tmp_path):
    """A harbor trial's verifier writes its test output to ``verifier/test-stdout.txt``; the ending names the tests
    that output names as failing, with that file as the source, and says no more than the files say."""
    tests = tmp_path / "task-tests"
    tests.mkdir()
    (tests / "test_outputs.py").write_text(
        "def test_greeting():\n    assert 'hi' == 'hello'\n\ndef test_exit_code():\n    assert True\n"
    )
    pytest_run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", str(tests)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert pytest_run.returncode == 1
    job = tmp_path / "jobs" / af.JOB
    failed = af.write_trial(job, af.TRIAL, reward=0.0)
    (failed / "verifier" / "test-stdout.txt").write_text("x" * 300_000 + "\n" + pytest_run.stdout)  # a long log
    af.write_trial(job, af.FAILED_TRIAL, reward=0.0)  # no test output kept
    run = ares_viewer.open_run(tmp_path / "jobs")
    why = ending.of(run.episode(f"{af.JOB}/{af.TRIAL}")).explanation
    assert "test_outputs.py::test_greeting failed" in why and "test_exit_code" not in why
    assert f"read from {failed / 'verifier' / 'test-stdout.txt'}" in why
    silent = ending.of(run.episode(f"{af.JOB}/{af.FAILED_TRIAL}")).explanation
    assert silent.endswith(
        f"the verifier's reward is in {job / af.FAILED_TRIAL / 'result.json'} (verifier_result); "
        "the trial keeps no test output (verifier/test-stdout.txt) to say why"
    )
