"""An opened per-step snapshot (:class:`StepSnapshot`): the files at one step and the base image's versions of
the paths it touched, read from its archives (``per_step_archives.py``); snapshots held in memory for a live
container's state; and what changed between two steps. Opening one from disk is ``per_step.open_step``."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import io
import logging
import tarfile
import types
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Literal

from ares_viewer.snapshots._per_step_archives import Archive, Discard, Hashing, MemoryArchive
from ares_viewer.snapshots.base import (
    DELETED,
    DIR,
    FILE,
    LIVE_FOLDER,
    SYMLINK,
    Entry,
    Restorable,
    Snapshot,
    SnapshotError,
    absolute,
    check_budget,
    parents,
)

_LOGGER = logging.getLogger(__name__)

BLOBS_NAME = "blobs.tar.gz"


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
    _archives: Mapping[str, Archive | MemoryArchive] = dataclasses.field(repr=False, compare=False)
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
                        hashing = Hashing(handle)
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
    def records_base(self) -> Literal[True]:
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
        check_budget(
            self.path,
            sum(e.size or 0 for e in sizes if e is not None and e.type == FILE and e.stored_in),
            max_bytes,
            "reading these files takes",
        )
        found = {}
        for path in paths:
            data = self.read(path)
            if data is not None:
                found[path] = data
        return found

    def check_restorable(self, *, max_bytes: int | None = None) -> None:
        """Read and check every stored file a restore applies (and every archive it reads), streamed, not kept."""
        self.validate()
        self.write_archive(Discard(), max_bytes=max_bytes)

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


def live_snapshot(
    recorded: Restorable,
    entries: Iterable[Entry],
    blobs: Mapping[str, bytes],
    *,
    step_index: int | None = None,
    created_at: str | None = None,
    also: Iterable[Restorable] = (),
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

    Raises:
        TypeError: When ``recorded`` or one of ``also`` is not a per-step snapshot (``container.as_changes`` makes
            one of any snapshot): the live state shares their archives.
    """
    archives: dict[str, Archive | MemoryArchive] = {}
    for source in (*also, recorded):
        archives.update(_per_step(source)._archives)
    return memory_snapshot(
        f"{recorded.path} (live)",
        episode_id=recorded.episode_id,
        step_index=recorded.step_index if step_index is None else step_index,
        base_image=recorded.base_image,
        image_id=recorded.image_id,
        workdir=recorded.workdir,
        entries=entries,
        base_entries=_per_step(recorded).base_entries,
        blobs=blobs,
        created_at=created_at,
        archives=archives,
    )


def _per_step(snapshot: Snapshot) -> StepSnapshot:
    if not isinstance(snapshot, StepSnapshot):
        raise TypeError(f"a live state shares the archives of per-step snapshots, not of {snapshot.path}")
    return snapshot


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
    archives: Mapping[str, Archive | MemoryArchive] | None = None,
) -> StepSnapshot:
    """A step snapshot held in memory: entries relative to ``base_image``, content (by sha256) in ``blobs``.

    Entries whose content is in ``blobs`` say ``stored_in=LIVE_FOLDER``; ``archives`` adds other snapshots'
    stored content that entries may refer to. Nothing is written anywhere.
    """
    readable = dict(archives or {})
    readable[LIVE_FOLDER] = MemoryArchive(blobs)
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
