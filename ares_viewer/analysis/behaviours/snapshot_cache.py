"""Snapshot flags, kept: each episode's snapshot findings stored once they are computed, for the whole run.

Snapshot flags read every step's snapshot of an episode, so they are computed on demand (``findings``, one
episode) or for the whole run when asked (``update``, in worker processes as the flag index is built), and kept in
``snapshot-flags.sqlite`` beside the flag index (``flag_index.folder``: the user's cache, never the run folder).
A row is keyed by the episode's file and id and holds the file's size and mtime when it was read and the snapshot
flags' names then: a rewritten file, or another set of snapshot flags, is computed again. Each batch is committed as
it comes, so an ``update`` stopped half-way continues where it stopped. ``table`` gives the flag table
(``behaviours.collect``'s form) and the evidence of every episode computed so far.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence

import orjson
import pandas as pd

from ares_viewer import model
from ares_viewer.analysis.behaviours import flag_index, registry
from ares_viewer.analysis.behaviours.rates import EVIDENCE_COLUMNS
from ares_viewer.runs import run as runs
from ares_viewer.runs.index import queries

FILE = "snapshot-flags.sqlite"
# Per episode, the files each step changed (``fsdiff.paths_by_step``); a module-level function, for the workers.
ChangesOf = Callable[[model.Episode], registry.StepChanges]
# (episodes done, episodes to compute)
Progress = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS snapshot_flags (
    path TEXT NOT NULL, episode_id TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    flags TEXT NOT NULL, found BLOB NOT NULL, error TEXT, PRIMARY KEY (path, episode_id)
)
"""


def names() -> list[str]:
    """The snapshot flags of ``registry.FLAGS``, in registration order."""
    return [name for name, flag_ in registry.FLAGS.items() if flag_.source == registry.SNAPSHOTS]


@contextlib.contextmanager
def _connect(run: runs.Run) -> Iterator[sqlite3.Connection]:
    folder = flag_index.folder(run)
    folder.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(folder / FILE, timeout=30)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(_SCHEMA)
        with con:
            yield con
    finally:
        con.close()


