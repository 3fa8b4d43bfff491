"""harbor jobs written by harbor 0.25.0's own code (``tests/producers/harbor_jobs.py``; the files are kept in
``tests/fixtures/harbor``, so the format stays covered without harbor, Python 3.12 or Docker).

- ``oracle-job``: a real harbor job with the oracle agent, trials ``hello-pass__*`` (reward 1.0) and
  ``hello-fail__*`` (reward 0.0); no ATIF trajectory (the oracle agent writes ``agent/oracle.txt`` only).
- ``mini-job``: harbor's mini-swe-agent agent's trials: ``agent/mini-swe-agent.trajectory.json`` beside the
  ATIF ``agent/trajectory.json`` harbor's converter wrote; ``mini0001`` reward 1.0, ``mini0002`` reward 0.0 (a
  command that timed out, then a format error).
- ``atif-features.json``: harbor's ATIF models: two observation results in one step and the newer fields.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import pandas as pd
import pytest

import ares_viewer

HARBOR = pathlib.Path(__file__).resolve().parent / "fixtures" / "harbor"
MINI_JOB = HARBOR / "mini-job"
ORACLE_JOB = HARBOR / "oracle-job"
FEATURES = HARBOR / "atif-features.json"


def _open(location: pathlib.Path) -> ares_viewer.Run:
    return ares_viewer.open_run(location, use_cache=False)


def test_two_observation_results_stay_two_results_each_with_its_own_output():
    run = _open(FEATURES)
    episode = run.episode("features-1")
    step = episode.step(1)
    assert step.command == "echo one"
    assert step.output == "one\n"  # the first result alone, never the two joined
    assert [(r["call_id"], r["command"], r["output"]) for r in step.extra["results"]] == [
        ("c1", "echo one", "one\n"), ("c2", "echo two", "two\n")]
    # The model's context holds them as two tool results, as harbor wrote them.
    assert [(m.tool_call_id, m.content) for m in episode.context(3) if m.role == "tool"][:2] == [
        ("c1", "one\n"), ("c2", "two\n")]


def test_a_timed_out_step_shows_the_exception_text():
    trajectory = json.loads((MINI_JOB / "hello-pass__mini0002" / "agent" / "trajectory.json").read_text())
    written = trajectory["steps"][2]["observation"]["results"][0]["content"]
    assert written.startswith("<exception>") and "timed out after 2 seconds" in written
    run = _open(MINI_JOB)
    step = run.episode("mini-job/hello-pass__mini0002").step(1)
    assert step.command == "sleep 5; echo done"
    assert step.failure == "timed out"
    assert step.returncode == -1
    assert step.output.startswith("An error occurred while executing the command")
    assert "timed out after 2 seconds" in step.output
    # The format error harbor's converter appended to the same step is a result of its own.
    assert step.extra["results"][1]["output"].startswith("Format error:")


def _listed_as_parsed(run: ares_viewer.Run) -> None:
    """Every index row gives the figures of its parsed episode."""
    for row in run.episodes.to_dict("records"):
        episode = run.episode(row["episode_id"])
        parsed = episode.summary()
        for column in ("task_name", "total_reward", "outcome", "num_actions", "total_cost", "prompt_tokens",
                       "generated_tokens", "error", "nonzero_returncodes", "context_rewrites"):
            listed, opened = row[column], parsed[column]
            if opened is None:
                assert pd.isna(listed), (row["episode_id"], column)  # None, NaN or NA
            else:
                assert listed == pytest.approx(opened), (row["episode_id"], column)


def test_a_mini_swe_agent_trial_is_one_episode_with_its_log_attached():
    run = _open(MINI_JOB)
    assert not run.errors
    assert sorted(run.episode_ids) == ["mini-job/hello-pass__mini0001", "mini-job/hello-pass__mini0002"]
    rows = run.episodes.set_index("episode_id")
    assert rows["total_reward"].to_dict() == {"mini-job/hello-pass__mini0001": 1.0,
                                              "mini-job/hello-pass__mini0002": 0.0}
    assert set(rows["format"]) == {"atif"}
    stats = run.stats()
    assert stats["episodes"] == 2 and stats["success_rate"] == 0.5
    # Each trial's cost once: harbor's agent_result.cost_usd (0.06 and 0.04), never the log's copy added.
    assert stats["total_cost"] == pytest.approx(0.10)
    log = MINI_JOB / "hello-pass__mini0001" / "agent" / "mini-swe-agent.trajectory.json"
    assert run.episode("mini-job/hello-pass__mini0001").metadata["agent_logs"] == [str(log)]
    _listed_as_parsed(run)


def test_an_oracle_trial_without_a_trajectory_is_an_episode():
    run = _open(ORACLE_JOB)
    assert not run.errors
    rows = run.episodes.set_index("episode_id")
    assert len(rows) == 2
    rewards = {name.split("/")[1].split("__")[0]: reward for name, reward in rows["total_reward"].items()}
    assert rewards == {"hello-pass": 1.0, "hello-fail": 0.0}
    assert set(rows["task_name"]) == {"ares/hello-pass", "ares/hello-fail"}
    assert set(rows["outcome"]) == {"completed"}
    assert run.stats()["success_rate"] == 0.5
    failed = run.episode(next(i for i in run.episode_ids if "hello-fail" in i))
    # Its verifier's output, from the trial's verifier/test-stdout.txt.
    assert "FAILED test_hello: /app/hello.txt holds Goodbye" in failed.metadata["verifier"]["output"]
    assert failed.metadata["harbor_trial"]["agent"] == {"name": "oracle", "version": "1.0.0"}
    # harbor's agent_result.cost_usd is null: the cost is unknown, never 0.
    assert failed.total_cost is None and rows["total_cost"].isna().all()
    assert "cost: unknown" in str(failed)
    # Its token counts are null too: unknown, never 0.
    assert failed.prompt_tokens is None and rows["prompt_tokens"].isna().all()
    assert "tokens: – prompt / – generated" in str(failed)
    _listed_as_parsed(run)


def test_totals_are_the_files_own_with_the_steps_sum_beside():
    # harbor's converter dropped the format-error call from the steps of mini0002 but kept it in final_metrics
    # (mini-swe-agent's instance_cost: 4 calls of 0.01); its steps record no cost at all.
    trajectory = json.loads((MINI_JOB / "hello-pass__mini0002" / "agent" / "trajectory.json").read_text())
    assert trajectory["final_metrics"]["total_cost_usd"] == pytest.approx(0.04)
    assert not any((s.get("metrics") or {}).get("cost_usd") for s in trajectory["steps"])
    run = _open(MINI_JOB)
    assert run.episode("mini-job/hello-pass__mini0002").total_cost == pytest.approx(0.04)
    # atif-features.json: final_metrics 0.02 USD, 380 and 40 tokens; its steps sum 0.015, 250 and 25.
    run = _open(FEATURES)
    episode = run.episode("features-1")
    assert (episode.total_cost, episode.prompt_tokens, episode.generated_tokens) == (pytest.approx(0.02), 380, 40)
    assert episode.steps_sums() == {"cost": pytest.approx(0.015), "prompt_tokens": 250, "generated_tokens": 25}
    assert "cost: $0.0200 (steps' sum $0.0150)" in str(episode)
    row = run.episodes.iloc[0]
    assert (row["total_cost"], row["prompt_tokens"], row["generated_tokens"]) == (pytest.approx(0.02), 380, 40)


def test_newer_atif_fields_subagents_copied_context_and_steps_that_are_no_model_call():
    run = _open(FEATURES)
    rows = run.episodes.set_index("episode_id")
    assert "features-1/helper-1" in rows.index  # the embedded sub-agent is an episode of its own
    parent = run.episode("features-1")
    helper = run.episode("features-1/helper-1")
    assert parent.metadata["subagent_episodes"] == ["features-1/helper-1"]
    assert helper.metadata["parent_episode"] == "features-1"
    assert (helper.num_actions, helper.step(1).command, helper.step(1).output) == (1, "ls /app", "hello.txt\n")
    # A copied-context step is context, not the task: the task is the first user step of this trajectory.
    assert parent.task_name == "Create hello.txt, then show two files."
    assert parent.metadata["copied_context_steps"] == 1
    assert next(m.content for m in parent.context(1) if m.role == "user") == "Earlier: the task was set up."
    # llm_call_count 0: an action no model call made; it answers no context and links the sub-agent it ran.
    dispatch = parent.step(2)
    assert dispatch.command == 'delegate {"task": "list"}'
    assert dispatch.context_index is None and dispatch.extra["model_call"] is False
    assert dispatch.extra["subagents"] == ["features-1/helper-1"]
    assert len(parent.links) == 3  # two model calls and the final observation
    assert rows.loc["features-1", "num_actions"] == parent.num_actions == 3
    _listed_as_parsed(run)


def test_a_continued_trajectory_is_joined_to_the_one_it_continues():
    run = _open(HARBOR)
    assert not run.errors and not run.warnings
    assert not [i for i in run.episode_ids if "cont" in i or "@" in i]  # the continuation is no episode apart
    episode = run.episode("features-1")
    assert episode.metadata["continuations"] == [str(HARBOR / "atif-features.cont.json")]
    assert episode.num_actions == 4
    last = episode.step(4)
    assert last.response == "Checked again." and last.context_rewritten
    assert [m.content for m in episode.context(4)] == ["Summary of the earlier part."]
    # The totals are the two files' final_metrics summed: 0.02 + 0.002 USD, 380 + 50 prompt tokens.
    assert (episode.total_cost, episode.prompt_tokens) == (pytest.approx(0.022), 430)
    row = run.episodes.set_index("episode_id").loc["features-1"]
    assert (row["num_actions"], row["total_cost"], row["context_rewrites"]) == (4, pytest.approx(0.022), 1)
    _listed_as_parsed(run)


def test_a_trial_whose_trajectory_is_missing_is_its_result_with_the_agents_log(tmp_path):
    # harbor writes agent/trajectory.json only when its converter succeeds: without it, the trial is its result,
    # and the agent's own log beside it is still no episode of its own.
    job = tmp_path / "mini-job"
    shutil.copytree(MINI_JOB, job)
    (job / "hello-pass__mini0002" / "agent" / "trajectory.json").unlink()
    run = _open(job)
    assert not run.errors
    rows = run.episodes.set_index("episode_id")
    assert rows["format"].to_dict() == {"mini-job/hello-pass__mini0001": "atif",
                                        "mini-job/hello-pass__mini0002": "harbor"}
    episode = run.episode("mini-job/hello-pass__mini0002")
    assert episode.total_reward == 0.0 and episode.total_cost == pytest.approx(0.04)
    log = job / "hello-pass__mini0002" / "agent" / "mini-swe-agent.trajectory.json"
    assert episode.metadata["agent_logs"] == [str(log)]
    assert "FAILED test_hello" in episode.metadata["verifier"]["output"]
    assert run.stats()["success_rate"] == 0.5
    _listed_as_parsed(run)
