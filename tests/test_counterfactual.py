"""Counterfactual model calls against the real engine: edit what the model saw at step k, resample, carry on.

The parent is the bundled slugify-wrong-fix episode (it strips accents at action 2 and earns 0). From step 1 (it
has just read textkit/slug.py) the model is told a hint and a scripted client answers with the solved attempt's
fix, its test run and the submission: the new episode records the edited prompt and those responses, its
container continued from step 1's state, and the task's verifier gives it the reward. Its per-step snapshots
show what each action changed (the Files page) and pair its fix with the parent's (Compare). A model that fails
partway (a real chat-completions server out of answers) leaves the actions done so far, ended ``errored``.
"""

from __future__ import annotations

import json
import logging
import pathlib
import shutil
import uuid

import chat_server
import pytest

from ares_viewer import counterfactual, fsdiff, sandbox, snapshots
from ares_viewer.analysis import align, ending
from ares_viewer.model import Outcome
from ares_viewer.runs.run import load_episode

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"
SESSION = f"pytest-{uuid.uuid4().hex[:10]}"
HINT = "Hint: transliterate accented letters with unicodedata instead of dropping them."


class Scripted:
    """A client answering with fixed responses, remembering what it was shown."""

    def __init__(self, responses: list[str]) -> None:
        self.responses = list(responses)
        self.seen: list[list[dict]] = []

    async def __call__(self, messages, system_prompt):
        self.seen.append(messages)
        return self.responses[len(self.seen) - 1]


def _hinted(messages: list[dict]) -> list[dict]:
    last = dict(messages[-1])
    last["content"] = f"{last['content']}\n\n{HINT}"
    return [*messages[:-1], last]


def test_a_counterfactual_from_step_1_continues_the_episode_with_the_edited_prompt(engine, tmp_path):
    parent, solved = load_episode(DEMO / f"{WRONG_FIX}.json"), load_episode(DEMO / f"{SOLVED}.json")
    client = Scripted([solved.step(k).response for k in (5, 6, 7)])
    result = counterfactual.run(parent, 1, edit=_hinted, client=client, out_dir=tmp_path / "cf", max_steps=5,
                                docker_client=engine, session=SESSION)
    assert result.box is None and not sandbox.list_sandboxes(engine, session=SESSION)  # removed when done
    # The model saw the edited observation of step 1 first.
    assert client.seen[0][-1]["content"].endswith(HINT) and len(client.seen[0]) == len(parent.observation(1))
    new = load_episode(result.path)
    assert new.step(1).response == solved.step(5).response  # the first response is the resampled one
    assert new.context(1)[-1].content.endswith(HINT)
    assert [s.command for s in new.actions] == [solved.step(k).command for k in (5, 6, 7)]
    # Its container continued from step 1: the fix applied there passes the tests, and the verifier rewards it.
    assert new.step(2).returncode == 0 and "passed" in (new.step(2).output or "")
    assert new.total_reward == 1.0 and parent.total_reward == 0.0
    assert new.metadata["counterfactual"]["episode_id"] == WRONG_FIX
    assert new.metadata["counterfactual"]["step"] == 1
    assert new.metadata["counterfactual"]["edit"]["after"][-1]["content"].endswith(HINT)
    assert new.outcome is Outcome.COMPLETED and new.metadata["end_status"] == "completed"
    # It opens in Compare against its parent.
    pairs = align.align_episodes(parent, new)
    assert any(p.a is not None and p.b is not None for p in pairs)
    # Its snapshots: the restored step 1 of the parent as step 0, then one per action, in the recorder's layout.
    assert [ref.step_index for ref in snapshots.find(new)] == [0, 1, 2, 3]
    assert pathlib.Path(snapshots.find(new)[1].path) == (pathlib.Path(result.path).parent / "snapshots"
                                                         / result.episode_id / "step_0001")
    # The Files page: action 1 rewrote textkit/slug.py (and nothing else of the project), action 2 ran the tests.
    first = fsdiff.step_changes(new, 1)
    assert [(c.path, c.kind) for c in first.changes if not fsdiff.is_noise(c.path)] == [
        ("/testbed/textkit/slug.py", "modified")]
    assert "unicodedata" in first.file_diff("/testbed/textkit/slug.py").unified
    files = fsdiff.files_by_step(new)
    assert files[1] == {"/testbed/textkit/slug.py": "modified"} and files[2] == {}
    # Compare pairs it with the parent's step that changed the same file (a heredoc rewrite and a sed edit).
    pairs = align.align_episodes(parent, new, files_a=fsdiff.files_by_step(parent), files_b=files)
    [fix] = [p for p in pairs if p.b == 1]
    assert fix.a == 2 and fix.files == ("/testbed/textkit/slug.py",)
    # The submission's output (its diff) is recorded, as the recorder records it.
    assert "unicodedata" in (new.step(3).output or "")
    # So is the verifier's run, with the tests' output it printed (and kept in a log).
    verifier = new.metadata["verifier"]
    assert verifier["step_index"] == 3 and verifier["returncode"] == 0 and verifier["reward"] == 1.0
    assert "passed" in verifier["output"]
    assert verifier["reward_file"] == {"path": "/logs/verifier/reward.txt", "content": "1.0\n"}
    assert "/logs/verifier/pytest.log" in verifier["changed_paths"]


