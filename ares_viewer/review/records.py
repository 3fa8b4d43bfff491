"""A review note and its rules: the record (:class:`Note`), the errors, the run key notes are filed under, how
labels compare, and what a label, a text and an author may be. Storing them is ``store.py``."""

from __future__ import annotations

import dataclasses
import datetime
import os
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ares_viewer.base import locations
from ares_viewer.runs import run as run_module
from ares_viewer.runs.index import subruns

if TYPE_CHECKING:
    import pandas as pd

MAX_LABEL = 100
MAX_TEXT = 100_000
NOTE_COLUMNS = (
    "note_id",
    "run",
    "episode_id",
    "step",
    "path",
    "label",
    "text",
    "author",
    "updated_at",
    "revision",
    "deleted",
    "created_by",
    "created_at",
)


class ReviewError(Exception):
    """The review database cannot be read or written (the message says why and what still works)."""


class ConflictError(ReviewError):
    """An edit was based on a revision that is no longer the latest: someone else changed the note first."""


@dataclasses.dataclass(frozen=True, slots=True)
class Note:
    """One note as it reads at one revision.

    Attributes:
        note_id: the note's id (stable across edits).
        run: the run key (``run_key``) of the run it belongs to.
        episode_id: the episode.
        step: the step index.
        path: a file path of that step the note is about, or None.
        label: the label (a short tag), or None for a plain note.
        text: the free text (may be empty for a bare label).
        author: who wrote this revision.
        updated_at: unix seconds of this revision.
        revision: 1 for the first version, +1 per edit.
        deleted: True when this revision is a delete (a tombstone).
        created_by: who wrote the first revision.
        created_at: unix seconds of the first revision.
    """

    note_id: str
    run: str
    episode_id: str
    step: int
    path: str | None
    label: str | None
    text: str
    author: str
    updated_at: float
    revision: int
    deleted: bool
    created_by: str
    created_at: float


def run_key(location: str | os.PathLike | run_module.Run) -> str:
    """The key notes are stored under: the run's resolved location.

    A local path becomes absolute with symlinks resolved; a URL (``s3://...``) is kept as given,
    without a trailing slash.
    """
    if isinstance(location, run_module.Run):
        location = location.location
    text = subruns.split(os.fspath(location))[0]  # a run of a folder holding several: the folder's notes
    if not locations.is_local(text):
        return text.rstrip("/")
    return os.path.realpath(os.path.expanduser(text))


def fold(label: str) -> str:
    """A label as labels are compared: in one Unicode form (NFC: an accented letter typed as one character or
    as letter + accent is the same) and case-folded (``ÉDITE les tests`` and ``édite les tests`` are one label)."""
    return unicodedata.normalize("NFC", label).casefold()


def clean_label(label: str | None) -> str | None:
    if label is None:
        return None
    label = unicodedata.normalize("NFC", " ".join(str(label).split()))
    if len(label) > MAX_LABEL:
        raise ValueError(f"a label has at most {MAX_LABEL} characters; this one has {len(label)}")
    return label or None


def clean_text(text: str | None) -> str:
    text = (text or "").strip()
    if len(text) > MAX_TEXT:
        raise ValueError(f"a note has at most {MAX_TEXT:,} characters; this one has {len(text):,}")
    return text


MAX_AUTHOR = 100


def clean_author(author: str | None) -> str:
    """A reviewer's name as it is stored and compared: NFC, without invisible characters (zero-width spaces and
    joiners, bidirectional marks, controls), runs of spaces as one, at most ``MAX_AUTHOR`` characters. So one name
    typed as NFC, as NFD or with a zero-width space is one reviewer.

    Raises:
        ValueError: for an empty name or one longer than ``MAX_AUTHOR``.
    """
    text = unicodedata.normalize("NFC", str(author or ""))
    text = "".join(ch for ch in text if unicodedata.category(ch) not in _INVISIBLE or ch.isspace())
    author = " ".join(text.split())
    if not author:
        raise ValueError("a note needs an author: say who you are")
    if len(author) > MAX_AUTHOR:
        raise ValueError(f"a reviewer's name is at most {MAX_AUTHOR} characters, not {len(author)}")
    return author


# Unicode categories a name never shows: format characters (zero-width, bidirectional marks), controls, unassigned,
# private use and surrogates.
_INVISIBLE = frozenset({"Cf", "Cc", "Cn", "Co", "Cs"})


def format_time(seconds: float) -> str:
    """Unix seconds as a UTC time a reader can compare across reviewers."""
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def spellings(notes: Iterable[Note]) -> dict[str, str]:
    """Folded label -> the first spelling among ``notes`` (oldest first): how a label written before labels were
    compared this way, in several spellings, is listed once."""
    spelling: dict[str, str] = {}
    for note in notes:
        if note.label:
            spelling.setdefault(fold(note.label), note.label)
    return spelling


def from_row(row: tuple) -> Note:
    (note_id, run, episode_id, step, path, label, text, author, at, revision, deleted, created_by, created_at) = row
    return Note(
        note_id,
        run,
        episode_id,
        int(step),
        path,
        label,
        text,
        author,
        at,
        int(revision),
        bool(deleted),
        created_by,
        created_at,
    )


def notes_frame(notes: Sequence[Note]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame.from_records([dataclasses.astuple(n) for n in notes], columns=list(NOTE_COLUMNS))
    for column in ("updated_at", "created_at"):
        frame[column] = pd.to_datetime(frame[column].astype("float64"), unit="s", utc=True)
    return frame.astype({"step": "int64", "revision": "int64", "deleted": "bool"})
