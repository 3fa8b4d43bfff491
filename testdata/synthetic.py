"""Synthetic ARES episodes that look like the real thing, for tests, benchmarks and demos.

Episodes follow formats.md section 1 exactly: key order, ``json.dump(indent=2)``, cumulative
observations, FIRST/MID/LAST semantics, the default agent's protocol, usage and cost. Sizes and
endings are arguments, so a benchmark can ask for 2,000 episodes of 40 steps or one of 250.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from typing import Any

SYSTEM_PROMPT = (
    "You are a helpful assistant that can interact multiple times with a computer shell to solve "
    "programming tasks.\nYour response must contain exactly ONE bash code block with ONE command (or commands "
    "connected with && or ||).\n\nInclude a THOUGHT section before your command where you explain your reasoning "
    "process.\nFormat your response as shown in <format_example>.\n\n<format_example>\nTHOUGHT: Your reasoning "
    "and analysis here\n\n```bash\nyour_command_here\n```\n</format_example>\n\nFailure to follow these rules "
    "will cause your response to be rejected."
)
_COMMANDS = (
    "ls -la",
    "grep -rn 'def parse' src/ | head -20",
    "cat src/calc/core.py",
    "python -m pytest -q tests/test_core.py",
    "sed -n '1,80p' src/calc/core.py",
    "git status --short",
    "python - <<'EOF'\nimport calc\nprint(calc.parse('1 + 2'))\nEOF",
    "sed -i 's/return a - b/return a + b/' src/calc/core.py",
    "find . -name '*.py' | xargs wc -l | sort -n | tail",
)
_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
_ELIDED_WARNING = (
    "<warning>\nThe output of your last command was too long.\nPlease try a different command that produces less "
    "output.\nIf you're looking at a file you can try use head, tail or sed to view a smaller number of lines "
    "selectively.\nIf you're using grep or find and it produced too much output, you can use a more selective "
    "search pattern.\nIf you really need to see something from the full command's output, you can redirect output "
    "to a file and then search in that file.\n</warning>"
)


def task_message(task_name: str) -> str:
    """The first user message: the task and the instructions."""
    return (
        f"<pr_description>\nConsider the following PR description for {task_name}:\n"
        "The add() helper returns the wrong result for negative numbers, and parse() fails on "
        "whitespace.\n</pr_description>\n\n<instructions>\n# Task Instructions\n\nYou're a software engineer "
        "interacting continuously with a computer by submitting commands.\nWork in /testbed. When done, run "
        f"`{_SUBMIT}`.\n</instructions>"
    )


def result_message(returncode: int, output: str) -> str:
    """The user message that carries a command's result, elided as the agent does at 10,000 chars."""
    if len(output) < 10000:
        return f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>"
    return (
        f"<returncode>{returncode}</returncode>\n{_ELIDED_WARNING}\n<output_head>\n{output[:5000]}\n</output_head>\n"
        f"<elided_chars>\n{len(output) - 10000} characters elided\n</elided_chars>\n"
        f"<output_tail>\n{output[-5000:]}\n</output_tail>"
    )


def _request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messages": list(messages),
        "system_prompt": SYSTEM_PROMPT,
        "max_output_tokens": None,
        "temperature": 0.0,
        "top_p": None,
        "top_k": None,
        "stream": False,
        "tools": None,
        "tool_choice": None,
        "metadata": None,
        "service_tier": None,
        "stop_sequences": None,
    }


