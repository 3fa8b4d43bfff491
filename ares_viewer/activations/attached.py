"""Capture folders attached to episodes where users keep them (``ares-viewer activations attach``), remembered in
the cache folder, never in the run.

ARES's own example saves a capture where the caller chooses (``activations/episode_001/``), not beside the episode
file; attaching records ``episode file -> capture folder`` in ``attached.sqlite`` in the cache folder
(``ARES_VIEWER_CACHE``, beside the index and the review notes), so ``linking.find`` opens it beside its episode.
An episode is known by its file's real path and its id (a file holding several episodes attaches each apart).
The run folder and the capture folder are only read.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sqlite3
import time
from collections.abc import Iterator

from ares_viewer.activations import capture as capture_mod
from ares_viewer.base import locations
from ares_viewer.runs import index_cache

FILE = "attached.sqlite"
_DDL = """CREATE TABLE IF NOT EXISTS attached (
    episode_file TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    folder TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (episode_file, episode_id)
)"""


class AttachError(ValueError):
    """A folder that cannot be attached (not a capture), or a database that cannot be written; says why."""


def db_path() -> pathlib.Path:
    """Where the links are kept: ``attached.sqlite`` in the cache folder."""
    return index_cache.cache_dir() / FILE


def episode_key(path: str) -> str:
    """An episode file as links name it: its real path (a URL as given)."""
    return os.path.realpath(os.path.expanduser(path)) if locations.is_local(path) else path


@contextlib.contextmanager
def _db(write: bool) -> Iterator[sqlite3.Connection | None]:
    path = db_path()
    if not write and not path.is_file():
        yield None
        return
    try:
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=30)
        else:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except (OSError, sqlite3.Error) as exc:
        if write:
            raise AttachError(f"{path}: cannot be opened for writing ({exc})") from exc
        yield None
        return
    try:
        if write:
            db.execute(_DDL)
        yield db
        if write:
            db.commit()
    except sqlite3.Error as exc:
        raise AttachError(f"{path}: {exc}") from exc
    finally:
        db.close()


def attach(episode_file: str, episode_id: str, folder: str | os.PathLike) -> str:
    """Link a capture folder to an episode; returns the folder as stored (its real path).

    Raises:
        AttachError: the folder holds no ``metadata.json`` (not a saved ``TrajectoryActivations``), or the
            database cannot be written.
    """
    real = os.path.realpath(os.path.expanduser(os.fspath(folder)))
    if not os.path.isdir(real):
        raise AttachError(f"{os.fspath(folder)}: no such folder")
    if not capture_mod.is_capture(real):
        raise AttachError(f"{os.fspath(folder)}: no {capture_mod.METADATA}; not a saved TrajectoryActivations")
    with _db(write=True) as db:
        assert db is not None
        db.execute("INSERT OR REPLACE INTO attached VALUES (?, ?, ?, ?)",
                   (episode_key(episode_file), episode_id, real, time.time()))
    return real


def detach(episode_file: str, episode_id: str) -> bool:
    """Forget an episode's attached folder; True when there was one."""
    with _db(write=True) as db:
        assert db is not None
        return db.execute("DELETE FROM attached WHERE episode_file = ? AND episode_id = ?",
                          (episode_key(episode_file), episode_id)).rowcount > 0


def folder_of(episode_file: str, episode_id: str) -> str | None:
    """The folder attached to an episode, or None (none attached, or no database yet)."""
    with _db(write=False) as db:
        if db is None:
            return None
        try:
            row = db.execute("SELECT folder FROM attached WHERE episode_file = ? AND episode_id = ?",
                             (episode_key(episode_file), episode_id)).fetchone()
        except sqlite3.Error:  # not a database, or another table: nothing attached
            row = None
    return str(row[0]) if row else None
