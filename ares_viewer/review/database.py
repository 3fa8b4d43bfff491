"""How the review store talks to SQLite: a busy write tried again until a gap, and its errors in words.

Several reviewers on one shared server write to one database (WAL); a write that finds it busy is tried again with
short pauses instead of failing, and any error a reviewer sees says what to do about it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import random
import sqlite3
import time
from collections.abc import Callable

try:
    import fcntl
except ImportError:  # Windows: writers are not seen waiting
    fcntl = None  # type: ignore[assignment]

from ares_viewer.base import settings


def is_lock(exc: sqlite3.Error) -> bool:
    message = str(exc)
    return "locked" in message or "busy" in message


def explain(exc: sqlite3.Error, path: pathlib.Path, doing: str, *, reading: bool = False) -> str:
    """An sqlite error in words a reviewer can act on (``reading``: the failure was to read notes, not write)."""
    message = str(exc)
    if is_lock(exc):
        after = "notes cannot be shown" if reading else "notes stay read-only"
        return (f"The review database {path} is locked by another program, so {doing} failed; {after} "
                f"until it is released ({message}).")
    if "not a database" in message or "malformed" in message or "corrupt" in message:
        return (f"The review database {path} is damaged or is not an SQLite database ({message}); notes are "
                f"read-only. Move the file away (it is left untouched) or set {settings.REVIEW_DB.name} to another "
                "path.")
    if "readonly" in message or "read-only" in message or "unable to open" in message:
        return f"The review database {path} cannot be written ({message}), so {doing} failed; notes are read-only."
    return f"The review database {path}: {doing} failed ({type(exc).__name__}: {message})."


# The longest pause between two tries of a write that finds the database busy.
_MAX_PAUSE = 0.05
# The first pause of a writer that finds others waiting before its first try.
_BEHIND_PAUSE = 0.01


def begin_write(db: sqlite3.Connection, timeout: float, error: Callable[[sqlite3.Error], Exception],
                waiting: pathlib.Path | None = None) -> None:
    """``BEGIN IMMEDIATE``, tried again while another writer holds the database, for up to ``timeout`` seconds.

    SQLite's own busy handler sleeps up to 100 ms between looks, and writers committing back to back leave the
    database free for far less than that: four of them made a reviewer's note fail 12 times in 15. Here each try
    returns at once, and the next one follows a short random pause that grows to ``_MAX_PAUSE``, so a gap between
    two other writers is soon met. A database busy for ``timeout`` seconds in all, or any other error, raises
    ``error(exc)``.

    Writers do not barge past those waiting (``waiting``: a file beside the database, :class:`_Waiting`): a writer
    whose first try finds the database busy holds a shared lock on it while it waits, and a writer that finds such
    a lock held (one that just committed and comes back at once, say) pauses first (``_BEHIND_PAUSE``) instead of
    trying at once, so four writers adding back to back no longer starve a fifth for seconds.
    """
    deadline = time.monotonic() + timeout
    db.execute("PRAGMA busy_timeout = 0")
    try:
        with _Waiting(waiting) as queue:
            pause = 0.001
            if queue.others_wait():  # behind those already waiting: no try before a pause
                pause = _BEHIND_PAUSE
                queue.join()
                time.sleep(random.uniform(0, pause))
            while True:
                try:
                    db.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if not is_lock(exc) or time.monotonic() >= deadline:
                        raise error(exc) from exc
                except sqlite3.Error as exc:
                    raise error(exc) from exc
                queue.join()
                time.sleep(random.uniform(0, pause))
                pause = min(pause * 2, _MAX_PAUSE)
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")


class _Waiting:
    """The writers waiting for one database, as shared ``flock`` locks on a file beside it: ``others_wait()`` is
    True while another writer waits (its shared lock keeps an exclusive one out), ``join()`` counts this one among
    them until the context ends. Without ``fcntl`` (Windows) or the file, nobody is ever seen waiting."""

    def __init__(self, path: pathlib.Path | None) -> None:
        self._path, self._fd, self._joined = path, -1, False

    def __enter__(self) -> _Waiting:
        if self._path is not None and fcntl is not None:
            with contextlib.suppress(OSError):
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        return self

    def others_wait(self) -> bool:
        if self._fd < 0 or fcntl is None:
            return False
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        return False

    def join(self) -> None:
        if self._fd >= 0 and fcntl is not None and not self._joined:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                self._joined = True

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases its lock
