"""A run: every episode file at a location, indexed into one table, opened on demand.

Building the index parses each file once (on both cores when the run is large enough for that to
pay) and caches the summary rows; reopening an unchanged run parses nothing. Whole episodes are
parsed only when asked for, and a bounded cache keeps the recently opened ones.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import threading
import weakref
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from ares_viewer import formats, model
from ares_viewer.base import settings
from ares_viewer.base.cache import BoundedCache
from ares_viewer.formats import errors as read_errors
from ares_viewer.formats.adapters import atif
from ares_viewer.formats.sidecars import harbor, verdicts
from ares_viewer.model import render
from ares_viewer.runs import asked, sources
from ares_viewer.runs.index import queries, store, subruns
from ares_viewer.runs.index import shared as index_shared
from ares_viewer.runs.index import table as index_table
from ares_viewer.runs.index import update as index_update

if TYPE_CHECKING:
    import pandas as pd

_LOGGER = logging.getLogger(__name__)
_T = TypeVar("_T")

# The episode table's common columns, in order: ``model.EpisodeRow``'s.
EPISODE_COLUMNS = model.EPISODE_COLUMNS
SHARED_INDEX_ENV = settings.SHARED_INDEX.name
_EPISODE_CACHE_SIZE = 16
_PATH_CACHE_SIZE = 4096  # episode id -> its file, per state of the index


@dataclasses.dataclass(frozen=True, slots=True)
class LoadError:
    """A file that should hold an episode but cannot be read."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class EmptyRunError(LookupError):
    """The location exists but holds no episodes."""


def unscored(episodes: pd.DataFrame) -> pd.Series:
    """Which episodes finished without anyone scoring them: completed, with no reward recorded or given.

    Such an episode (a mini-swe-agent trajectory before its evaluation, say) is neither a success nor a failure,
    so success rates leave it out. An episode that errored, was truncated or never finished without a reward
    did fail, and counts as such.
    """
    return episodes["total_reward"].isna() & (episodes["outcome"] == model.Outcome.COMPLETED.value)


