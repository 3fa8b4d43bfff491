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

import json
from typing import Any

from ares_viewer import model
from ares_viewer.base import jsondecode
from ares_viewer.formats.export.steps import arguments, call_ids, clean, iso, jsonable, results

SCHEMA_VERSION = "ATIF-v1.6"


def _count(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


def _tool_calls(step: model.Step) -> list[dict[str, Any]]:
    return [{"tool_call_id": call_id, "function_name": call.name or "tool", "arguments": arguments(call.arguments)}
            for call_id, call in zip(call_ids(step), step.tool_calls, strict=True)]


def _results(episode: model.Episode, k: int, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Action ``k``'s results, each tied to its tool call by ``source_call_id`` (none for a text command)."""
    return [clean({"source_call_id": source, "content": text})
            for source, text in results(episode, k, [c["tool_call_id"] for c in calls])]


def _agent(episode: model.Episode) -> dict[str, Any]:
    agent = jsondecode.object_at(episode.metadata, "agent")
    config = jsondecode.object_at(episode.metadata, "config")
    model_config = jsondecode.object_at(config, "model")
    name = agent.get("name") or {"mini-swe-agent": "mini-swe-agent"}.get(episode.format, f"{episode.format} agent")
    version = agent.get("version") or episode.metadata.get("mini_version") or "unknown"
    model_name = agent.get("model_name") or episode.metadata.get("model") or model_config.get("model_name")
    return clean({"name": str(name), "version": str(version), "model_name": model_name and str(model_name)})


def to_atif(episode: model.Episode) -> dict[str, Any]:
    """The episode as an ATIF trajectory document (a plain dict, ready for ``json.dumps``)."""
    steps: list[dict[str, Any]] = []

    def add(**fields: Any) -> None:
        steps.append(clean({"step_id": len(steps) + 1, **fields}))

    if episode.system_prompt is not None:
        add(source="system", message=episode.system_prompt)
    first = episode.context(1) if len(episode.steps) > 1 else (episode.observation(0) or [])
    for message in first:
        if message.role == "assistant":
            add(source="agent", message=message.content, llm_call_count=0,
                tool_calls=[{"tool_call_id": c.call_id or f"call_0_{n}", "function_name": c.name or "tool",
                             "arguments": arguments(c.arguments)} for n, c in enumerate(message.tool_calls)] or None)
        else:
            add(source="system" if message.role == "system" else "user", message=message.content,
                extra={"role": message.role} if message.role not in ("user", "system") else None)
    for step in episode.actions:
        k = step.index
        calls = _tool_calls(step)
        found = _results(episode, k, calls)
        metrics = clean({"prompt_tokens": _count(step.usage.prompt_tokens),
                         "completion_tokens": _count(step.usage.generated_tokens),
                         "cached_tokens": _count(step.usage.cached_prompt_tokens),
                         "cost_usd": step.cost if step.cost is not None and step.cost >= 0 else None})
        for key in ("completion_token_ids", "logprobs"):
            if isinstance(step.extra.get(key), list):
                metrics[key] = jsonable(step.extra[key])
        extra = clean({"step_index": k, "command": step.command, "returncode": step.returncode,
                       "failure": step.failure, "format_error": step.format_error or None, "reward": step.reward,
                       "model_time": step.model_time, "command_time": step.command_time})
        add(source="agent", timestamp=iso(step.timestamp), message=step.response,
            reasoning_content=step.reasoning or None, tool_calls=calls or None,
            observation={"results": found} if found else None, metrics=metrics or None,
            extra=jsonable(extra))
    trajectory = {
        "schema_version": SCHEMA_VERSION,
        "session_id": episode.episode_id,
        "agent": _agent(episode),
        "steps": steps,
        "final_metrics": clean({
            "total_prompt_tokens": episode.prompt_tokens, "total_completion_tokens": episode.generated_tokens,
            "total_cost_usd": jsonable(episode.total_cost), "total_steps": len(steps)}),
        "extra": jsonable(clean({
            "task_name": episode.task_name, "outcome": str(episode.outcome), "total_reward": episode.total_reward,
            "truncated": episode.truncated, "error": episode.error, "format": episode.format,
            "source_path": episode.path, "start_time": iso(episode.start_time), "end_time": iso(episode.end_time),
        })),
    }
    return trajectory


def dumps(episode: model.Episode) -> str:
    """The episode's ATIF trajectory as JSON text (indented, UTF-8 kept)."""
    return json.dumps(to_atif(episode), indent=2, ensure_ascii=False)
