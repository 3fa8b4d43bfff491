"""The flag index: the episode-file flags of every episode of a run, kept beside the run's index.

Computing flags needs each episode's commands and results, which the run index's fast paths never read (measured:
2.92x the cold index time), so flags are not a column of the run index. Episodes are parsed whole, but Tinker
rollouts that run no command (``screen``) and ARES files in the writer's layout (``ares_flags``). The flags live
in a table of their own, built on first use and kept up to date: ``flags/`` in the run's index folder (the
user's cache, never the run folder) holds

- ``flags-<id>.parquet``: one row per episode: ``episode_id`` and ``path`` (as the run lists them), ``mask`` (a
  BIGINT, bit ``i`` set when the ``i``-th episode-file flag of ``registry.FLAGS`` shows) and ``steps`` (the first
  evidence step of each of those flags, NULL where it does not show);
- ``manifest.json``: the flag names the bits stand for, the table's name, and per file of the run its size and
  mtime (the run index's key) and its error, if it failed. On reopen only new or changed files are read again;
  other flag names (a flag added) read every file again.

Files are read in worker processes (each opens the run only for a file read whole, ``Run.file_episodes``: the
fast paths need only what the parent sends), in batches whose rows are written out as they come (bounded
memory); a file that fails is recorded with its reason and the rest go on. Queries over the table:
``flag_queries``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import multiprocessing
import os
import pathlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ares_viewer.analysis.behaviours import ares_flags, registry, screen
from ares_viewer.base import atomic, cache
from ares_viewer.runs import run as runs
from ares_viewer.runs import sources
from ares_viewer.runs.index import store

_LOGGER = logging.getLogger(__name__)

FOLDER = "flags"
MANIFEST = "manifest.json"
# Files read per task given to a worker, and rows held before they are written out (bound the memory).
_BATCH_FILES = 64
_PART_ROWS = 50_000
# Below this much episode data, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 16 * 1024 * 1024

_SCHEMA = pa.schema(
    [("episode_id", pa.string()), ("path", pa.string()), ("mask", pa.int64()), ("steps", pa.list_(pa.int32()))]
)

# (files done, files to read)
Progress = Callable[[int, int], None]


def names() -> list[str]:
    """The flags the index holds, in bit order: the episode-file flags of ``registry.FLAGS``."""
    return [name for name, flag_ in registry.FLAGS.items() if flag_.source == registry.EPISODE]


@dataclasses.dataclass(frozen=True, slots=True)
class FileState:
    """What the flag index knows of one file: the run index's key when it was read, and its error if it failed."""

    size: int
    mtime_ns: int
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class Manifest:
    """The flag index as written: its flag names (bit order), the table file and each file's state."""

    flags: tuple[str, ...] = ()
    table: str | None = None
    files: dict[str, FileState] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Coverage:
    """How far the flag index covers a run: files to read (new, changed, or all when the flags changed)."""

    stale: tuple[str, ...]
    gone: tuple[str, ...]
    files: int
    manifest: Manifest

    @property
    def current(self) -> bool:
        built = self.manifest.table is not None and self.manifest.flags == tuple(names())
        return built and not self.stale and not self.gone


def folder(run: runs.Run) -> pathlib.Path:
    """The flag index's folder: in the run's index folder (the user's cache), never in the run."""
    return run.index_store.folder / FOLDER


def read_manifest(run: runs.Run) -> Manifest:
    """The flag index's manifest (empty when there is none or it does not read: then every file is read again)."""
    path = folder(run) / MANIFEST
    try:
        raw = orjson.loads(path.read_bytes())
        files = {p: FileState(int(s), int(m), e) for p, (s, m, e) in raw["files"].items()}
        return Manifest(tuple(raw["flags"]), raw["table"], files)
    except FileNotFoundError:
        return Manifest()
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        _LOGGER.warning("flag index %s does not read (%s): it is built again", path, exc)
        return Manifest()


def episode_files(run: runs.Run) -> dict[str, store.FileEntry]:
    """The run's files that hold episodes, with the run index's entries (their size and mtime)."""
    entries, _ = run.index_store.read_keyed()
    return {path: entries[path] for path, _ in run.files() if path in entries}


