"""Per-step container snapshots: the on-disk layout and a safe reader (writing is :mod:`.per_step_writer`).

A snapshot records how a task container's filesystem differs from its base image after one step of an
episode, plus the base image's own versions of every touched path, so that the files at any step (and at
the base) can be read and diffed without a Docker daemon. The layout is documented in ``docs/snapshots.md``::

    <run>/<episode_id>.json                     the episode file
    <run>/snapshots/<episode_id>/base/          manifest.json + blobs.tar.gz: base versions of touched paths
    <run>/snapshots/<episode_id>/step_0000/     manifest.json + blobs.tar.gz: state after step 0
    <run>/snapshots/<episode_id>/step_0001/     ...

Every input is untrusted. Archives are never extracted onto the filesystem (see :mod:`.tar_safety`), and a
malformed manifest raises :class:`SnapshotError` naming the snapshot and the reason. This module imports no
Docker code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import io
import json
import logging
import os
import pathlib
import posixpath
import re
import tarfile
import threading
import types
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

from ares_viewer.base import locations
from ares_viewer.base.cache import BoundedCache
from ares_viewer.runs import companions
from ares_viewer.snapshots import mirror
from ares_viewer.snapshots.base import (
    ABSENT,
    CHANGES,
    DELETED,
    DIR,
    ENTRY_TYPES,
    FILE,
    LIVE_FOLDER,
    MAX_MANIFEST_BYTES,
    MAX_PATH_CHARS,
    SNAPSHOTS_DIRNAME,
    SYMLINK,
    Entry,
    Snapshot,
    SnapshotError,
    absolute,
    check_budget,
    parents,
)
from ares_viewer.snapshots.spool import SpooledBlobs
from ares_viewer.snapshots.tar_safety import SHA256_RE, scan_archive

if TYPE_CHECKING:
    from ares_viewer import model

_LOGGER = logging.getLogger(__name__)

BASE_DIRNAME = companions.SNAPSHOT_BASE_DIRNAME
MANIFEST_NAME = companions.SNAPSHOT_MANIFEST
BLOBS_NAME = "blobs.tar.gz"
STEP_FORMAT = "ares-viewer.step-snapshot/1"
BASE_FORMAT = "ares-viewer.base-snapshot/1"

_STEP_DIR_RE = companions.SNAPSHOT_STEP_DIR_RE
_STORED_IN_RE = re.compile(r"^(base|step_\d{1,9})$")
# Episode ids come from untrusted files and become folder names: keep them to one plain path component.
_EPISODE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


@dataclasses.dataclass(frozen=True)
class StepRef:
    """Where a per-step snapshot lives, found without opening it (a :class:`~.base.SnapshotRef`).

    Attributes:
        path: The step folder (``.../snapshots/<episode_id>/step_NNNN``).
        episode_id: The episode it belongs to.
        step_index: The step it records (0 = the initial state, k = after action k ran).
    """

    path: str
    episode_id: str
    step_index: int

    @property
    def records_base(self) -> bool:
        return True

    def open(self) -> StepSnapshot:
        return open_step(self)


class _Archive:
    """One blob archive, indexed and validated lazily: on the first content read, never at open.

    Opening a snapshot only checks that its archives exist; the first read scans every member (rejecting
    anything but plain, bounded content blobs, and truncation) before any content is returned. The member
    index is kept, and so is the decompressed archive when it is small, so later reads need no reopening.
    """

    def __init__(self, path: str, folder: str) -> None:
        self.path = path
        self.folder = folder
        self._lock = threading.Lock()
        self._members: dict[str, tarfile.TarInfo] | None = None
        self._data: bytes | None = None

    def members(self, snapshot: str) -> Mapping[str, tarfile.TarInfo]:
        """The validated member index (scanned on first use; ``snapshot`` names the culprit in errors)."""
        with self._lock:
            if self._members is None:
                self._members, self._data = scan_archive(pathlib.Path(snapshot), pathlib.Path(self.path))
            return self._members

    def read(self, snapshot: str, member: tarfile.TarInfo) -> bytes:
        if self._data is not None:
            return self._data[member.offset_data : member.offset_data + member.size]
        with tarfile.open(self.path, "r:*") as tar:
            handle = tar.extractfile(member)
            return handle.read(member.size + 1) if handle is not None else b""

    @contextlib.contextmanager
    def open(self, member: tarfile.TarInfo) -> Iterator[IO[bytes]]:
        """A member's content as a stream (the archive is reopened for it unless it is held in memory)."""
        if self._data is not None:
            yield io.BytesIO(memoryview(self._data)[member.offset_data : member.offset_data + member.size])
            return
        with tarfile.open(self.path, "r:*") as tar:
            handle = tar.extractfile(member)
            yield handle if handle is not None else io.BytesIO()


