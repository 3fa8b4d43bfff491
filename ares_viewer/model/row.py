"""One episode's row in a run's episode table: the one declaration of its columns.

``Episode.summary()``, every format adapter's ``summarize`` (the index's fast path reads the row without
building the episode) and the run's table all produce or read this row. It is a ``TypedDict``, so a row
is the plain dict that the index cache stores as JSON and pandas turns into a table, at no cost on the
fast path.

An adapter may add columns of its own after these (a training iteration, a group); the run table keeps
them after the common ones. ``warnings`` is not a column: the run moves it into ``Run.warnings``.
"""

# No ``from __future__ import annotations``: TypedDict reads ``NotRequired`` from evaluated annotations.

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, cast


class EpisodeRow(TypedDict):
    """One episode's row in a run's episode table (``EPISODE_COLUMNS``, in this order)."""

    episode_id: str
    """The episode's id: unique in a run (a duplicate is reported as a warning)."""
    task_name: str
    """The task the episode attempted ("" when the file names none)."""
    outcome: str
    """Why the episode ended: an ``Outcome`` value (``completed``, ``truncated``, ``errored``, ...)."""
    total_reward: float | None
    """The episode's reward (the last step's reward), or None when nothing scored it."""
    num_actions: int
    """Model responses executed (the FIRST record, the first request, is not one)."""
    start_time: float | None
    """Unix seconds, or None."""
    end_time: float | None
    """Unix seconds, or None."""
    duration_s: float | None
    """Wall time from start to end (or to the last step when the end is unknown), or None."""
    total_cost: float | None
    """USD: the total the file records, or the sum of the costs the model calls record; None (unknown, never 0)
    when the episode has model calls and none records a cost (docs/formats.md, "Totals"); 0.0 with no call."""
    prompt_tokens: int | None
    """The total the file records, or the sum of the prompt tokens the model calls record; None when the episode
    has model calls and none records them (as ``total_cost``)."""
    generated_tokens: int | None
    """The total the file records, or the sum of the generated tokens the model calls record; None as
    ``prompt_tokens``."""
    truncated: bool
    """True when a step or token limit ended the episode."""
    error: str | None
    """The error that ended the episode, in one line, or None."""
    nonzero_returncodes: int
    """How many executed commands returned a non-zero code."""
    context_rewrites: int
    """How many model calls answered a context that does not extend the previous call's context."""
    path: str
    """The file the episode was read from."""
    format: str
    """The adapter that read it (its ``name``, e.g. ``"ares"``)."""
    warnings: NotRequired[list[str]]
    """What the reader repaired or could not read, in plain words (adapters' rows only; not a column)."""
    explained: NotRequired[str]
    """Why an unsolved episode is not a success when the file says more than its reward: the failing tests its
    verifier's recorded output names (``VerifierRecord.says``); absent when it names none. Not a column: the run's
    ``why`` and failure reasons read it."""


# The row's ``explained`` key (above).
EXPLAINED = "explained"


EPISODE_COLUMNS: tuple[str, ...] = tuple(
    key for key in EpisodeRow.__annotations__ if key in EpisodeRow.__required_keys__
)


def with_columns(row: EpisodeRow, columns: Mapping[str, Any]) -> EpisodeRow:
    """``row`` with an adapter's own columns after the common ones (a ``TypedDict`` cannot declare them yet:
    mypy does not read PEP 728's ``extra_items``)."""
    return cast(EpisodeRow, {**row, **columns})