# The coverage of the index states looked at last, by run index manifest and flag manifest (size, mtime, inode):
# a page asks on every rerun, and at 100,000 files working it out reads both manifests.
_COVERAGE: cache.BoundedCache[Coverage] = cache.BoundedCache(maxsize=8)


def coverage(run: runs.Run) -> Coverage:
    """Which of the run's files the flag index has to read (again) to be current."""
    return _covered(run)[0]


def _covered(run: runs.Run) -> tuple[Coverage, dict[str, store.FileEntry] | None]:
    """``coverage``, and the run's ``episode_files`` when working it out read them (None when it was known):
    at 100,000 files reading them costs a second or two, once is enough."""
    key = (str(folder(run)), run.index_store.manifest_key(), run.index_store.manifest_key(folder(run) / MANIFEST))
    known = _COVERAGE.get(key) if key[1] is not None and key[2] is not None else None
    if known is not None:
        return known, None
    files = episode_files(run)
    found = _coverage(run, files)
    if key[1] is not None and key[2] is not None:
        _COVERAGE.put(key, found)
    return found, files


def _coverage(run: runs.Run, files: dict[str, store.FileEntry]) -> Coverage:
    manifest = read_manifest(run)
    # Another process may have replaced the table since (its manifest then names the new one): read all again.
    same_flags = (
        manifest.flags == tuple(names()) and manifest.table is not None and (folder(run) / manifest.table).exists()
    )
    stale = tuple(
        path
        for path, entry in files.items()
        if not same_flags
        or (known := manifest.files.get(path)) is None
        or (known.size, known.mtime_ns) != (entry.size, entry.mtime_ns)
    )
    gone = tuple(sorted(set(manifest.files) - set(files))) if same_flags else ()
    return Coverage(stale, gone, len(files), manifest)


def flag_rows(episodes: Iterator[Any], path: str) -> list[tuple[str, str, int, list[int | None]]]:
    """One row per episode: its id, ``path``, the flags' bitmask and first evidence steps."""
    return _rows([registry.FLAGS[name] for name in names()], episodes, path)


def _rows(order: list[registry.Flag], episodes: Iterator[Any], path: str) -> list[ares_flags.Row]:
    """``flag_rows`` with the flags in bit order (``names()``) worked out once by the caller."""
    rows = []
    for episode in episodes:
        mask, steps = 0, []
        for bit, flag_ in enumerate(order):
            hit = flag_.check(episode)
            if hit is not None:
                mask |= 1 << bit
            steps.append(hit.step if hit is not None else None)
        rows.append((episode.episode_id, path, mask, steps))
    return rows


class _WorkerRun:
    """The run as a worker process sees it: the parent's ``table.originals`` and ``trials`` (what the fast paths,
    ``ares_flags`` and ``screen``, ask), sent at its start; anything else (``file_episodes``, for a file read whole)
    from the run opened in the worker on first use. Opening a run lists and checks every file of it (4.4 CPU s at
    100,000 ARES files, measured), which a worker whose files all take a fast path never needs."""

    def __init__(self, location: str, within: str | None, originals: Any, trials: Any) -> None:
        self.location, self._within, self.trials = location, within, trials
        self.table = _WorkerTable(self, originals)
        self._opened: runs.Run | None = None

    def opened(self) -> runs.Run:
        if self._opened is None:
            self._opened = runs.open_run(self.location, within=self._within)
        return self._opened

    def __getattr__(self, name: str) -> Any:
        return getattr(self.opened(), name)


class _WorkerTable:
    """``_WorkerRun.table``: ``originals`` as sent, the rest from the opened run's table."""

    def __init__(self, run: _WorkerRun, originals: Any) -> None:
        self._run, self.originals = run, originals

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run.opened().table, name)


_WORKER_RUN: Any = None


def _start_worker(location: str, within: str | None, originals: Any, trials: Any) -> None:
    global _WORKER_RUN
    _WORKER_RUN = _WorkerRun(location, within, originals, trials)


