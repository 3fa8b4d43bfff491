"""Hostile Inspect AI ``.eval`` archives, built from a log Inspect itself wrote (``tests/fixtures/inspect/arith.eval``,
``python3 -m testdata.inspect_logs`` rewrites it): what a reader must refuse as a whole, or sample by sample.

Each writer puts one archive into a folder and returns its path.
"""

from __future__ import annotations

import io
import pathlib
import struct
import zipfile
import zlib

from ares_viewer.formats import zipped
from testdata import inspect_logs

LOG = inspect_logs.FIXTURES / "arith.eval"
SOLVED = "samples/solve_epoch_1.json"
WRONG = "samples/wrong_epoch_1.json"
MB = 1024 * 1024


def members(log: pathlib.Path = LOG) -> dict[str, bytes]:
    """The log's members, decompressed (Inspect compresses with zstd, which this Python's ``zipfile`` cannot read)."""
    archive = zipped.Archive(log.read_bytes(), 64 * MB)
    return {member.name: member.read() for member in archive.members()}


def write_zip(path: pathlib.Path, entries: list[tuple[str, bytes]]) -> pathlib.Path:
    """A deflated zip of ``entries`` in order (a name given twice is written twice, as ``zipfile`` allows)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return path


def _padded_sample(size: int) -> tuple[bytes, int, int]:
    """A sample of ``size`` bytes (Inspect's solved sample, padded with spaces), deflated raw: (compressed, crc,
    size), without ever holding the whole sample."""
    sample = members()[SOLVED]
    head, tail = sample[:-1], sample[-1:]
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    out, crc = [squeeze.compress(head)], zlib.crc32(head)
    spaces, left = b" " * MB, size - len(sample)
    while left > 0:
        chunk = spaces[:min(MB, left)]
        out.append(squeeze.compress(chunk))
        crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    out += [squeeze.compress(tail), squeeze.flush()]
    return b"".join(out), zlib.crc32(tail, crc), size


def _raw_zip(path: pathlib.Path, stored: list[tuple[str, bytes, int, int]], aliases: dict[str, str]) -> pathlib.Path:
    """A zip written byte by byte: ``stored`` (name, deflated bytes, crc, size) each with a local header, then a
    central directory listing them and, for each alias, another entry pointing at the named member's bytes."""
    local, central, offsets = bytearray(), bytearray(), {}
    for name, data, crc, size in stored:
        offsets[name] = (len(local), data, crc, size)
        encoded = name.encode()
        local += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), size, len(encoded), 0)
        local += encoded + data
    listed = [(name, name) for name, *_ in stored] + list(aliases.items())
    for name, target in listed:
        offset, data, crc, size = offsets[target]
        encoded = name.encode()
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data), size, len(encoded),
                               0, 0, 0, 0, 0, offset)
        central += encoded
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(listed), len(listed), len(central), len(local), 0)
    path.write_bytes(bytes(local + central + end))
    return path


def _deflated(data: bytes) -> tuple[bytes, int, int]:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    return squeeze.compress(data) + squeeze.flush(), zlib.crc32(data), len(data)


def shared_entries(folder: pathlib.Path, entries: int = 40, size: int = 105 * MB) -> pathlib.Path:
    """About 110 KB: Inspect's header and ``entries`` sample entries that all point at one compressed sample of
    ``size`` bytes (``entries * size`` to decompress: 4.2 GB)."""
    header = _deflated(members()["header.json"])
    stored = [("header.json", *header), ("samples/s0_epoch_1.json", *_padded_sample(size))]
    aliases = {f"samples/s{n}_epoch_1.json": "samples/s0_epoch_1.json" for n in range(1, entries)}
    return _raw_zip(folder / "shared.eval", stored, aliases)


def one_huge_sample(folder: pathlib.Path, size: int = 400 * MB) -> pathlib.Path:
    """About 0.4 MB: Inspect's header and one sample that inflates to ``size`` bytes."""
    stored = [("header.json", *_deflated(members()["header.json"])), (SOLVED, *_padded_sample(size))]
    return _raw_zip(folder / "huge-sample.eval", stored, {})


def huge_summaries(folder: pathlib.Path, size: int = 400 * MB) -> pathlib.Path:
    """Inspect's log whose ``summaries.json`` inflates to ``size`` bytes (a list padded with spaces)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    out, crc, spaces = [squeeze.compress(b"[")], zlib.crc32(b"["), b" " * MB
    for _ in range((size - 2) // MB):
        out.append(squeeze.compress(spaces))
        crc = zlib.crc32(spaces, crc)
    out += [squeeze.compress(b"]"), squeeze.flush()]
    summaries = (b"".join(out), zlib.crc32(b"]", crc), (size - 2) // MB * MB + 2)
    stored = [(name, *_deflated(data)) for name, data in members().items() if name != "summaries.json"]
    return _raw_zip(folder / "huge-summaries.eval", [*stored, ("summaries.json", *summaries)], {})


def with_sample(folder: pathlib.Path, name: str, sample: bytes, *, duplicate: bool = False) -> pathlib.Path:
    """Inspect's log with the solved sample's member replaced by ``sample`` (``duplicate``: kept, and ``sample``
    written after it under the same name)."""
    entries = list(members().items())
    if duplicate:
        entries.append((SOLVED, sample))
    else:
        entries = [(member, sample if member == SOLVED else data) for member, data in entries]
    return write_zip(folder / name, entries)
