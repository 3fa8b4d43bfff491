"""A zip archive's members read one at a time, in memory, with bounds: a hostile archive is an error, never a
memory blowup.

Python's ``zipfile`` reads the central directory (the member list); each member's bytes are then decompressed
here from the archive's own bytes (stored, deflate, or zstd, which Inspect AI writes and ``zipfile`` reads only
from Python 3.14), never extracted to disk. Before ``zipfile`` reads the directory, its size and member count
as the archive's end record declares them are checked (``MAX_MEMBERS``, ``MAX_DIRECTORY_BYTES``). The archive is
then bounded as a whole before any member is read: no two members may share a name or compressed bytes (a bomb
whose entries all point at one compressed sample), and the sizes its members declare may add up to at most
``MAX_RATIO`` times the archive's own size (or ``RATIO_FLOOR`` when that is more). A member is decompressed only up
to the size it declares, at most ``max_member_bytes`` and ``MAX_RATIO`` times its compressed size (or
``RATIO_FLOOR``), and its CRC is checked. So reading every member of an archive decompresses at most
``max(MAX_RATIO * archive size, RATIO_FLOOR)`` bytes, one member at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import Any

import zstandard

from ares_viewer.base.cache import BoundedCache

# Members one archive may hold (an Inspect log of 200,000 samples holds about 200,000).
MAX_MEMBERS = 1_000_000
# Bytes of central directory read at most (about 130 bytes a member in an Inspect log).
MAX_DIRECTORY_BYTES = 256 * 1024 * 1024
# What the members may declare in all, as a multiple of the archive's size (Inspect logs declare 6 to 8 times their
# size, a single member up to 65 times), or RATIO_FLOOR bytes when that is more; the same bounds one member.
MAX_RATIO = 100
RATIO_FLOOR = 64 * 1024 * 1024
_MAGIC = b"PK\x03\x04"
_EMPTY_MAGIC = b"PK\x05\x06"
# zipfile's end-record layouts (``stringEndArchive``, ``structEndArchive`` ...): module constants its stubs omit.
_RECORDS: Any = zipfile
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # zipfile.structFileHeader
_STORED, _DEFLATED, _ZSTD = 0, 8, 93
_CHUNK = 1024 * 1024
# Archives read lately, by their bytes' length and member list (``opened``): opening one sample of a large Inspect
# log again reads no member list and no local header again.
_OPENED: BoundedCache[Archive] = BoundedCache(maxsize=4)


class ArchiveError(ValueError):
    """The archive, or one member of it, cannot be read; the message says which and why."""


class CutShortError(ArchiveError):
    """The archive has no end record: it is cut short (or still being written)."""


def is_zip(data: bytes) -> bool:
    """Whether the bytes start like a zip archive (a member, or the end record of an empty one)."""
    return data[:4] in (_MAGIC, _EMPTY_MAGIC)


def _declared(data: bytes) -> tuple[int, int]:
    """The member count and central directory size the end record declares (zip64's when it has one)."""
    at = data.rfind(_RECORDS.stringEndArchive, max(0, len(data) - _RECORDS.sizeEndCentDir - 0xFFFF))
    if at < 0 or len(data) < at + _RECORDS.sizeEndCentDir:
        raise CutShortError("not a readable zip archive: no end of central directory (cut short?)")
    end = struct.unpack(_RECORDS.structEndArchive, data[at:at + _RECORDS.sizeEndCentDir])
    count, size = end[4], end[5]
    locator = at - _RECORDS.sizeEndCentDir64Locator
    if locator >= 0 and data[locator:locator + 4] == _RECORDS.stringEndArchive64Locator:
        offset = struct.unpack(_RECORDS.structEndArchive64Locator, data[locator:at])[2]
        record = data[offset:offset + _RECORDS.sizeEndCentDir64]
        if len(record) == _RECORDS.sizeEndCentDir64 and record[:4] == _RECORDS.stringEndArchive64:
            fields = struct.unpack(_RECORDS.structEndArchive64, record)
            count, size = fields[7], fields[8]
    return count, size


def opened(data: bytes, max_member_bytes: int) -> Archive:
    """``Archive(data, max_member_bytes)``, or the one made of the same bytes lately: the same length and the same
    member list and end record (every member's name, sizes, CRC and offset: the bytes of the central directory and
    all after it, hashed), so the same members (each read is still checked against its CRC).

    Raises:
        ArchiveError: as ``Archive`` does.
    """
    _, size = _declared(data)
    tail = memoryview(data)[max(0, len(data) - min(size, MAX_DIRECTORY_BYTES) - 0x10000 - 128):]
    key = (len(data), max_member_bytes, hashlib.blake2b(tail, digest_size=20).digest())
    found = _OPENED.get(key)
    return found if found is not None else _OPENED.put(key, Archive(data, max_member_bytes))


@dataclasses.dataclass(frozen=True, eq=False)
class Member:
    """One member of an ``Archive``: its name and size; ``read()`` decompresses it (bounded)."""

    archive: Archive
    name: str
    size: int

    def read(self) -> bytes:
        return self.archive.read(self.name)


class Archive:
    """A zip archive held as bytes; members are decompressed one at a time, on demand, within bounds.

    Args:
        data: the archive's bytes.
        max_member_bytes: the most one member may decompress to.

    Raises:
        ArchiveError: the archive is not a readable zip, declares more members or a larger directory than
            the bounds allow, names a member twice, has members sharing compressed bytes, or declares more than
            ``MAX_RATIO`` times its size in all.
    """

    def __init__(self, data: bytes, max_member_bytes: int) -> None:
        count, size = _declared(data)
        if count > MAX_MEMBERS:
            raise ArchiveError(f"the zip archive declares {count:,} members, more than {MAX_MEMBERS:,}")
        if size > MAX_DIRECTORY_BYTES:
            raise ArchiveError(f"the zip archive's member list is {size:,} bytes, more than {MAX_DIRECTORY_BYTES:,}")
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError) as exc:
            raise ArchiveError(f"not a readable zip archive: {exc}") from exc
        infos = self._zip.infolist()
        if len(infos) > MAX_MEMBERS:  # the end record under-declared them
            raise ArchiveError(f"the zip archive holds {len(infos):,} members, more than {MAX_MEMBERS:,}")
        self._data = memoryview(data)
        files = [info for info in infos if not info.is_dir()]
        self._infos = {info.filename: info for info in files}
        if len(self._infos) < len(files):
            names = sorted(info.filename for info in files)
            twice = next(a for a, b in itertools.pairwise(names) if a == b)
            raise ArchiveError(f"member {twice!r} appears more than once in the archive (which one is meant?)")
        self._starts = _check_whole(self._data, files)
        self.max_member_bytes = max_member_bytes
        self._memo: dict[Any, Any] = {}

    def members(self) -> list[Member]:
        """Every file member, in the archive's order."""
        return [Member(self, name, info.file_size) for name, info in self._infos.items()]

    def names(self) -> frozenset[str]:
        return frozenset(self._infos)

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, worked out once per archive (what every member's reader shares: a header, summaries)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def read(self, name: str) -> bytes:
        """One member's bytes, decompressed.

        Raises:
            ArchiveError: naming the member: missing, larger than allowed (declared or in fact), compressed in
                a way this reader does not know, corrupt, or failing its CRC.
        """
        info = self._infos.get(name)
        if info is None:
            raise ArchiveError(f"the archive has no member {name!r}")
        if info.file_size > self.max_member_bytes:
            raise ArchiveError(f"member {name!r} is {info.file_size:,} bytes, more than {self.max_member_bytes:,}")
        if info.flag_bits & 0x1:
            raise ArchiveError(f"member {name!r} is encrypted")
        if info.file_size > max(MAX_RATIO * info.compress_size, RATIO_FLOOR):
            raise ArchiveError(f"member {name!r} declares {info.file_size:,} bytes from {info.compress_size:,} "
                               f"compressed, more than {MAX_RATIO} times as many (a zip bomb?)")
        start = self._starts[name]
        raw = self._data[start:start + info.compress_size]
        limit = info.file_size  # never more than it declares (at most max_member_bytes)
        try:
            data = _decompress(info.compress_type, raw, limit + 1)
        except (zlib.error, zstandard.ZstdError) as exc:
            raise ArchiveError(f"member {name!r} is corrupt: {exc}") from exc
        if data is None:
            raise ArchiveError(f"member {name!r} uses compression method {info.compress_type}, which is not read")
        if len(data) != limit:
            raise ArchiveError(f"member {name!r} decompresses to {'more' if len(data) > limit else 'fewer'} "
                               f"bytes than the {limit:,} it declares")
        if zlib.crc32(data) != info.CRC:
            raise ArchiveError(f"member {name!r} fails its CRC check (corrupt)")
        return data


def _data_start(data: memoryview, info: zipfile.ZipInfo) -> int:
    """Where a member's compressed bytes start: after its local header, whose own name and extra lengths count."""
    header = bytes(data[info.header_offset:info.header_offset + _LOCAL_HEADER.size])
    if len(header) < _LOCAL_HEADER.size or header[:4] != _MAGIC:
        raise ArchiveError(f"member {info.filename!r}: bad local header")
    fields = _LOCAL_HEADER.unpack(header)
    return int(info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10])


