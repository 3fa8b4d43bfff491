"""Snapshot flags, kept: each episode's snapshot findings stored once they are computed, for the whole run.

Snapshot flags read every step's snapshot of an episode, so they are computed on demand (``findings``, one
episode) or for the whole run when asked (``update``, in worker processes as the flag index is built), and kept in
``snapshot-flags.sqlite`` beside the flag index (``flag_index.folder``: the user's cache, never the run folder).
A row is keyed by the episode's file and id and holds the file's size and mtime when it was read, the snapshot
flags' names then, and the identity of the episode's snapshots (:func:`_snapshot_state` of the folders
``snapshots_of`` names: the name, size and mtime of what they hold; the app passes ``fsdiff.snapshot_folders``,
which asks ``snapshots.find``, and the default, :func:`per_step_folders`, follows the per-step layout): a rewritten
file, a changed, added or removed snapshot, or another set of snapshot flags is computed again. Each batch is
committed as it comes, so an ``update`` stopped half-way continues where it stopped. ``table`` gives the flag table
(``behaviours.collect``'s form) and the evidence of every episode computed so far.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence

import orjson
import pandas as pd

from ares_viewer import model
from ares_viewer.analysis.behaviours import flag_index, registry
from ares_viewer.analysis.behaviours.rates import EVIDENCE_COLUMNS
from ares_viewer.runs import companions
from ares_viewer.runs import run as runs
from ares_viewer.runs.index import queries

FILE = "snapshot-flags.sqlite"
# Per episode, the files each step changed (``fsdiff.paths_by_step``); a module-level function, for the workers.
ChangesOf = Callable[[model.Episode], registry.StepChanges]
# Per episode, the folders whose state identifies its snapshots (``fsdiff.snapshot_folders``); module-level too.
SnapshotsOf = Callable[[model.Episode], Sequence[str]]
# (episodes done, episodes to compute)
Progress = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS snapshot_flags (
    path TEXT NOT NULL, episode_id TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    flags TEXT NOT NULL, found BLOB NOT NULL, error TEXT, watched TEXT NOT NULL, snapshots TEXT NOT NULL,
    PRIMARY KEY (path, episode_id)
)
"""
# Entries of one watched snapshot folder looked at (a whole-filesystem snapshot's top level is a few dozen).
_MAX_WATCHED_ENTRIES = 10_000


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
        columns = {row[1] for row in con.execute("PRAGMA table_info(snapshot_flags)")}
        if columns and "snapshots" not in columns:  # kept before snapshots were part of the key: computed again
            con.execute("DROP TABLE snapshot_flags")
        con.execute(_SCHEMA)
        with con:
            yield con
    finally:
        con.close()