# Volatile parts of error messages, so one failure mode groups as one reason: numbers, hex ids, quoted words (a
# quoted sentence, "container <id> is not running", says what failed and is kept).
_VOLATILE = (
    (re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b"), "<id>"),
    (re.compile(r"'[^'\s]{1,200}'|\"[^\"\s]{1,200}\""), "'…'"),
    (re.compile(r"\d+(\.\d+)?"), "N"),
)
_REASON_CHARS = 2000  # the root cause unabridged (a recorded error's line is rarely longer)


def failure_reasons(episodes: pd.DataFrame) -> pd.Series:
    """Why each episode failed, in words that group alike failures (None for successes and unscored ones).

    An errored (or aborted, interrupted, cancelled) episode's reason is its outcome and the first line of its
    error, with numbers, ids and quoted text replaced so that one failure mode is one reason; a truncated one
    hit its limit; an incomplete one has no final step; a completed one with a reward of 0 or less was not
    solved, with what its ``explained`` column says when the frame has one (``runs.index.queries.REASON``).
    """
    outcome, reward = episodes["outcome"], episodes["total_reward"]
    import pandas as pd
    reasons = pd.Series([None] * len(episodes), index=episodes.index, dtype=object)
    unsolved = (outcome == model.Outcome.COMPLETED.value) & (reward <= 0)
    reasons[unsolved] = "completed, not solved (reward ≤ 0)"
    if model.EXPLAINED in episodes:  # what a report or the verifier's output says of it (the index's ``why``)
        said = unsolved & episodes[model.EXPLAINED].map(lambda e: isinstance(e, str))
        reasons[said] = queries.NOT_SOLVED_SAYS + episodes.loc[said, model.EXPLAINED]
    reasons[outcome == model.Outcome.TRUNCATED.value] = "truncated: hit its step or token limit"
    reasons[outcome == model.Outcome.INCOMPLETE.value] = "incomplete: no final step (in progress or cut short)"
    ended = ~outcome.isin([o.value for o in (model.Outcome.COMPLETED, model.Outcome.TRUNCATED,
                                             model.Outcome.INCOMPLETE)])
    if ended.any():
        first = episodes.loc[ended, "error"].where(episodes.loc[ended, "error"].map(
            lambda e: isinstance(e, str) and bool(e.strip())), "no message").str.strip().str.split("\n").str[0]
        for pattern, placeholder in _VOLATILE:
            first = first.str.replace(pattern, placeholder, regex=True)
        reasons[ended] = outcome[ended] + ": " + first.str.slice(0, _REASON_CHARS)
    return reasons


def load_episode(path: str | os.PathLike) -> model.Episode:
    """Read one episode file.

    Raises:
        FileNotFoundError: when the file does not exist.
        sources.FileTooLargeError: when it is larger than one file may be (``ARES_VIEWER_MAX_FILE_MB``).
        ValueError: when it is not a readable episode; the message names the file and the reason.
    """
    path = os.fspath(path)
    data = sources.read_bytes(path)
    result = formats.read_file(path, data)
    if not result.episodes:
        reason = result.errors[0] if result.errors else "not an episode file of any format this viewer reads"
        raise ValueError(f"{path}: {reason}")
    return result.episodes[0]


# The episode tables of the index states this process opened last, by index folder, location and manifest key: a
# table never changes (a new manifest is a new key), so opening an unchanged run again starts no DuckDB database.
_TABLES: BoundedCache[index_table.EpisodeTable] = BoundedCache(maxsize=8)


def _table(target: store.Store, result: index_update.Update, location: str, sub_run: str | None = None
           ) -> index_table.EpisodeTable:
    """The episode table of an index state (of one of its runs, ``sub_run``), made once per state."""
    if result.manifest is None:
        return index_table.EpisodeTable(target, result.entries, location, sub_run)
    # the folders above the run where its reports may be (``subruns.nearby_reports``): a report put there is seen
    return _TABLES.get_or_compute((str(target.folder), location, sub_run, result.manifest, subruns.around(location)),
                                  lambda: index_table.EpisodeTable(target, result.entries, location, sub_run))


class Run:
    """The episodes at a location (a folder, a file, a glob or an fsspec URL).

    The index lives in Parquet partitions in the user's cache (never in the run) and is queried with DuckDB:
    reopening an unchanged run parses nothing, and a changed one parses only its new or changed files.

    Attributes:
        location: what was opened: a folder, file, glob or URL, or ``LOCATION::RUN_ID``, one run of a folder holding
            several (a sub-run: :mod:`ares_viewer.runs.index.subruns`); ``folder`` is the location without it and
            ``run_id`` the run (None for the whole location).
        episodes: one row per readable episode (see ``EPISODE_COLUMNS``), a pandas DataFrame built on first use.
            At a million episodes it takes about a gigabyte: for large runs ask ``query()``/``relation`` (lazy,
            in DuckDB) or the aggregate functions (``stats``, ``failures``, ``table.queries``) instead.
        errors: files that should hold episodes but cannot be read.
        pending: after ``refresh``, files that changed since the last look and end cut off (a last line or a
            document still being written): not errors until a refresh finds them unchanged.
        skipped: how many files were something else (configs, notes) and were left alone.
        companions: the companion folders beside the episode files (per-step snapshots, activation captures:
            ``sources.COMPANION_FOLDERS``), part of the run and read on demand, never listed file by file.
        warnings: ``(path, message)`` for files that loaded with repairs.
        listing_cut: why the listing of the location stopped early (it was too big or too deep: see
            :mod:`ares_viewer.runs.sources` for the bounds), or None when every file was found.
        reports: evaluation reports found in the run (path -> instance id -> verdict); their verdicts give
            a reward to the episodes whose files record none (see
            :mod:`ares_viewer.formats.sidecars.verdicts`), with the
            verdict in the ``verdict`` column.
        trials: harbor trial results found in the run (trial folder -> what ``result.json`` says); each gives
            the ATIF trajectory of its folder its task, reward, outcome and times.
    """

    def __init__(self, location: str | os.PathLike, *, use_cache: bool = True, workers: int | None = None,
                 shared_index: str | None = None, within: str | None = None) -> None:
        self.location = os.fspath(location)
        self.folder, self.run_id = subruns.split(self.location)
        self._within = within
        self._use_cache = use_cache
        self._workers = workers
        self._store, temporary = index_update.store_for(self.folder, use_cache=use_cache)
        if temporary:
            weakref.finalize(self, shutil.rmtree, self._store.folder, True)
        self._shared = shared_index if shared_index is not None else settings.SHARED_INDEX.get()
        if self._shared:
            index_shared.pull(self._shared, index_update.canonical(self.folder), self._store)
        self._open: BoundedCache[model.Episode] = BoundedCache(maxsize=_EPISODE_CACHE_SIZE)
        # the file of each episode asked for since the last refresh (a page asks several times per rerun)
        self._paths: BoundedCache[str] = BoundedCache(maxsize=_PATH_CACHE_SIZE)
        self._lock = threading.RLock()
        self.refresh()

    def refresh(self) -> int:
        """Bring the run up to date with its files: only new or changed ones are parsed. Returns how many were.

        A run still being written grows: rows already there keep their place (run order), new ones follow.
        """
        return self._refresh(check=False)

    def _refresh(self, *, check: bool) -> int:
        """``refresh``; ``check``: a query failed on the index as it was, so each partition is read to find one
        damaged where its size does not show it (it heals: its files are read again)."""
        listing = sources.listing(self.folder, within=self._within)
        files = listing.files
        with self._lock:
            self.listing_cut = listing.cut
            self.companions = listing.companions
            self.companion_kinds = listing.companion_kinds()
            result = index_update.update(self._store, files, workers=self._workers)
            if check and (damaged := self._store.unreadable(result.entries)):
                result = index_update.update(self._store, files, workers=self._workers, damaged=damaged)
            old = getattr(self, "table", None)  # None on the first look, from __init__
            following = old is not None
            try:
                self.table: index_table.EpisodeTable = _table(self._store, result, self.folder, self.run_id)
            except duckdb.Error:  # a partition damaged where its size does not show it: found by reading each
                damaged = self._store.unreadable(result.entries)
                if not damaged:
                    raise
                result = index_update.update(self._store, files, workers=self._workers, damaged=damaged)
                self.table = _table(self._store, result, self.folder, self.run_id)
            self._entries = result.entries
            self.parsed_files = result.parsed
            self._frame: pd.DataFrame | None = None
            self._warnings: list[tuple[str, str]] | None = None
            self._failures: pd.DataFrame | None = None
            self._count: int | None = None
            self._paths.clear()
            if result.parsed:
                self._open.clear()
            self._verdicts = self.table.verdicts
            self.reports = self.table.reports
            self.trials = self.table.trials
            self.errors: list[LoadError] = []
            self.pending: list[LoadError] = []
            self.skipped = 0
            for path, entry in sorted(self._entries.items()):
                if entry.kind == "skipped":
                    self.skipped += 1
                # Changed since the last look and cut off at its end: still being written, so not an error yet.
                writing = following and path in result.changed
                for stored in entry.errors:
                    reason = read_errors.RecordError.from_json(stored)
                    error = LoadError(path, str(reason))
                    (self.pending if writing and reason.cut_short else self.errors).append(error)
            # Reports that disagree about an instance of one run: that instance keeps no reward.
            self.errors.extend(LoadError(path, reason) for path, reason in self.table.errors)
        # The previous table is left to the garbage collector: another thread may still be reading it.
        del old
        return result.parsed

    @property
    def run_ids(self) -> tuple[str, ...]:
        """The runs of the folder (``run_id``s, sorted) when it holds two or more, else ``()``; a sub-run lists its
        folder's (:mod:`ares_viewer.runs.index.subruns`)."""
        names = self.table.run_ids.names
        return names if len(names) > 1 else ()

    def per_run(self) -> list[dict[str, Any]]:
        """For a folder holding several runs, each run's headline figures as ``stats()`` counts them (``run_id``,
        ``episodes``, ``judged``, ``successes``, ``success_rate``, ``unscored``, ``infrastructure``); else ``[]``."""
        return self._recovered(lambda: subruns.per_run(self.table.cursor()))

    @property
    def missing_reports(self) -> list[tuple[str, str]]:
        """``(run folder, message)`` for each mini-swe-agent run whose trajectories no evaluation report scores: the
        folders where its report was looked for (:mod:`ares_viewer.runs.index.subruns`). Not among ``warnings``: a
        run of other tasks than SWE-bench's has no report; ``compare-runs`` and the overview say it beside the
        unscored count."""
        return list(self.table.missing_reports)

    @property
    def index_store(self) -> store.Store:
        """Where this run's index is kept (a folder in the cache, never in the run)."""
        return self._store

    @property
    def queries(self) -> asked.Recovering:
        """Aggregate and paging queries over the episode table (answers stay small at any run size)."""
        return asked.Recovering(self)

    def _ask(self, how: str, sql: str, params: list | None = None) -> Any:
        """``rows`` or ``scalar`` of a query, recovering once from an index another process replaced."""
        return self._recovered(lambda: getattr(self.table, how)(sql, params))

    def _recovered(self, ask: Callable[[], _T]) -> _T:
        """``ask()``; asked once more after a refresh when the index partitions it read were replaced.

        Another process (``ares-viewer index``, another reader following the run) may have replaced them (a
        changed file, a compaction); they are kept a while (``store``) but a run left open long enough outlives
        them, and DuckDB then finds them gone (an ``IOException``). ``ask`` must read ``self.table`` anew each time
        it is called.
        """
        try:
            return ask()
        except (duckdb.IOException, duckdb.InvalidInputException):  # gone, or damaged (then healed by refresh)
            self._refresh(check=True)
            return ask()

    @property
    def relation(self) -> duckdb.DuckDBPyRelation:
        """The episode table as a lazy DuckDB relation (run order), e.g. ``run.relation.filter("total_reward > 0")``."""
        return self._recovered(lambda: self.table.relation())

    def query(self, sql: str | None = None, params: list | None = None) -> duckdb.DuckDBPyRelation:
        """The episode table in DuckDB: ``run.query()`` is ``relation``; ``run.query("SELECT ... FROM episodes")``
        runs SQL over the view ``episodes`` (its columns, plus ``_seq``, a row's place in its file)."""
        if sql is None:
            return self.relation
        return self._recovered(lambda: self.table.cursor().sql(sql, params=params))

    @property
    def episodes(self) -> pd.DataFrame:
        with self._lock:
            if self._frame is None:
                self._frame = self._recovered(lambda: self.table.frame())
            return self._frame

    @property
    def warnings(self) -> list[tuple[str, str]]:
        with self._lock:
            if self._warnings is None:
                found = [(p, w) for p, w in self._ask("rows",
                    "SELECT path, unnest(warnings) FROM episodes WHERE len(warnings) > 0 ORDER BY path, _seq")]
                found.extend(self.table.notes)  # reports applied by location, repeated episode ids
                self._warnings = found
            return self._warnings

    # ----- episodes -----------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            if self._count is None:
                self._count = int(self._ask("scalar", "SELECT count(*) FROM episodes")[0])
            return self._count

    def __contains__(self, episode_id: object) -> bool:
        return isinstance(episode_id, str) and self._path_of(episode_id) is not None

    def _path_of(self, episode_id: str) -> str | None:
        known = self._paths.get(episode_id)
        if known is not None:
            return known
        # A repeated id is listed once under its id and once under ``{id}@{path}`` per other file (``index.joins``).
        found = self._ask("scalar", "SELECT path FROM episodes WHERE episode_id = ? ORDER BY path, _seq LIMIT 1",
                          [episode_id])
        return self._paths.put(episode_id, found[0]) if found else None

    @property
    def episode_ids(self) -> list[str]:
        ordered = self._ask("rows", "SELECT episode_id FROM episodes ORDER BY path, _seq")
        return list(dict.fromkeys(r[0] for r in ordered))

    def episode(self, episode_id: str) -> model.Episode:
        """One episode, parsed on demand; recently opened ones are kept (a bounded cache).

        Raises:
            KeyError: when the run has no such episode.
        """
        cached = self._open.get(episode_id)
        if cached is not None:
            return cached
        path = self._path_of(episode_id) if isinstance(episode_id, str) else None
        if path is None:
            raise KeyError(f"no episode {episode_id!r} in {self.location}")
        original = self.table.originals.get(episode_id, episode_id)
        # A file of many episodes (JSON Lines) is parsed only where this one is.
        result = formats.read_file(path, sources.read_bytes(path), episode_id=original)
        found = [e for e in result.episodes if e.episode_id == original]
        if not found:
            raise KeyError(f"{path} no longer holds episode {original!r}; reopen the run")
        return self._open.put(episode_id, self._as_listed(episode_id, path, found[0]))

    def _as_listed(self, key: str, path: str, episode: model.Episode) -> model.Episode:
        """A parsed episode as the run lists it: its harbor trial, its key, a report's verdict."""
        if episode.format == atif.NAME and path in self.table.continued:  # as its row: joined to its continuation
            episode = atif.with_continuations(episode, sources.read_bytes)
        trial = harbor.trial_of(path, episode.format, self.trials)
        if trial is not None:
            output = sources.test_output(trial)
            logs = self.table.attached.get(str(trial["folder"]), ())
            episode = harbor.with_trial(episode, trial, output, logs)
        if episode.episode_id != key:  # a repeated id: the episode answers to the key the run lists it under
            episode = dataclasses.replace(episode, episode_id=key)
        given = verdicts.reward_for(episode.format, episode.task_name, episode.total_reward, episode.path,
                                    self._verdicts)
        if given is not None:
            reward, verdict, report = given
            tests = verdicts.read_tests(report, episode.task_name) if episode.task_name else None
            extra = {"verdict_tests": tests} if tests is not None else {}
            episode = dataclasses.replace(episode, total_reward=reward, metadata={
                **episode.metadata, "verdict": verdict, "verdict_report": report, **extra})
        return episode

    def files(self) -> list[tuple[str, int]]:
        """The run's episode files in run order, each with how many episodes the run lists from it."""
        return [(p, int(n)) for p, n in self._ask(
            "rows", "SELECT path, count(*) FROM episodes GROUP BY path ORDER BY path")]

    def file_episodes(self, path: str, data: bytes | None = None,
                      lines: Collection[int] | None = None) -> Iterator[model.Episode]:
        """The episodes of one of the run's files in run order, each what ``episode(id)`` gives for its id.

        Args:
            path: a file of the run (see ``files``).
            data: its bytes, when already read.
            lines: of a JSON Lines file, read only these records (1-based line numbers); the other lines are
                not decoded. A run whose episode ids repeat reads the whole file (a repeated id answers with its
                first record in the file, as ``episode`` does).
        """
        data = sources.read_bytes(path) if data is None else data
        if self.table.originals:
            keys = [k for (k,) in self._ask("rows", "SELECT episode_id FROM episodes WHERE path = ? ORDER BY _seq",
                                            [path])]
            first: dict[str, model.Episode] = {}
            for episode in formats.read_file(path, data).episodes:
                first.setdefault(episode.episode_id, episode)
            for key in dict.fromkeys(keys):
                listed = first.get(self.table.originals.get(key, key))
                if listed is not None:
                    yield self._as_listed(key, path, listed)
            return
        seen: set[str] = set()
        for episode in formats.read_file(path, data, lines=lines).episodes:
            if episode.episode_id not in seen:
                seen.add(episode.episode_id)
                yield self._as_listed(episode.episode_id, path, episode)

    def other_attempt(self, episode_id: str) -> str | None:
        """The best other attempt at the same task, or None when there is none.

        The natural partner to compare a failed episode with: the highest reward first, and among equal rewards
        the attempt with the fewest actions (a 4-step solution reads side by side better than a 62-step one).
        """
        if episode_id not in self:
            raise KeyError(f"no episode {episode_id!r} in {self.location}")
        return self.queries.best_other(episode_id, same_task=True)

    def failures(self) -> pd.DataFrame:
        """The failure reasons of the run (see :func:`failure_reasons`), most frequent first: ``reason``,
        ``episodes`` (how many), ``tasks`` (how many distinct) and ``episode_ids``."""
        with self._lock:
            if self._failures is None:  # worked out once per state of the index
                self._failures = self.queries.failures(with_ids=True)
            return self._failures.copy()

    def __iter__(self) -> Iterator[model.Episode]:
        """Every episode, parsed one at a time (nothing is kept beyond the bounded cache)."""
        for episode_id in self.episode_ids:
            yield self.episode(episode_id)

    def require_episodes(self) -> Run:
        """This run, or ``EmptyRunError`` with a message saying what was found instead."""
        if len(self):
            return self
        raise EmptyRunError(f"{self.location}: no episodes found ({self.files_found()})")

    def files_found(self) -> str:
        """What the run holds besides its episodes, in words: unreadable and other files, companion folders."""
        found = f"{len(self.errors)} unreadable file(s), {self.skipped} other file(s)"
        return f"{found}; beside them: {', '.join(self.companion_kinds)}" if self.companion_kinds else found

    # ----- summaries ----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Headline figures of the run."""
        with self._lock:  # the figures are kept per state of the index (``asked.ANSWERS``)
            return {**self.queries.stats(), "errors": len(self.errors)}

    def __repr__(self) -> str:
        return f"Run({self.location!r}, episodes={len(self)}, errors={len(self.errors)})"

    def __str__(self) -> str:
        return render.run_text(self)

    def _repr_html_(self) -> str:
        return render.run_html(self)


def open_run(location: str | os.PathLike, *, use_cache: bool = True, workers: int | None = None,
             shared_index: str | None = None, within: str | None = None) -> Run:
    """Open the episodes at a location: a folder (searched recursively), a file, a glob or a URL.

    ``shared_index`` (or the ``ARES_VIEWER_SHARED_INDEX`` environment variable): a folder or fsspec URL where
    ``ares-viewer index --index-to`` wrote indexes; the run's is read from there and only files changed
    since are parsed here. ``within``: a local folder no file of the run may resolve outside of (symlinks out of
    it are left out: ``sources.listing``), as a server reachable from other machines opens its runs.

    Raises:
        sources.LocationError: when the location does not exist.
    """
    return Run(location, use_cache=use_cache, workers=workers, shared_index=shared_index, within=within)