def _read_files(run: runs.Run, paths: Sequence[str]) -> tuple[list[tuple[str, str, int, list[int | None]]], dict]:
    """The flag rows of ``paths``, and the reason of each file that failed (the others go on)."""
    rows: list[tuple[str, str, int, list[int | None]]] = []
    failed: dict[str, str] = {}
    flags = names()
    rows_of = functools.partial(_rows, [registry.FLAGS[name] for name in flags])
    for path in paths:
        try:
            data = sources.read_bytes(path)
            # an ARES file (its writer's layout) is never a Tinker one (JSON Lines): whichever answers is right
            found = (ares_flags.flag_rows(run, path, data, flags, rows_of)
                     or screen.flag_rows(run, path, flags, rows_of, data)
                     or rows_of(run.file_episodes(path, data), path))
            if not found:  # the run lists episodes of it, so it changed since or no longer parses
                raise ValueError(f"{path}: no episode could be read from it (did it change since the run was read?)")
            rows.extend(found)
        except Exception as exc:  # one bad file (or a flag's bug on it) must not stop the rest of the run
            failed[path] = f"{type(exc).__name__}: {exc}"
    return rows, failed


def _read_table(run: runs.Run, paths: Sequence[str]) -> tuple[pa.Table, dict]:
    """``_read_files`` as a table: what a worker sends back (a few buffers to pickle, not a tuple per episode)."""
    rows, failed = _read_files(run, paths)
    return _table(rows), failed


def _worker_batch(read: Callable[[runs.Run, Sequence[str]], Any], paths: Sequence[str]) -> Any:
    assert _WORKER_RUN is not None
    return read(_WORKER_RUN, paths)


