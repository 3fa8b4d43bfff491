"""Building a run's index: the files that are new or changed are summarized into new partitions.

Files are read in batches. Whoever summarized a batch (a worker process when the run is large enough for that
to pay) writes its rows as a JSON array beside the partitions, and this process makes partitions of them with
DuckDB, batches together up to ``_PART_ROWS`` rows: rows never travel through a pipe, a run has few partitions,
and indexing imports neither pyarrow nor pandas (half of a small run's cold index time once). Tinker and
Ray runner JSON Lines files go through DuckDB's JSON reader (``_fast_tinker``, ``_fast_ray``), one batch per
core side by side, each on its own single-threaded connection, in this process
(DuckDB is never used in a forked child: a fork inherits its threads' state half-copied); any file it does not
take is read the ordinary way (``formats.summarize_file``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import gc
import logging
import multiprocessing
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

from ares_viewer import formats, model
from ares_viewer.formats import errors as read_errors
from ares_viewer.formats.sidecars import harbor
from ares_viewer.runs import sources
from ares_viewer.runs.index import _fast_ray as fast_ray
from ares_viewer.runs.index import _fast_tinker as fast_tinker
from ares_viewer.runs.index import fast_jsonl, store

_LOGGER = logging.getLogger(__name__)

# Below this much data, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
# A batch holds about this much source data (bounds a worker's memory).
_PART_BYTES = 64 * 1024 * 1024
# Batches summarized the ordinary way are committed together into partitions of about this many rows (bounds a
# rewrite's cost when one of their files changes; fewer partitions make a quicker reopen).
_PART_ROWS = 100_000


def summarize(path: str) -> formats.FileResult:
    """One file's rows, errors, verdicts or trial result; never raises (a parser bug is that file's error).

    A row the index cannot hold (a number out of its range) is left out, with an error naming its field.
    """
    return _fitted(_read(path))


def _read(path: str) -> formats.FileResult:
    """``summarize`` but for the rows the index cannot hold: left in (``_fitted`` takes them out)."""
    try:
        result = formats.summarize_file(path, sources.read_bytes(path))
    except OSError as exc:
        return formats.FileResult(record_errors=(
            read_errors.RecordError(read_errors.UNREADABLE, f"cannot read the file ({exc.strerror or exc})"),))
    except Exception as exc:  # a parser bug must not stop the rest of the run
        _LOGGER.exception("unexpected failure reading %s", path)
        return formats.FileResult(record_errors=(read_errors.RecordError(
            read_errors.FAILURE, f"unexpected failure while reading ({type(exc).__name__}: {exc})"),))
    if result.trial is not None:  # a harbor trial: the failing tests its verifier's output names, kept with it
        result = dataclasses.replace(result, trial=harbor.with_test_output(result.trial, sources.test_output(
            result.trial)))
    return result


def _fitted(result: formats.FileResult) -> formats.FileResult:
    """A file's result without the rows the index cannot hold (``store.unfit``), each an error naming its field."""
    unfit = [(row, reason) for row in result.rows if (reason := store.unfit(row)) is not None]
    if not unfit:
        return result
    left = tuple(row for row in result.rows if store.unfit(row) is None)
    errors = tuple(read_errors.RecordError(read_errors.CONTENT, f"episode {row.get('episode_id')!r}: {reason}"
                                           if len(result.rows) > 1 else reason)
                   for row, reason in unfit)
    return dataclasses.replace(result, rows=left, record_errors=(*result.record_errors, *errors))


def entry_for(file: sources.SourceFile, result: formats.FileResult, part: str | None, rows: int) -> store.FileEntry:
    if result.verdicts:
        return store.FileEntry(file.path, file.size, file.mtime_ns, "verdicts",
                               verdicts=orjson.dumps(dict(result.verdicts)).decode())
    if result.trial is not None:
        return store.FileEntry(file.path, file.size, file.mtime_ns, "trial", part if rows else None, rows,
                               trial=orjson.dumps(result.trial).decode())
    if result.skipped:
        return store.FileEntry(file.path, file.size, file.mtime_ns, "skipped")
    return store.FileEntry(file.path, file.size, file.mtime_ns, "read", part if rows else None, rows,
                           tuple(error.to_json() for error in result.record_errors))


