"""An opened episode-boundary snapshot (:class:`BoundarySnapshot`): the whole container filesystem at one step,
read from a copied folder tree (without following any symlink) or from a tarball scanned by
:mod:`._tar_safety` and read into memory; and what changed between two such snapshots. Finding them and linking
them to steps is ``episode_boundary.py``, which also opens them (``open_boundary``)."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import pathlib
import posixpath
import stat
import tarfile
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any, Literal

from ares_viewer.snapshots._tar_safety import MAX_MEMBER_BYTES, scan_archive, tree_path
from ares_viewer.snapshots.base import (
    ABSENT,
    DIR,
    FILE,
    OTHER,
    SYMLINK,
    Entry,
    Snapshot,
    SnapshotError,
    absolute,
    check_budget,
)

CONTAINER_FS = "container_fs.tar.gz"
# A whole container filesystem: bounded so a hostile folder cannot exhaust memory.
MAX_TREE_ENTRIES = 1_000_000
_EMPTY: Mapping[str, Entry] = types.MappingProxyType({})
_READ_CHUNK = 1 << 20


class TreeReader:
    """A folder holding a copy of the container's filesystem: walked and read without following symlinks."""

    def __init__(self, snapshot: str, root: pathlib.Path) -> None:
        self.snapshot = snapshot
        self.root = root
        self.mtimes: dict[str, int] = {}
        self.digests: dict[str, str] = {}  # content sha256 by path, computed when a comparison needs it
        self.nlinks: dict[str, int] = {}  # link counts of the files with several links (all inside the copy)

    def index(self) -> dict[str, Entry]:
        entries: dict[str, Entry] = {}
        # Regular files with more than one link: each must have all its links inside the copy (a container's
        # own hard links); one whose other link is outside it could be any file of the host.
        linked: dict[tuple[int, int], list[Any]] = {}
        stack = [("/", str(self.root))]
        while stack:
            inside, real = stack.pop()
            for child in self._listing(inside, real):
                path = posixpath.join(inside, child.name)
                if len(entries) >= MAX_TREE_ENTRIES:
                    raise SnapshotError(self.snapshot, f"{CONTAINER_FS} holds more than {MAX_TREE_ENTRIES} paths")
                try:
                    info = child.stat(follow_symlinks=False)
                except OSError:
                    continue  # vanished while walking
                mode = stat.S_IMODE(info.st_mode)
                if stat.S_ISLNK(info.st_mode):
                    target = os.readlink(child.path)  # the container's link, recorded verbatim, never followed
                    entries[path] = Entry(path=path, type=SYMLINK, mode=mode, link_target=target)
                elif stat.S_ISDIR(info.st_mode):
                    entries[path] = Entry(path=path, type=DIR, mode=mode)
                    stack.append((path, child.path))
                elif stat.S_ISREG(info.st_mode):
                    note = None
                    if info.st_size > MAX_MEMBER_BYTES:
                        note = f"{info.st_size} bytes, over the {MAX_MEMBER_BYTES} byte read limit"
                    entries[path] = Entry(
                        path=path, type=FILE, mode=mode, size=info.st_size, mtime=int(info.st_mtime), note=note
                    )
                    self.mtimes[path] = info.st_mtime_ns
                    if info.st_nlink > 1:
                        linked.setdefault((info.st_dev, info.st_ino), [info.st_nlink]).append(path)
                else:  # fifo, socket, device node: recorded, never opened
                    entries[path] = Entry(path=path, type=OTHER, mode=mode)
        self._check_links_inside(linked)
        self.nlinks = {path: nlink for nlink, *paths in linked.values() for path in paths}
        return entries

    def _listing(self, inside: str, real: str) -> list[os.DirEntry[str]]:
        """The entries of the copy's folder ``real`` (``inside`` in the container)."""
        try:
            with os.scandir(real) as listing:
                return list(listing)
        except OSError as exc:
            raise SnapshotError(self.snapshot, f"cannot list {inside} in {CONTAINER_FS}: {exc.strerror}") from exc

    def _check_links_inside(self, linked: Mapping[tuple[int, int], list[Any]]) -> None:
        """Refuse a file whose hard links are not all inside the copy (``linked``: its link count, then the
        paths found, by device and inode)."""
        for nlink, *paths in linked.values():
            if nlink > len(paths):
                raise SnapshotError(
                    self.snapshot,
                    f"{paths[0]} in {CONTAINER_FS} is a hard link to a file outside "
                    f"the copy ({nlink} links, {len(paths)} inside); it is not read",
                )

    def each(self, entries: Iterable[Entry]) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of each regular file in turn."""
        for entry in entries:
            yield entry.path, self.read(entry)

    def read(self, entry: Entry) -> bytes:
        """A regular file's bytes, opening each path component with ``O_NOFOLLOW`` (a symlink is never crossed)."""
        parts = [p for p in entry.path.split("/") if p]
        fds = []
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            fds.append(fd)
            for part in parts[:-1]:
                fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                fds.append(fd)
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            fds.append(fd)
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_size != entry.size
                or (info.st_nlink > 1 and self.nlinks.get(entry.path) != info.st_nlink)
            ):
                raise SnapshotError(self.snapshot, f"{entry.path} changed since the snapshot was indexed")
            chunks, left = [], info.st_size
            while left > 0:
                chunk = os.read(fd, min(left, _READ_CHUNK))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        except OSError as exc:
            reason = "a symlink is in the way" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror
            raise SnapshotError(self.snapshot, f"cannot read {entry.path}: {reason}") from exc
        finally:
            for fd in reversed(fds):
                os.close(fd)


