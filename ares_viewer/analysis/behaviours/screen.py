"""The flag rows of a Tinker rollout file without building the episodes that cannot show a flag.

Building a Tinker rollout as an ``Episode`` (messages, contexts, reasoning, metadata) is what made the flag index
of a million rollouts 12.9 times the cold index's CPU. In a rollout whose responses run no command (no single bash
block, no tool call) and whose line records no error, the command flags (the command rules, a submission), the
time-outs (a step's ``failure`` is never set from a Tinker line) and the error flags (``Episode.error`` is the line's
``error``; a harbor trial's is joined, so a file with one is read whole) cannot show; what can is a format error in
a result and a context rewrite, both read from the steps' prompts with the functions ``tinker.parse`` uses
(``chat.ContextBuilder`` without its messages, ``chat.command_result``). Such lines are only decoded; every other
line is parsed as ``Run.file_episodes`` gives it (``lines``), and its flags are checked. A line whose bytes hold no
backtick, no ``tool_calls`` and no escaped ASCII character (``plain``) runs no command whatever it says, so only its
responses' shapes are looked at; lines are decoded with orjson alone, and one only Python's decoder reads is parsed.

Exact only for the flags it was written for (``SCREENED``): with any other episode-file flag registered, or a run
whose episode ids repeat, or when anything is unusual (a line of another format, an id seen twice), it answers None
and the file is read whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson

from ares_viewer.base import agent_text
from ares_viewer.formats import chat, decoding, registry
from ares_viewer.formats.adapters import tinker
from ares_viewer.formats.sidecars import harbor
from ares_viewer.runs import run as runs
from ares_viewer.runs import sources

# The episode-file flags the screen was written for (see the module's docstring).
SCREENED = frozenset({
    "touched_tests", "repeated_command", "repeated_failing_command", "submitted_no_change", "gave_up", "ran_tests",
    "no_tests_before_submit", "installed_packages", "tried_network", "format_errors", "command_timeouts",
    "context_rewrites", "model_api_errors", "container_errors",
})

Row = tuple[str, str, int, list[int | None]]


def _runs_a_command(step: Mapping[str, Any]) -> bool:
    """Whether a step's response may run a command (as ``tinker.parse`` reads it: a single bash block, or a tool
    call; a response in another shape counts as one, to be parsed)."""
    trace = step.get("trace")
    part = trace.get("policy_response") if isinstance(trace, dict) else None
    response = part.get("messages") if isinstance(part, dict) else part
    if part is not None and not isinstance(response, list):
        return True
    said = [m for m in response or [] if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
    if any(m.get("tool_calls") for m in said):
        return True
    text = "\n".join(chat.text(m.get("content")) for m in said)
    # a bash block opens with three backticks: without them there is none to parse
    return "```" in text and agent_text.parse_response(text).command is not None


# An escaped ASCII character (``\u0060`` is a backtick): a line with one is read step by step, not from its bytes.
_ASCII_ESCAPE = re.compile(rb"\\u00[0-7]")


def plain(line: bytes) -> bool:
    """Whether a line's bytes show that none of its responses can hold a bash block or a tool call: no backtick
    (content parts are joined without a separator, so no single one may show), no ``tool_calls`` and no escaped
    ASCII character that could spell either."""
    return b"`" not in line and b"tool_calls" not in line and _ASCII_ESCAPE.search(line) is None


def _quiet_steps(doc: Any, is_plain: bool) -> list[dict] | None:
    """The steps of a rollout line that records no error and whose responses run no command, else None. With
    ``is_plain`` only the responses' shapes are looked at: none, a list of messages or an object with one (any other
    shape counts as running a command, as in ``_runs_a_command``)."""
    if (type(doc) is not dict and not isinstance(doc, Mapping)) or "error" in doc:  # a line's error is its
        return None  # episode's (``Episode.error``)
    steps = doc.get("steps")
    if type(steps) is not list or not steps:
        return None
    for step in steps:
        if type(step) is not dict:
            return None
        if is_plain:
            trace = step.get("trace")
            part = trace.get("policy_response") if type(trace) is dict else None
            if part is not None and type(part.get("messages") if type(part) is dict else part) is not list:
                return None
        elif _runs_a_command(step):
            return None
    return steps


def _prompt(step: Mapping[str, Any]) -> list[Any] | None:
    """A step's prompt as ``tinker.parse`` reads it: its messages, the leading system message left out."""
    trace = step.get("trace")
    messages = tinker._conversation(trace.get("prompt") if isinstance(trace, Mapping) else None)
    return None if messages is None else chat.split_system(messages)[1]