def _staged_batch(folder: str, files: Sequence[sources.SourceFile]
                  ) -> tuple[list[store.FileEntry], store.Staged | None]:
    """Summarize files the ordinary way and stage their rows as one partition (``store.Store.stage``): their
    manifest entries, and the rows to commit (None when the files hold none). The rows are looked at by
    ``store.unfit`` one by one only when a look at the batch's in bulk finds one that may not fit
    (``store.Store.stage_fitting``: a pass over each value of each row cost as much as staging them)."""
    results = [_read(f.path) for f in files]
    target = store.Store(folder)
    rows, seqs = _rows(results)
    staged = target.stage_fitting(rows, seqs) if rows else None
    if rows and staged is None:
        results = [_fitted(r) for r in results]
        rows, seqs = _rows(results)
        staged = target.stage(rows, seqs) if rows else None
    part = staged.name if staged else None
    return [entry_for(f, r, part, len(r.rows)) for f, r in zip(files, results, strict=True)], staged


def _rows(results: Sequence[formats.FileResult]) -> tuple[list[model.EpisodeRow], list[int]]:
    """The rows of these files' results, and each one's place in its file."""
    rows: list[model.EpisodeRow] = []
    seqs: list[int] = []
    for result in results:
        rows.extend(result.rows)
        seqs.extend(range(len(result.rows)))
    return rows, seqs


def summarize_batch(files: Sequence[sources.SourceFile], target: store.Store) -> list[store.FileEntry]:
    """Summarize files the ordinary way into one partition of ``target``; their manifest entries."""
    return list(_committed(target, [_staged_batch(str(target.folder), files)]))


def _committed(target: store.Store, done: Iterable[tuple[list[store.FileEntry], store.Staged | None]]
               ) -> Iterator[store.FileEntry]:
    """The entries of staged batches, committed together into partitions of up to ``_PART_ROWS`` rows."""
    entries: list[store.FileEntry] = []
    group: list[store.Staged] = []
    for batch, staged in done:
        entries += batch
        group += [staged] if staged else []
        if sum(s.rows for s in group) >= _PART_ROWS:
            yield from _commit(target, entries, group)
            entries, group = [], []
    yield from _commit(target, entries, group)