class TarReader:
    """A gzip (or plain) tarball of the container's filesystem: scanned and read in memory, never extracted."""

    def __init__(self, snapshot: str, path: pathlib.Path) -> None:
        self.snapshot = snapshot
        self.path = path
        self.mtimes: dict[str, int] = {}
        self.digests: dict[str, str] = {}
        self._members: dict[str, tarfile.TarInfo] = {}
        self._data: bytes | None = None

    def index(self) -> dict[str, Entry]:
        self._members, self._data = scan_archive(pathlib.Path(self.snapshot), self.path, tree=True)
        entries: dict[str, Entry] = {}
        for path, member in self._members.items():
            mode = member.mode & 0o7777
            if member.isdir():
                entries[path] = Entry(path=path, type=DIR, mode=mode)
            elif member.issym():
                entries[path] = Entry(path=path, type=SYMLINK, mode=mode, link_target=member.linkname)
            elif member.ischr() or member.isblk() or member.isfifo():  # recorded, never opened
                kind = "character device" if member.ischr() else "block device" if member.isblk() else "FIFO"
                entries[path] = Entry(path=path, type=OTHER, mode=mode, note=kind)
            else:
                content = self._content_member(path)
                entries[path] = Entry(path=path, type=FILE, mode=mode, size=content.size, mtime=int(member.mtime))
                self.mtimes[path] = int(member.mtime) * 10**9
        return entries

    def _content_member(self, path: str) -> tarfile.TarInfo:
        member = self._members[path]
        if member.islnk():  # a hard link: the content is an earlier regular member's
            target = self._members.get(tree_path(member.linkname))
            if target is None or not target.isreg():
                raise SnapshotError(
                    self.snapshot,
                    f"{CONTAINER_FS}: hard link {member.name!r} points at "
                    f"{member.linkname!r}, which is not a file in it",
                )
            return target
        return member

    def each(self, entries: Iterable[Entry]) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of each regular file, in the tarball's order: one forward pass, however many."""
        by_member: dict[int, tuple[tarfile.TarInfo, list[str]]] = {}
        for entry in entries:
            member = self._content_member(entry.path)
            by_member.setdefault(member.offset_data, (member, []))[1].append(entry.path)
        ordered = [by_member[offset] for offset in sorted(by_member)]
        if self._data is not None:
            for member, paths in ordered:
                data = self._data[member.offset_data : member.offset_data + member.size]
                yield from ((path, data) for path in paths)
            return
        try:
            with tarfile.open(self.path, "r:*") as tar:
                for member, paths in ordered:
                    handle = tar.extractfile(member)
                    data = handle.read(member.size) if handle is not None else b""
                    yield from ((path, data) for path in paths)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SnapshotError(self.snapshot, f"cannot read {CONTAINER_FS}: {exc}") from exc

    def read(self, entry: Entry) -> bytes:
        member = self._content_member(entry.path)
        if self._data is not None:
            return self._data[member.offset_data : member.offset_data + member.size]
        try:
            with tarfile.open(self.path, "r:*") as tar:
                handle = tar.extractfile(member)
                return handle.read(member.size) if handle is not None else b""
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SnapshotError(self.snapshot, f"cannot read {entry.path} from {CONTAINER_FS}: {exc}") from exc