def _check_whole(data: memoryview, files: list[zipfile.ZipInfo]) -> dict[str, int]:
    """Each member's data start, once the archive passes its whole bounds: every member's compressed bytes inside
    the archive and shared with no other member's, and the declared sizes within ``MAX_RATIO`` of its size.

    Raises:
        ArchiveError: naming the members that overlap, or the sizes that exceed the ratio.
    """
    starts = {info.filename: _data_start(data, info) for info in files}
    spans = sorted((starts[info.filename], starts[info.filename] + info.compress_size, info.header_offset,
                    info.filename) for info in files)
    for (_, end, _, name), (_, _, header, other) in itertools.pairwise(spans):
        if header < end:  # the next member's header, hence its data, lies within this one's compressed bytes
            raise ArchiveError(f"members {name!r} and {other!r} share compressed bytes (from offset {header:,}): "
                               "an archive whose entries overlap is refused (a zip bomb?)")
    if spans and spans[-1][1] > len(data):
        raise ArchiveError(f"member {spans[-1][3]!r} runs past the end of the archive")
    total = sum(info.file_size for info in files)
    if total > max(MAX_RATIO * len(data), RATIO_FLOOR):
        raise ArchiveError(f"the archive's {len(files):,} members declare {total:,} bytes in all, "
                           f"{total / max(1, len(data)):,.0f} times its {len(data):,} bytes: more than {MAX_RATIO} "
                           "times (a zip bomb?)")
    return starts


def _decompress(method: int, raw: memoryview, at_most: int) -> bytes | None:
    """At most ``at_most`` bytes of a member's data (None for a method not read here)."""
    if method == _STORED:
        return bytes(raw[:at_most])
    if method == _DEFLATED:
        return zlib.decompressobj(-15).decompress(raw, at_most)
    if method == _ZSTD:
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        chunks, total = [], 0
        while total < at_most:
            chunk = reader.read(min(_CHUNK, at_most - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    return None