def _commit(target: store.Store, entries: list[store.FileEntry], group: list[store.Staged]) -> list[store.FileEntry]:
    if not group:
        return entries
    name = target.commit(group)
    staged = {s.name for s in group}
    return [dataclasses.replace(e, part=name) if e.part in staged else e for e in entries]


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork starts workers at once and never re-imports the caller's __main__ (a notebook, a Streamlit script,
    # a script without a main guard); the workers only read files, parse and write their rows as JSON
    # (``store.Store.stage``).
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """The caller's objects kept out of the forked workers' garbage collection (``gc.freeze``): a child must not
    collect objects it merely inherited, such as a DuckDB connection whose threads it does not have."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def batches(files: Sequence[sources.SourceFile], parts: int, most: int = _PART_BYTES) -> list[list[sources.SourceFile]]:
    """Files in path order, cut into at least ``parts`` batches of at most about ``most`` bytes each."""
    total = sum(f.size for f in files)
    limit = max(1, min(most, total // max(1, parts) + 1))
    out: list[list[sources.SourceFile]] = []
    size = 0
    for f in files:
        if not out or size + f.size > limit:
            out.append([])
            size = 0
        out[-1].append(f)
        size += f.size
    return out


def workers_for(workers: int | None) -> int:
    """``workers`` when given, else one per core: no step shared by the workers grows with their number (the fast
    paths' batches do not get smaller, ``_even``), and each worker's memory is bounded by its batch."""
    return workers or os.cpu_count() or 1


def _ordinary(files: list[sources.SourceFile], target: store.Store, workers: int) -> Iterator[store.FileEntry]:
    total = sum(f.size for f in files)
    if workers <= 1 or len(files) < 2 or total < PARALLEL_MIN_BYTES:
        yield from _committed(target, (_staged_batch(str(target.folder), batch) for batch in batches(files, 1)))
        return
    work = batches(files, workers * 4)
    work.sort(key=lambda b: -sum(f.size for f in b))  # big batches first: the last worker ends with the others
    with _frozen_heap(), \
            concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        yield from _committed(target, pool.map(_staged_batch, [str(target.folder)] * len(work), work))


# A fast-path batch is not cut smaller than this: each batch costs some 90-170 ms of CPU in fixed queries (planning
# the read and the row queries, the Parquet file), about a tenth of reading 64 MB of Tinker rollouts.
_MIN_FAST_BATCH = 64 * 1024 * 1024
# How many batches of a format's ``fast_jsonl.BATCH_BYTES * Spec.batches`` each worker's batch is at most: it bounds
# a worker's memory whatever the number of workers.
_PER_WORKER = 2


def _even(files: list[sources.SourceFile], workers: int, scale: int) -> list[list[sources.SourceFile]]:
    """A fast path's files cut into batches of about one size, each under a worker's bound: as few as that bound
    allows, and at least one per worker while a batch stays over ``_MIN_FAST_BATCH``; when there are more than
    workers, a multiple of ``workers`` (no batch is read alone at the end). The count does not grow with the
    workers beyond that: each batch costs fixed queries (cut by the number of workers, 1.27 GB of Tinker rollouts
    took 19.4 CPU seconds at 16 workers against 8.8 at one)."""
    most = max(fast_jsonl.BATCH_BYTES * scale // _PER_WORKER, _MIN_FAST_BATCH)
    total = sum(f.size for f in files)
    count = max(-(-total // most), min(workers, -(-total // _MIN_FAST_BATCH)), 1)
    if count > workers:
        count = -(-count // workers) * workers
    # cut by the bytes before each file: ``count`` batches of about one size (``batches`` may leave one more)
    cut: list[list[sources.SourceFile]] = [[] for _ in range(count)]
    done = 0
    for f in files:
        cut[min(count - 1, done * count // max(1, total))].append(f)
        done += f.size
    return [batch for batch in cut if batch]


# The fast path of each format whose JSON Lines files DuckDB reads (``fast_jsonl``), by its adapter's NAME, and why
# each other format has none; tests/test_index_fast_path.py checks that every adapter is in one of the two.
FAST_PATHS: dict[str, fast_jsonl.Spec] = {
    "tinker": fast_tinker.SPEC,
    "ray": fast_ray.SPEC,
}
NO_FAST_PATH: dict[str, str] = {
    "ares": "one JSON document per file, not JSON Lines: its summarize_bytes reads the writer's layout instead",
    "atif": "one JSON document per trajectory file, not JSON Lines",
    "inspect_ai": "zip archives (.eval) whose members are read one by one already",
    "mini-swe-agent": "its summarize_bytes decodes just the fields a row reads with msgspec, in the worker processes: "
                      "less CPU than DuckDB's reader (3.0x orjson's) and than orjson itself",
}


def _fast(chosen: dict[fast_jsonl.Spec, list[sources.SourceFile]], target: store.Store, workers: int
          ) -> tuple[list[store.FileEntry], list[sources.SourceFile]]:
    """The fast path's batches, read by DuckDB in this process: ``workers`` batches side by side, each on its own
    single-threaded connection (a batch's later stages, the rows query, the Parquet write and the values read in
    Python, run on one thread; side by side, they keep every core busy). Each batch in memory holds at most
    ``fast_jsonl.BATCH_BYTES`` times the format's ``Spec.batches`` over ``_PER_WORKER`` of source data, so the
    memory grows by a bounded amount per worker (``_even``)."""
    jobs = [(spec, batch) for spec, files in chosen.items() for batch in _even(files, workers, spec.batches)]
    if not jobs:
        return [], []
    local = threading.local()
    opened: list[Any] = []
    lock = threading.Lock()

    def run(job: tuple[fast_jsonl.Spec, list[sources.SourceFile]]
            ) -> tuple[list[store.FileEntry], list[sources.SourceFile]]:
        con = getattr(local, "con", None)
        if con is None:
            con = local.con = fast_jsonl.connect(1)
            with lock:
                opened.append(con)
        return fast_jsonl.read_batch(con, job[0], job[1], target)

    entries: list[store.FileEntry] = []
    left: list[sources.SourceFile] = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            for taken, rest in pool.map(run, jobs):
                entries += taken
                left += rest
    finally:
        for con in opened:
            con.close()
    return entries, left


def build(files: list[sources.SourceFile], target: store.Store, *, workers: int | None = None
          ) -> list[store.FileEntry]:
    """Summarize these files into new partitions of ``target``; their manifest entries (not yet committed)."""
    workers = workers_for(workers)
    chosen, rest = fast_jsonl.choose(files, tuple(FAST_PATHS.values()))
    entries, left = _fast(chosen, target, workers)
    entries.extend(_ordinary(sorted(rest + left, key=lambda f: f.path), target, workers))
    return entries