class _MemoryArchive:
    """Content read by the capture helper (a live container's state): held in memory, or spooled to a temporary
    file (:class:`~.spool.SpooledBlobs`); nothing to validate."""

    def __init__(self, blobs: Mapping[str, bytes]) -> None:
        self.path = "<memory>"
        self.folder = LIVE_FOLDER
        self._blobs: Mapping[str, bytes] = blobs if isinstance(blobs, SpooledBlobs) else dict(blobs)
        self._members = {}
        for digest in self._blobs:
            info = tarfile.TarInfo(digest)
            spooled = isinstance(self._blobs, SpooledBlobs)
            info.size = self._blobs.size(digest) if spooled else len(self._blobs[digest])  # type: ignore[attr-defined]
            self._members[digest] = info

    def members(self, snapshot: str) -> Mapping[str, tarfile.TarInfo]:
        return self._members

    def read(self, snapshot: str, member: tarfile.TarInfo) -> bytes:
        return self._blobs[member.name]

    @contextlib.contextmanager
    def open(self, member: tarfile.TarInfo) -> Iterator[IO[bytes]]:
        if isinstance(self._blobs, SpooledBlobs):
            with self._blobs.open(member.name) as stream:
                yield stream
        else:
            yield io.BytesIO(self._blobs[member.name])