def test_a_model_that_fails_at_its_third_call_leaves_two_actions_and_an_errored_episode(engine, tmp_path):
    parent, solved = load_episode(DEMO / f"{WRONG_FIX}.json"), load_episode(DEMO / f"{SOLVED}.json")
    key = "sk-counterfactual-secret"
    with chat_server.serve([solved.step(k).response for k in (5, 6)]) as server:  # no third answer: HTTP 400
        client = counterfactual.openai_client(server.base_url, "scripted", key)
        with pytest.raises(counterfactual.CounterfactualError, match="no scripted response #3") as caught:
            counterfactual.run(parent, 1, edit=_hinted, client=client, out_dir=tmp_path / "cf", max_steps=5,
                               docker_client=engine, session=SESSION)
    assert len(server.requests) == 3
    failed = caught.value.result
    assert isinstance(caught.value.__cause__, counterfactual.ModelEndpointError)
    assert failed.status == "errored" and "HTTP 400" in failed.error and failed.box is None
    assert not sandbox.list_sandboxes(engine, session=SESSION)  # the container is removed
    new = load_episode(failed.path)
    assert new.num_actions == 2 and new.outcome is Outcome.ERRORED
    assert [s.response for s in new.actions] == [solved.step(5).response, solved.step(6).response]
    assert new.step(2).returncode == 0 and "passed" in (new.step(2).output or "")
    assert "ModelEndpointError" in new.error and "answered HTTP 400" in new.error
    assert "no scripted response #3" in new.error
    text = pathlib.Path(failed.path).read_text()
    assert key not in text and json.loads(text)["end_status"] == "errored"
    # What was done is all there: the snapshots of steps 0-2, the fix in step 1's.
    assert [ref.step_index for ref in snapshots.find(new)] == [0, 1, 2]
    assert fsdiff.files_by_step(new)[1] == {"/testbed/textkit/slug.py": "modified"}


def test_a_counterfactual_stopped_by_system_exit_ends_cancelled_as_a_recording_would(engine, tmp_path):
    """One rule for both writers (``status_of``): a ``SystemExit`` stops the episode, it did not fail."""
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")

    def client(messages, system_prompt):
        raise SystemExit(2)

    with pytest.raises(SystemExit):
        counterfactual.run(parent, 1, edit=_hinted, client=client, out_dir=tmp_path / "cf", max_steps=2,
                           docker_client=engine, session=SESSION)
    [path] = (tmp_path / "cf").glob("*.json")
    assert json.loads(path.read_text())["end_status"] == "cancelled"
    assert load_episode(path).outcome is Outcome.CANCELLED
    assert not sandbox.list_sandboxes(engine, session=SESSION)


