"""``Run.queries``: the questions of ``index.queries`` asked of a run's current episode table, asked once more over
a refreshed index when the partitions they read were replaced, with their small answers kept per table.

Each question is a typed method declaring how it is asked: ``@kept`` (its answer stays small: kept per table) or
``@asked`` (asked anew each time); mypy checks the calls like any other."""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from ares_viewer.base.cache import BoundedCache
from ares_viewer.runs.index import kept as kept_answers
from ares_viewer.runs.index import queries as index_queries
from ares_viewer.runs.index import table as index_table

if TYPE_CHECKING:
    import pandas as pd

_T = TypeVar("_T")
_P = ParamSpec("_P")


class Asker(Protocol):
    """What ``Recovering`` asks through (a ``Run``)."""

    table: index_table.EpisodeTable

    def _recovered(self, ask: Callable[[], _T]) -> _T: ...


# The answers of the questions declared ``@kept``, per episode table (a table is one state of an index and never
# changes): a page that runs again (a filter changed under the overview's figures, a sort, a click) asks its figures
# again, and on a run of a million episodes they took about 0.6 s of queries every time. Only questions whose
# answers stay small are declared so, and each caller gets a copy of its own. A big run's answers are also kept on
# disk beside its index (``index.kept``), for the next process that opens it.
ANSWERS: BoundedCache[Any] = BoundedCache(maxsize=128)


def asked(method: Callable[Concatenate[Recovering, _P], _T]) -> Callable[Concatenate[Recovering, _P], _T]:
    """Declares a question asked anew each time (its answer may be big), once more over a refreshed index when the
    partitions it read were replaced (``Run._recovered``)."""

    @functools.wraps(method)
    def ask(self: Recovering, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return self._run._recovered(lambda: method(self, *args, **kwargs))

    return ask


def kept(method: Callable[Concatenate[Recovering, _P], _T]) -> Callable[Concatenate[Recovering, _P], _T]:
    """Declares a question whose answer stays small at any run size: asked like ``asked``, and its answer kept per
    episode table and arguments (``ANSWERS``, and on disk for a big run: ``index.kept``); each caller gets a copy."""
    name = method.__name__

    @functools.wraps(method)
    def ask(self: Recovering, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        def keep() -> _T:  # reads ``self._run.table`` anew: a refreshed index is another table, another key
            # The arguments as a digest: a filter may name thousands of labelled episodes.
            asked_as = hashlib.blake2b(repr((args, sorted(kwargs.items()))).encode(), digest_size=16).hexdigest()
            table = self._run.table
            return ANSWERS.get_or_compute((table.key, name, asked_as), lambda: kept_answers.answer(
                table.folder, table.state, f"{name}-{asked_as}.json", lambda: method(self, *args, **kwargs)))

        return copy.deepcopy(self._run._recovered(keep))

    return ask


class Recovering:
    """``Run.queries``: the questions of ``index.queries.Queries`` over the run's current episode table, each
    declared ``@kept`` (a small answer, kept per table) or ``@asked`` (asked anew); each is asked once more on a
    refreshed index when the partitions it read are gone (``Run._recovered``); a stream carries on after the last
    row it gave."""

    def __init__(self, run: Asker) -> None:
        self._run = run

    def _queries(self) -> index_queries.Queries:
        return index_queries.Queries(self._run.table.cursor(), self._run.table.columns)

    @property
    def columns(self) -> list[str]:
        """The episode table's columns (those of ``model.EpisodeRow`` and the formats' own)."""
        return list(self._run.table.columns)

    @kept
    def count(self, filters: index_queries.Filters | None = None) -> int:
        """``Queries.count``."""
        return self._queries().count(filters)

    @kept
    def stats(self) -> dict[str, Any]:
        """``Queries.stats``."""
        return self._queries().stats()

    def failures(self, *, with_ids: bool = False, first_ids: int | None = None) -> pd.DataFrame:
        """``Queries.failures``; kept unless it holds the ids of every failed episode (``with_ids``)."""
        if with_ids:
            return self._failures_with_ids(first_ids=first_ids)
        return self._failures(first_ids=first_ids)

    @kept
    def _failures(self, *, first_ids: int | None = None) -> pd.DataFrame:
        return self._queries().failures(first_ids=first_ids)

    @asked
    def _failures_with_ids(self, *, first_ids: int | None = None) -> pd.DataFrame:
        return self._queries().failures(with_ids=True, first_ids=first_ids)

    @kept
    def values(self, column: str, limit: int = 5000) -> list[Any]:
        """``Queries.values``."""
        return self._queries().values(column, limit)

    @kept
    def reward_range(self) -> tuple[float, float] | None:
        """``Queries.reward_range``."""
        return self._queries().reward_range()

    @kept
    def page(self, filters: index_queries.Filters | None = None, *, sort: str | None = None, direction: str = "asc",
             offset: int = 0, limit: int = 100, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """``Queries.page``."""
        return self._queries().page(filters, sort=sort, direction=direction, offset=offset, limit=limit,
                                    columns=columns)

    @asked
    def positioned(self, filters: index_queries.Filters | None = None, *, columns: Sequence[str] | None = None,
                   limit: int | None = None, chunk: int = 8192, after: tuple[str, int] | None = None
                   ) -> Iterator[tuple[pd.DataFrame, tuple[str, int]]]:
        """``Queries.positioned`` (``stream`` below carries on over a refreshed index)."""
        return self._queries().positioned(filters, columns=columns, limit=limit, chunk=chunk, after=after)

    @kept
    def attempts(self, task: str | None, filters: index_queries.Filters | None = None, *, limit: int = 100,
                 columns: Sequence[str] | None = None) -> pd.DataFrame:
        """``Queries.attempts``."""
        return self._queries().attempts(task, filters, limit=limit, columns=columns)

    @kept
    def best_other(self, episode_id: str, *, same_task: bool, min_actions: int = 0) -> str | None:
        """``Queries.best_other``."""
        return self._queries().best_other(episode_id, same_task=same_task, min_actions=min_actions)

    @kept
    def unsolved_of_solved_task(self) -> str | None:
        """``Queries.unsolved_of_solved_task``."""
        return self._queries().unsolved_of_solved_task()

    @kept
    def reward_histogram(self, bins: int = 20) -> pd.DataFrame:
        """``Queries.reward_histogram``."""
        return self._queries().reward_histogram(bins)

    @kept
    def per_task(self, limit: int = 40) -> tuple[pd.DataFrame, int]:
        """``Queries.per_task``."""
        return self._queries().per_task(limit)

    @kept
    def reward_bands(self, by: str | None = None, *, bins: int = 200) -> pd.DataFrame:
        """``Queries.reward_bands``."""
        return self._queries().reward_bands(by, bins=bins)

    @kept
    def per_iteration(self) -> pd.DataFrame:
        """``Queries.per_iteration``."""
        return self._queries().per_iteration()

    @kept
    def actions_grid(self, *, bins: int = 30) -> pd.DataFrame:
        """``Queries.actions_grid``."""
        return self._queries().actions_grid(bins=bins)

    @kept
    def sample(self, n: int = index_queries.MAX_MARKS, columns: Sequence[str] = (
            "episode_id", "task_name", "outcome", "total_reward", "num_actions")) -> pd.DataFrame:
        """``Queries.sample``."""
        return self._queries().sample(n, columns)

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