@dataclasses.dataclass(frozen=True)
class StepSnapshot:
    """A validated, opened per-step snapshot (a :class:`~.base.Snapshot`). Reading needs no Docker daemon.

    Attributes:
        path: The step folder.
        episode_id: The episode it belongs to.
        step_index: The step it records.
        base_image: The image reference the container was created from.
        image_id: The base image's content id (``sha256:...``).
        workdir: The task's working directory inside the container.
        created_at: ISO-8601 UTC time of the capture.
        entries: Every path that differs from the base image at this step (cumulative, not relative to
            the previous step), keyed by absolute path.
        base_entries: The base image's versions of every path touched anywhere in the episode.
    """

    path: str
    episode_id: str
    step_index: int
    base_image: str
    image_id: str | None
    workdir: str
    created_at: str | None
    entries: Mapping[str, Entry]
    base_entries: Mapping[str, Entry]
    _archives: Mapping[str, _Archive | _MemoryArchive] = dataclasses.field(repr=False, compare=False)
    _checked: set[str] = dataclasses.field(default_factory=set, repr=False, compare=False)

    def stat(self, path: str) -> Entry | None:
        """The state of ``path`` at this step.

        Args:
            path: Absolute container path, or a path relative to :attr:`workdir`.

        Returns:
            The step's entry when the path changed; a synthesized ``deleted`` entry when a parent folder was
            deleted; else the base entry (``absent`` when the base image has no such path); None when the
            path is unchanged from the base image and its base version was not recorded.
        """
        path = self._absolute(path)
        entry = self.entries.get(path)
        if entry is not None:
            return entry
        for parent in parents(path):
            parent_entry = self.entries.get(parent)
            if parent_entry is not None and parent_entry.type == DELETED:
                return Entry(path=path, type=DELETED, change="deleted")
        return self.base_entries.get(path)

    def read(self, path: str) -> bytes | None:
        """The content of a regular file at this step.

        Returns:
            The bytes when ``path`` is a regular file whose content is known at this step (changed content,
            or the recorded base version when unchanged). None otherwise: see :meth:`stat` for why (not a
            file, deleted, absent, unchanged and not recorded, or too large to have been stored).
        """
        return self._content(self.stat(path))

    def read_base(self, path: str) -> bytes | None:
        """The base image's content of ``path``, or None when it is not a recorded regular file there."""
        return self._content(self.base_entries.get(self._absolute(path)))

    def changed_paths(self, *, include_dirs: bool = False) -> list[str]:
        """Sorted paths added or modified relative to the base image (folders only on request)."""
        return sorted(
            path
            for path, entry in self.entries.items()
            if entry.type != DELETED and (include_dirs or entry.type != DIR)
        )

    def deleted_paths(self) -> list[str]:
        """Sorted paths deleted relative to the base image (a deleted folder stands for its contents)."""
        return sorted(path for path, entry in self.entries.items() if entry.type == DELETED)

    def to_archive(self, *, max_bytes: int | None = None) -> bytes:
        """A tar (in memory) of this step's added and modified paths, named relative to ``/``.

        Together with :meth:`deleted_paths` it restores the step onto a container of :attr:`base_image`
        (``container.put_archive("/", data)`` after removing the deleted paths). A restore streams the same tar
        through a file instead: :meth:`write_archive`.
        """
        buffer = io.BytesIO()
        self.write_archive(buffer, max_bytes=max_bytes)
        return buffer.getvalue()

    def restore_bytes(self) -> int:
        """The bytes of file content a restore writes: every restored file's size (one blob referenced by N
        paths counts N times, as N files are written)."""
        return sum(entry.size or 0 for entry in self.entries.values() if entry.type == FILE and entry.stored_in)

    def write_archive(self, out: IO[bytes], *, max_bytes: int | None = None) -> int:
        """Write the tar of :meth:`to_archive` to ``out`` as a stream; return the bytes of content written.

        The total is checked against ``max_bytes`` (default :data:`~.base.max_read_bytes`) before anything is
        read, and each file is streamed from its archive with its sha256 checked on the way: one blob is never
        held in memory more than a chunk at a time, however many paths reference it.

        Raises:
            SnapshotError: When the total is over the budget, or a file's content is missing or altered.
        """
        check_budget(self.path, self.restore_bytes(), max_bytes, "restoring it writes")
        # Paths whose modification time was not recorded get the capture time: closer to what the agent saw
        # (``ls -l``, make, gzip headers) than the epoch.
        fallback_mtime = _unix_time(self.created_at)
        written = 0
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            # Folders first, so their modes apply before their contents land.
            ordered = sorted(self.entries.values(), key=lambda e: (e.type != DIR, e.path))
            for entry in ordered:
                info = tarfile.TarInfo(entry.path.lstrip("/"))
                info.mode = entry.mode if entry.mode is not None else 0o644
                info.mtime = entry.mtime if entry.mtime is not None else fallback_mtime
                if entry.type == DIR:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif entry.type == SYMLINK:
                    info.type = tarfile.SYMTYPE
                    info.linkname = entry.link_target or ""
                    tar.addfile(info)
                elif entry.type == FILE:
                    if entry.stored_in is None or entry.sha256 is None:
                        _LOGGER.warning("%s: %s has no stored content; not restored", self.path, entry.path)
                        continue
                    with self._open_content(entry) as (member, handle):
                        info.size = member.size
                        hashing = _Hashing(handle)
                        try:
                            tar.addfile(info, hashing)
                        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                            raise SnapshotError(self.path, f"cannot read {entry.path}: {exc}") from exc
                        if hashing.digest() != entry.sha256:
                            raise SnapshotError(self.path, f"content of {entry.path} does not match its sha256")
                    written += member.size
        return written

    @contextlib.contextmanager
    def _open_content(self, entry: Entry) -> Iterator[tuple[tarfile.TarInfo, IO[bytes]]]:
        archive = self._archives.get(entry.stored_in or "")
        if archive is None:
            raise SnapshotError(self.path, f"{entry.path} is stored in {entry.stored_in!r}, which it cannot read")
        member = self._members(entry.stored_in or "")[entry.sha256 or ""]
        try:
            with archive.open(member) as handle:
                yield member, handle
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise SnapshotError(self.path, f"cannot read {entry.path} from {archive.path}: {exc}") from exc

    def _absolute(self, path: str) -> str:
        return absolute(self.workdir, path)

    @property
    def records_base(self) -> bool:
        """Always True: a per-step snapshot records the base image's versions of every path it touches."""
        return True

    def stat_base(self, path: str) -> Entry | None:
        """The base image's entry of ``path`` (``absent`` when not there; None when not recorded)."""
        return self.base_entries.get(self._absolute(path))

    def changed_since(self, before: Snapshot | None) -> list[str]:
        """Sorted paths whose state differs from ``before`` (None: the base image); see :func:`changed_between`."""
        return changed_between(before, self)

    def same_state_as(self, before: Snapshot | None, path: str) -> bool:
        """Whether ``path`` is in the same state in ``before`` (None: the base image) and here."""
        old = before.stat(path) if before is not None else self.stat_base(path)
        new = self.stat(path)
        return (old is None and new is None) or (new is not None and new.same_state(old))

    def digests(self) -> dict[str, str]:
        """The sha256 of every regular file whose content is stored, by path."""
        return {p: e.sha256 for p, e in self.entries.items() if e.type == FILE and e.stored_in and e.sha256}

    def read_many(self, paths: Iterable[str], *, max_bytes: int | None = None) -> dict[str, bytes]:
        """The content of several regular files; paths whose content is not stored here are left out.

        Raises:
            SnapshotError: When their total size is over ``max_bytes`` (default :data:`~.base.max_read_bytes`),
                checked before anything is read.
        """
        paths = list(paths)
        sizes = (self.stat(path) for path in paths)
        check_budget(self.path, sum(e.size or 0 for e in sizes if e is not None and e.type == FILE and e.stored_in),
                     max_bytes, "reading these files takes")
        found = {}
        for path in paths:
            data = self.read(path)
            if data is not None:
                found[path] = data
        return found

    def check_restorable(self, *, max_bytes: int | None = None) -> None:
        """Read and check every stored file a restore applies (and every archive it reads), streamed, not kept."""
        self.validate()
        self.write_archive(_Discard(), max_bytes=max_bytes)

    def validate(self) -> None:
        """Scan every archive this snapshot reads now, rather than on first read.

        Raises:
            SnapshotError: When an archive is corrupt, truncated, holds anything but plain content blobs, or
                lacks content the manifests point at.
        """
        for folder in self._archives:
            self._members(folder)

    def _members(self, folder: str) -> Mapping[str, tarfile.TarInfo]:
        members = self._archives[folder].members(self.path)
        if folder not in self._checked:
            # Every entry pointing into this archive must find its blob there, with the size the manifest says:
            # checked once per archive, so a missing blob is reported whichever file is read first.
            for entry in (*self.entries.values(), *self.base_entries.values()):
                if entry.stored_in != folder:
                    continue
                member = members.get(entry.sha256 or "")
                if member is None:
                    raise SnapshotError(self.path, f"content of {entry.path} is missing from {folder}/{BLOBS_NAME}")
                if member.size != entry.size:
                    raise SnapshotError(
                        self.path, f"content of {entry.path} has {member.size} bytes, manifest says {entry.size}"
                    )
            self._checked.add(folder)
        return members

    def _content(self, entry: Entry | None) -> bytes | None:
        if entry is None or entry.type != FILE or entry.stored_in is None or entry.sha256 is None:
            return None
        archive = self._archives.get(entry.stored_in)
        if archive is None:
            raise SnapshotError(self.path, f"{entry.path} is stored in {entry.stored_in!r}, which it cannot read")
        member = self._members(entry.stored_in)[entry.sha256]
        try:
            data = archive.read(self.path, member)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise SnapshotError(self.path, f"cannot read {entry.path} from {archive.path}: {exc}") from exc
        if len(data) != member.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise SnapshotError(self.path, f"content of {entry.path} in {archive.path} does not match its sha256")
        return data


