"""Reading mini-swe-agent trajectories (2.x tool calling and 1.x text): formats.md section 6."""

from __future__ import annotations

import json

import formats_fixtures as fx
import pytest

import ares_viewer


def test_tool_calling_trajectory():
    episode = ares_viewer.load_episode(fx.MINI_V2)
    assert episode.format == "mini-swe-agent" and episode.task_name == "astropy__astropy-12907"
    assert episode.episode_id == "swebench-sonnet/astropy__astropy-12907"
    assert episode.outcome is ares_viewer.Outcome.COMPLETED and episode.total_reward is None
    assert episode.num_actions == 5
    step = episode.step(2)
    assert step.command.startswith('python -c "from astropy.modeling import models as m')
    assert step.thought == "Let me reproduce the issue with the nested compound model from the PR."
    assert step.returncode == 0 and step.output.startswith("[[ True  True False False]")
    assert step.usage.prompt_tokens == 2391 and step.usage.cached_prompt_tokens == 2391 - 420
    assert step.cost == pytest.approx(0.00612) and step.dt == pytest.approx(8.3 + 0.9)
    assert episode.total_cost == pytest.approx(0.02796)
    assert episode.metadata["api_calls"] == 5
    assert episode.metadata["submission"].startswith("diff --git a/astropy/modeling/separable.py")
    assert episode.duration_s == pytest.approx(49.4)


def test_context_is_the_history_before_each_call():
    doc = json.loads(fx.MINI_V2.read_text())
    episode = ares_viewer.load_episode(fx.MINI_V2)
    assert episode.system_prompt == doc["messages"][0]["content"]
    assert [m.to_dict() for m in episode.context(1)] == doc["messages"][1:2]
    assert [m.to_dict() for m in episode.context(4)] == doc["messages"][1:8]
    assert [m.role for m in episode.new_messages(4)] == ["assistant", "tool"]
    assert len(episode.messages) == len(doc["messages"]) - 3  # not the system, last call, exit messages


def test_text_protocol_trajectory():
    episode = ares_viewer.load_episode(fx.MINI_V1)
    assert episode.episode_id == "swebench-gpt4o-v1/django__django-11099"
    assert episode.outcome is ares_viewer.Outcome.COMPLETED
    assert [s.returncode for s in episode.actions] == [0, None, 0, 1, None]
    assert [s.format_error for s in episode.actions] == [False, True, False, False, False]
    assert episode.step(2).command is None and episode.step(2).extra["bash_blocks"] == 2
    assert episode.step(4).output.rstrip().endswith("@/./+/-/_ characters.']")
    # The run's exit text on the last step is the submitted diff, not a format error.
    assert episode.step(5).output.startswith("diff --git a/django/contrib/auth/validators.py")
    # 1.x records only the total cost; the episode (and its row) report it.
    assert episode.total_cost == pytest.approx(0.0419)
    row = ares_viewer.open_run(fx.MINI_V1).episodes.iloc[0]
    assert row["total_cost"] == pytest.approx(0.0419) and row["nonzero_returncodes"] == 1


@pytest.mark.parametrize(
    ("status", "outcome"),
    [("Submitted", "completed"), ("LimitsExceeded", "truncated"), ("TimeExceeded", "truncated"),
     ("RepeatedFormatError", "errored"), ("RuntimeError", "errored"), ("", "incomplete")],
)
def test_exit_status_names_the_outcome(tmp_path, status, outcome):
    doc = json.loads(fx.MINI_V2.read_text())
    doc["info"]["exit_status"] = status
    doc["messages"][-1]["extra"]["exit_status"] = status
    if outcome == "errored":
        doc["messages"][-1]["content"] = f"{status}: the agent stopped after 3 malformed responses"
        doc["info"]["submission"] = doc["messages"][-1]["extra"]["submission"] = ""
    path = fx.write_json(tmp_path / "astropy__astropy-12907.traj.json", doc)
    episode = ares_viewer.load_episode(path)
    assert episode.outcome.value == outcome
    assert episode.truncated == (outcome == "truncated")
    if outcome == "truncated":
        assert episode.metadata["truncated_by"].endswith(f"limit ({status})")
    if outcome == "errored":
        assert episode.error == f"{status}: {status}: the agent stopped after 3 malformed responses"
    row = ares_viewer.open_run(path).episodes.iloc[0]
    assert row["outcome"] == outcome and row["exit_status"] == (status or None)


def test_index_rows_agree_with_parsed_trajectories():
    run = ares_viewer.open_run(fx.MINI)
    assert len(run) == 2
    for row in run.episodes.to_dict("records"):
        expected = run.episode(row["episode_id"]).summary()
        for key, value in expected.items():
            if value is None:
                assert row[key] is None or row[key] != row[key], key
            else:
                assert row[key] == pytest.approx(value) if isinstance(value, float) else row[key] == value, key
