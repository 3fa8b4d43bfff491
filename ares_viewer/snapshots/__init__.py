"""Container snapshots of an episode's steps: find them, open them, read files at any step without Docker.

    from ares_viewer import snapshots

    refs = snapshots.find(episode)           # every recorded step's snapshot, sorted by step
    snap = snapshots.open(refs[0])           # opened and validated, whatever its kind
    snap.read("/testbed/app.py")             # the file after that step
    snap.changed_since(None)                 # what differs from the base image

Every snapshot implements :class:`Snapshot` (``base.py``) and every reference :class:`SnapshotRef`. The kinds
(``per_step.py``: ares-viewer's per-step snapshots, opened as ``_per_step_snapshot.py`` over
``_per_step_archives.py`` and written by ``_per_step_writer.py``; ``episode_boundary.py``: ARES's whole-filesystem
copies, opened as ``episode_boundary_snapshot.py``)
are found by a registry of finders, each answering for the locations it handles (:func:`register_finder`);
the first finder that finds snapshots for an episode wins. Archives are checked by ``_tar_safety.py``, and
runs read through fsspec are mirrored into the local cache by ``mirror.py``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ares_viewer.snapshots._per_step_snapshot import (
    BLOBS_NAME,
    StepSnapshot,
    changed_between,
    live_snapshot,
    memory_snapshot,
    utc_now,
)
from ares_viewer.snapshots._per_step_writer import read_manifest_entries, write_base, write_step
from ares_viewer.snapshots.base import (
    ABSENT,
    CHANGES,
    DELETED,
    DIR,
    ENTRY_TYPES,
    FILE,
    LIVE_FOLDER,
    MAX_MANIFEST_BYTES,
    OTHER,
    SNAPSHOTS_DIRNAME,
    SYMLINK,
    BaseReads,
    Entry,
    Finder,
    Restorable,
    Snapshot,
    SnapshotError,
    SnapshotRef,
    restorable,
    with_base,
)
from ares_viewer.snapshots.episode_boundary import BoundaryFinder
from ares_viewer.snapshots.per_step import (
    BASE_DIRNAME,
    MANIFEST_NAME,
    StepFinder,
    StepRef,
    episode_snapshots_dir,
    list_steps,
    open_step,
    step_dirname,
)

if TYPE_CHECKING:
    from ares_viewer import model

__all__ = [
    "ABSENT", "BASE_DIRNAME", "BLOBS_NAME", "CHANGES", "DELETED", "DIR", "ENTRY_TYPES", "FILE", "LIVE_FOLDER",
    "MANIFEST_NAME", "MAX_MANIFEST_BYTES", "OTHER", "SNAPSHOTS_DIRNAME", "SYMLINK", "BaseReads", "Entry", "Finder",
    "Restorable", "Snapshot", "SnapshotError", "SnapshotRef", "StepRef", "StepSnapshot", "changed_between",
    "episode_snapshots_dir", "find", "finders", "for_step", "list_steps", "live_snapshot", "memory_snapshot", "open",
    "open_step", "problems", "read_manifest_entries", "register_finder", "restorable", "step_dirname", "utc_now",
    "with_base", "write_base", "write_step",
]

_LOGGER = logging.getLogger(__name__)

# Asked in order: ares-viewer's own per-step snapshots first (they also record the base image), then ARES's
# episode-boundary copies.
_FINDERS: list[Finder] = [StepFinder(), BoundaryFinder()]
_FINDERS_LOCK = threading.Lock()


def register_finder(finder: Finder, *, first: bool = False) -> None:
    """Add a way snapshots are recorded beside episodes (asked after the others unless ``first``)."""
    with _FINDERS_LOCK:
        _FINDERS.insert(0 if first else len(_FINDERS), finder)


def finders() -> list[Finder]:
    """The registered finders, in the order they are asked."""
    with _FINDERS_LOCK:
        return list(_FINDERS)


def find(episode: model.Episode) -> list[SnapshotRef]:
    """The container snapshots recorded for ``episode``, sorted by step (empty when there are none).

    Each registered finder that handles the episode's location is asked in turn; the first that finds any
    snapshots answers. Only folder names and small headers are read here: open a reference with :func:`open`.
    """
    location = str(episode.path)
    for finder in finders():
        if not finder.handles(location):
            continue
        refs = list(finder.find(episode))
        if refs:
            _LOGGER.debug("%s: %d %s", episode.episode_id, len(refs), finder.name)
            return refs
    return []


def problems(episode: model.Episode) -> list[SnapshotError]:
    """Snapshots near ``episode`` that could not be read well enough to tell which step they belong to.

    Asked of the same finders, in the same order, as :func:`find` (a finder answers through its optional
    ``problems(episode)`` method); the finder that answers :func:`find` is the last one asked. A snapshot that is
    found but unreadable is not here: opening it raises :class:`SnapshotError`.
    """
    location = str(episode.path)
    found: list[SnapshotError] = []
    for finder in finders():
        if not finder.handles(location):
            continue
        ask = getattr(finder, "problems", None)
        if ask is not None:
            found.extend(ask(episode))
        if finder.find(episode):
            break
    return found


def open(ref: SnapshotRef) -> Snapshot:
    """Open and validate the snapshot ``ref`` points at (the reference knows how).

    Raises:
        SnapshotError: When the snapshot is missing, malformed or unsafe (the message names it and why).
    """
    return ref.open()


def for_step(episode: model.Episode, step: int) -> Snapshot:
    """The opened snapshot of step ``step`` of ``episode``.

    Raises:
        LookupError: When no snapshot was recorded for that step.
        SnapshotError: When it is unreadable.
    """
    for ref in find(episode):
        if ref.step_index == step:
            return ref.open()
    raise LookupError(f"episode {episode.episode_id} has no snapshot for step {step}")