# ----- discovery and opening ------------------------------------------------------------------------------------


def episode_snapshots_dir(run_dir: str | os.PathLike[str], episode_id: str) -> pathlib.Path:
    """The folder holding an episode's snapshots: ``<run_dir>/snapshots/<episode_id>``.

    Raises:
        ValueError: When ``episode_id`` is not a single safe path component.
    """
    if not _EPISODE_ID_RE.match(episode_id or "") or episode_id in {".", ".."}:
        raise ValueError(f"episode id {episode_id!r} cannot name a snapshot folder")
    return pathlib.Path(run_dir) / SNAPSHOTS_DIRNAME / episode_id


def step_dirname(step_index: int) -> str:
    """The folder name of step ``step_index``'s snapshot."""
    return f"step_{step_index:04d}"


def find_for_episode(episode_path: str | os.PathLike[str], episode_id: str) -> list[StepRef]:
    """The step snapshots recorded for an episode, sorted by step (empty when there are none).

    Looks in ``snapshots/<episode_id>/`` beside the episode file. Only folder names are read here; open a
    reference with :func:`open_step` to validate and read it. For a run read through fsspec the folder is
    first mirrored into the local cache (see ``_remote_steps``).

    Args:
        episode_path: The episode file (``<run>/<episode_id>.json``).
        episode_id: The episode's id as written inside the file.
    """
    if not locations.is_local(episode_path):
        key = (os.fspath(episode_path), episode_id)
        return list(_REMOTE_SEEN.get_or_compute(key, lambda: _remote_steps(*key)))
    try:
        folder = episode_snapshots_dir(pathlib.Path(episode_path).parent, episode_id)
    except ValueError:
        # Normal for formats whose ids are paths (Tinker's "run/it10/train/g1/t3"): such episodes have no
        # per-step snapshot folders.
        _LOGGER.debug("episode %r: id is not usable as a folder name; no per-step snapshots looked up", episode_id)
        return []
    return list_steps(folder)


