"""What a format adapter is, the row it summarizes an episode into, and the step fields and the episode every
adapter builds alike (``step_fields``, ``episode``).

An adapter is an ``Adapter``, which each format module (``formats/adapters/ares.py``, ...) declares as its
``ADAPTER``; the registry (``formats.registry``) picks the one whose ``sniff`` claims a file's first record, by
content, never by the file's name or by branching on the adapter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ares_viewer import model
from ares_viewer.base import agent_text
from ares_viewer.formats import chat
from ares_viewer.model import EpisodeRow

__all__ = ["Adapter", "EpisodeRow", "episode", "step_fields"]


def _no_episode_id(doc: Any, path: str, record: int | None = None) -> str | None:
    return None


def _never_misnamed(path: str) -> str | None:
    return None


def _no_fast_path(path: str, data: bytes) -> list[EpisodeRow] | None:
    return None


@dataclasses.dataclass(frozen=True)
class Adapter:
    """One file format's reader: its functions, with a default for each one a format may go without.

    A format module ends with ``ADAPTER = base.Adapter(NAME, sniff=..., summarize=..., parse=..., ...)``, and
    ``formats.registry.ADAPTERS`` lists the built-in ones; a package outside this repository adds its own through
    the ``ares_viewer.formats`` entry-point group (docs/formats.md, "Adding a format").

    A file holds one record, or several: one per line (JSON Lines) or one per item of a top-level JSON
    array. ``record`` is then the 1-based line or item number (None for a whole file). ``summarize``,
    ``parse`` and ``episode_id`` may raise ``ValueError`` with a plain-words reason; the caller reports it
    as that record's error and reads every other record.
    """

    NAME: str
    """The value of the ``format`` column (``"ares"``, ``"tinker"``, ...)."""

    sniff: Callable[[Any], bool]
    """Whether a decoded record is this format's, judged by its content, never by the file's name. Each sniff is
    strict enough that no two adapters claim the same record."""

    summarize: Callable[[Any, str, int | None], list[EpisodeRow]]
    """``(doc, path, record)``: the index rows of one record's episodes (with ``warnings``, and any columns of the
    adapter's own), agreeing with ``parse(...)[i].summary()`` on the common columns."""

    parse: Callable[[Any, str, int | None], list[model.Episode]]
    """``(doc, path, record)``: one record's episodes."""

    episode_id: Callable[[Any, str, int | None], str | None] = _no_episode_id
    """``(doc, path, record)``: the id ``parse`` would give, read cheaply, so a file of many records is parsed only
    where the wanted episode is; None (the default) when the record holds several episodes or the format cannot
    tell cheaply (it is then parsed to find the wanted one)."""

    misnamed: Callable[[str], str | None] = _never_misnamed
    """The error for a file named like this format's files that holds something else (None otherwise, and by
    default: a format with no file name of its own): such a file is then an error, not "something else"."""

    summarize_bytes: Callable[[str, bytes], list[EpisodeRow] | None] = _no_fast_path
    """A whole file's rows read faster than decoding it (the index's fast path), or None (the default) to read it
    the ordinary way. Errors and repairs are always the ordinary way's: anything unexpected returns None."""


def step_fields(
    response: str,
    tool_calls: tuple[model.ToolCall, ...],
    result: chat.CommandResult | None,
    call: int | None,
    links: Sequence[model.ContextLink],
    *,
    command: str | None = None,
    tool_command: Callable[[tuple[model.ToolCall, ...]], str | None] = chat.command,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields of a ``model.Step`` that every adapter reads the same way, from the parts it parsed.

    Adapters add what is theirs (index, kind, reward, times, usage, cost) and build the step with
    ``model.Step(index=..., kind=..., **step_fields(...))``.

    Args:
        response: the model's response text; the default agent's protocol splits it into thought and command.
        tool_calls: the response's tool calls.
        result: what running the command gave (None when the file records no result).
        call: which model call's context the response answered (an index into ``links``), or None.
        links: the episode's context links so far.
        command: the command when the file records it apart from the response (it wins over the response's).
        tool_command: the command of a response whose text has none, from its tool calls.
        extra: format-specific fields; ``bash_blocks`` is added when the response had several bash blocks.
    """
    parsed = agent_text.parse_response(response)
    if command is None:
        command = parsed.command
    if command is None:
        command = tool_command(tool_calls)
    fields = dict(extra or {})
    if parsed.bash_blocks > 1:
        fields["bash_blocks"] = parsed.bash_blocks
    result = result or chat.NO_RESULT
    link = links[call] if call is not None else None
    return {
        "response": response,
        "thought": parsed.thought,
        "command": command,
        "tool_calls": tool_calls,
        "returncode": result.returncode,
        "output": result.output,
        "output_elided": result.elided,
        "observation_text": result.text,
        "format_error": result.format_error,
        "context_index": call,
        "context_len": link.kept + len(link.added) if link else 0,
        "context_rewritten": link.rewritten if link else False,
        "new_message_count": len(link.added) if link else 0,
        "extra": fields,
    }


def episode(
    name: str,
    path: str,
    *,
    episode_id: str,
    task_name: str,
    outcome: model.Outcome,
    steps: Sequence[model.Step],
    messages: Sequence[model.Message],
    links: Sequence[model.ContextLink],
    metadata: dict[str, Any],
    warnings: Sequence[str],
    system_prompt: str | None = None,
    total_reward: float | None = None,
    truncated: bool | None = None,
    times: Sequence[float | None] | None = None,
    skipped: Sequence[str] = (),
) -> model.Episode:
    """The ``model.Episode`` of what an adapter parsed: the format's own parts in, the shared rest filled.

    Args:
        name: the adapter's ``NAME`` (the episode's ``format``).
        path: the file it was read from.
        episode_id, task_name, outcome, system_prompt, total_reward, metadata: as the format records them.
        steps: the steps, the initial one first.
        messages, links: the episode's message pool and one context link per model call
            (``chat.ContextBuilder``'s ``pool`` and ``links``, or the adapter's own).
        warnings: what had to be repaired or guessed while reading.
        truncated: whether a limit cut the episode short (default: whether ``outcome`` says truncated).
        times: the episode's moments, first to last (default: the steps' timestamps); it starts at the first
            and ends at the last (None where the file does not say: e.g. ``(started, None)``).
        skipped: the parts of the file the adapter could not read, named where they sit (``Episode.skipped``);
            its ``summarize`` rows then carry ``model.read_in_part(skipped)`` among their ``warnings``.
    """
    if times is None:
        times = [step.timestamp for step in steps if step.timestamp is not None]
    return model.Episode(
        episode_id=episode_id,
        task_name=task_name,
        outcome=outcome,
        total_reward=total_reward,
        start_time=times[0] if times else None,
        end_time=times[-1] if times else None,
        truncated=outcome is model.Outcome.TRUNCATED if truncated is None else truncated,
        system_prompt=system_prompt,
        steps=tuple(steps),
        path=path,
        format=name,
        metadata=metadata,
        warnings=tuple(warnings),
        messages=tuple(messages),
        links=tuple(links),
        skipped=tuple(skipped),
    )