def batches(
    run: runs.Run, paths: Sequence[str], workers: int, read: Callable[[runs.Run, Sequence[str]], Any] = _read_files
) -> Iterator[tuple[Sequence[str], Any]]:
    """Each batch of ``paths`` with what ``read(run, batch)`` gives for it (by default: its flag rows and
    failures), read here or by ``workers`` processes (``read`` then a module-level function, to be pickled)."""
    # Small enough batches that every worker has several (a run of few large JSON Lines files too).
    size = max(1, min(_BATCH_FILES, len(paths) // (4 * workers)))
    chunks = [paths[i : i + size] for i in range(0, len(paths), size)]
    if workers <= 1:
        for chunk in chunks:
            yield chunk, read(run, chunk)
        return
    # Spawned, not forked: this process holds DuckDB threads a fork would copy half-way.
    context = multiprocessing.get_context("spawn")
    within = getattr(run, "_within", None)
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker,
        initargs=(run.location, within, run.table.originals, run.trials)
    ) as pool:
        # At most two batches in flight per worker: rows waiting to be written stay few.
        pending: dict[concurrent.futures.Future, Sequence[str]] = {}
        queue = iter(chunks)
        for chunk in queue:
            pending[pool.submit(_worker_batch, read, chunk)] = chunk
            if len(pending) >= 2 * workers:
                break
        while pending:
            done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                chunk = pending.pop(future)
                yield chunk, future.result()
                following = next(queue, None)
                if following is not None:
                    pending[pool.submit(_worker_batch, read, following)] = following


def workers_for(run: runs.Run, paths: Sequence[str], files: dict[str, store.FileEntry], workers: int | None) -> int:
    """How many worker processes read ``paths``: ``workers`` when given, else by their size and the cores."""
    if workers is not None:
        return max(1, workers)
    if sum(files[p].size for p in paths) < PARALLEL_MIN_BYTES or run.index_store.folder.name.startswith(
        "ares-viewer-index-"
    ):
        return 1  # small, or a run without a cache (a worker would index it all again)
    return min(len(paths) // _BATCH_FILES + 1, os.cpu_count() or 1)


def _table(rows: list[tuple[str, str, int, list[int | None]]]) -> pa.Table:
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    return pa.Table.from_arrays([pa.array(c, t) for c, t in zip(columns, _SCHEMA.types, strict=True)],
                                schema=_SCHEMA)


def _write_part(target: pathlib.Path, tables: list[pa.Table]) -> pathlib.Path:
    part = target / f".part-{uuid.uuid4().hex}.parquet"
    pq.write_table(pa.concat_tables(tables) if tables else _table([]), part)
    return part


@dataclasses.dataclass(frozen=True)
class Update:
    """What ``update`` did: files read, episodes flagged in them, and the files that failed (path -> reason)."""

    read: int
    episodes: int
    failed: dict[str, str]


def update(run: runs.Run, *, progress: Progress | None = None, workers: int | None = None) -> Update:
    """Bring the flag index of ``run`` up to date: read the new and changed files (all of them the first time),
    keep the rows of the others. ``progress(done, total)`` is called after each batch of files."""
    found, files = _covered(run)
    if found.current:
        return Update(0, 0, {})
    target = folder(run)
    target.mkdir(parents=True, exist_ok=True)
    files = episode_files(run) if files is None else files
    stale = list(found.stale)
    parts: list[pathlib.Path] = []
    held: list[pa.Table] = []
    failed: dict[str, str] = {}
    done = episodes = 0
    dropped = set(stale) | set(found.gone)
    states = {p: s for p, s in found.manifest.files.items() if p in files and p not in dropped}
    if progress is not None:
        progress(0, len(stale))
    try:
        for chunk, (rows, errors) in batches(run, stale, workers_for(run, stale, files, workers), _read_table):
            held.append(rows)
            episodes += rows.num_rows
            failed.update(errors)
            for path in chunk:
                states[path] = FileState(files[path].size, files[path].mtime_ns, errors.get(path))
            if sum(t.num_rows for t in held) >= _PART_ROWS:
                parts.append(_write_part(target, held))
                held = []
            done += len(chunk)
            if progress is not None:
                progress(done, len(stale))
        parts.append(_write_part(target, held))
        table = _merge(target, found.manifest, parts, dropped)
        _write_manifest(target, Manifest(tuple(names()), table, states))
    finally:
        for part in parts:
            with contextlib.suppress(OSError):
                part.unlink()
    if found.manifest.table and found.manifest.table != table:
        with contextlib.suppress(OSError):
            (target / found.manifest.table).unlink()
    return Update(len(stale), episodes, failed)


def _merge(target: pathlib.Path, old: Manifest, parts: list[pathlib.Path], dropped: set[str]) -> str:
    """A new table: the old one's rows but those of ``dropped`` files (when its flags are the same), and ``parts``."""
    name = f"flags-{uuid.uuid4().hex}.parquet"
    sources = [store.literal(str(p)) for p in parts]
    selects = [f"SELECT * FROM read_parquet([{', '.join(sources)}])"]
    params: list[Any] = []
    if old.table and old.flags == tuple(names()) and (target / old.table).exists():
        kept = store.literal(str(target / old.table))
        selects.insert(0, f"SELECT * FROM read_parquet({kept}) WHERE path NOT IN (SELECT unnest(?::VARCHAR[]))")
        params.append(sorted(dropped))
    with store.connection() as con, atomic.written(target / name) as tmp:
        con.execute(
            f"COPY ({' UNION ALL '.join(selects)} ORDER BY path) TO {store.literal(str(tmp))} "
            "(FORMAT parquet, COMPRESSION zstd)",
            params,
        )
    return name


def _write_manifest(target: pathlib.Path, manifest: Manifest) -> None:
    raw = {
        "flags": list(manifest.flags),
        "table": manifest.table,
        "files": {p: [s.size, s.mtime_ns, s.error] for p, s in manifest.files.items()},
    }
    atomic.write_bytes(target / MANIFEST, orjson.dumps(raw))


def table_path(run: runs.Run) -> pathlib.Path | None:
    """The flag table of ``run`` as last written, or None before the first ``update``."""
    manifest = read_manifest(run)
    return folder(run) / manifest.table if manifest.table and manifest.flags == tuple(names()) else None


def errors(run: runs.Run) -> list[tuple[str, str]]:
    """The files whose flags could not be read, each with the reason."""
    return sorted((p, s.error) for p, s in read_manifest(run).files.items() if s.error)
