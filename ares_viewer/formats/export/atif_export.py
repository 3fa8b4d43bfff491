"""Any episode as an ATIF trajectory (Agent Trajectory Interchange Format, harbor RFC 0001).

The document follows the ``atif`` package's pydantic models (``atif.Trajectory``): a system step for the system
prompt, user steps for the messages of the first request, then one agent step per model call with its answer
(``message``), ``reasoning_content``, ``tool_calls`` (``arguments`` as an object), the result as
``observation.results`` (tied to its tool call by ``source_call_id``; a text-protocol command's result has
none) and ``metrics`` (tokens and cost). What ATIF has no field for goes into ``extra``: per step the command,
return code, failure, reward and model/command times; per trajectory the task, outcome, reward, format and the
file it was read from.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from typing import Any

from ares_viewer import model
from ares_viewer.base import jsondecode

SCHEMA_VERSION = "ATIF-v1.6"


def _iso(seconds: float | None) -> str | None:
    if seconds is None or seconds != seconds:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat().replace("+00:00", "Z")


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": value}


def _count(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


def _clean(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


def _jsonable(value: Any) -> Any:
    """Plain JSON values: ``extra`` holds what the file held, and NaN or infinity is no JSON number (None then)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def _tool_calls(step: model.Step, k: int) -> list[dict[str, Any]]:
    return [{"tool_call_id": call.call_id or f"call_{k}_{n}", "function_name": call.name or "tool",
             "arguments": _arguments(call.arguments)} for n, call in enumerate(step.tool_calls)]


def _results(episode: model.Episode, k: int, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Action ``k``'s results: the tool messages answering its calls in the next context, else its own result."""
    ids = {c["tool_call_id"] for c in calls}
    found = []
    if k + 1 < len(episode.steps) and episode.steps[k + 1].context_index is not None:
        for message in episode.appended_messages(k + 1):
            if message.role == "tool" and message.tool_call_id in ids:
                found.append({"source_call_id": message.tool_call_id, "content": message.content})
    if found:
        return found
    step = episode.step(k)
    text = step.observation_text if step.observation_text is not None else step.output
    if text is None:
        return []
    source = calls[0]["tool_call_id"] if calls else None
    return [_clean({"source_call_id": source, "content": text})]


def _agent(episode: model.Episode) -> dict[str, Any]:
    agent = jsondecode.object_at(episode.metadata, "agent")
    config = jsondecode.object_at(episode.metadata, "config")
    model_config = jsondecode.object_at(config, "model")
    name = agent.get("name") or {"mini-swe-agent": "mini-swe-agent"}.get(episode.format, f"{episode.format} agent")
    version = agent.get("version") or episode.metadata.get("mini_version") or "unknown"
    model_name = agent.get("model_name") or episode.metadata.get("model") or model_config.get("model_name")
    return _clean({"name": str(name), "version": str(version), "model_name": model_name and str(model_name)})


def to_atif(episode: model.Episode) -> dict[str, Any]:
    """The episode as an ATIF trajectory document (a plain dict, ready for ``json.dumps``)."""
    steps: list[dict[str, Any]] = []

    def add(**fields: Any) -> None:
        steps.append(_clean({"step_id": len(steps) + 1, **fields}))

    if episode.system_prompt is not None:
        add(source="system", message=episode.system_prompt)
    first = episode.context(1) if len(episode.steps) > 1 else (episode.observation(0) or [])
    for message in first:
        if message.role == "assistant":
            add(source="agent", message=message.content, llm_call_count=0,
                tool_calls=[{"tool_call_id": c.call_id or f"call_0_{n}", "function_name": c.name or "tool",
                             "arguments": _arguments(c.arguments)} for n, c in enumerate(message.tool_calls)] or None)
        else:
            add(source="system" if message.role == "system" else "user", message=message.content,
                extra={"role": message.role} if message.role not in ("user", "system") else None)
    for step in episode.actions:
        k = step.index
        calls = _tool_calls(step, k)
        results = _results(episode, k, calls)
        metrics = _clean({"prompt_tokens": _count(step.usage.prompt_tokens),
                          "completion_tokens": _count(step.usage.generated_tokens),
                          "cached_tokens": _count(step.usage.cached_prompt_tokens),
                          "cost_usd": step.cost if step.cost is not None and step.cost >= 0 else None})
        for key in ("completion_token_ids", "logprobs"):
            if isinstance(step.extra.get(key), list):
                metrics[key] = _jsonable(step.extra[key])
        extra = _clean({"step_index": k, "command": step.command, "returncode": step.returncode,
                        "failure": step.failure, "format_error": step.format_error or None, "reward": step.reward,
                        "model_time": step.model_time, "command_time": step.command_time})
        add(source="agent", timestamp=_iso(step.timestamp), message=step.response,
            reasoning_content=step.reasoning or None, tool_calls=calls or None,
            observation={"results": results} if results else None, metrics=metrics or None,
            extra=_jsonable(extra))
    trajectory = {
        "schema_version": SCHEMA_VERSION,
        "session_id": episode.episode_id,
        "agent": _agent(episode),
        "steps": steps,
        "final_metrics": _clean({
            "total_prompt_tokens": episode.prompt_tokens, "total_completion_tokens": episode.generated_tokens,
            "total_cost_usd": _jsonable(episode.total_cost), "total_steps": len(steps)}),
        "extra": _jsonable(_clean({
            "task_name": episode.task_name, "outcome": str(episode.outcome), "total_reward": episode.total_reward,
            "truncated": episode.truncated, "error": episode.error, "format": episode.format,
            "source_path": episode.path, "start_time": _iso(episode.start_time), "end_time": _iso(episode.end_time),
        })),
    }
    return trajectory


def dumps(episode: model.Episode) -> str:
    """The episode's ATIF trajectory as JSON text (indented, UTF-8 kept)."""
    return json.dumps(to_atif(episode), indent=2, ensure_ascii=False)