def _key(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def per_step_folders(episode: model.Episode) -> list[str]:
    """The folders of ``episode``'s per-step snapshots by their layout: ``snapshots/<episode_id>/`` beside its file
    and every folder in it (base and steps), whether or not they exist yet. None for a remote file or an id that
    cannot name a folder."""
    path = str(episode.path)
    episode_id = str(episode.episode_id)
    if not os.path.isabs(path) or not episode_id or "/" in episode_id or episode_id in {".", ".."}:
        return []
    top = os.path.join(os.path.dirname(path), companions.SNAPSHOTS_DIRNAME, episode_id)
    try:
        with os.scandir(top) as entries:
            inside = [e.path for _, e in zip(range(_MAX_WATCHED_ENTRIES), entries, strict=False) if e.is_dir()]
    except OSError:
        inside = []
    return [top, *sorted(inside)]


def _snapshot_state(folders: Sequence[str]) -> str:
    """A fingerprint of ``folders``: for each, whether it exists, and the name, kind, size and mtime of every
    entry it holds (a remote folder: its name only)."""
    digest = hashlib.sha256()
    for folder in folders:
        digest.update(f"{folder}\0".encode("utf-8", "surrogateescape"))
        if not os.path.isabs(folder):
            continue
        try:
            with os.scandir(folder) as entries:
                listed = sorted((e for _, e in zip(range(_MAX_WATCHED_ENTRIES), entries, strict=False)),
                                key=lambda e: e.name)
                for entry in listed:
                    stat = entry.stat(follow_symlinks=False)
                    digest.update(f"{entry.name}\0{stat.st_mode}\0{stat.st_size}\0{stat.st_mtime_ns}\n"
                                  .encode("utf-8", "surrogateescape"))
        except OSError as exc:
            digest.update(f"unreadable {exc.errno}\n".encode())
    return digest.hexdigest()


def _compute(episode: model.Episode, changes_of: ChangesOf) -> tuple[list[registry.Finding], str | None]:
    """The snapshot findings of ``episode``, or none and the reason when its snapshots do not read."""
    try:
        return registry.findings(registry.SNAPSHOTS, episode, changes_of(episode)), None
    except Exception as exc:  # a bad snapshot (or a flag's bug on it) must not stop the rest of the run
        return [], f"{type(exc).__name__}: {exc}"


def _row(path: str, key: tuple[int, int], found: list[registry.Finding], error: str | None, episode_id: str,
         watched: Sequence[str]):
    return (path, episode_id, *key, ",".join(names()), orjson.dumps([f.as_dict() for f in found]), error,
            orjson.dumps(list(watched)).decode(), _snapshot_state(watched))


def _store(con: sqlite3.Connection, rows: Sequence[tuple]) -> None:
    con.executemany("INSERT OR REPLACE INTO snapshot_flags VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def findings(run: runs.Run, episode: model.Episode, changes_of: ChangesOf,
             snapshots_of: SnapshotsOf = per_step_folders) -> list[registry.Finding]:
    """The snapshot findings of one episode of ``run``: as kept (file and snapshots unchanged), or computed now and
    kept."""
    path = str(episode.path)
    key = _key(path)
    watched = sorted(set(snapshots_of(episode)))
    with _connect(run) as con:
        kept = con.execute(
            "SELECT found FROM snapshot_flags WHERE path = ? AND episode_id = ? AND size = ? AND mtime_ns = ? "
            "AND flags = ? AND snapshots = ?",
            (path, episode.episode_id, *key, ",".join(names()), _snapshot_state(watched)),
        ).fetchone()
        if kept is not None:
            return [registry.Finding(**f) for f in orjson.loads(kept[0])]
        found, error = _compute(episode, changes_of)
        _store(con, [_row(path, key, found, error, episode.episode_id, watched)])
    return found


def _current(run: runs.Run) -> pd.DataFrame:
    """The kept rows of the run's episodes as the run lists them now (same file key, same snapshot flags, same
    snapshots: their watched folders looked at again, nothing parsed)."""
    files = flag_index.episode_files(run)
    with _connect(run) as con:
        kept = pd.read_sql_query(
            "SELECT path, episode_id, size, mtime_ns, found, error, watched, snapshots FROM snapshot_flags "
            "WHERE flags = ?",
            con,
            params=(",".join(names()),),
        )
    sizes = kept["path"].map(lambda p: files[p].size if p in files else -1)
    mtimes = kept["path"].map(lambda p: files[p].mtime_ns if p in files else -1)
    kept = kept[(kept["size"] == sizes) & (kept["mtime_ns"] == mtimes)]
    same = [_snapshot_state(orjson.loads(w)) == k for w, k in zip(kept["watched"], kept["snapshots"], strict=True)]
    return kept[pd.Series(same, index=kept.index, dtype=bool)].drop(columns=["watched", "snapshots"])


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


def _read_files(changes_of: ChangesOf, snapshots_of: SnapshotsOf, run: runs.Run, paths: Sequence[str]
                ) -> list[tuple]:
    """The rows to keep for every episode of ``paths`` (a file that does not read: no rows, it is tried again)."""
    rows = []
    for path in paths:
        try:
            key = _key(path)
            for episode in run.file_episodes(path):
                watched = sorted(set(snapshots_of(episode)))  # before computing: one changed meanwhile is redone
                found, error = _compute(episode, changes_of)
                rows.append(_row(path, key, found, error, episode.episode_id, watched))
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
    snapshots_of: SnapshotsOf = per_step_folders,
) -> int:
    """Compute and keep the snapshot flags of every episode of ``run`` (of its ``first`` episodes in run order) not
    kept yet, in worker processes for a large run, a batch of files at a time, each committed as it comes (a rerun
    continues where one stopped). ``progress(done, total)`` counts episodes; ``snapshots_of`` names the folders
    whose state identifies an episode's snapshots. Returns how many were computed."""
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
    read = functools.partial(_read_files, changes_of, snapshots_of)
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
