"""The review store: notes and labels on steps, kept in SQLite.

A *note* is attached to one step of one episode of one run (optionally to a file path of that
step) and carries a label (a short tag such as ``reward hacking``), a free text, or both. Several
reviewers (several app sessions, notebooks, scripts) may write at once:

- the database is SQLite in WAL mode, every write one short ``BEGIN IMMEDIATE`` transaction, tried again with
  short random pauses while another writer holds it (up to the store's ``timeout``), so concurrent writers wait
  for each other instead of failing or losing rows, however busy the others are; a writer does not barge past
  those already waiting (``database.begin_write``: a shared lock on ``<db>-writers`` beside the database);
- nothing is overwritten: every change appends a revision (a delete appends a tombstone), so the
  whole history of every note stays readable;
- an edit names the revision it was based on; when someone else changed the note since, the edit
  is refused with ``records.ConflictError`` instead of silently replacing their words.

Runs are identified by ``records.run_key(location)``: the run's resolved location (an absolute local path with
symlinks resolved, or a URL as given without a trailing slash). Notes follow the files, not the
name of a folder in the picker: opening the same folder by another relative path finds the same notes.

Labels are one name per run whatever the case, compared with ``str.casefold`` (``édite`` and
``ÉDITE`` are one label), which SQLite's ``lower()`` (ASCII only) would not do.

The database lives at ``ARES_VIEWER_REVIEW_DB`` when set, else ``review.sqlite`` in the index cache
folder (``ARES_VIEWER_CACHE``); never in a run folder unless a user points it there. A file that is
not a readable database, or one that another program keeps locked, gives a clear message: the store
then opens read-only (empty when unreadable) and the viewer keeps working. A lock that keeps even
readers out (an exclusive lock in rollback-journal mode) makes reads fail with that message until
it is released, rather than look like a store with no notes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ares_viewer.base import settings
from ares_viewer.review import database, queue_tables, records
from ares_viewer.runs import index_cache
from ares_viewer.runs import run as run_module

if TYPE_CHECKING:
    import pandas as pd

_LOGGER = logging.getLogger(__name__)
_T = TypeVar("_T")

DB_ENV = settings.REVIEW_DB.name
# 1: notes and their revisions; 2: queues (``queue_tables``); 3: queues' adjudicators and an append-only history in
# SQLite itself (triggers). Each is added by opening an older database for writing.
SCHEMA = 3

_DDL = """
CREATE TABLE IF NOT EXISTS notes (
    note_id TEXT PRIMARY KEY,
    run TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    path TEXT,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS notes_by_step ON notes (run, episode_id, step);
CREATE TABLE IF NOT EXISTS revisions (
    note_id TEXT NOT NULL REFERENCES notes (note_id),
    revision INTEGER NOT NULL,
    label TEXT,
    text TEXT NOT NULL,
    author TEXT NOT NULL,
    at REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (note_id, revision)
);
"""
# The latest revision of each note: the note as it reads now.
_CURRENT = """
SELECT n.note_id, n.run, n.episode_id, n.step, n.path, r.label, r.text, r.author, r.at, r.revision, r.deleted,
       n.created_by, n.created_at
FROM notes n JOIN revisions r ON r.note_id = n.note_id
WHERE r.revision = (SELECT MAX(revision) FROM revisions WHERE note_id = n.note_id)
"""


def db_path(path: str | os.PathLike | None = None) -> pathlib.Path:
    """Where the review database is: ``path``, else ``ARES_VIEWER_REVIEW_DB``, else beside the index cache."""
    chosen = path or settings.REVIEW_DB.get()
    if chosen:
        return pathlib.Path(chosen).expanduser()
    return index_cache.cache_dir() / "review.sqlite"


def _sql_fold(value: str | bytes | int | float | None) -> str | bytes | int | float | None:
    """``fold`` for SQL (``casefold(r.label)``): NULL and non-text values pass through unchanged."""
    return records.fold(value) if isinstance(value, str) else value


class ReviewStore:
    """Notes and labels on steps, in an SQLite database shared by every reviewer.

    Attributes:
        path: the database file.
        problem: why the store is read-only (a damaged, locked or unwritable database), else None.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool = False,
                 timeout: float = 10.0) -> None:
        self.path = db_path(path)
        self.timeout = timeout
        self.problem: str | None = None
        self._read_only = read_only
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        # True while a lock keeps even readers out: reads open the file again (and say so when they still cannot).
        self._locked_out = False
        try:
            self._db = self._connect(read_only)
        except (OSError, sqlite3.Error, records.ReviewError) as exc:
            self._fail_open(exc)

    # ----- opening ------------------------------------------------------------------------------

    def _connect(self, read_only: bool) -> sqlite3.Connection | None:
        if read_only:
            if not self.path.exists():
                return None  # nothing written yet: an empty store
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=self.timeout,
                                 check_same_thread=False, isolation_level=None)
            db.create_function("casefold", 1, _sql_fold, deterministic=True)
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a damaged or locked file fails here
            except BaseException:
                db.close()
                raise
            return db
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=False, isolation_level=None)
        db.create_function("casefold", 1, _sql_fold, deterministic=True)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]  # a damaged file fails here
            if version > SCHEMA:
                raise records.ReviewError(f"The review database {self.path} was written by a newer ares-viewer (schema "
                                  f"{version}, this one reads {SCHEMA}); notes are read-only.")
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")  # readers never wait for writers
            if version < SCHEMA:
                db.execute("BEGIN IMMEDIATE")
                try:
                    for statement in filter(str.strip, (_DDL + ";" + queue_tables.DDL).split(";")):
                        db.execute(statement)
                    queue_tables.add_adjudicators(db)
                    for statement in queue_tables.HISTORY_TRIGGERS:
                        db.execute(statement)
                    db.execute(f"PRAGMA user_version = {SCHEMA}")
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
        except BaseException:
            db.close()
            raise
        return db

    def _fail_open(self, exc: Exception) -> None:
        """After a failure to open: open read-only if the file can be read, keeping the reason.

        A store asked to be read-only has failed at exactly that already, so it is not tried twice (each try
        waits for the busy timeout on a locked file).
        """
        tried_read_only = self._read_only
        if isinstance(exc, records.ReviewError):
            self.problem = str(exc)
        elif isinstance(exc, sqlite3.Error):
            doing = "opening it" if tried_read_only else "opening it for writing"
            self.problem = database.explain(exc, self.path, doing, reading=tried_read_only)
        else:
            self.problem = f"The review database {self.path} cannot be created ({exc}); notes are read-only."
        self._read_only = True
        if tried_read_only:
            self._locked_out = isinstance(exc, sqlite3.Error) and database.is_lock(exc)
        elif not isinstance(exc, OSError):
            try:
                self._db = self._connect(read_only=True)
            except sqlite3.Error as again:
                self.problem += f" Its notes cannot be read either ({again})."
                self._locked_out = database.is_lock(again)
        _LOGGER.warning("%s", self.problem)

    @property
    def writable(self) -> bool:
        """True when notes can be added and edited."""
        return not self._read_only

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> ReviewStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-write" if self.writable else "read-only"
        return f"ReviewStore({str(self.path)!r}, {mode})"

    # ----- writing ------------------------------------------------------------------------------

    def _write(self, doing: str, body) -> Any:
        """Run ``body(db)`` in one immediate transaction (waits up to ``timeout`` for other writers)."""
        if not self.writable or self._db is None:
            raise records.ReviewError(self.problem or f"The review database {self.path} is open read-only.")
        with self._lock:
            db = self._db
            database.begin_write(db, self.timeout,
                                 lambda exc: records.ReviewError(database.explain(exc, self.path, doing)),
                                 waiting=self.path.with_name(self.path.name + "-writers"))
            try:
                result = body(db)
                db.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise records.ReviewError(database.explain(exc, self.path, doing)) from exc
                raise
            return result

    def write(self, doing: str, body: Callable[[sqlite3.Connection], _T]) -> _T:
        """``body(db)`` in one immediate write transaction; ``doing`` names it in errors (for ``queues``)."""
        return self._write(doing, body)

    def add(self, run: str | os.PathLike | run_module.Run, episode_id: str, step: int, *, author: str,
            label: str | None = None, text: str | None = None, path: str | None = None) -> records.Note:
        """Attach a new note or label to a step.

        Args:
            run: the run (a location, or an opened ``Run``).
            episode_id: the episode.
            step: the step index.
            author: who writes it.
            label: a short tag (``reward hacking``); None for a plain note.
            text: free text; may be empty when a label is given.
            path: a file path of that step the note is about.

        Raises:
            ValueError: when the note is empty or has no author.
            records.ReviewError: when the database cannot be written.
        """
        label, text, author = records.clean_label(label), records.clean_text(text), records.clean_author(author)
        if label is None and not text:
            raise ValueError("a note needs a label or some text")
        if not isinstance(step, int) or step < 0:
            raise ValueError(f"a step index is a whole number >= 0, not {step!r}")
        note_id = uuid.uuid4().hex
        now = time.time()
        key = records.run_key(run)
        path = (path or "").strip() or None

        def insert(db: sqlite3.Connection) -> str | None:
            # The run's spelling is looked up inside the write transaction: two reviewers adding one new label in
            # two spellings at once still give it one name.
            spelled = _spelling(db, key, label)
            db.execute("INSERT INTO notes VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (note_id, key, str(episode_id), step, path, author, now))
            db.execute("INSERT INTO revisions VALUES (?, 1, ?, ?, ?, ?, 0)", (note_id, spelled, text, author, now))
            return spelled

        label = self._write("adding a note", insert)
        return records.Note(note_id, key, str(episode_id), step, path, label, text, author, now, 1, False, author, now)

    def _revise(self, note_id: str, revision: int, author: str, deleted: bool, doing: str, *,
                label: str | None = None, text: str | None = None) -> records.Note:
        """Append a revision; ``label`` or ``text`` None keeps the note's latest one, ``label=""`` removes it."""
        author = records.clean_author(author)
        now = time.time()

        def append(db: sqlite3.Connection) -> None:
            head = db.execute("SELECT revision, author, at, label, text FROM revisions WHERE note_id = ? "
                              "ORDER BY revision DESC LIMIT 1", (note_id,)).fetchone()
            if head is None:
                raise KeyError(f"no note {note_id!r} in {self.path}")
            if head[0] != revision:
                raise records.ConflictError(
                    f"Not saved: this note was changed by {head[1]} at {records.format_time(head[2])} "
                    f"(now revision {head[0]}) "
                    f"after the revision {revision} you edited. Reload it, then apply your change again.")
            new_label = head[3] if label is None else label or None
            new_text = head[4] if text is None else text
            if not deleted and new_label is None and not new_text:
                raise ValueError("a note needs a label or some text (delete it instead)")
            run = db.execute("SELECT run FROM notes WHERE note_id = ?", (note_id,)).fetchone()[0]
            db.execute("INSERT INTO revisions VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (note_id, revision + 1, _spelling(db, run, new_label), new_text, author, now, int(deleted)))

        self._write(doing, append)
        return self.get(note_id)

    def edit(self, note_id: str, *, revision: int, author: str, label: str | None = None,
             text: str | None = None) -> records.Note:
        """Change a note's label, text or both; ``revision`` is the revision the change was based on.

        What is left out stays as it is: ``edit(id, revision=2, author="ada", text="…")`` keeps the label.
        ``label=""`` removes the label (the note keeps its text), ``text=""`` empties the text.
        Editing a deleted note (at its tombstone's revision) restores it.

        Raises:
            records.ConflictError: when the note has a newer revision than ``revision`` (nothing is written).
            KeyError: when there is no such note.
            ValueError: when the result would be empty (no label and no text).
        """
        if label is not None:
            label = records.clean_label(label) or ""  # a blank label removes it, as "" does
        if text is not None:
            text = records.clean_text(text)
        return self._revise(note_id, revision, author, False, "saving the edit", label=label, text=text)

    def delete(self, note_id: str, *, revision: int, author: str) -> records.Note:
        """Delete a note: appends a tombstone revision (the history stays readable).

        Raises:
            records.ConflictError: when the note has a newer revision than ``revision``.
            KeyError: when there is no such note.
        """
        return self._revise(note_id, revision, author, True, "deleting the note")

    def restore(self, note_id: str, *, revision: int, author: str) -> records.Note:
        """Undo a deletion: appends a revision with the note's last label and text (its history keeps the deletion).

        Raises:
            records.ConflictError: when the note has a newer revision than ``revision``.
            KeyError: when there is no such note.
            ValueError: when the note is not deleted.
        """
        if not self.get(note_id).deleted:
            raise ValueError(f"note {note_id} is not deleted: there is nothing to restore")
        return self._revise(note_id, revision, author, False, "restoring the note")

    def move_run(self, old: str | os.PathLike, new: str | os.PathLike | run_module.Run) -> int:
        """Re-file a moved run's notes under its new location; returns how many notes moved.

        Raises:
            ValueError: when the new location already has notes (merging two runs' notes is not a move).
        """
        old_key, new_key = records.run_key(old), records.run_key(new)

        def move(db: sqlite3.Connection) -> int:
            if old_key != new_key and db.execute("SELECT 1 FROM notes WHERE run = ? LIMIT 1", (new_key,)).fetchone():
                raise ValueError(f"{new_key} already has notes: not moving the notes of {old_key} onto them")
            return db.execute("UPDATE notes SET run = ? WHERE run = ?", (new_key, old_key)).rowcount

        return self._write("moving a run's notes", move)

    # ----- reading ------------------------------------------------------------------------------

    def _read(self, query: str, params: Sequence[Any]) -> list[tuple]:
        with self._lock:
            try:
                if self._db is None and self._locked_out:
                    self._db = self._connect(read_only=True)  # the lock may be gone by now
                    self._locked_out = False
                if self._db is None:
                    return []  # nothing written yet, or a damaged file (``problem`` says so)
                return self._db.execute(query, params).fetchall()
            except sqlite3.Error as exc:
                raise records.ReviewError(database.explain(exc, self.path, "reading notes", reading=True)) from exc

    def select(self, query: str, params: Sequence[Any] = ()) -> list[tuple]:
        """The rows of one read query (empty when nothing was written yet)."""
        return self._read(query, params)

    def find(self, run: str | os.PathLike | run_module.Run | None = None, *, episode_id: str | None = None,
             step: int | None = None, labels: Iterable[str] | None = None,
             include_deleted: bool = False) -> list[records.Note]:
        """The notes as they read now, oldest first, narrowed by run, episode, step and labels (any case: ``fold``).

        Raises:
            records.ReviewError: when the database cannot be read (a lock that keeps readers out says so).
        """
        query, params = _CURRENT, []
        for column, value in (("n.run", None if run is None else records.run_key(run)), ("n.episode_id", episode_id),
                              ("n.step", step)):
            if value is not None:
                query += f" AND {column} = ?"
                params.append(value)
        wanted = [label for label in (labels or ()) if label]
        if wanted:
            query += f" AND casefold(r.label) IN ({', '.join(['casefold(?)'] * len(wanted))})"
            params.extend(wanted)
        if not include_deleted:
            query += " AND r.deleted = 0"
        query += " ORDER BY n.created_at, n.note_id"
        return [records.from_row(row) for row in self._read(query, params)]

    def notes(self, run: str | os.PathLike | run_module.Run | None = None, *, episode_id: str | None = None,
              step: int | None = None, labels: Iterable[str] | None = None,
              include_deleted: bool = False) -> pd.DataFrame:
        """The notes as a DataFrame (``records.NOTE_COLUMNS``; times as UTC timestamps), one row per note."""
        found = self.find(run, episode_id=episode_id, step=step, labels=labels, include_deleted=include_deleted)
        return records.notes_frame(found)

    def get(self, note_id: str) -> records.Note:
        """A note as it reads now (its latest revision, which may be a tombstone).

        Raises:
            KeyError: when there is no such note.
        """
        rows = self._read(_CURRENT + " AND n.note_id = ?", [note_id])
        if not rows:
            raise KeyError(f"no note {note_id!r} in {self.path}")
        return records.from_row(rows[0])

    def history(self, note_id: str) -> pd.DataFrame:
        """Every revision of a note, oldest first (``records.NOTE_COLUMNS``)."""
        rows = self._read(
            "SELECT n.note_id, n.run, n.episode_id, n.step, n.path, r.label, r.text, r.author, r.at, r.revision, "
            "r.deleted, n.created_by, n.created_at FROM notes n JOIN revisions r ON r.note_id = n.note_id "
            "WHERE n.note_id = ? ORDER BY r.revision", [note_id])
        return records.notes_frame([records.from_row(row) for row in rows])

    def labels(self, run: str | os.PathLike | run_module.Run | None = None) -> list[str]:
        """The labels in use on live notes (of one run, or of all), sorted; each once, in its first spelling."""
        return sorted(records.spellings(self.find(run)).values())

    def step_labels(self, run: str | os.PathLike | run_module.Run, episode_id: str) -> dict[int, list[str]]:
        """Step index -> the labels on that step of one episode (each once, in the run's first spelling)."""
        notes = self.find(run, episode_id=episode_id)
        spelling = records.spellings(self.find(run)) if any(n.label for n in notes) else {}
        found: dict[int, list[str]] = {}
        for note in notes:
            if note.label and spelling[records.fold(note.label)] not in found.setdefault(note.step, []):
                found[note.step].append(spelling[records.fold(note.label)])
        return {step: labels for step, labels in found.items() if labels}

    def episode_labels(self, run: str | os.PathLike | run_module.Run) -> dict[str, list[str]]:
        """Episode id -> the labels on any of its steps, sorted (each once, in the run's first spelling)."""
        notes = self.find(run)
        spelling = records.spellings(notes)
        found: dict[str, set[str]] = {}
        for note in notes:
            if note.label:
                found.setdefault(note.episode_id, set()).add(spelling[records.fold(note.label)])
        return {episode_id: sorted(labels) for episode_id, labels in found.items()}


def _spelling(db: sqlite3.Connection, run: str, label: str | None) -> str | None:
    """A label as the run already spells it (``Reward hacking`` -> ``reward hacking``): one label, one name."""
    if label is None:
        return None
    row = db.execute(_CURRENT + " AND n.run = ? AND r.deleted = 0 AND casefold(r.label) = casefold(?) "
                     "ORDER BY n.created_at LIMIT 1", [run, label]).fetchone()
    return records.from_row(row).label if row else label


def open_store(path: str | os.PathLike | None = None, *, read_only: bool = False,
               timeout: float = 10.0) -> ReviewStore:
    """The review database (``db_path(path)``); read-only with ``problem`` set when it cannot be written."""
    return ReviewStore(path, read_only=read_only, timeout=timeout)