# A remote run's snapshot listing is asked for again after a minute (each page view asks for it).
_REMOTE_SEEN: BoundedCache[list[StepRef]] = BoundedCache(maxsize=256, ttl=60.0)


def _remote_steps(episode_url: str, episode_id: str) -> list[StepRef]:
    """The step snapshots of an episode read through fsspec (``s3://``, ``gs://``, ``memory://``...).

    The episode's snapshot folder is mirrored into the local cache (:func:`.mirror.mirror_remote`), never into
    the run, and read from there like a local one.
    """
    try:
        fs, path, local = mirror.url_to_fs(episode_url)
        if local:
            return find_for_episode(path, episode_id)
        remote = posixpath.join(posixpath.dirname(path), SNAPSHOTS_DIRNAME,
                                episode_snapshots_dir(".", episode_id).name)
        if not fs.isdir(remote):
            return []
    except ValueError:
        return []  # an id that cannot name a folder: no per-step snapshots (see find_for_episode)
    except OSError as exc:
        _LOGGER.warning("%s: cannot list its snapshots (%s)", episode_url, exc)
        return []
    copy = mirror.mirror_remote(fs, remote, "remote-snapshots", episode_id)
    return list_steps(copy) if copy is not None else []



def list_steps(episode_dir: str | os.PathLike[str]) -> list[StepRef]:
    """The step snapshots in one episode's snapshot folder (``<run>/snapshots/<episode_id>``), sorted by step."""
    folder = pathlib.Path(episode_dir)
    episode_id = folder.name
    if not folder.is_dir():
        return []
    refs: dict[int, StepRef] = {}
    for child in sorted(folder.iterdir()):
        match = _STEP_DIR_RE.match(child.name)
        if match is None or not child.is_dir() or child.is_symlink():
            continue
        index = int(match.group(1))
        if index in refs:
            _LOGGER.warning("%s: two folders for step %d; keeping %s", folder, index, refs[index].path)
            continue
        refs[index] = StepRef(path=str(child), episode_id=episode_id, step_index=index)
    return [refs[index] for index in sorted(refs)]


