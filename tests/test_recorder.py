"""The recorder's pure parts, without ARES or Docker: the episode file's layout and the episode bookkeeping.

The environment here is a scripted stand-in with ARES's interface (async ``reset``/``step`` returning dm_env
time steps whose observations hold the agent's live message list); the real ARES runs are in
tests/test_recorder_ares.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import math
import pathlib
from typing import Any, NamedTuple

import pytest

from ares_viewer import Outcome, load_episode
from ares_viewer.recorder import EpisodeFile, record, to_jsonable
from ares_viewer.recorder.episode_file import step_record


class TimeStep(NamedTuple):
    step_type: str
    reward: float | None
    discount: float | None
    observation: Any

    def last(self) -> bool:
        return self.step_type == "LAST"


@dataclasses.dataclass
class Request:
    messages: list[dict[str, str]]
    system_prompt: str | None = "You are a helpful assistant."
    temperature: float | None = 0.0


@dataclasses.dataclass
class TextData:
    content: str


@dataclasses.dataclass
class Usage:
    prompt_tokens: int
    generated_tokens: int


@dataclasses.dataclass
class Response:
    data: list[TextData]
    cost: float
    usage: Usage


def respond(command: str) -> Response:
    return Response([TextData(f"THOUGHT: go.\n\n```bash\n{command}\n```")], 0.001, Usage(10, 5))


class ScriptedEnv:
    """ARES's environment interface; like the real agent it keeps appending to the message list it handed out."""

    def __init__(self, *, limit: int = 100, submit_at: int | None = None, raise_at: int | None = None,
                 hang_at: int | None = None, reward: float = 1.0) -> None:
        self.limit, self.submit_at, self.raise_at, self.hang_at = limit, submit_at, raise_at, hang_at
        self.reward = reward
        self.messages: list[dict[str, str]] = []
        self.count = 0
        self.entered = self.exited = False

    async def __aenter__(self):
        self.entered = True
        return self

    async def __aexit__(self, *exc):
        self.exited = True

    async def close(self):
        self.exited = True

    async def reset(self) -> TimeStep:
        self.count = 0
        self.messages = [{"role": "user", "content": "<pr_description>Fix it — café</pr_description>"}]
        return TimeStep("FIRST", 0.0, 1.0, Request(self.messages))

    async def step(self, action: Response) -> TimeStep:
        self.count += 1
        self.messages.append({"role": "assistant", "content": action.data[0].content})
        if self.count == self.hang_at:
            await asyncio.sleep(3600)
        if self.count == self.raise_at:
            raise RuntimeError("Code agent task failed")
        if self.count == self.submit_at:
            return TimeStep("LAST", self.reward, 0.0, None)
        result = f"<returncode>0</returncode>\n<output>\nout {self.count}\n</output>"
        self.messages.append({"role": "user", "content": result})
        request = Request(self.messages)
        if self.count >= self.limit:
            return TimeStep("LAST", 0.0, 1.0, request)
        return TimeStep("MID", 0.0, 1.0, request)