@dataclasses.dataclass(frozen=True, eq=False)
class BoundarySnapshot:
    """An opened episode-boundary snapshot: the whole filesystem at one step, readable without Docker.

    It implements :class:`~.base.Snapshot`, but it records no base image: ``base_entries`` is empty,
    ``stat_base`` and ``read_base`` return None, and it compares only with another step.

    Attributes:
        path: The snapshot folder.
        snapshot_id: Its id.
        episode_id: The episode it was linked to ("" when opened by path).
        step_index: The step it was linked to (-1 when opened by path).
        base_image: The container image it ran on (``container_image``; "" when unknown).
        image_id: Always None (not recorded).
        workdir: ``/testbed`` when the filesystem has it (the coding agent's folder), else ``/``.
        created_at: When it was written (local time, no zone, as the file says).
        header: The other ``snapshot.json`` fields (step count and limit, task, container), without the messages.
        entries: Every path of the filesystem copy, keyed by absolute container path.
        base_entries: Empty: a boundary snapshot does not record the base image.
    """

    path: str
    snapshot_id: str
    episode_id: str
    step_index: int
    base_image: str
    image_id: str | None
    workdir: str
    created_at: str | None
    header: Mapping[str, Any]
    entries: Mapping[str, Entry]
    base_entries: Mapping[str, Entry] = dataclasses.field(default_factory=lambda: _EMPTY)
    _reader: TreeReader | TarReader | None = dataclasses.field(default=None, repr=False)

    def _absolute(self, path: str) -> str:
        return absolute(self.workdir, path)

    @property
    def records_base(self) -> Literal[False]:
        """Always False: a whole-filesystem copy records no base image."""
        return False

    def stat_base(self, path: str) -> Entry | None:
        """Always None: the base image is not part of a boundary snapshot."""
        return None

    def changed_since(self, before: Snapshot | None) -> list[str]:
        """Sorted paths whose state differs from ``before``; see :func:`changed_between` (None raises LookupError)."""
        return changed_between(None if before is None else _boundary(before), self)

    def same_state_as(self, before: Snapshot | None, path: str) -> bool:
        """Whether ``path`` is in the same state in ``before`` and here (None: there is no base to compare with,
        so only a path this copy does not hold counts as the same)."""
        if before is None:
            return self.entries.get(self._absolute(path)) is None
        return same_state(_boundary(before), self, path)

    def check_restorable(self, *, max_bytes: int | None = None) -> None:
        """A restore compares the copy with its image first: it must name one."""
        if not self.base_image:
            raise SnapshotError(
                self.path,
                "this episode-boundary snapshot records no container image, so there is nothing to restore it onto",
            )

    def stat(self, path: str) -> Entry:
        """The state of ``path``: its entry, or an ``absent`` entry when the filesystem copy has no such path."""
        path = self._absolute(path)
        return self.entries.get(path) or Entry(path=path, type=ABSENT)

    def read(self, path: str) -> bytes | None:
        """A regular file's content (None when not a readable regular file here)."""
        entry = self.entries.get(self._absolute(path))
        if entry is None or entry.type != FILE or entry.note is not None or self._reader is None:
            return None
        return self._reader.read(entry)

    def read_base(self, path: str) -> bytes | None:
        """Always None: the base image's files are not part of a boundary snapshot."""
        return None

    def sha256(self, path: str) -> str | None:
        """The sha256 of a regular file's content (computed once, then kept with the snapshot's index)."""
        path = self._absolute(path)
        known = self._reader.digests if self._reader is not None else {}
        if path not in known:
            data = self.read(path)
            if data is None:
                return None
            known[path] = hashlib.sha256(data).hexdigest()
        return known[path]

    def digests(self) -> dict[str, str]:
        """The sha256 of every readable regular file of the copy, by path (one pass over a tarball)."""
        if self._reader is None:
            return {}
        known = self._reader.digests
        missing = [e for p, e in self.entries.items() if e.type == FILE and e.note is None and p not in known]
        for path, data in self._reader.each(missing):
            known[path] = hashlib.sha256(data).hexdigest()
        return {p: known[p] for p, e in self.entries.items() if e.type == FILE and e.note is None}

    def read_many(self, paths: Iterable[str], *, max_bytes: int | None = None) -> dict[str, bytes]:
        """The content of several regular files at once (one pass over a tarball); paths that are not readable
        regular files here are left out.

        Raises:
            SnapshotError: When their total size is over ``max_bytes`` (:func:`~.base.max_read_bytes`), checked
                before anything is read.
        """
        wanted = [self.entries.get(self._absolute(path)) for path in paths]
        files = [e for e in wanted if e is not None and e.type == FILE and e.note is None]
        check_budget(self.path, sum(e.size or 0 for e in files), max_bytes, "reading these files takes")
        return dict(self._reader.each(files)) if self._reader is not None and files else {}

    def changed_paths(self, *, include_dirs: bool = False) -> list[str]:
        """Every path of the copy (it is a whole filesystem, not a change set); folders only on request."""
        return sorted(p for p, e in self.entries.items() if include_dirs or e.type != DIR)

    def deleted_paths(self) -> list[str]:
        """Always empty: deletions are only seen by comparing two snapshots."""
        return []

    def validate(self) -> None:
        """Nothing left to check: the filesystem was indexed (and checked) when the snapshot was opened."""

    def restore_bytes(self) -> int:
        """Every readable regular file's size: what a copy compared with nothing would write."""
        return sum(e.size or 0 for e in self.entries.values() if e.type == FILE and e.note is None)

    def write_archive(self, out: IO[bytes], *, max_bytes: int | None = None) -> int:
        """Refused, as :meth:`to_archive`."""
        return len(self.to_archive(max_bytes=max_bytes))

    def to_archive(self, *, max_bytes: int | None = None) -> bytes:
        """Refused: a whole-filesystem copy records no changes; ``container.against_image`` finds them first."""
        raise SnapshotError(
            self.path,
            "an episode-boundary snapshot copies the whole filesystem and "
            "records no changes against its image; compare it with its image "
            "first (container.against_image, as sandbox.restore does)",
        )


