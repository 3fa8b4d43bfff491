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
import pathlib
import uuid

import chat_server
import pytest

from ares_viewer import align, counterfactual, fsdiff, sandbox, snapshots
from ares_viewer.model import Outcome
from ares_viewer.run import load_episode

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
    assert files[1] == {"/testbed/textkit/slug.py"} and files[2] == frozenset()
    # Compare pairs it with the parent's step that changed the same file (a heredoc rewrite and a sed edit).
    pairs = align.align_episodes(parent, new, files_a=fsdiff.files_by_step(parent), files_b=files)
    [fix] = [p for p in pairs if p.b == 1]
    assert fix.a == 2 and fix.files == ("/testbed/textkit/slug.py",)
    # The submission's output (its diff) is recorded, as the recorder records it.
    assert "unicodedata" in (new.step(3).output or "")


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
    assert fsdiff.files_by_step(new)[1] == {"/testbed/textkit/slug.py"}


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
