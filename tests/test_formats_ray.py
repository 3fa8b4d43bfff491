"""Reading Ray runner trajectories: semantics from formats.md section 5."""

from __future__ import annotations

import json

import formats_fixtures as fx
import pytest

import ares_viewer

OK = "5b0e9c1d-4a7f-4e62-9d3b-2f8a61c0e7a4"
FAILED = "a3c71f28-0d5e-4b19-8f6a-7e2d94b1c350"
CRASHED = "e91f0a7b-6c2d-4f38-b5a4-0c1d83e7f296"


def test_json_lines_and_a_single_json_dump_load():
    run = ares_viewer.open_run(fx.RAY)
    assert len(run) == 4 and run.errors == []
    assert set(run.episodes["format"]) == {"ray"}
    rows = run.episodes.set_index("episode_id")
    assert rows.loc[OK, "task_name"] == "sympy__sympy-20590"  # from reset_kwargs
    assert rows.loc[OK, "outcome"] == "completed" and rows.loc[OK, "total_reward"] == 1.0
    assert rows.loc[FAILED, "total_reward"] == 0.0


def test_error_info_is_the_errored_outcome_with_its_message():
    run = ares_viewer.open_run(fx.RAY_LINES)
    episode = run.episode(CRASHED)
    assert episode.outcome is ares_viewer.Outcome.ERRORED
    assert episode.error.startswith("RayActorError: The actor died unexpectedly")
    assert "OOM-killed" in run.episodes.set_index("episode_id").loc[CRASHED, "error"]
    assert episode.metadata["error_info"]["traceback"].startswith("Traceback")


@pytest.mark.parametrize(
    ("error_info", "expected"),
    [("ConnectionResetError: sandbox closed the socket", "ConnectionResetError: sandbox closed the socket"),
     ({"exception_type": "TimeoutError", "error_message": "step exceeded 600 s"}, "TimeoutError: step exceeded 600 s"),
     ({"traceback": "Traceback (most recent call last):\n  ...\nKeyError: 'obs'"}, "KeyError: 'obs'")],
)
def test_error_info_spellings(tmp_path, error_info, expected):
    doc = fx.lines(fx.RAY_LINES)[0]
    doc["error_info"] = error_info
    episode = ares_viewer.load_episode(fx.write_json(tmp_path / "t.json", doc))
    assert episode.outcome is ares_viewer.Outcome.ERRORED and episode.error == expected


def test_evaluation_and_tools_are_kept():
    episode = ares_viewer.open_run(fx.RAY_LINES).episode(FAILED)
    assert episode.metadata["evaluation"]["success"] is False
    assert "still fails" in episode.metadata["evaluation"]["rationale"]
    assert episode.metadata["tools"] == ["bash", "submit"]
    assert episode.metadata["reset_kwargs"]["seed"] == 17


def test_steps_contexts_and_tool_results():
    doc = fx.lines(fx.RAY_LINES)[0]
    episode = ares_viewer.open_run(fx.RAY_LINES).episode(OK)
    assert episode.num_actions == 3 and episode.steps[-1].kind is ares_viewer.StepKind.LAST
    assert episode.system_prompt.startswith("You are a software engineering agent")
    # Action k answered its timestep's chat without the answer at its end.
    for k in range(1, 4):
        assert [m.to_dict() for m in episode.context(k)] == doc["timesteps"][k - 1]["chats"][0][1:-1]
    step = episode.step(1)
    assert step.command.startswith("grep -n '__slots__'")
    assert step.output.startswith("sympy/core/symbol.py:209")  # the tool's answer, from the next chat
    assert [m.role for m in episode.new_messages(2)] == ["assistant", "tool"]
    assert episode.step(3).command == "submit" and episode.step(3).reward == 1.0


def test_missing_episode_id_uses_the_file_name(tmp_path):
    doc = json.loads(fx.RAY_ONE.read_text())
    del doc["episode_id"]
    path = fx.write_json(tmp_path / "traj-000731.json", doc)
    assert ares_viewer.open_run(path).episode_ids == ["traj-000731"]
    listed = fx.write_json(tmp_path / "batch.json", [doc, doc])  # a JSON array of trajectories
    assert ares_viewer.open_run(listed).episode_ids == ["batch#1", "batch#2"]


def test_not_done_without_error_is_incomplete(tmp_path):
    doc = fx.lines(fx.RAY_LINES)[2]
    doc["error_info"] = None
    episode = ares_viewer.load_episode(fx.write_json(tmp_path / "t.json", doc))
    assert episode.outcome is ares_viewer.Outcome.INCOMPLETE and episode.error is None


def test_a_timestep_with_several_chats_keeps_the_others_beside_the_main_one(tmp_path):
    doc = fx.lines(fx.RAY_LINES)[0]
    main = doc["timesteps"][0]["chats"][0]
    planner = [{"role": "user", "content": "Plan the fix in one line."},
               {"role": "assistant", "content": "Add __slots__ = ('name',) to Symbol."}]
    doc["timesteps"][0]["chats"] = [planner, main]
    episode = ares_viewer.load_episode(fx.write_json(tmp_path / "t.json", doc))
    step = episode.step(1)
    assert [m.to_dict() for m in episode.context(1)] == main[1:-1]  # the last chat made the action
    assert step.extra["chats"] == 2 and step.extra["other_chats"] == [planner]
    assert "other_chats" not in episode.step(2).extra