def open_step(ref_or_path: StepRef | str | os.PathLike[str]) -> StepSnapshot:
    """Open and validate one per-step snapshot.

    Args:
        ref_or_path: A :class:`StepRef` or the step folder's path.

    Raises:
        SnapshotError: When a piece is missing, a manifest is malformed, or an archive is corrupt, truncated
            or holds anything other than plain content blobs.
    """
    if isinstance(ref_or_path, StepRef):
        step_dir = pathlib.Path(ref_or_path.path)
        expected: tuple[str, int] | None = (ref_or_path.episode_id, ref_or_path.step_index)
    else:
        step_dir = pathlib.Path(ref_or_path)
        expected = None
    if not step_dir.is_dir():
        raise SnapshotError(step_dir, "the snapshot folder does not exist")
    episode_dir = step_dir.parent

    manifest = _load_manifest(step_dir, step_dir / MANIFEST_NAME, STEP_FORMAT)
    episode_id = _field(step_dir, manifest, "episode_id", str)
    step_index = _field(step_dir, manifest, "step_index", int)
    base_image = _field(step_dir, manifest, "base_image", str)
    image_id = _field(step_dir, manifest, "image_id", str, optional=True)
    workdir = _field(step_dir, manifest, "workdir", str)
    created_at = _field(step_dir, manifest, "created_at", str, optional=True)
    match = _STEP_DIR_RE.match(step_dir.name)
    if match is None or int(match.group(1)) != step_index:
        raise SnapshotError(step_dir, f"manifest says step {step_index} but the folder is named {step_dir.name!r}")
    if episode_dir.name != episode_id:
        raise SnapshotError(
            step_dir, f"manifest says episode {episode_id!r} but it is filed under {episode_dir.name!r}"
        )
    if expected is not None and expected != (episode_id, step_index):
        raise SnapshotError(step_dir, f"expected episode {expected[0]!r} step {expected[1]}")
    if not _is_clean_path(workdir):
        raise SnapshotError(step_dir, f"workdir {workdir!r} is not an absolute normalized path")
    entries = _parse_entries(step_dir, manifest, base=False)

    base_dir = episode_dir / BASE_DIRNAME
    base_manifest, base_entries = _load_base(step_dir, base_dir / MANIFEST_NAME)
    if _field(step_dir, base_manifest, "episode_id", str) != episode_id:
        raise SnapshotError(step_dir, "base/manifest.json belongs to another episode")
    if _field(step_dir, base_manifest, "base_image", str) != base_image or (
        image_id is not None and _field(step_dir, base_manifest, "image_id", str, optional=True) != image_id
    ):
        raise SnapshotError(step_dir, "base/manifest.json records another base image")

    # Every folder whose archive holds content this snapshot can read, plus the step's own archive.
    needed = {e.stored_in for e in (*entries.values(), *base_entries.values()) if e.stored_in is not None}
    if (step_dir / BLOBS_NAME).exists():
        needed.add(step_dir.name)
    # Archives are only located here; their members are scanned on first read (see _Archive).
    archives: dict[str, _Archive | _MemoryArchive] = {}
    for folder in sorted(needed):
        archive_path = episode_dir / folder / BLOBS_NAME
        if not archive_path.is_file():
            raise SnapshotError(step_dir, f"missing {folder}/{BLOBS_NAME}")
        archives[folder] = _Archive(str(archive_path), folder)

    return StepSnapshot(
        path=str(step_dir),
        episode_id=episode_id,
        step_index=step_index,
        base_image=base_image,
        image_id=image_id,
        workdir=workdir,
        created_at=created_at,
        entries=types.MappingProxyType(entries),
        base_entries=base_entries,
        _archives=types.MappingProxyType(archives),
    )


def live_snapshot(
    recorded: StepSnapshot,
    entries: Iterable[Entry],
    blobs: Mapping[str, bytes],
    *,
    step_index: int | None = None,
    created_at: str | None = None,
    also: Iterable[StepSnapshot] = (),
) -> StepSnapshot:
    """A snapshot held in memory: a live container's state, comparable with the recorded steps of its episode.

    It shares ``recorded``'s base image, base entries and archives (so base versions stay readable) and keeps
    its own content in memory; nothing is written anywhere. ``fsdiff.diff_snapshots(recorded, live)`` then
    lists where the live container differs from the recording.

    Args:
        recorded: Any opened step snapshot of the same episode.
        entries: Every path differing from the base image now; stored content has ``stored_in=LIVE_FOLDER``.
        blobs: sha256 hex -> content for those entries.
        step_index: The step this state stands for (default: ``recorded``'s).
        created_at: ISO-8601 UTC time of the capture (default: now).
        also: Other snapshots of the episode whose stored content ``entries`` may refer to.
    """
    archives = {}
    for source in (*also, recorded):
        archives.update(source._archives)
    return memory_snapshot(
        f"{recorded.path} (live)",
        episode_id=recorded.episode_id,
        step_index=recorded.step_index if step_index is None else step_index,
        base_image=recorded.base_image,
        image_id=recorded.image_id,
        workdir=recorded.workdir,
        entries=entries,
        base_entries=recorded.base_entries,
        blobs=blobs,
        created_at=created_at,
        archives=archives,
    )


