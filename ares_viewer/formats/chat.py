"""Chat messages and cumulative contexts, as every adapter meets them.

ARES, Tinker traces, Ray runner chats and mini-swe-agent trajectories all hold OpenAI-style message
dicts (content a string or a list of parts, tool calls nested under ``function`` or flat) and
per-call contexts that mostly extend the previous one. This module turns them into
``model.Message`` / ``model.ContextLink`` and reads loosely typed numbers, so each adapter keeps
only its own quirks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

from ares_viewer import model
from ares_viewer.base import agent_text

# ``isinstance(value, MAPPINGS)`` is ``isinstance(value, Mapping)``, quick for the dicts a JSON reader gives: the
# exact type is checked first, where ``Mapping`` alone asks its ABC (about ten times the cost, and adapters ask
# it of every value of every message).
MAPPINGS = (dict, Mapping)


class FormatError(ValueError):
    """A document of an adapter's format that cannot be read as an episode; the message says why."""


def list_field(doc: Any, key: str, *, per: str, items: str) -> list[Any]:
    """``doc[key]``, checked to be a list inside a JSON object.

    Args:
        doc: The decoded document (or record).
        key: The key holding the list.
        per: Where the object was expected, for the message (e.g. ``"per line"``).
        items: What the list holds, for the message (e.g. ``"step records"``).

    Raises:
        FormatError: naming what was found instead.
    """
    if not isinstance(doc, MAPPINGS):
        raise FormatError(f"expected a JSON object {per}, found a {type(doc).__name__}")
    value = doc.get(key)
    if not isinstance(value, list):
        raise FormatError(f"'{key}' is a {type(value).__name__}, expected a list of {items}")
    return value


def number(value: Any, what: str, warnings: list[str]) -> float | None:
    """A float from a JSON value; strings of numbers are read with a warning, others dropped."""
    if type(value) is float or type(value) is int:  # the usual case first: summaries read millions
        return float(value)
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            warnings.append(f"{what} is the text {value[:40]!r}, not a number; ignored")
            return None
        warnings.append(f"{what} is the text {value!r}; read as the number {parsed}")
        return parsed
    warnings.append(f"{what} is a {type(value).__name__}, not a number; ignored")
    return None


T = TypeVar("T", int, float)


def plus(total: T | None, value: T | None) -> T | None:
    """``total`` plus ``value``, a figure one model call may record (tokens, cost): None until a call records one
    (``call_total``)."""
    if value is None:
        return total
    return value if total is None else total + value


def call_total(summed: T | None, calls: int, zero: T) -> T | None:
    """An episode's total of a figure its model calls may record (docs/formats.md, "Totals"): ``summed``, the sum
    over the calls that record it (``plus``); None (unknown, never 0) when it has ``calls`` and none records it;
    ``zero`` with no model call."""
    if summed is not None:
        return summed
    return None if calls else zero


def count(value: Any) -> int | None:
    """A token count: negative, missing or non-integer counts are unknown."""
    if type(value) is int:  # the usual case first: summaries read millions
        return value if value >= 0 else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or math.isnan(value):
        return None
    return int(value)


def integer(value: Any) -> int | None:
    """An integer field (an index, an iteration), or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # NaN
        return None
    return int(value) if float(value).is_integer() else None


def text(content: Any) -> str:
    """Message content as text: strings as they are, content-part lists joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, MAPPINGS):
                # {type: text, text}, {type: thinking, thinking}, or a nested {content}.
                value = part.get("text", part.get("thinking", part.get("content", "")))
                value = value if isinstance(value, str) else text(value)
                parts.append(f"{value}\n\n" if part.get("type") == "thinking" and value else value)
            else:
                parts.append(str(part))
        return "".join(parts)
    return str(content)


def tool_calls(raw: Any) -> tuple[model.ToolCall, ...]:
    """Tool calls in either shape: ``{id, function: {name, arguments}}`` or flat ``{call_id|id, name, input}``."""
    if not isinstance(raw, list):
        return ()
    calls = []
    for call in raw:
        if not isinstance(call, MAPPINGS):
            continue
        function = call.get("function")
        fn = function if isinstance(function, MAPPINGS) else call
        arguments = fn.get("arguments", fn.get("input", ""))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("call_id", call.get("id"))
        calls.append(model.ToolCall(call_id=None if call_id is None else str(call_id), name=str(fn.get("name", "")),
                                    arguments=arguments))
    return tuple(calls)


def command(calls: tuple[model.ToolCall, ...]) -> str | None:
    """The command of a response's first tool call: its shell command, else the tool's name and arguments."""
    if not calls:
        return None
    call = calls[0]
    found = agent_text.command_from_tool_call(call.name, call.arguments)
    if found != call.arguments:
        return found
    return call.name if call.arguments.strip() in ("", "{}") else f"{call.name} {call.arguments}"


