"""Content blobs of a snapshot kept in a temporary file instead of memory (a live container's state, a capture).

A capture reads every changed file of a container; held as ``bytes`` they would make the process grow with the
changed bytes. :class:`SpooledBlobs` writes each file's content, streamed in chunks and hashed on the way, to one
anonymous temporary file (gone when the last reader lets go) and keeps only its offset and size, by sha256. It
is a ``Mapping[str, bytes]``, so it is accepted wherever blobs are (``snapshots.live_snapshot``, ``write_step``):
reading one blob materializes that blob only, and :meth:`open` streams it.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_CHUNK = 1 << 20


class _File:
    """The shared temporary file: appended to by reserving a range, read and written by offset (thread-safe)."""

    def __init__(self) -> None:
        self._handle = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the blobs that point into it)
        self.fd = self._handle.fileno()
        self._end = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> int:
        with self._lock:
            offset, self._end = self._end, self._end + size
            return offset

    def read(self, offset: int, size: int) -> bytes:
        parts, done = [], 0
        while done < size:
            part = os.pread(self.fd, min(size - done, 64 * _CHUNK), offset + done)
            if not part:
                raise OSError(f"spooled content ended {size - done} bytes early")
            parts.append(part)
            done += len(part)
        return b"".join(parts)

    def write(self, offset: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.pwrite(self.fd, view, offset + len(data) - len(view)):]


class _Range(io.RawIOBase):
    """A read-only stream over one blob's bytes in the file."""

    def __init__(self, file: _File, offset: int, size: int) -> None:
        self._file, self._offset, self._size, self._at = file, offset, size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._size - self._at)
        if want <= 0:
            return 0
        data = os.pread(self._file.fd, want, self._offset + self._at)
        view[: len(data)] = data
        self._at += len(data)
        return len(data)


class SpooledBlobs(Mapping[str, bytes]):
    """Content by sha256 hex, in a temporary file; memory holds an offset and a size per blob.

    :meth:`add_stream` may be called from several threads at once. :meth:`subset` gives a view of some blobs over
    the same file (the file stays while any view does); :meth:`compacted` copies them into a new file when most of
    the old one is content nothing refers to any more.
    """

    def __init__(self, _file: _File | None = None, _where: dict[str, tuple[int, int]] | None = None) -> None:
        self._file = _file or _File()
        self._where: dict[str, tuple[int, int]] = _where if _where is not None else {}
        self._lock = threading.Lock()

    def add_stream(self, source: IO[bytes], size: int) -> str:
        """Copy exactly ``size`` bytes of ``source`` in, in chunks; return their sha256 hex.

        Raises:
            OSError: When ``source`` ends before ``size`` bytes.
        """
        offset = self._file.reserve(size)
        digest = hashlib.sha256()
        done = 0
        while done < size:
            chunk = source.read(min(_CHUNK, size - done))
            if not chunk:
                raise OSError(f"content ended after {done} of {size} bytes")
            self._file.write(offset + done, chunk)
            digest.update(chunk)
            done += len(chunk)
        name = digest.hexdigest()
        with self._lock:
            self._where.setdefault(name, (offset, size))  # the same content twice: the first copy is read
        return name

    def add(self, data: bytes) -> str:
        """Store ``data``; return its sha256 hex."""
        return self.add_stream(io.BytesIO(data), len(data))

    def size(self, digest: str) -> int:
        return self._where[digest][1]

    def open(self, digest: str) -> IO[bytes]:
        """One blob as a stream (nothing read ahead)."""
        offset, size = self._where[digest]
        return io.BufferedReader(_Range(self._file, offset, size), _CHUNK)

    def __getitem__(self, digest: str) -> bytes:
        offset, size = self._where[digest]
        return self._file.read(offset, size)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._where))

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, digest: object) -> bool:
        return digest in self._where

    def stored_bytes(self) -> int:
        """The bytes of content these blobs hold (each blob once)."""
        return sum(size for _, size in self._where.values())

    def subset(self, digests: Iterable[str]) -> SpooledBlobs:
        """A view of only ``digests`` (those held here), over the same file."""
        with self._lock:
            return SpooledBlobs(self._file, {d: self._where[d] for d in digests if d in self._where})

    def compacted(self, digests: Iterable[str], *, slack_bytes: int = 64 * 1024 * 1024) -> SpooledBlobs:
        """A store of only ``digests``: a view over this file, or a copy into a new one when the file holds over
        ``slack_bytes`` more than they need and more than twice what they need (so disk use stays bounded by what
        is still referred to)."""
        kept = self.subset(digests)
        wasted = self._file.reserve(0) - kept.stored_bytes()
        if wasted <= max(slack_bytes, kept.stored_bytes()):
            return kept
        fresh = SpooledBlobs()
        for digest in kept:
            with kept.open(digest) as stream:
                fresh.add_stream(stream, kept.size(digest))
        return fresh