def run(coroutine: Any) -> Any:
    """``asyncio.run`` in a thread of its own: a test run earlier in the session may leave this thread's loop set."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def rollout(env, out: pathlib.Path, actions: int) -> tuple[Any, list[dict]]:
    """Run up to ``actions`` steps through the recorder, reading the episode file after every step."""
    seen = []
    async with record(env, out, snapshots=False) as live:
        ts = await live.reset()
        path = live.episodes[-1]
        seen.append(json.loads(path.read_text()))
        for n in range(actions):
            ts = await live.step(respond(f"echo {n}"))
            seen.append(json.loads(path.read_text()))
            if ts.last():
                break
    return live, seen


# ----- the file ---------------------------------------------------------------------------------------------------


def test_the_file_is_what_json_dump_with_indent_2_writes(tmp_path):
    doc_file = EpisodeFile(tmp_path / "e.json", "e", "täsk ✓", 1.5)
    assert doc_file.render() == json.dumps({**doc_file.header, "steps": []}, indent=2)
    records = [
        step_record(0, "FIRST", {"messages": [{"role": "user", "content": "naïve\n日本 \"q\""}]}, None, None, None, 2),
        step_record(1, "MID", {"messages": [], "tools": None}, {"data": [{"content": "x"}], "cost": 0.0}, 0.0, 1.0, 3),
        step_record(2, "LAST", None, {"data": [], "usage": {"prompt_tokens": -1}}, math.nan, 0.0, math.inf),
    ]
    for record_ in records:
        doc_file.add_step(record_)
    doc_file.header.update(end_time=4.0, total_reward=math.nan)
    doc_file.extra["end_status"] = "completed"
    expected = json.dumps({**doc_file.header, "steps": records, "end_status": "completed"}, indent=2)
    assert doc_file.render() == expected
    assert "NaN" in expected and "Infinity" in expected and "\\u65e5\\u672c" in expected
    doc_file.write()
    assert (tmp_path / "e.json").read_text() == expected
    assert [p.name for p in tmp_path.iterdir()] == ["e.json"]  # no temporary file left behind


def test_to_jsonable_copies_the_agents_live_list():
    messages = [{"role": "user", "content": "hi"}]
    copied = to_jsonable(Request(messages))
    messages.append({"role": "assistant", "content": "later"})
    messages[0]["content"] = "changed"
    assert copied == {"messages": [{"role": "user", "content": "hi"}], "system_prompt": "You are a helpful assistant.",
                      "temperature": 0.0}
    assert to_jsonable(respond("ls")) == {
        "data": [{"content": "THOUGHT: go.\n\n```bash\nls\n```"}], "cost": 0.001,
        "usage": {"prompt_tokens": 10, "generated_tokens": 5},
    }
    assert to_jsonable((1, {"a": object}))[1]["a"].startswith("<class")


# ----- episodes ---------------------------------------------------------------------------------------------------


def test_a_completed_episode_is_written_after_every_step(tmp_path):
    env = ScriptedEnv(submit_at=3, reward=1.0)
    live, seen = run(rollout(env, tmp_path, 10))
    assert env.entered and env.exited
    assert [d["num_steps"] for d in seen] == [1, 2, 3, 4]
    assert [d["end_status"] for d in seen] == ["running"] * 3 + ["completed"]
    final = seen[-1]
    assert [s["step_type"] for s in final["steps"]] == ["FIRST", "MID", "MID", "LAST"]
    first, last = final["steps"][0], final["steps"][-1]
    assert (first["reward"], first["discount"], first["action"]) == (None, None, None)
    # Copied when the step returned: the FIRST request holds only the task, though the agent's list grew since.
    assert len(first["observation"]["messages"]) == 1
    assert (last["observation"], last["reward"], last["discount"]) == (None, 1.0, 0.0)
    assert final["total_reward"] == 1.0 and final["truncated"] is False and final["end_time"] is not None
    episode = load_episode(live.episodes[0])
    assert episode.outcome is Outcome.COMPLETED and episode.total_reward == 1.0
    assert [s.command for s in episode.steps[1:]] == ["echo 0", "echo 1", "echo 2"]
    assert "café" in episode.context(1)[0].content


def test_the_step_limit_gives_a_truncated_episode(tmp_path):
    live, seen = run(rollout(ScriptedEnv(limit=2), tmp_path, 10))
    final = seen[-1]
    assert final["end_status"] == "truncated" and final["truncated"] is True and final["total_reward"] == 0.0
    assert final["steps"][-1]["observation"] is not None and final["steps"][-1]["discount"] == 1.0
    assert load_episode(live.episodes[0]).outcome is Outcome.TRUNCATED


def test_an_environment_that_raises_gives_an_errored_episode_with_every_earlier_step(tmp_path):
    env = ScriptedEnv(raise_at=3)
    with pytest.raises(RuntimeError, match="Code agent task failed"):
        run(rollout(env, tmp_path, 10))
    [path] = tmp_path.glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["end_status"] == "errored" and doc["num_steps"] == 3
    assert doc["error"]["type"] == "RuntimeError" and "Code agent task failed" in doc["error"]["message"]
    assert "Traceback" in doc["error"]["traceback"]
    episode = load_episode(path)
    assert episode.outcome is Outcome.ERRORED and episode.num_actions == 2
    assert [s.output for s in episode.steps[1:]] == ["out 1\n", "out 2\n"]
    assert env.exited


def test_a_cancelled_rollout_is_recorded_as_cancelled(tmp_path):
    async def main():
        task = asyncio.create_task(rollout(ScriptedEnv(hang_at=2), tmp_path, 10))
        while not (files := list(tmp_path.glob("*.json"))) or json.loads(files[0].read_text())["num_steps"] < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    [path] = tmp_path.glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["end_status"] == "cancelled" and doc["num_steps"] == 2
    assert load_episode(path).outcome is Outcome.CANCELLED


def test_reset_while_running_abandons_and_exit_aborts(tmp_path):
    async def main():
        async with record(ScriptedEnv(), tmp_path, snapshots=False) as live:
            await live.reset()
            await live.step(respond("ls"))
            await live.reset()  # the first episode was still running
            await live.step(respond("pwd"))
        return live.episodes

    first, second = run(main())
    assert json.loads(first.read_text())["end_status"] == "abandoned"
    assert json.loads(second.read_text())["end_status"] == "aborted"
    assert load_episode(first).outcome is Outcome.INTERRUPTED
    assert load_episode(second).outcome is Outcome.ABORTED


def test_the_last_output_is_read_from_final_command(tmp_path):
    doc_file = EpisodeFile(tmp_path / "e.json", "e", "t", 1.0)
    first = {"messages": [{"role": "user", "content": "task"}]}
    doc_file.add_step(step_record(0, "FIRST", first, None, None, None, 1.0))
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"
    doc_file.add_step(step_record(1, "LAST", None, to_jsonable(respond(submit)), 1.0, 0.0, 2.0))
    doc_file.extra["final_command"] = {"step_index": 1, "command": submit, "returncode": 0,
                                       "output": "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x\n"}
    doc_file.write()
    last = load_episode(tmp_path / "e.json").steps[-1]
    assert (last.returncode, last.output) == (0, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x\n")


@dataclasses.dataclass(frozen=True)
class ExecResult:
    output: str
    exit_code: int


class ScriptedContainer:
    """ARES's container interface, as far as the recorder uses it: ``exec_run`` (no Docker behind it)."""

    def __init__(self, outputs: dict[str, ExecResult]) -> None:
        self.outputs = outputs

    async def exec_run(self, command: str, **_: Any) -> ExecResult:
        return self.outputs.get(command, ExecResult("", 0))


