"""Trajectories mini-swe-agent 2.4.6 wrote with its own deterministic models and its Docker environment
(``tests/producers/mini_swe_agent_runs.py --multi``, kept in ``tests/fixtures/mini-swe-agent-2.4``): the Responses
API, a response with two tool calls, a text response with two commands; and a file read only in part."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

import ares_viewer
from ares_viewer import model
from ares_viewer.model import render

KEPT = pathlib.Path(__file__).resolve().parent / "fixtures" / "mini-swe-agent-2.4"
RUN = "deterministic-run"


def _doc(name: str) -> dict:
    return json.loads((KEPT / RUN / name / f"{name}.traj.json").read_text())


@pytest.fixture(scope="module")
def run() -> ares_viewer.Run:
    return ares_viewer.open_run(KEPT)


def _row(run: ares_viewer.Run, name: str) -> dict:
    return run.episodes.set_index("episode_id").loc[f"{RUN}/{name}"].to_dict()


def _agrees(run: ares_viewer.Run, name: str) -> model.Episode:
    """The episode, after checking that its index row says what the parsed episode says."""
    episode = run.episode(f"{RUN}/{name}")
    row, summary = _row(run, name), episode.summary()
    for key in ("num_actions", "outcome", "total_cost", "prompt_tokens", "generated_tokens", "nonzero_returncodes"):
        assert row[key] == pytest.approx(summary[key]), key
    assert row["total_reward"] != row["total_reward"] or row["total_reward"] is None  # unscored: unknown, not 0
    return episode


def test_a_responses_api_trajectory_reads_fully(run):
    episode = _agrees(run, "responses-submitted")
    # Two model calls: the first made two function calls (the setup and the fix), the second submitted.
    assert [s.command.split(" && ")[0] for s in episode.actions] == [
        "mkdir -p /tmp/repo", "cd /tmp/repo", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert [s.tool_calls[0].call_id for s in episode.actions] == ["fc_1a", "fc_1b", "fc_2a"]
    assert episode.step(1).output == "def add(a, b):\n    return a - b\n" and episode.step(2).output == "5\n"
    assert episode.step(1).thought == "Set up, then fix the operator."
    assert "+    return a + b" in episode.step(3).output and episode.outcome == "completed"
    # Cost and tokens once per model call (the response's usage), as mini-swe-agent bills them.
    assert episode.total_cost == pytest.approx(episode.metadata["model_stats"]["instance_cost"]) == 0.06
    assert (episode.prompt_tokens, episode.generated_tokens) == (2700, 100)
    assert episode.step(2).cost is None and episode.step(2).usage == model.Usage()
    assert [m.role for m in episode.context(3)][-3:] == ["assistant", "tool", "tool"]
    assert episode.read_in_part is None and not episode.warnings


@pytest.mark.parametrize("name", ["toolcall-two-calls", "text-two-commands"])
def test_every_command_of_a_response_is_an_action_with_its_own_result(run, name):
    episode = _agrees(run, name)
    first, second = episode.step(1), episode.step(2)
    assert first.output == "def add(a, b):\n    return a - b\n" and first.returncode == 0
    assert second.command == "cd /tmp/repo && cat missing.txt"
    assert second.returncode == 1 and second.output == "cat: missing.txt: No such file or directory\n"
    assert episode.num_actions == 4 and episode.summary()["nonzero_returncodes"] == 1
    # Both answer the first model call's context; its cost is counted once.
    assert first.context_index == second.context_index == 0 and second.cost is None
    assert episode.total_cost == pytest.approx(episode.metadata["model_stats"]["instance_cost"])
    assert len({s.context_index for s in episode.actions}) == episode.metadata["api_calls"] == 3
    assert episode.landmarks()[0] == (2, "first failed command (rc 1)")
    # Nothing entered the prompt between the commands of one call: the second shows no prompt of its own.
    assert episode.call_step(2) == 1 and episode.call_step(3) == 3 and not episode.new_messages(2)
    assert "another command of step 1's model call" in render.step_text(episode, 2)


def _partly_readable(tmp_path: pathlib.Path) -> pathlib.Path:
    """The Responses API file with two items this reader does not know: a hosted tool's call among a response's
    output items, and an item of its own between the messages."""
    doc = _doc("responses-submitted")
    doc["messages"][2]["output"].insert(1, {"type": "web_search_call", "id": "ws_1", "status": "completed"})
    doc["messages"].insert(5, {"type": "compaction", "summary": "..."})
    folder = tmp_path / "partial" / RUN / "responses-submitted"
    folder.mkdir(parents=True)
    (folder / "responses-submitted.traj.json").write_text(json.dumps(doc))
    return tmp_path / "partial"


def test_a_file_read_in_part_says_what_was_skipped(tmp_path):
    run = ares_viewer.open_run(_partly_readable(tmp_path))
    episode = run.episode(f"{RUN}/responses-submitted")
    assert episode.skipped == ("messages[2].output[1] (type 'web_search_call')", "messages[5] (type 'compaction')")
    assert episode.read_in_part == ("read in part: skipped messages[2].output[1] (type 'web_search_call'), "
                                    "messages[5] (type 'compaction')")
    assert [w for _, w in run.warnings] == [episode.read_in_part]
    assert episode.num_actions == 3  # what it could read is read
    assert f"note: {episode.read_in_part}" in str(episode)  # the CLI's and the notebook's text face


def _page(page: str, **params: str):
    """The app's ``page`` in AppTest (over the runs ``ARES_VIEWER_RUNS`` lists), after its first run."""
    from streamlit.testing.v1 import AppTest

    import ares_viewer_app

    main = str(pathlib.Path(ares_viewer_app.__file__).resolve().parent / "main.py")
    at = AppTest.from_file(main, default_timeout=60)
    at.query_params.update(params)
    at.switch_page(f"views/{page}/{page}.py")
    at.run()
    assert not at.exception
    return at


def test_the_episode_page_and_the_overview_say_a_file_was_read_in_part(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    shutil.copytree(_partly_readable(tmp_path), root / "partial")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    at = _page("episode", run="partial", episode=f"{RUN}/responses-submitted", step="1")
    shown = [w.value.replace("\\", "") for w in at.warning]  # the markdown source, escaped as text
    assert any("read in part: skipped messages[2].output[1] (type 'web_search_call'), messages[5] (type "
               "'compaction')" in w for w in shown), shown
    overview = _page("overview", run="partial")
    assert any("1 episode file(s) read in part" in w.value for w in overview.warning), [
        w.value for w in overview.warning]


def test_the_episode_page_says_a_step_is_another_command_of_a_model_call(monkeypatch, tmp_path):
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path))
    shutil.copytree(KEPT, tmp_path / "mini")
    at = _page("episode", run="mini", episode=f"{RUN}/toolcall-two-calls", step="2")
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any("Another command of step 1's model call" in c for c in captions), captions
