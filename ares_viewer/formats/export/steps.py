"""What every export of an episode needs: plain JSON values, times as ISO text, tool-call arguments as objects,
and an action's results (the tool messages answering its calls, else its own recorded result)."""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from typing import Any

from ares_viewer import model


def iso(seconds: float | None) -> str | None:
    """Unix seconds as ISO 8601 text in UTC (``...Z``); None when unknown or out of range."""
    if seconds is None or seconds != seconds:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat().replace("+00:00", "Z")


def arguments(raw: str) -> dict[str, Any]:
    """A tool call's arguments as an object: the JSON object it holds, else ``{"input": ...}`` with its value."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": value}


def clean(value: dict[str, Any]) -> dict[str, Any]:
    """The dict without its None values."""
    return {k: v for k, v in value.items() if v is not None}


def jsonable(value: Any) -> Any:
    """Plain JSON values: what the file held, with NaN or infinity (no JSON number) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def call_ids(step: model.Step) -> list[str]:
    """The ids of action ``step``'s tool calls, ``call_{step}_{n}`` where the file gave none."""
    return [call.call_id or f"call_{step.index}_{n}" for n, call in enumerate(step.tool_calls)]


def results(episode: model.Episode, k: int, ids: list[str]) -> list[tuple[str | None, str]]:
    """Action ``k``'s results as ``(call id, text)``: the tool messages answering its calls (``ids``) in the next
    context, else its own result (the message that carried it, else its output) tied to its first call."""
    wanted = set(ids)
    found: list[tuple[str | None, str]] = []
    if k + 1 < len(episode.steps) and episode.steps[k + 1].context_index is not None:
        for message in episode.appended_messages(k + 1):
            if message.role == "tool" and message.tool_call_id in wanted:
                found.append((message.tool_call_id, message.content))
    if found:
        return found
    step = episode.step(k)
    text = step.observation_text if step.observation_text is not None else step.output
    if text is None:
        return []
    return [(ids[0] if ids else None, text)]