class SubmittingEnv(ScriptedEnv):
    """Like ARES's CodeEnvironment: the agent's command runs in ``_container``, the verifier in ``_compute_reward``."""

    async def reset(self) -> TimeStep:
        self._container = ScriptedContainer({
            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff": ExecResult(
                "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x.py b/x.py\n", 0),
            "bash /tests/test.sh": ExecResult("1 passed in 0.01s\n", 0),
            "cat /logs/verifier/reward.txt": ExecResult("1.0\n", 0),
        })
        return await super().reset()

    async def step(self, action: Response) -> TimeStep:
        self.count += 1
        command = action.data[0].content.split("```bash\n")[1].split("\n```")[0]
        result = await self._container.exec_run(command)
        if result.output.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"):
            return TimeStep("LAST", await self._compute_reward(), 0.0, None)
        self.messages.append({"role": "user", "content": f"<returncode>{result.exit_code}</returncode>\n<output>\n"
                                                        f"{result.output}</output>"})
        return TimeStep("MID", 0.0, 1.0, Request(self.messages))

    async def _compute_reward(self) -> float:
        await self._container.exec_run("mkdir -p /logs/verifier")
        await self._container.exec_run("bash /tests/test.sh")
        return float((await self._container.exec_run("cat /logs/verifier/reward.txt")).output)


def test_the_last_command_and_the_verifier_are_recorded_apart(tmp_path):
    async def main():
        async with record(SubmittingEnv(), tmp_path, snapshots=False) as live:
            await live.reset()
            await live.step(respond("ls"))
            await live.step(respond("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"))
        return live.episodes[0]

    path = run(main())
    doc = json.loads(path.read_text())
    assert doc["end_status"] == "completed" and doc["total_reward"] == 1.0
    assert doc["final_command"]["step_index"] == 2 and doc["final_command"]["returncode"] == 0
    assert doc["final_command"]["output"].startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git")
    verifier = doc["verifier"]
    assert [c["command"] for c in verifier["commands"]] == [
        "mkdir -p /logs/verifier", "bash /tests/test.sh", "cat /logs/verifier/reward.txt"]
    assert (verifier["reward"], verifier["returncode"], verifier["output"]) == (1.0, 0, "1 passed in 0.01s\n")
    last = load_episode(path).steps[-1]
    assert last.command == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff" and last.returncode == 0
    assert "diff --git a/x.py" in last.output


def test_a_keyboard_interrupt_is_recorded_as_interrupted(tmp_path):
    class InterruptedEnv(ScriptedEnv):
        async def step(self, action):
            if self.count == 1:
                raise KeyboardInterrupt
            return await super().step(action)

    with pytest.raises(KeyboardInterrupt):
        run(rollout(InterruptedEnv(), tmp_path, 10))
    [path] = tmp_path.glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["end_status"] == "interrupted" and doc["num_steps"] == 2
    assert load_episode(path).outcome is Outcome.INTERRUPTED


@pytest.mark.parametrize(("exc", "status"), [(SystemExit(1), "cancelled"), (KeyboardInterrupt(), "interrupted"),
                                             (asyncio.CancelledError(), "cancelled"), (OSError("disk"), "errored")])
def test_a_rollout_stopped_by_an_exception_ends_as_a_counterfactual_stopped_by_it_would(tmp_path, exc, status):
    """The recorder and counterfactuals share one rule (``status_of``): ``SystemExit`` stops, it does not fail."""

    class StoppedEnv(ScriptedEnv):
        async def step(self, action):
            if self.count == 1:
                raise exc
            return await super().step(action)

    with pytest.raises(type(exc)):
        run(rollout(StoppedEnv(), tmp_path, 10))
    [path] = tmp_path.glob("*.json")
    assert json.loads(path.read_text())["end_status"] == status
    assert load_episode(path).outcome == status