def _first_rewrite(steps: list[dict]) -> int | None:
    """The first step whose context does not extend the previous one, as ``chat.ContextBuilder`` links them."""
    previous: list[Any] = []
    for j, step in enumerate(steps):
        current = _prompt(step)
        if current is None:
            continue
        if chat.kept(previous, current) < len(previous):
            return j + 1
        previous = current
    return None


def context_steps(doc: Any, line: bytes | None = None) -> tuple[int | None, int | None] | None:
    """For a Tinker rollout line that runs no command and records no error: the first step whose result is a format
    error and the first whose context rewrote the previous one (None where none does), read from the steps'
    prompts as ``tinker.parse`` reads them; None for any other line (it is parsed). ``line``: its bytes, when read:
    of a ``plain`` one only the responses' shapes are looked at, and one with no ``<`` besides holds no result
    whose format error could show (``chat.command_result`` reads one only in ``<returncode>`` or ``<output``)."""
    is_plain = line is not None and plain(line)
    steps = _quiet_steps(doc, is_plain)
    if steps is None:
        return None
    if len(steps) == 1:  # one call: its context rewrites nothing, and no later prompt carries a result
        return None, None
    if is_plain and line is not None and b"<" not in line:
        return None, _first_rewrite(steps)
    contexts = chat.ContextBuilder(messages=False)
    calls: list[int | None] = []
    results: list[Mapping[str, Any] | None] = []
    for step in steps:
        messages = _prompt(step)
        if messages is None:
            calls.append(None)
            results.append(None)
            continue
        result = contexts.add(messages)
        if calls and calls[-1] is not None:
            results[-1] = result
        calls.append(len(contexts.links) - 1)
        results.append(None)
    format_error = next((j + 1 for j, raw in enumerate(results) if chat.command_result(raw).format_error), None)
    rewritten = next((j + 1 for j, call in enumerate(calls) if call is not None and contexts.links[call].rewritten),
                     None)
    return format_error, rewritten


def _lines(data: bytes) -> Iterator[tuple[int, bytes, Any]]:
    """Each line of a JSON Lines file with its (1-based) number and value; a line orjson does not load (repaired
    or reported by the whole read) with the value ``_UNREAD``."""
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line or line.isspace():
            continue
        try:
            yield number, line, orjson.loads(line)
        except orjson.JSONDecodeError:
            yield number, line, _UNREAD


_UNREAD = object()


def _episode_id(doc: Mapping[str, Any], path: str, number: int) -> str:
    """``tinker.episode_id`` of a rollout, without its checks when the indices are plain integers."""
    group, traj, iteration = doc.get("group_idx"), doc.get("traj_idx"), doc.get("iteration")
    if type(group) is int and type(traj) is int and (iteration is None or type(iteration) is int):
        run, folder_iteration, base = tinker._location(path)
        iteration = folder_iteration if iteration is None else iteration
        return f"{run}/it{iteration if iteration is not None else '?'}/{base}/g{group}/t{traj}"
    return tinker.episode_id(doc, path, number)


def flag_rows(run: runs.Run, path: str, flags: list[str],
              rows_of: Callable[[Any, str], list[Row]], data: bytes | None = None) -> list[Row] | None:
    """The flag rows of a Tinker file of ``run`` (``rows_of(episodes, path)`` for the lines that are parsed), or
    None when the screen does not apply: the caller then reads the file whole. ``data``: its bytes, when read."""
    if not set(flags) <= SCREENED or run.table.originals or harbor.trial_of(path, tinker.NAME, run.trials):
        return None
    data = sources.read_bytes(path) if data is None else data
    if not decoding.is_json_lines(data):
        return None
    first, _ = decoding.decode(path, data, ())  # the first line alone tells the format: other files cost no decode
    if not first or registry.sniff(first[0].value) is not tinker.ADAPTER:
        return None
    quiet: list[Row] = []
    parsed: list[int] = []
    order = list(flags)
    bits = {name: order.index(name) for name in ("format_errors", "context_rewrites")}
    none = [None] * len(order)
    for number, line, value in _lines(data):
        rollout = type(value) is dict and "steps" in value and ("group_idx" in value or "traj_idx" in value)
        found = context_steps(value, line) if rollout else None  # ``tinker.sniff``, for decoded lines
        if found is None:
            parsed.append(number)
            continue
        steps: list[int | None] = list(none)
        mask = 0
        if found != (None, None):
            for name, step in zip(("format_errors", "context_rewrites"), found, strict=True):
                if step is not None:
                    mask |= 1 << bits[name]
                    steps[bits[name]] = step
        quiet.append((_episode_id(value, path, number), path, mask, steps))
    rows = rows_of(run.file_episodes(path, data, lines=parsed), path) if parsed else []
    ids = [row[0] for row in quiet] + [row[0] for row in rows]
    if len(set(ids)) != len(ids):
        return None  # a repeated id: the first of the file is the one listed, which the whole read tells
    return rows + quiet
