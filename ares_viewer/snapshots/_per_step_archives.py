"""The blob archives a per-step snapshot reads its content from: a ``blobs.tar.gz`` on disk, or content held in
memory for a live container's state; plus the streams a restore checks content through."""

from __future__ import annotations

import contextlib
import hashlib
import io
import pathlib
import tarfile
import threading
from collections.abc import Iterator, Mapping
from typing import IO, Any

from ares_viewer.snapshots._tar_safety import scan_archive
from ares_viewer.snapshots.base import LIVE_FOLDER
from ares_viewer.snapshots.spool import SpooledBlobs


class Archive:
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


class MemoryArchive:
    """Content read by the capture helper (a live container's state): held in memory, or spooled to a temporary
    file (:class:`~.spool.SpooledBlobs`); nothing to validate."""

    def __init__(self, blobs: Mapping[str, bytes]) -> None:
        self.path = "<memory>"
        self.folder = LIVE_FOLDER
        self._blobs: Mapping[str, bytes] = blobs if isinstance(blobs, SpooledBlobs) else dict(blobs)
        self._members = {}
        blobs = self._blobs
        for digest in blobs:
            info = tarfile.TarInfo(digest)
            info.size = blobs.size(digest) if isinstance(blobs, SpooledBlobs) else len(blobs[digest])
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


class Hashing:
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


class Discard(io.BytesIO):
    """A sink that keeps nothing (checking an archive's content without holding it)."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return len(data)
