"""A file's bytes as decoded records: one JSON document, one record per line or per top-level array item, or one
per member of a zip archive.

The content decides JSON vs JSON Lines vs zip (whatever the file is called); an unreadable line is an error of its
own while every other line loads. A zip archive's records are its members (``zipped.Member``), decompressed only
when an adapter reads one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection
from typing import Any

from ares_viewer.base import jsondecode, settings
from ares_viewer.formats import zipped
from ares_viewer.formats.errors import RecordError

JSONL_SUFFIXES = (".jsonl", ".ndjson")
_BLANK = re.compile(rb"[ \t\r\n]*")


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One decoded record and where it sits: ``number`` is its line or item (None for a whole file)."""

    value: Any
    number: int | None
    unit: str
    warnings: tuple[str, ...]

    @property
    def where(self) -> str:
        return "" if self.number is None else f"{self.unit} {self.number}: "


def _lines(data: bytes, only: Collection[int] | None = None) -> tuple[list[Record], list[RecordError]]:
    if only is not None:
        return _some_lines(data, only)
    records, errors = [], []
    for number, item in jsondecode.decode_lines(data):
        if isinstance(item, jsondecode.DecodeError):
            errors.append(RecordError.of(item))
        else:
            records.append(Record(item.value, number, "line", item.warnings))
    return records, errors


def _some_lines(data: bytes, only: Collection[int]) -> tuple[list[Record], list[RecordError]]:
    """The lines ``only`` names, after the first readable line (whose record says which format the file is)."""
    records: list[Record] = []
    errors: list[RecordError] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if (records and number not in only) or not line.strip():
            continue
        try:
            item = jsondecode.decode(line)
        except jsondecode.DecodeError as exc:
            if number in only:
                errors.append(RecordError(exc.kind, exc.reason, number))
            continue
        records.append(Record(item.value, number, "line", item.warnings))
    return records, errors


def is_json_lines(data: bytes) -> bool:
    """Whether ``decode`` reads these bytes line by line, judged by the first line alone (a record followed by
    more). A file whose first line is corrupt may still be read line by line (see ``decode``)."""
    return _first_line_is_record(data)


def _after_blanks(data: bytes, pos: int) -> int:
    found = _BLANK.match(data, pos)  # it matches everywhere (zero or more blanks)
    return found.end() if found else pos


def _first_line_is_record(data: bytes) -> bool:
    """True when the first line is a whole JSON object and more follows: the shape of JSON Lines.

    Cheap on large documents: nothing is copied, and only a first line that ends like an object is decoded.
    """
    start = _after_blanks(data, 0)
    end = data.find(b"\n", start)
    if end < 0 or _after_blanks(data, end) == len(data) or not data[start:end].rstrip().endswith(b"}"):
        return False
    try:
        return isinstance(jsondecode.decode(data[start:end]).value, dict)
    except jsondecode.DecodeError:
        return False


def _members(data: bytes) -> list[Record]:
    """A zip archive's members as records (``unit`` ``entry``), each decompressed only when read."""
    try:
        archive = zipped.opened(data, settings.MAX_FILE_MB.get() * 1024 * 1024)
    except zipped.ArchiveError as exc:  # a zip cut short may be a log still being written, as a JSON file may
        kind = jsondecode.TRUNCATED if isinstance(exc, zipped.CutShortError) else jsondecode.INVALID
        raise jsondecode.DecodeError(str(exc), kind=kind) from None
    records = archive.memo(("records",), lambda: [Record(member, number, "entry", ())
                                                  for number, member in enumerate(archive.members(), start=1)])
    if not records:
        raise jsondecode.DecodeError("an empty zip archive", kind=jsondecode.EMPTY)
    return list(records)


def decode(path: str, data: bytes, only: Collection[int] | None = None) -> tuple[list[Record], list[RecordError]]:
    """The file's records and its per-line decoding errors; the content decides JSON vs JSON Lines.

    The first line alone says which it is, so a large pretty-printed or truncated document is never
    decoded line by line. ``only``: of JSON Lines, decode just these (1-based) line numbers, plus the first
    readable line (the caller reads the format from ``records[0]``); a whole document is decoded whole. A zip
    archive gives one record per member, its value a ``zipped.Member`` read on demand.

    Raises:
        jsondecode.DecodeError: when nothing in the file is readable.
    """
    if zipped.is_zip(data):
        return _members(data), []
    if _first_line_is_record(data):
        return _lines(data, only)  # JSON Lines, also in a file named .json
    try:
        decoded = jsondecode.decode(data)
    except jsondecode.DecodeError:
        if not path.lower().endswith(JSONL_SUFFIXES):
            raise
        # JSON Lines whose first line is corrupt: every other line still loads.
        records, errors = _lines(data, only)
        if not records:
            if not errors:
                raise jsondecode.DecodeError("empty file", kind=jsondecode.EMPTY) from None
            raise jsondecode.DecodeError(errors[0].message, kind=errors[0].kind, line=errors[0].line) from None
        return records, errors
    value = decoded.value
    if isinstance(value, list) and value:
        return [Record(item, n, "item", decoded.warnings) for n, item in enumerate(value, start=1)], []
    return [Record(value, None, "", decoded.warnings)], []
