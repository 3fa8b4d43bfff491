"""Reading a container's file listing with one ``exec`` of GNU ``find`` (shared by change tracking and image
comparison): records of ``DEV TYPE MODE SIZE PATH\\0LINK\\0``."""

from __future__ import annotations

import dataclasses
from typing import IO, Any

from ares_viewer import snapshots
from ares_viewer.container.capture import ContainerFilesError
from ares_viewer.container.streams import StreamError, exec_to_file

FIND_TYPES = {"d": snapshots.DIR, "f": snapshots.FILE, "l": snapshots.SYMLINK}


@dataclasses.dataclass(frozen=True)
class Listed:
    """One path as ``find -printf`` described it."""

    dev: str
    type: str
    mode: int
    size: int
    link: str


def exec_output(container: Any, command: list[str]) -> bytes:
    """The stdout of ``command`` in ``container`` (read as a stream, within ``ResourceLimits``' capture limits)."""
    with exec_file(container, command) as out:
        return out.read()


def exec_file(container: Any, command: list[str]) -> IO[bytes]:
    """The stdout of ``command`` in ``container`` as a temporary file positioned at its start (the caller closes
    it); read frame by frame, spooled to disk past a few MiB, so time is linear and memory bounded.

    Raises:
        ContainerFilesError: When the command fails, or passes the capture limits on time or bytes.
    """
    try:
        code, out, _ = exec_to_file(container, command)
    except StreamError as exc:
        raise ContainerFilesError(str(exc)) from exc
    if code != 0:
        out.close()
        raise ContainerFilesError(f"{command[0]} in {container.short_id} exited with {code}")
    return out


class Records:
    """NUL-terminated records read one at a time from a file (the file is read in chunks, never whole)."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self._buffer = b""
        self._start = 0
        self._eof = False

    def next(self) -> bytes | None:
        """The next record, without its NUL (None at the end of the file)."""
        while True:
            end = self._buffer.find(b"\0", self._start)
            if end >= 0:
                record = self._buffer[self._start : end]
                self._start = end + 1
                return record
            if self._eof:
                return None
            chunk = self._source.read(_CHUNK)
            if not chunk:
                self._eof = True
            self._buffer = self._buffer[self._start :] + chunk
            self._start = 0

    def rest(self) -> IO[bytes]:
        """The file positioned just after the last record returned."""
        self._source.seek(self._source.tell() - (len(self._buffer) - self._start))
        self._buffer, self._start = b"", 0
        return self._source


_CHUNK = 1 << 20


def read_listed(records: Records) -> dict[str, Listed]:
    """``DEV TYPE MODE SIZE PATH\\0LINK\\0`` records up to a ``--`` record (or the end)."""
    listed: dict[str, Listed] = {}
    while True:
        record = records.next()
        if record is None or record == b"--":
            return listed
        link = records.next()
        if link is None:
            return listed
        dev, kind, mode, size, path = record.decode("utf-8", "surrogateescape").split(" ", 4)
        listed[path] = Listed(dev, kind, int(mode, 8), int(size), link.decode("utf-8", "surrogateescape"))


def parse_listed(data: bytes, offset: int) -> tuple[dict[str, Listed], int]:
    """``DEV TYPE MODE SIZE PATH\\0LINK\\0`` records from ``offset`` up to a ``--`` record (or the end)."""
    listed: dict[str, Listed] = {}
    while offset < len(data):
        end = data.find(b"\0", offset)
        if end < 0:
            break
        record = data[offset:end]
        if record == b"--":
            return listed, end + 1
        link_end = data.find(b"\0", end + 1)
        if link_end < 0:
            break
        dev, kind, mode, size, path = record.decode("utf-8", "surrogateescape").split(" ", 4)
        link = data[end + 1 : link_end].decode("utf-8", "surrogateescape")
        listed[path] = Listed(dev, kind, int(mode, 8), int(size), link)
        offset = link_end + 1
    return listed, len(data)