def memory_snapshot(
    path: str,
    *,
    episode_id: str,
    step_index: int,
    base_image: str,
    image_id: str | None,
    workdir: str,
    entries: Iterable[Entry],
    base_entries: Mapping[str, Entry],
    blobs: Mapping[str, bytes],
    created_at: str | None = None,
    archives: Mapping[str, _Archive | _MemoryArchive] | None = None,
) -> StepSnapshot:
    """A step snapshot held in memory: entries relative to ``base_image``, content (by sha256) in ``blobs``.

    Entries whose content is in ``blobs`` say ``stored_in=LIVE_FOLDER``; ``archives`` adds other snapshots'
    stored content that entries may refer to. Nothing is written anywhere.
    """
    readable = dict(archives or {})
    readable[LIVE_FOLDER] = _MemoryArchive(blobs)
    return StepSnapshot(
        path=path,
        episode_id=episode_id,
        step_index=step_index,
        base_image=base_image,
        image_id=image_id,
        workdir=workdir,
        created_at=created_at or utc_now(),
        entries=types.MappingProxyType({entry.path: entry for entry in entries}),
        base_entries=types.MappingProxyType(dict(base_entries)),
        _archives=types.MappingProxyType(readable),
    )


def changed_between(before: Snapshot | None, after: StepSnapshot) -> list[str]:
    """Sorted paths whose state differs between two steps of one episode (``before=None``: the base image).

    Folders are included only when their type or mode differs, never just because their contents changed.
    """
    paths = set(after.entries)
    if before is not None:
        paths |= set(before.entries)
    changed = []
    for path in paths:
        old = before.stat(path) if before is not None else after.stat_base(path)
        new = after.stat(path)
        if new is None or not new.same_state(old):
            if old is None and new is not None and new.type == DIR:
                continue
            changed.append(path)
    return sorted(changed)



def _unix_time(iso: str | None) -> int:
    """Unix seconds of an ISO-8601 time (UTC when it names no zone); 0 when missing or unreadable."""
    if not iso:
        return 0
    try:
        moment = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return max(0, int(moment.timestamp()))


def utc_now(timestamp: float | None = None) -> str:
    """ISO-8601 UTC (``...Z``) for a unix time, or for now."""
    moment = (
        datetime.datetime.now(datetime.UTC)
        if timestamp is None
        else datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    )
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ----- internals -------------------------------------------------------------------------------------------------


def _is_clean_path(path: str) -> bool:
    return (
        isinstance(path, str)
        and path.startswith("/")
        and len(path) <= MAX_PATH_CHARS
        and "\x00" not in path
        and posixpath.normpath(path) == path
        and not path.startswith("//")
    )


