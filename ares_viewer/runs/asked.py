"""``Run.queries``: the questions of ``index.queries`` asked of a run's current episode table, asked once more over
a refreshed index when the partitions they read were replaced, with their small answers kept per table."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ares_viewer.base.cache import BoundedCache
from ares_viewer.runs.index import kept as kept_answers
from ares_viewer.runs.index import queries as index_queries
from ares_viewer.runs.index import table as index_table

if TYPE_CHECKING:
    import pandas as pd

_T = TypeVar("_T")


class Asker(Protocol):
    """What ``Recovering`` asks through (a ``Run``)."""

    table: index_table.EpisodeTable

    def _recovered(self, ask: Callable[[], _T]) -> _T: ...


# The answers of ``Run.queries`` kept per episode table (a table is one state of an index and never changes): a page
# that runs again (a filter changed under the overview's figures, a sort, a click) asks its figures again, and on a
# run of a million episodes they took about 0.6 s of queries every time. Only questions whose answers stay small
# are kept (``KEPT``; ``failures`` without the ids of every failed episode), and each caller gets a copy of its own.
# A big run's answers are also kept on disk beside its index (``index.kept``), for the next process that opens it.
ANSWERS: BoundedCache[Any] = BoundedCache(maxsize=128)
KEPT = frozenset({"count", "stats", "failures", "values", "reward_range", "page", "attempts", "best_other",
                   "unsolved_of_solved_task", "reward_histogram", "per_task", "reward_bands", "per_iteration",
                   "actions_grid", "sample"})


class Recovering:
    """``Run.queries``: each call is asked again on a refreshed index when the partitions it read are gone
    (``Run._recovered``); a stream carries on after the last row it gave. Small answers are kept per table
    (``ANSWERS``)."""

    def __init__(self, run: Asker) -> None:
        self._run = run

    def _queries(self) -> index_queries.Queries:
        return index_queries.Queries(self._run.table.cursor(), self._run.table.columns)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._queries(), name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            def ask() -> Any:
                return getattr(self._queries(), name)(*args, **kwargs)

            def kept() -> Any:  # reads ``self._run.table`` anew: a refreshed index is another table, another key
                # The arguments as a digest: a filter may name thousands of labelled episodes.
                asked_as = hashlib.blake2b(repr((args, sorted(kwargs.items()))).encode(), digest_size=16).hexdigest()
                table = self._run.table
                return ANSWERS.get_or_compute((table.key, name, asked_as), lambda: kept_answers.answer(
                    table.folder, table.state, f"{name}-{asked_as}.json", ask))

            if name not in KEPT or kwargs.get("with_ids"):
                return self._run._recovered(ask)
            return copy.deepcopy(self._run._recovered(kept))

        return call

    def stream(self, filters: index_queries.Filters | None = None, *, columns: Sequence[str] | None = None,
               limit: int | None = None, chunk: int = 8192) -> Iterator[pd.DataFrame]:
        """``Queries.stream``. When the partitions it reads are replaced, it carries on over the refreshed index
        after the last row it gave (run order): no row comes twice and none is skipped."""
        after: tuple[str, int] | None = None
        left = limit
        chunks: Iterator[tuple[pd.DataFrame, tuple[str, int]]] | None = None

        def pull() -> tuple[pd.DataFrame, tuple[str, int]] | None:
            nonlocal chunks
            if chunks is None:  # (again) after the last row given, over the index as it is now
                chunks = self._queries().positioned(filters, columns=columns, limit=left, chunk=chunk, after=after)
            try:
                return next(chunks, None)
            except Exception:
                chunks = None  # a query that failed is over: asked again, it starts anew
                raise

        while (found := self._run._recovered(pull)) is not None:
            frame, after = found
            left = None if left is None else left - len(frame)
            yield frame