def test_a_container_that_goes_away_ends_the_episode_errored_after_the_action_it_hit(engine, tmp_path):
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    removed = []

    def client(messages, system_prompt):
        if len(messages) > len(parent.observation(1)):  # the second call: the container dies under the agent
            for info in sandbox.list_sandboxes(engine, session=SESSION):
                engine.api.remove_container(info.container_id, force=True)
                removed.append(info.container_id)
        return "```bash\necho still-here > /testbed/probe.txt\n```"

    with pytest.raises(counterfactual.CounterfactualError, match="container") as caught:
        counterfactual.run(parent, 1, edit=_hinted, client=client, out_dir=tmp_path / "cf", max_steps=5,
                           docker_client=engine, session=SESSION)
    assert removed
    new = load_episode(caught.value.result.path)
    assert new.outcome is Outcome.ERRORED and new.num_actions == 2 and "container is removed" in new.error
    assert new.step(1).returncode == 0 and new.step(2).returncode == -1 and "is gone" in new.step(2).output


def test_the_sandbox_can_be_kept_and_holds_step_1_plus_the_new_actions(engine, tmp_path):
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    client = Scripted(["Look.\n\n```bash\necho probe > /testbed/probe.txt && git status --porcelain\n```"])
    result = counterfactual.run(parent, 1, edit=_hinted, client=client, out_dir=tmp_path / "cf", max_steps=1,
                                docker_client=engine, session=SESSION, keep_sandbox=True)
    try:
        assert result.box is not None and result.box.step == 1
        assert result.box.run("cat /testbed/probe.txt").output.strip() == "probe"
        # Step 1 only read a file: the project is as the task left it, the probe the one new file.
        assert result.box.run("git status --porcelain").output.split() == ["??", "probe.txt"]
    finally:
        result.box.remove()
    new = load_episode(result.path)
    assert new.truncated and new.num_actions == 1 and result.status == "truncated"  # the step budget ended it
    changed = fsdiff.step_changes(new, 1).changes  # (and git's index, which git status refreshed)
    assert [c.path for c in changed if not fsdiff.is_noise(c.path)] == ["/testbed/probe.txt"]


def test_an_async_client_is_awaited_from_inside_a_running_event_loop(engine, tmp_path):
    """As in a notebook, whose kernel runs an event loop."""
    import asyncio
    import concurrent.futures

    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    client = Scripted(["```bash\necho from-a-loop\n```"])

    async def inside() -> counterfactual.Result:
        return counterfactual.run(parent, 1, edit=_hinted, client=client, out_dir=tmp_path / "cf", max_steps=1,
                                  docker_client=engine, session=SESSION)

    # A thread of its own: the test session's main thread may already run a loop (Playwright's sync API does).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
        result = worker.submit(asyncio.run, inside()).result()
    assert "from-a-loop" in (load_episode(result.path).step(1).output or "")


def test_what_cannot_be_a_counterfactual_is_refused_before_any_container(tmp_path):
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    last = len(parent.steps) - 1
    with pytest.raises(ValueError, match="no observation to edit"):
        counterfactual.run(parent, last, edit=[], client=Scripted([]), out_dir=tmp_path)
    with pytest.raises(ValueError, match="parent's run folder"):
        counterfactual.run(parent, 1, edit=_hinted, client=Scripted([]), out_dir=DEMO)


