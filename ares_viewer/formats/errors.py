"""Why a file, or one record of it, could not be read: a typed :class:`RecordError`, made where reading fails and
read by kind (never by parsing its text) wherever it is sorted, classified or stored."""

from __future__ import annotations

import dataclasses
import json

from ares_viewer.base import jsondecode

# The bytes are not readable JSON (see ``jsondecode``); the first two are also a file still being written.
EMPTY = jsondecode.EMPTY
TRUNCATED = jsondecode.TRUNCATED
INVALID = jsondecode.INVALID
TOO_DEEP = jsondecode.TOO_DEEP
# Readable JSON, but an adapter could not read the record as an episode of its format.
CONTENT = "content"
# No format could be told, or the file is named as a format's but holds something else.
FORMAT = "format"
# The file itself could not be read (a filesystem or network error).
UNREADABLE = "unreadable"
# The reader failed unexpectedly (a bug; logged where it happened).
FAILURE = "failure"
# Read back from an index written before errors had kinds: only its text is known.
UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True, slots=True)
class RecordError:
    """Why a file or one of its records could not be read.

    Attributes:
        kind: one of the kinds above (``TRUNCATED``, ``CONTENT``...).
        message: why, in words.
        line: the line (or array item) of the record it is about; None for the whole file.
        unit: what ``line`` counts: ``line`` or ``item``.
    """

    kind: str
    message: str
    line: int | None = None
    unit: str = "line"

    def __str__(self) -> str:
        return self.message if self.line is None else f"{self.unit} {self.line}: {self.message}"

    @property
    def cut_short(self) -> bool:
        """Whether this is what a file still being written looks like (its end not written yet)."""
        return self.kind in (EMPTY, TRUNCATED)

    @classmethod
    def of(cls, exc: jsondecode.DecodeError) -> RecordError:
        """The error of bytes that are not readable JSON."""
        return cls(exc.kind, exc.reason, exc.line)

    def to_json(self) -> str:
        """The stored form (in the run index's manifest)."""
        return json.dumps({"kind": self.kind, "message": self.message, "line": self.line, "unit": self.unit})

    @classmethod
    def from_json(cls, stored: str) -> RecordError:
        """An error from its stored form; an index written before errors had kinds stored the text alone."""
        try:
            fields = json.loads(stored)
            return cls(str(fields["kind"]), str(fields["message"]), fields.get("line"), str(fields.get("unit", "line")))
        except (ValueError, TypeError, KeyError, AttributeError):
            return cls(UNKNOWN, stored)
