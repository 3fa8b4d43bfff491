"""Find text inside one episode, for reading it: every hit in reading order, within a count and a time.

The Search page searches a run; this searches the episode on screen, field by field as the reader shows them
(the task, then each step's reasoning, thought, command and output). A query is literal and case-insensitive
unless asked (``case``, ``regex``: RE2, as ``search`` runs it); the hits stop at ``limit`` or after ``seconds``,
and ``Found`` says which bound stopped them, so a reader never waits on a 200-step episode of long outputs.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from ares_viewer.analysis import search

if TYPE_CHECKING:
    from ares_viewer import model

# The fields searched, in the order a reader meets them at one step (the task is step 0's).
FIELDS = ("task", "reasoning", "thought", "command", "output")
LIMIT = 1_000
SECONDS = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """The hits of one query in one episode.

    Attributes:
        hits: ``search.Hit`` in reading order (step, then field as ``FIELDS`` orders them, then offset).
        stopped: why the hits may be incomplete: ``"limit"`` (``limit`` hits were found) or ``"time"`` (the time
            ran out), or None when every hit is there.
    """

    hits: tuple[search.Hit, ...]
    stopped: str | None = None

    def steps(self) -> list[int]:
        """The steps with at least one hit, in order."""
        return sorted({hit.step for hit in self.hits})

    def describe(self, n: int) -> str:
        """``"hit 3 of 17"`` for the ``n``-th hit (from 1), saying when the count is a lower bound."""
        more = {"limit": " (the first hits only)", "time": " (searched in part: the time ran out)"}
        return f"hit {n:,} of {len(self.hits):,}{more.get(self.stopped or '', '')}"


def text_of(episode: model.Episode, hit: search.Hit) -> str:
    """The whole text of the field a hit is in (its ``start`` and ``end`` are offsets into it)."""
    if hit.field in search.PROMPT_FIELDS:
        return search.prompt_text(episode, hit.field) or ""
    return search.field_text(episode.step(hit.step), hit.field) or ""


def find(
    episode: model.Episode,
    query: str,
    *,
    case: bool = False,
    regex: bool = False,
    limit: int = LIMIT,
    seconds: float = SECONDS,
) -> Found:
    """Every match of ``query`` in ``episode`` in reading order, at most ``limit`` of them, within ``seconds``.

    Raises:
        ValueError: for an empty query, or an invalid regular expression (the message says what is wrong).
    """
    if not query:
        raise ValueError("the query is empty")
    pattern = search.compile_pattern(query, regex=regex, case=case)
    deadline = time.monotonic() + seconds
    hits: list[search.Hit] = []
    for hit in search.episode_hits(episode, pattern, FIELDS):
        if len(hits) >= limit:
            return Found(tuple(hits), "limit")
        if time.monotonic() > deadline:
            return Found(tuple(hits), "time")
        hits.append(hit)
    return Found(tuple(hits))
