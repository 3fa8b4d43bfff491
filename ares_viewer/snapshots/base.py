"""What every kind of container snapshot is: entries, errors, and the declared interface readers rely on.

Two kinds of snapshot record a task container's filesystem at one step of an episode (``docs/snapshots.md``):
ares-viewer's per-step snapshots (:mod:`.per_step`: changes against the base image, plus the base versions
of the touched paths) and ARES's episode-boundary snapshots (:mod:`.episode_boundary`: a whole-filesystem
copy, no base image). Both implement :class:`Snapshot`; only per-step ones are :class:`BaseReads` and
:class:`Restorable`, capabilities asked for with :func:`with_base` and :func:`restorable`. Where one is found
without opening it, it is a :class:`SnapshotRef`, and a :class:`Finder` finds the references of an episode.
Code outside this package uses only these protocols: it never asks which kind it holds, only what it can do.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol, TypeGuard, runtime_checkable

from ares_viewer.base import settings
from ares_viewer.runs.sources import SNAPSHOTS_DIRNAME as SNAPSHOTS_DIRNAME

if TYPE_CHECKING:
    from ares_viewer import model

# SNAPSHOTS_DIRNAME: the folder of a run that holds its snapshots (per-step ones, and episode-boundary ones by
# convention); a companion folder of the run, which its listing does not walk (``sources.COMPANION_FOLDERS``).

# Entry types. "absent" only appears on the base side: the path does not exist in the base image.
FILE = "file"
DIR = "dir"
SYMLINK = "symlink"
DELETED = "deleted"
ABSENT = "absent"
OTHER = "other"  # fifo, socket or device node inside the container: recorded, never stored
ENTRY_TYPES = frozenset({FILE, DIR, SYMLINK, DELETED, ABSENT, OTHER})
CHANGES = frozenset({"added", "modified", "deleted"})

# The most bytes of file content one call materializes (a restore's archive, ``read_many``): checked before
# anything is read. ``ARES_VIEWER_SNAPSHOT_MAX_BYTES`` changes it for the process; a restore uses
# ``container.ResourceLimits.restore_max_bytes`` (the same figure by default).
DEFAULT_MAX_READ_BYTES = settings.SNAPSHOT_MAX_BYTES.default
MAX_READ_BYTES_ENV = settings.SNAPSHOT_MAX_BYTES.name


def max_read_bytes() -> int:
    """The budget of bytes one snapshot call may materialize (``ARES_VIEWER_SNAPSHOT_MAX_BYTES``, or 2 GiB)."""
    return settings.SNAPSHOT_MAX_BYTES.get()


def check_budget(snapshot: str | os.PathLike[str], total: int, max_bytes: int | None, what: str) -> None:
    """Raise :class:`SnapshotError` when ``total`` bytes is over ``max_bytes`` (default :func:`max_read_bytes`)."""
    budget = max_read_bytes() if max_bytes is None else max_bytes
    if total > budget:
        raise SnapshotError(snapshot, f"{what} {total} bytes of file content, over the budget of {budget} bytes "
                                      "(raise it: ARES_VIEWER_RESTORE_MAX_BYTES or ResourceLimits.restore_max_bytes "
                                      f"for a restore, {MAX_READ_BYTES_ENV} otherwise)")


# A manifest or header file larger than this is refused unread.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_PATH_CHARS = 4096
# The folder name of content held in memory (a live container's state), never a folder on disk.
LIVE_FOLDER = "live"


class SnapshotError(Exception):
    """A snapshot that cannot be read safely or is inconsistent.

    Attributes:
        path: The snapshot folder (or file) at fault.
        reason: What is wrong with it, in words a user can act on.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"snapshot {self.path}: {reason}")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One path of a snapshot.

    Attributes:
        path: Absolute, normalized path inside the container.
        type: One of ``file``, ``dir``, ``symlink``, ``deleted``, ``absent`` (base only) or ``other``.
        mode: Permission bits (``st_mode & 0o7777``), or None for deleted/absent paths.
        size: Content size in bytes for files.
        sha256: Hex digest of a file's content.
        link_target: The symlink's target, verbatim (may be relative or point anywhere in the container).
        change: The engine's change kind relative to the base image: ``added``, ``modified`` or ``deleted``;
            None in the base manifest.
        stored_in: Folder of the episode's snapshot directory whose ``blobs.tar.gz`` holds the content
            (``base`` or ``step_NNNN``); None when the content was not stored.
        note: Why content is missing, when it is (for example a file over the capture size limit).
        mtime: Modification time (unix seconds) when the capture recorded it; older snapshots have none, and a
            restore then uses the snapshot's capture time.
    """

    path: str
    type: str
    mode: int | None = None
    size: int | None = None
    sha256: str | None = None
    link_target: str | None = None
    change: str | None = None
    stored_in: str | None = None
    note: str | None = None
    mtime: int | None = None

    def same_state(self, other: Entry | None) -> bool:
        """Whether two entries describe the same filesystem state (ignoring where content is stored)."""
        if other is None:
            return False
        return (self.type, self.mode, self.sha256, self.link_target) == (
            other.type,
            other.mode,
            other.sha256,
            other.link_target,
        )

    def to_json(self) -> dict[str, Any]:
        """The manifest form: None fields and the path (the manifest key) are left out."""
        out = dataclasses.asdict(self)
        del out["path"]
        return {key: value for key, value in out.items() if value is not None}


class _Step(Protocol):
    """Which step of which episode a snapshot or its ref is, and where it lives: what both declare."""

    @property
    def path(self) -> str: ...

    @property
    def episode_id(self) -> str: ...

    @property
    def step_index(self) -> int: ...


@runtime_checkable
class Snapshot(_Step, Protocol):
    """An opened snapshot of one step: the container's filesystem after that step, readable without Docker.

    What every kind does. What only some kinds can do is a capability of its own, asked for with
    :func:`with_base` (:class:`BaseReads`: the base image's versions of the touched paths) and
    :func:`restorable` (:class:`Restorable`: the recorded changes as an archive to put into a container).

    Attributes:
        path: Where it was read from (a folder, or a description for one held in memory).
        episode_id: The episode it belongs to ("" when opened by path and the snapshot does not say).
        step_index: The step it records (0 = the initial state, k = after action k ran).
        base_image: The image reference the container ran on ("" when unknown).
        image_id: That image's content id, when recorded.
        workdir: The task's working directory; relative paths are read from there.
        created_at: ISO-8601 time of the capture, when recorded.
        entries: The paths it records, keyed by absolute path (changes for a per-step snapshot, every path
            for a whole-filesystem copy).
        records_base: Whether the base image's versions of the touched paths are part of it: the capability
            flag behind :func:`with_base` and :func:`restorable`. When False, compare it with another step,
            and compare it with its image before restoring it.
    """

    @property
    def base_image(self) -> str: ...

    @property
    def image_id(self) -> str | None: ...

    @property
    def workdir(self) -> str: ...

    @property
    def created_at(self) -> str | None: ...

    @property
    def entries(self) -> Mapping[str, Entry]: ...

    @property
    def records_base(self) -> bool: ...

    def stat(self, path: str) -> Entry | None:
        """The state of ``path`` at this step (None: unchanged from the base image and not recorded)."""

    def read(self, path: str) -> bytes | None:
        """A regular file's content at this step (None when it is not a readable, recorded regular file)."""

    def changed_since(self, before: Snapshot | None) -> list[str]:
        """Sorted paths whose state differs from ``before`` (None: the base image) to this snapshot.

        Raises:
            LookupError: When ``before`` is None and the snapshot records no base image.
        """

    def same_state_as(self, before: Snapshot | None, path: str) -> bool:
        """Whether ``path`` is in the same state in ``before`` (None: the base image) and here."""

    def changed_paths(self, *, include_dirs: bool = False) -> list[str]:
        """Sorted paths it records as present (folders only on request)."""

    def deleted_paths(self) -> list[str]:
        """Sorted paths it records as deleted relative to the base image."""

    def digests(self) -> dict[str, str]:
        """The sha256 of every readable regular file it records, by path."""

    def read_many(self, paths: Iterable[str], *, max_bytes: int | None = None) -> dict[str, bytes]:
        """The content of several regular files at once; paths that are not readable files here are left out.
        Refused (SnapshotError) before reading when their total is over ``max_bytes`` (:func:`max_read_bytes`)."""

    def validate(self) -> None:
        """Check everything it would read now rather than on first read (raises SnapshotError)."""

    def check_restorable(self, *, max_bytes: int | None = None) -> None:
        """Read and check everything a restore needs, before any engine is contacted (raises SnapshotError,
        also when the restore would write more than ``max_bytes``). A snapshot that is not :class:`Restorable`
        itself checks what making it restorable needs (a whole-filesystem copy: that it names its image)."""


@runtime_checkable
class BaseReads(Snapshot, Protocol):
    """A snapshot that records the base image's versions of the paths it touches, so it compares with the base
    image (``changed_since(None)``). Ask for it with :func:`with_base`."""

    @property
    def records_base(self) -> Literal[True]: ...

    def stat_base(self, path: str) -> Entry | None:
        """The state of ``path`` in the base image (None when not recorded)."""

    def read_base(self, path: str) -> bytes | None:
        """A regular file's content in the base image (None when not recorded there)."""


@runtime_checkable
class Restorable(BaseReads, Protocol):
    """A snapshot whose recorded changes against its base image can be put into a container (what
    ``container.restore_container`` takes). Ask for it with :func:`restorable`; a snapshot that is not one is
    compared with its image first (``container.as_changes``)."""

    def restore_bytes(self) -> int:
        """The bytes of file content a restore of it writes (a blob referenced by N paths counts N times)."""

    def to_archive(self, *, max_bytes: int | None = None) -> bytes:
        """Its recorded changes as a tar named relative to ``/`` (raises SnapshotError when it records none)."""

    def write_archive(self, out: IO[bytes], *, max_bytes: int | None = None) -> int:
        """The tar of :meth:`to_archive` streamed to ``out`` after a budget check; returns the content bytes."""


def with_base(snapshot: Snapshot) -> BaseReads:
    """``snapshot`` as the reader of its base image's versions (:class:`BaseReads`).

    Raises:
        LookupError: When it records no base image (a whole-filesystem copy): compare it with another step.
    """
    if not (snapshot.records_base and isinstance(snapshot, BaseReads)):
        raise LookupError(f"snapshot {snapshot.path} records no base image: compare it with another step")
    return snapshot


def restorable(snapshot: Snapshot) -> TypeGuard[Restorable]:
    """Whether ``snapshot``'s recorded changes can be put into a container as they are (:class:`Restorable`)."""
    return snapshot.records_base and isinstance(snapshot, Restorable)


@runtime_checkable
class SnapshotRef(_Step, Protocol):
    """Where one step's snapshot lives, found without opening it; :meth:`open` opens it (whatever its kind)."""

    @property
    def records_base(self) -> bool: ...

    def open(self) -> Snapshot:
        """Open and validate the snapshot (raises SnapshotError)."""


class Finder(Protocol):
    """One way snapshots are recorded next to episodes (registered with ``snapshots.register_finder``).

    A finder that must read something to link a snapshot to a step may also define
    ``problems(episode) -> list[SnapshotError]``: the snapshots it could not read for that (asked by
    ``snapshots.problems``).

    Attributes:
        name: What it finds, in words (for logs and errors).
    """

    name: str

    def handles(self, location: str) -> bool:
        """Whether snapshots of this kind can exist for an episode file at ``location`` (cheap: no reading)."""

    def find(self, episode: model.Episode) -> Sequence[SnapshotRef]:
        """The episode's snapshots of this kind, sorted by step (empty when there are none)."""


def parents(path: str) -> Iterable[str]:
    """The folders above an absolute container path, nearest first (``/`` left out)."""
    parent = posixpath.dirname(path)
    while parent not in {"/", ""}:
        yield parent
        parent = posixpath.dirname(parent)


def absolute(workdir: str, path: str) -> str:
    """``path`` as an absolute normalized container path (relative paths are taken from ``workdir``)."""
    if not path.startswith("/"):
        path = posixpath.join(workdir, path)
    return posixpath.normpath(path)
