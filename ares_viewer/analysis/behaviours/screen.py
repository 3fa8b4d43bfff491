"""The flag rows of a Tinker rollout file without building the episodes that cannot show a flag.

Building a Tinker rollout as an ``Episode`` (messages, contexts, reasoning, metadata) is what made the flag index
of a million rollouts 12.9 times the cold index's CPU. In a rollout whose responses run no command (no single bash
block, no tool call) and whose line records no error, the command flags (the command rules, a submission), the
time-outs (a step's ``failure`` is never set from a Tinker line) and the error flags (``Episode.error`` is the line's
``error``; a harbor trial's is joined, so a file with one is read whole) cannot show; what can is a format error in
a result and a context rewrite, both read from the steps' prompts with the functions ``tinker.parse`` uses
(``chat.ContextBuilder`` without its messages, ``chat.command_result``). Such lines are only decoded; every other
line is parsed as ``Run.file_episodes`` gives it (``lines``), and its flags are checked.

Exact only for the flags it was written for (``SCREENED``): with any other episode-file flag registered, or a run
whose episode ids repeat, or when anything is unusual (a line of another format, an id seen twice), it answers None
and the file is read whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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


def context_steps(doc: Any) -> tuple[int | None, int | None] | None:
    """For a Tinker rollout line that runs no command and records no error: the first step whose result is a format
    error and the first whose context rewrote the previous one (None where none does), read from the steps'
    prompts as ``tinker.parse`` reads them; None for any other line (it is parsed)."""
    if not isinstance(doc, Mapping) or "error" in doc:  # a line's error is its episode's (``Episode.error``)
        return None
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        return None
    if any(_runs_a_command(step) for step in steps):
        return None
    if len(steps) == 1:  # one call: its context rewrites nothing, and no later prompt carries a result
        return None, None
    contexts = chat.ContextBuilder(messages=False)
    calls: list[int | None] = []
    results: list[Mapping[str, Any] | None] = []
    for step in steps:
        trace = step.get("trace")
        messages = tinker._conversation(trace.get("prompt") if isinstance(trace, Mapping) else None)
        if messages is None:
            calls.append(None)
            results.append(None)
            continue
        result = contexts.add(chat.split_system(messages)[1])
        if calls and calls[-1] is not None:
            results[-1] = result
        calls.append(len(contexts.links) - 1)
        results.append(None)
    format_error = next((j + 1 for j, raw in enumerate(results) if chat.command_result(raw).format_error), None)
    rewritten = next((j + 1 for j, call in enumerate(calls) if call is not None and contexts.links[call].rewritten),
                     None)
    return format_error, rewritten


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
    records, _ = decoding.decode(path, data)
    quiet: list[Row] = []
    parsed: list[int] = []
    order = list(flags)
    for record in records:
        if record.unit != "line" or record.number is None:
            return None
        found = context_steps(record.value) if tinker.sniff(record.value) else None
        if found is None:
            parsed.append(record.number)
            continue
        steps: list[int | None] = [None] * len(order)
        mask = 0
        for name, step in zip(("format_errors", "context_rewrites"), found, strict=True):
            if step is not None:
                mask |= 1 << order.index(name)
                steps[order.index(name)] = step
        quiet.append((tinker.episode_id(record.value, path, record.number), path, mask, steps))
    rows = rows_of(run.file_episodes(path, data, lines=parsed), path) if parsed else []
    ids = [row[0] for row in quiet] + [row[0] for row in rows]
    if len(set(ids)) != len(ids):
        return None  # a repeated id: the first of the file is the one listed, which the whole read tells
    return rows + quiet