def _key(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def _compute(episode: model.Episode, changes_of: ChangesOf) -> tuple[list[registry.Finding], str | None]:
    """The snapshot findings of ``episode``, or none and the reason when its snapshots do not read."""
    try:
        return registry.findings(registry.SNAPSHOTS, episode, changes_of(episode)), None
    except Exception as exc:  # a bad snapshot (or a flag's bug on it) must not stop the rest of the run
        return [], f"{type(exc).__name__}: {exc}"


def _row(path: str, key: tuple[int, int], found: list[registry.Finding], error: str | None, episode_id: str):
    return (path, episode_id, *key, ",".join(names()), orjson.dumps([f.as_dict() for f in found]), error)


def _store(con: sqlite3.Connection, rows: Sequence[tuple]) -> None:
    con.executemany("INSERT OR REPLACE INTO snapshot_flags VALUES (?, ?, ?, ?, ?, ?, ?)", rows)


def findings(run: runs.Run, episode: model.Episode, changes_of: ChangesOf) -> list[registry.Finding]:
    """The snapshot findings of one episode of ``run``: as kept, or computed now and kept."""
    path = str(episode.path)
    key = _key(path)
    with _connect(run) as con:
        kept = con.execute(
            "SELECT found FROM snapshot_flags WHERE path = ? AND episode_id = ? AND size = ? AND mtime_ns = ? "
            "AND flags = ?",
            (path, episode.episode_id, *key, ",".join(names())),
        ).fetchone()
        if kept is not None:
            return [registry.Finding(**f) for f in orjson.loads(kept[0])]
        found, error = _compute(episode, changes_of)
        _store(con, [_row(path, key, found, error, episode.episode_id)])
    return found


def _current(run: runs.Run) -> pd.DataFrame:
    """The kept rows of the run's episodes as the run lists them now (same file key, same snapshot flags)."""
    files = flag_index.episode_files(run)
    with _connect(run) as con:
        kept = pd.read_sql_query(
            "SELECT path, episode_id, size, mtime_ns, found, error FROM snapshot_flags WHERE flags = ?",
            con,
            params=(",".join(names()),),
        )
    sizes = kept["path"].map(lambda p: files[p].size if p in files else -1)
    mtimes = kept["path"].map(lambda p: files[p].mtime_ns if p in files else -1)
    return kept[(kept["size"] == sizes) & (kept["mtime_ns"] == mtimes)]


def _episodes(run: runs.Run) -> pd.DataFrame:
    """The run's episodes: ``path``, ``episode_id``, ``task_name``, ``solved`` (and ``iteration`` when it has one)."""
    more = ", iteration" if "iteration" in run.relation.columns else ""
    return run.query(
        f"SELECT path, episode_id, task_name, {queries.SOLVED} AS solved{more} FROM episodes ORDER BY path, _seq"
    ).df()


def covered(run: runs.Run) -> int:
    """How many of the run's episodes have their snapshot flags kept (and current)."""
    kept = _current(run)
    return len(_episodes(run).merge(kept[["path", "episode_id"]], on=["path", "episode_id"]))


def table(run: runs.Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The snapshot flags of every episode computed so far: the flag table (``episode_id``, ``task_name``,
    ``solved``, ``iteration`` when the run has it, a boolean column per snapshot flag) and the evidence (one row
    per flag found, ``rates.EVIDENCE_COLUMNS``), in run order."""
    rows = _episodes(run).merge(_current(run), on=["path", "episode_id"])
    found = [[registry.Finding(**f) for f in orjson.loads(raw)] for raw in rows["found"]]
    frame = rows.drop(columns=["path", "size", "mtime_ns", "found", "error"])
    for name in names():
        frame[name] = [any(f.flag == name for f in fs) for fs in found]
    evidence = [
        {**f.as_dict(), "task_name": task, "solved": bool(solved)}
        for fs, task, solved in zip(found, rows["task_name"], rows["solved"], strict=True)
        for f in fs
    ]
    return frame.reset_index(drop=True), pd.DataFrame(evidence, columns=list(EVIDENCE_COLUMNS))


def _read_files(changes_of: ChangesOf, run: runs.Run, paths: Sequence[str]) -> list[tuple]:
    """The rows to keep for every episode of ``paths`` (a file that does not read: no rows, it is tried again)."""
    rows = []
    for path in paths:
        try:
            key = _key(path)
            for episode in run.file_episodes(path):
                found, error = _compute(episode, changes_of)
                rows.append(_row(path, key, found, error, episode.episode_id))
        except Exception:  # one bad file must not stop the rest; it stays uncovered (tried again next time)
            continue
    return rows


def update(
    run: runs.Run,
    changes_of: ChangesOf,
    *,
    first: int | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> int:
    """Compute and keep the snapshot flags of every episode of ``run`` (of its ``first`` episodes in run order) not
    kept yet, in worker processes for a large run, a batch of files at a time, each committed as it comes (a rerun
    continues where one stopped). ``progress(done, total)`` counts episodes. Returns how many were computed."""
    kept = _current(run)
    todo = (
        _episodes(run)
        .head(first)
        .merge(kept[["path", "episode_id"]], on=["path", "episode_id"], how="left", indicator=True)
    )
    todo = todo[todo["_merge"] == "left_only"]
    per_file = todo.groupby("path", sort=True).size()
    paths, total = list(per_file.index), int(per_file.sum())
    if progress is not None:
        progress(0, total)
    files = flag_index.episode_files(run)
    read = functools.partial(_read_files, changes_of)
    done = 0
    for chunk, rows in flag_index.batches(run, paths, flag_index.workers_for(run, paths, files, workers), read):
        with _connect(run) as con:
            _store(con, rows)
        done += int(per_file[list(chunk)].sum())
        if progress is not None:
            progress(done, total)
    return done


def errors(run: runs.Run) -> list[tuple[str, str]]:
    """The episodes whose snapshots did not read, each with the reason (their snapshot flags count as not shown)."""
    kept = _current(run)
    return [(e, str(r)) for e, r in zip(kept["episode_id"], kept["error"], strict=True) if r]