def shell_command(calls: tuple[model.ToolCall, ...]) -> str | None:
    """The shell command of a response's first tool call, else that call's raw arguments (None without calls)."""
    return agent_text.command_from_tool_call(calls[0].name, calls[0].arguments) if calls else None


def message_from_dict(raw: Any) -> model.Message:
    """A ``model.Message`` from a message dict (ARES writes tool calls as messages with no ``role``)."""
    if not isinstance(raw, MAPPINGS):
        return model.Message(role="unknown", content=text(raw))
    if "role" not in raw and "call_id" in raw:
        call = model.ToolCall(call_id=raw.get("call_id"), name=str(raw.get("name", "")),
                              arguments=text(raw.get("arguments")))
        return model.Message(role="tool_call", content="", tool_calls=(call,), raw=raw)
    name = raw.get("name")
    tool_call_id = raw.get("tool_call_id")
    return model.Message(
        role=str(raw.get("role", "unknown")),
        content=text(raw.get("content")),
        name=str(name) if name is not None else None,
        tool_calls=tool_calls(raw.get("tool_calls")),
        tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
        raw=raw,
    )


def split_system(messages: list[Any]) -> tuple[str | None, list[Any]]:
    """The leading system message's text, and the messages after it.

    The model keeps the system prompt apart from contexts (ARES never puts it inside them), so
    formats that do put it first in the conversation are read the same way.
    """
    if messages and isinstance(messages[0], MAPPINGS) and messages[0].get("role") in ("system", "developer"):
        return text(messages[0].get("content")), messages[1:]
    return None, messages


def kept(previous: list[Any], current: list[Any]) -> int:
    """How many leading messages of the previous context the current one keeps unchanged."""
    n = len(previous)
    # The common case, a pure extension, is one list comparison done in C.
    if len(current) >= n and current[:n] == previous:
        return n
    same = 0
    while same < n and same < len(current) and current[same] == previous[same]:
        same += 1
    return same


def result_message(added: list[Any]) -> Mapping[str, Any] | None:
    """The message that carried the last action's result: the first user/tool message after the
    last assistant message among the newly added ones."""
    start = 0
    for n, raw in enumerate(added):
        if isinstance(raw, MAPPINGS) and raw.get("role") == "assistant":
            start = n + 1
    for raw in added[start:]:
        if isinstance(raw, MAPPINGS) and raw.get("role") in ("user", "tool"):
            return raw
    return None


class ContextBuilder:
    """Turns per-call contexts into a message pool plus one link per model call."""

    def __init__(self, *, messages: bool = True) -> None:
        """``messages``: build the pool's messages (False: only count them, for a summary that needs the links)."""
        self.pool: list[model.Message] = []
        self.links: list[model.ContextLink] = []
        self._previous_raw: list[Any] = []
        self._messages = messages
        self._pooled = 0

    def add(self, raw_messages: list[Any]) -> Mapping[str, Any] | None:
        """Record one call's context; returns the raw message carrying the previous action's result."""
        same = kept(self._previous_raw, raw_messages)
        added_raw = raw_messages[same:]
        start = self._pooled
        if self._messages:
            self.pool.extend(message_from_dict(raw) for raw in added_raw)
        self._pooled += len(added_raw)
        link = model.ContextLink(kept=same, added=tuple(range(start, self._pooled)),
                                 rewritten=same < len(self._previous_raw))
        self.links.append(link)
        self._previous_raw = raw_messages
        return result_message(added_raw)

    def rewrites(self) -> int:
        """How many calls did not extend the previous call's context."""
        return sum(1 for link in self.links if link.rewritten)


class CommandResult(NamedTuple):
    """What the environment answered to an action's command, as a step records it."""

    returncode: int | None
    """The command's return code, when recorded."""
    output: str | None
    """The command's output; for elided output, head + marker + tail."""
    elided: int
    """Characters the recording elided from the output (0 if none)."""
    text: str | None
    """The raw text of the message that carried the result (or an error)."""
    format_error: bool
    """True when the message reports a format error instead of output."""


NO_RESULT = CommandResult(None, None, 0, None, False)


def command_result(raw: Mapping[str, Any] | None) -> CommandResult:
    """What an action's result message says about its command."""
    if raw is None:
        return NO_RESULT
    body = text(raw.get("content"))
    if "<returncode>" in body or "<output" in body:
        parsed = agent_text.parse_result(body)
        return CommandResult(parsed.returncode, parsed.output, parsed.elided_chars, body, parsed.format_error)
    # A tool's answer is the command's output; a user turn is the environment's feedback.
    return CommandResult(None, body if raw.get("role") == "tool" else None, 0, body, False)