def test_without_a_folder_it_goes_to_a_new_one_under_the_cache_folder_and_reports_progress(engine, tmp_path,
                                                                                           monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    lines = []
    result = counterfactual.run(parent, 1, edit=_hinted, client=Scripted(["```bash\necho progress-probe\n```"]),
                                max_steps=1, docker_client=engine, session=SESSION, progress=lines.append)
    folder = pathlib.Path(result.path).parent
    assert folder.parent == tmp_path / "cache" / "counterfactuals"
    assert sorted(p.name for p in folder.iterdir()) == [f"{result.episode_id}.json", "snapshots"]
    said = "\n".join(lines)
    assert "Action 1 of at most 1: asking the model" in said and "Action 1: running echo progress-probe" in said
    assert "Container" in said  # the restore's own progress lines come first


def _run_whose_verifier_prints(root: pathlib.Path, command: str | None = None) -> pathlib.Path:
    """The wrong-fix episode in a run of its own (its file, snapshots and task recipe; the sample recipe's verifier
    prints the tests' output as ARES's ``bash /tests/test.sh`` does, and keeps it in a log), with the verifier's
    ``command`` instead when given."""
    task = "textkit__slugify-accents"
    root.mkdir()
    shutil.copy(DEMO / f"{WRONG_FIX}.json", root)
    shutil.copytree(DEMO / "snapshots" / WRONG_FIX, root / "snapshots" / WRONG_FIX)
    shutil.copytree(DEMO / "tasks" / task, root / "tasks" / task)
    if command is not None:
        recipe_path = root / "tasks" / task / "task.json"
        recipe = json.loads(recipe_path.read_text())
        recipe["verifier"]["command"] = command
        recipe_path.write_text(json.dumps(recipe))
    return root / f"{WRONG_FIX}.json"


def test_a_counterfactual_through_an_endpoint_with_credentials_records_its_verifier_as_the_recorder_does(
        engine, tmp_path, monkeypatch, caplog):
    """Its endpoint takes HTTP Basic auth from the URL (a wrong password first: an errored episode naming the URL
    without it); the verifier's output, exit code, reward file and changed paths are recorded in the recorder's
    shape, and the Episode page's ending shows them as for a recorded episode. Nothing written holds the
    password."""
    caplog.set_level(logging.INFO, logger="ares_viewer")
    parent = load_episode(_run_whose_verifier_prints(tmp_path / "run"))
    solved = load_episode(DEMO / f"{SOLVED}.json")
    password = "cf-p@ss-9137"
    with chat_server.serve([solved.step(k).response for k in (5, 6, 7)]) as server:
        server.basic_auth = ("reviewer", password)
        at = f"127.0.0.1:{server.base_url.split(':')[2].split('/')[0]}"
        shown = f"http://reviewer:***@{at}/v1/chat/completions"
        wrong = counterfactual.openai_client(f"http://reviewer:not-{password}@{at}/v1", "scripted")
        with pytest.raises(counterfactual.CounterfactualError) as caught:
            counterfactual.run(parent, 1, edit=_hinted, client=wrong, out_dir=tmp_path / "out" / "refused",
                               docker_client=engine, session=SESSION)
        refused = load_episode(caught.value.result.path)
        assert refused.outcome is Outcome.ERRORED and refused.num_actions == 0
        assert f"{shown} answered HTTP 401" in refused.error and "user name 'reviewer'" in refused.error
        assert f"{shown} answered HTTP 401" in str(caught.value)
        server.requests.clear()
        right = counterfactual.openai_client(f"http://reviewer:{password.replace('@', '%40')}@{at}/v1", "scripted")
        result = counterfactual.run(parent, 1, edit=_hinted, client=right, out_dir=tmp_path / "out" / "cf",
                                    docker_client=engine, session=SESSION)
    assert len(server.requests) == 3 and all(r.headers["authorization"].startswith("Basic ")
                                             for r in server.requests)
    new = load_episode(result.path)
    assert new.metadata["recording"]["model"] == {"endpoint": shown, "model": "scripted"}
    # The verifier, in the recorder's shape: the same keys as a recorded episode's.
    verifier = new.metadata["verifier"]
    recorded = solved.metadata["verifier"]
    assert set(verifier) == set(recorded)
    assert verifier["step_index"] == 3 and verifier["returncode"] == 0 and "5 passed" in verifier["output"]
    assert [c["command"] for c in verifier["commands"]] == [json.loads(
        (tmp_path / "run" / "tasks" / "textkit__slugify-accents" / "task.json").read_text())["verifier"]["command"]]
    assert verifier["reward_file"] == {"path": "/logs/verifier/reward.txt", "content": "1.0\n"}
    assert verifier["snapshot"] == f"snapshots/{result.episode_id}.verifier/step_0003"
    assert (pathlib.Path(result.path).parent / verifier["snapshot"]).is_dir()
    assert {"/logs/verifier/reward.txt", "/logs/verifier/pytest.log"} <= set(verifier["changed_paths"])
    assert "/testbed/textkit/slug.py" not in verifier["changed_paths"]  # the model's fix is not the verifier's
    # The ending reads it as it reads a recorded episode's.
    end = ending.of(new)
    assert end.step == 3 and end.reward == 1.0 and end.explanation == "completed, reward 1: the verifier's tests passed"
    assert "5 passed" in end.verifier.output and end.verifier.returncode == 0 and end.verifier.reward_file == "1.0\n"
    assert end.submission is not None and "unicodedata" in end.submission
    # The Episode page's ending section shows it.
    shown_page = _episode_page(tmp_path / "out", "cf", result.episode_id, 3, monkeypatch)
    assert "#### Why this reward" in shown_page and "**Verifier output** · exit code 0 · reward 1" in shown_page
    assert "5 passed" in shown_page and "Reward file: 1.0" in shown_page
    assert "The recording holds no verifier output" not in shown_page
    # Nothing written or logged holds the password.
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert password.encode() not in data and b"cf-p%40ss" not in data, path
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert shown in logged and password not in logged and "cf-p%40ss" not in logged


def test_a_verifier_that_gives_no_reward_ends_the_episode_errored_with_its_output_recorded(engine, tmp_path):
    parent = load_episode(_run_whose_verifier_prints(tmp_path / "run", "echo the tests crashed; exit 3"))
    solved = load_episode(DEMO / f"{SOLVED}.json")
    client = Scripted([solved.step(k).response for k in (5, 6, 7)])
    with pytest.raises(counterfactual.CounterfactualError, match="the verifier failed: no reward at"):
        counterfactual.run(parent, 1, edit=_hinted, client=client, out_dir=tmp_path / "cf", docker_client=engine,
                           session=SESSION)
    [written] = (tmp_path / "cf").glob("*.json")
    new = load_episode(written)
    assert new.outcome is Outcome.ERRORED and new.num_actions == 3 and new.total_reward is None
    verifier = new.metadata["verifier"]
    assert verifier["returncode"] == 3 and "the tests crashed" in verifier["output"] and verifier["reward"] is None
    assert "no reward at /logs/verifier/reward.txt" in verifier["error"]["message"]
    end = ending.of(new)
    assert end.verifier.output.strip() == "the tests crashed" and "the verifier failed" in end.verifier.error
    assert end.explanation.startswith("errored: the episode failed before it was scored")
    assert "the verifier failed: no reward at /logs/verifier/reward.txt" in end.explanation


def _episode_page(root: pathlib.Path, run: str, episode_id: str, step: int, monkeypatch) -> str:
    """The app's Episode page at a step, as the text it shows (AppTest; markdown escapes dropped)."""
    import html
    import re

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import ares_viewer_app

    st.cache_resource.clear()
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    at = AppTest.from_file(str(pathlib.Path(ares_viewer_app.__file__).parent / "main.py"), default_timeout=120)
    at.query_params.update(run=run, episode=episode_id, step=str(step))
    at.switch_page("views/episode/episode.py")
    at.run()
    assert not at.exception, at.exception
    parts = []
    for kind in ("markdown", "caption", "code", "error", "warning", "info"):
        parts.extend(str(getattr(e, "value", "") or "") for e in at.get(kind))
    shown = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", "\n".join(parts)).replace("\u2060", "")
    # The step's texts are text blocks (``blocks.text_block``): escaped HTML, shown as the file holds them.
    blocks = [html.unescape(re.sub(r"<[^>]+>", "", body)) for e in at.get("html")
              for body in re.findall(r"<pre data-language=[^>]*>(.*?)</pre>", str(e.value), re.S)]
    return "\n".join([shown, *blocks])