def _boundary(snapshot: Snapshot) -> BoundarySnapshot:
    """``snapshot`` when it is an episode-boundary snapshot: two copies are compared by their own files."""
    if not isinstance(snapshot, BoundarySnapshot):
        raise TypeError(f"{snapshot.path} is not an episode-boundary snapshot: compare it with one of its own kind")
    return snapshot


def _same_file(before: BoundarySnapshot, after: BoundarySnapshot, path: str) -> bool:
    """Whether a regular file is unchanged: equal size and modification time (git's and rsync's rule),
    else equal content."""
    old, new = before.entries[path], after.entries[path]
    if old.size != new.size:
        return False
    old_mtime = before._reader.mtimes.get(path) if before._reader else None
    new_mtime = after._reader.mtimes.get(path) if after._reader else None
    if old_mtime is not None and old_mtime == new_mtime:
        return True
    return before.sha256(path) == after.sha256(path)


def same_state(before: BoundarySnapshot, after: BoundarySnapshot, path: str) -> bool:
    """Whether one path is in the same state in two boundary snapshots (absent from both counts as the same)."""
    a, b = before.entries.get(path), after.entries.get(path)
    if a is None or b is None:
        return a is b
    if (a.type, a.mode, a.link_target) != (b.type, b.mode, b.link_target):
        return False
    return a.type != FILE or _same_file(before, after, path)


def changed_between(before: BoundarySnapshot | None, after: BoundarySnapshot) -> list[str]:
    """Sorted paths whose state differs between two boundary snapshots of one episode.

    Folders are listed only when their type or mode changed (an added or removed folder's files are listed).

    Raises:
        LookupError: When ``before`` is None: a boundary snapshot records no base image to compare with.
    """
    if before is None:
        raise LookupError(
            f"{after.path}: an episode-boundary snapshot records no base image; compare it with an earlier step"
        )
    old, new = before.entries, after.entries
    changed = []
    for path in old.keys() | new.keys():
        a, b = old.get(path), new.get(path)
        if a is None or b is None:
            present = a or b
            if present is not None and present.type != DIR:
                changed.append(path)
        elif not same_state(before, after, path):
            changed.append(path)
    return sorted(changed)