def _load_manifest(snapshot: pathlib.Path, path: pathlib.Path, expected_format: str) -> dict[str, Any]:
    where = path.relative_to(snapshot.parent) if path.is_relative_to(snapshot.parent) else path
    if not path.is_file():
        raise SnapshotError(snapshot, f"missing {where}")
    size = path.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise SnapshotError(snapshot, f"{where} is {size} bytes, over the {MAX_MANIFEST_BYTES} byte limit")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SnapshotError(snapshot, f"{where} is not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise SnapshotError(snapshot, f"{where} is nested too deeply to read") from exc
    if not isinstance(manifest, dict):
        raise SnapshotError(snapshot, f"{where} is not a JSON object")
    if manifest.get("format") != expected_format:
        raise SnapshotError(snapshot, f"{where} has format {manifest.get('format')!r}, expected {expected_format!r}")
    return manifest


def _load_base(snapshot: pathlib.Path, path: pathlib.Path) -> tuple[dict[str, Any], Mapping[str, Entry]]:
    """The base manifest's header fields and parsed entries, shared by every step of an episode.

    Every step snapshot reads the same base manifest, so a parse is reused while the file is unchanged (same
    inode, size and modification time); entries are immutable, so sharing them is safe.
    """
    try:
        info = path.stat()
        key: tuple[Any, ...] | None = (str(path), info.st_ino, info.st_size, info.st_mtime_ns)
    except OSError:
        key = None  # _load_manifest reports the missing file
    cached = _BASE_CACHE.get(key) if key is not None else None
    if cached is not None:
        return cached
    manifest = _load_manifest(snapshot, path, BASE_FORMAT)
    entries = types.MappingProxyType(_parse_entries(snapshot, manifest, base=True))
    header = {k: v for k, v in manifest.items() if k != "entries"}
    if key is not None:
        _BASE_CACHE.put(key, (header, entries))
    return header, entries


# Parsed base manifests by (file, inode, size, mtime): every step of an episode reads the same one.
_BASE_CACHE: BoundedCache[tuple[dict[str, Any], Mapping[str, Entry]]] = BoundedCache(maxsize=8)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a manifest")


def _field(snapshot: pathlib.Path, manifest: Mapping[str, Any], key: str, kind: type, *, optional: bool = False) -> Any:
    value = manifest.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SnapshotError(snapshot, f"manifest field {key!r} should be {kind.__name__}, got {value!r:.80}")
    return value


def _parse_entries(snapshot: pathlib.Path, manifest: Mapping[str, Any], *, base: bool) -> dict[str, Entry]:
    raw = manifest.get("entries")
    which = "base manifest" if base else "manifest"
    if not isinstance(raw, dict):
        raise SnapshotError(snapshot, f"{which} has no 'entries' object")
    entries = {}
    # Manifests hold tens of thousands of entries: keep the per-entry work to set and dict operations.
    fields_ok = _ENTRY_FIELDS.issuperset
    new_entry = object.__new__
    for path, fields in raw.items():
        if not _is_clean_path(path):
            raise SnapshotError(snapshot, f"{which} entry {path!r:.200} is not an absolute normalized path")
        if type(fields) is not dict or not fields_ok(fields) or "type" not in fields:
            raise SnapshotError(snapshot, f"{which} entry {path} is malformed")
        # Entry's generated __init__ sets each field through object.__setattr__ (it is frozen); filling the
        # instance dict directly gives the same object at a fraction of the cost. Fields were checked above.
        entry = new_entry(Entry)
        state = entry.__dict__
        state.update(_ENTRY_DEFAULTS)
        state.update(fields)
        state["path"] = path
        problem = _entry_problem(entry, base=base)
        if problem:
            raise SnapshotError(snapshot, f"{which} entry {path}: {problem}")
        entries[path] = entry
    return entries


_ENTRY_FIELDS = frozenset(field.name for field in dataclasses.fields(Entry)) - {"path"}
_ENTRY_DEFAULTS = {
    field.name: field.default for field in dataclasses.fields(Entry) if field.name not in {"path", "type"}
}


def _entry_problem(entry: Entry, *, base: bool) -> str | None:
    if entry.type not in ENTRY_TYPES:
        return f"unknown type {entry.type!r:.40}"
    if entry.type == ABSENT and not base:
        return "only the base manifest can hold absent paths"
    if base and entry.type == DELETED:
        return "the base cannot hold deleted paths"
    if entry.path == "/" and entry.type != DIR:
        return "the root folder can only be a folder"
    if entry.mode is not None and (not isinstance(entry.mode, int) or not 0 <= entry.mode <= 0o7777):
        return f"bad mode {entry.mode!r}"
    if entry.size is not None and (not isinstance(entry.size, int) or entry.size < 0):
        return f"bad size {entry.size!r}"
    if entry.sha256 is not None and not (isinstance(entry.sha256, str) and SHA256_RE.match(entry.sha256)):
        return "bad sha256"
    if entry.mtime is not None and (type(entry.mtime) is not int or entry.mtime < 0):
        return f"bad mtime {entry.mtime!r:.40}"
    if entry.link_target is not None and not isinstance(entry.link_target, str):
        return "bad link target"
    if entry.type == SYMLINK and entry.link_target is None:
        return "symlink without a target"
    if entry.change is not None and entry.change not in CHANGES:
        return f"unknown change {entry.change!r}"
    if entry.stored_in is not None:
        if not (isinstance(entry.stored_in, str) and _STORED_IN_RE.match(entry.stored_in)):
            return f"stored_in {entry.stored_in!r:.80} is not 'base' or a step folder"
        if entry.type != FILE or entry.sha256 is None or entry.size is None:
            return "stored content needs type file, a size and a sha256"
    return None


class _Hashing:
    """A file read through: the sha256 of what was read, for checking content while it streams elsewhere."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self._sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        self._sha.update(data)
        return data

    def digest(self) -> str:
        return self._sha.hexdigest()


class _Discard(io.RawIOBase):
    """A sink that keeps nothing (checking an archive's content without holding it)."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return len(data)


class StepFinder:
    """Finds ares-viewer's per-step snapshots: ``snapshots/<episode_id>/step_NNNN`` beside the episode file."""

    name = "per-step snapshots"

    def handles(self, location: str) -> bool:
        return not locations.is_local(location) or (pathlib.Path(location).parent / SNAPSHOTS_DIRNAME).is_dir()

    def find(self, episode: model.Episode) -> list[StepRef]:
        return find_for_episode(episode.path, episode.episode_id)