def _response(text: str, prompt_chars: int) -> dict[str, Any]:
    prompt_tokens = prompt_chars // 4
    generated = max(1, len(text) // 4)
    return {
        "data": [{"content": text}],
        "cost": round(prompt_tokens * 3e-6 + generated * 15e-6, 6),
        "usage": {"prompt_tokens": prompt_tokens, "generated_tokens": generated},
    }


def episode_dict(
    *,
    task_name: str = "calc__calc-1",
    actions: int = 10,
    ending: str = "completed",
    reward: float = 1.0,
    output_chars: int = 600,
    seed: int = 0,
    start_time: float = 1_763_800_000.0,
    drop_context_at: int | None = None,
    episode_id: str | None = None,
) -> dict[str, Any]:
    """One ARES episode as the collector writes it.

    Args:
        task_name: the task's name.
        actions: how many model responses were executed.
        ending: ``completed`` (LAST with the reward), ``truncated`` (step limit: pending request),
            ``errored`` (no LAST record, an ``end_status`` of errored) or ``incomplete`` (no LAST).
        reward: the final reward of a completed episode.
        output_chars: typical size of a command's output.
        seed: makes the episode's text and timings reproducible.
        start_time: unix seconds of the FIRST record.
        drop_context_at: an action after which the agent drops the old observations from its context.
        episode_id: the id (a UUID4 from the seed when omitted).
    """
    rng = random.Random(seed)
    episode_id = episode_id or str(uuid.UUID(int=rng.getrandbits(128), version=4))
    messages: list[dict[str, Any]] = [{"role": "user", "content": task_message(task_name)}]
    now = start_time
    steps: list[dict[str, Any]] = [
        {"step_index": 0, "step_type": "FIRST", "observation": _request(messages), "action": None, "reward": None,
         "discount": None, "timestamp": now}
    ]
    prompt_chars = len(SYSTEM_PROMPT) + len(messages[0]["content"])
    for k in range(1, actions + 1):
        final = k == actions and ending == "completed"
        command = _SUBMIT if final else _COMMANDS[rng.randrange(len(_COMMANDS))]
        thought = f"THOUGHT: Step {k}. I need to look at the code and check what the tests expect before editing."
        text = f"{thought}\n\n```bash\n{command}\n```"
        action = _response(text, prompt_chars)
        now += rng.uniform(1.5, 9.0)
        if final:
            steps.append({"step_index": k, "step_type": "LAST", "observation": None, "action": action,
                          "reward": reward, "discount": 0.0, "timestamp": now})
            break
        returncode = 0 if rng.random() > 0.2 else 1
        line = f"src/calc/core.py:{k}: def parse(text: str) -> Expr:  # line {k}\n"
        output = (line * (output_chars // len(line) + 1))[: rng.randint(output_chars // 2, output_chars)]
        messages.append({"role": "assistant", "content": text})
        messages.append({"role": "user", "content": result_message(returncode, output)})
        if drop_context_at == k:
            # The agent keeps the task and the latest exchange only.
            messages = [messages[0], *messages[-2:]]
        prompt_chars += len(text) + len(messages[-1]["content"])
        kind = "LAST" if k == actions and ending == "truncated" else "MID"
        steps.append({"step_index": k, "step_type": kind, "observation": _request(messages), "action": action,
                      "reward": 0.0, "discount": 1.0, "timestamp": now})
    doc: dict[str, Any] = {
        "episode_id": episode_id,
        "task_name": task_name,
        "start_time": start_time,
        "end_time": now if ending in ("completed", "truncated") else None,
        "total_reward": (reward if ending == "completed" else 0.0 if ending == "truncated" else None),
        "num_steps": len(steps),
        "truncated": ending == "truncated",
        "steps": steps,
    }
    if ending == "errored":
        doc["end_status"] = "errored"
        doc["error"] = {"type": "TimeoutError", "message": "container stopped answering during step execution"}
    return doc


def write_episode(folder: str | os.PathLike, doc: dict[str, Any]) -> str:
    """Write an episode as ARES does (``{episode_id}.json``, ``indent=2``); returns the path."""
    path = os.path.join(os.fspath(folder), f"{doc['episode_id']}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2)
    return path


def write_mixed_run(folder: str | os.PathLike) -> str:
    """Five episodes of three tasks, a minute apart, with 4 to 8 actions: solved and failed attempts at two tasks, a
    truncated one and an errored one (the run the chart tests read); returns ``folder``."""
    plan = [("calc__calc-1", "completed", 1.0), ("calc__calc-1", "completed", 0.0), ("calc__calc-2", "truncated", 0.0),
            ("calc__calc-2", "completed", 1.0), ("calc__calc-3", "errored", 0.0)]
    for i, (task, ending, reward) in enumerate(plan):
        write_episode(folder, episode_dict(task_name=task, ending=ending, reward=reward, seed=i, actions=4 + i,
                                           start_time=1.7e9 + 60 * i))
    return os.fspath(folder)


def write_output_run(folder: str | os.PathLike, output: str, *, seed: int = 0) -> str:
    """Write a run of one episode whose first command printed ``output`` (whole, however long); returns the
    episode's path."""
    os.makedirs(folder, exist_ok=True)
    doc = episode_dict(actions=2, seed=seed)
    result = doc["steps"][1]["observation"]["messages"][-1]
    result["content"] = f"<returncode>0</returncode>\n<output>\n{output}</output>"
    return write_episode(folder, doc)


def write_run(folder: str | os.PathLike, episodes: int, actions: int = 40, *, output_chars: int = 600,
              seed: int = 0) -> list[str]:
    """Write a run of ``episodes`` episodes over a handful of tasks, with mixed endings."""
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for i in range(episodes):
        ending = rng.choices(("completed", "truncated", "errored"), weights=(85, 10, 5))[0]
        doc = episode_dict(task_name=f"calc__calc-{i % 7}", actions=actions, ending=ending,
                           reward=float(rng.random() < 0.5), output_chars=output_chars, seed=seed * 1_000_003 + i,
                           start_time=1_763_800_000.0 + 600 * i)
        paths.append(write_episode(folder, doc))
    return paths


def boundary_messages(doc: dict[str, Any], k: int) -> list[dict[str, Any]]:
    """The conversation right after action ``k`` of an episode dict ran: what a boundary snapshot records.

    Step ``k``'s observation messages; for a LAST step without one, the conversation it answered plus its
    response (the agent's message list after the final action).
    """
    step = doc["steps"][k]
    if step.get("observation") is not None:
        return [dict(m) for m in step["observation"]["messages"]]
    answered = doc["steps"][k - 1]["observation"]["messages"]
    return [*(dict(m) for m in answered), {"role": "assistant", "content": step["action"]["data"][0]["content"]}]


def write_boundary_snapshot(
    output_dir: str | os.PathLike,
    agent_messages: list[dict[str, Any]],
    files: dict[str, bytes],
    *,
    links: dict[str, str] | None = None,
    modes: dict[str, int] | None = None,
    snapshot_id: str | None = None,
    step_count: int = 0,
    tarball: bool = False,
    created_at: str = "2026-11-20T14:05:00.000000",
    mtime: float = 1_763_800_000.0,
    container_image: str | None = "swebench/sweb.eval.x86_64.calc_1:latest",
) -> str:
    """Write an episode-boundary snapshot as ARES's proposed writer does (formats.md section 2).

    ``{output_dir}/{snapshot_id}/snapshot.json`` plus ``container_fs.tar.gz``: a folder holding a copy of the
    files (the writer's real behaviour) or, with ``tarball=True``, a gzip tar of them (what test doubles write).

    Args:
        output_dir: The snapshot writer's output folder.
        agent_messages: The conversation at the snapshot (see :func:`boundary_messages`).
        files: Absolute container path -> content.
        links: Absolute container path -> symlink target (verbatim).
        modes: Absolute container path -> permission bits (default 0o644).
        snapshot_id: The folder name (a UUID4 from the messages when omitted).
        step_count: The environment's step count at the snapshot.
        tarball: Write ``container_fs.tar.gz`` as a real gzip tarball instead of a folder.
        created_at: ISO-8601 local time, no zone.
        mtime: Modification time given to every file (a copy keeps the original times).
        container_image: The image the container ran (``container_image``; None when unknown).

    Returns:
        The snapshot folder.
    """
    import gzip
    import hashlib
    import io
    import tarfile

    links = links or {}
    modes = modes or {}
    digest = hashlib.sha256(json.dumps(agent_messages, sort_keys=True).encode()).digest()
    snapshot_id = snapshot_id or str(uuid.UUID(bytes=digest[:16], version=4))
    folder = os.path.join(os.fspath(output_dir), snapshot_id)
    os.makedirs(folder, exist_ok=True)
    header = {
        "snapshot_id": snapshot_id,
        "created_at": created_at,
        "snapshot_dir": folder,
        "step_count": step_count,
        "step_limit": 250,
        "requires_reset": False,
        "task_type": "swebench",
        "task_data": {"instance_id": "calc__calc-1"},
        "container_type": "docker",
        "container_image": container_image,
        "container_dockerfile_path": "None",
        "container_resources": None,
        "agent_messages": agent_messages,
    }
    with open(os.path.join(folder, "snapshot.json"), "w", encoding="utf-8") as handle:
        json.dump(header, handle, indent=2)
    fs = os.path.join(folder, "container_fs.tar.gz")
    if tarball:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            folders = sorted({p for path in [*files, *links] for p in _parents(path)})
            for name in folders:
                info = tarfile.TarInfo(name.lstrip("/"))
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(mtime)
                tar.addfile(info)
            for path, data in sorted(files.items()):
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size, info.mode, info.mtime = len(data), modes.get(path, 0o644), int(mtime)
                tar.addfile(info, io.BytesIO(data))
            for path, target in sorted(links.items()):
                info = tarfile.TarInfo(path.lstrip("/"))
                info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, int(mtime)
                tar.addfile(info)
        with open(fs, "wb") as handle:
            handle.write(gzip.compress(raw.getvalue(), mtime=0))
        return folder
    os.makedirs(fs, exist_ok=True)
    for path, data in files.items():
        target = os.path.join(fs, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
        os.chmod(target, modes.get(path, 0o644))
        os.utime(target, (mtime, mtime))
    for path, link_target in links.items():
        target = os.path.join(fs, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(link_target, target)
    return folder


def _parents(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def docker_died_error() -> BaseException:
    """An error as ARES raises one when the container died under the agent: its wrapper, raised from the cause
    (a Docker 409, raised while handling an exec that failed), so ``__cause__`` and ``__context__`` chain them."""
    try:
        try:
            try:
                raise ConnectionError("409 Client Error: Conflict (container is not running)")
            except ConnectionError as exc:
                raise OSError("exec in container failed") from exc
        except OSError as exc:
            raise RuntimeError("Code agent task failed") from exc
    except RuntimeError as exc:
        return exc
