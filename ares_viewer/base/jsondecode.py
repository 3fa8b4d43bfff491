"""Tolerant JSON decoding: fast with orjson, correct for what Python's ``json`` writes.

ARES writes episodes with ``json.dump``, which emits ``NaN`` and ``Infinity`` literals that orjson
refuses; files may also be truncated (a writer killed mid-write) or hold non-UTF-8 bytes. The
fast path is orjson; the fallback is the standard library, and every failure becomes a
``DecodeError`` with a sentence a user can act on.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import orjson

# Why bytes are not readable JSON: ``EMPTY`` and ``TRUNCATED`` are also what a file still being written looks like.
EMPTY = "empty"
TRUNCATED = "truncated"
INVALID = "invalid"
TOO_DEEP = "too deep"


class DecodeError(ValueError):
    """The bytes are not readable JSON; the message says why in plain words.

    Attributes:
        reason: why, in words (the message without its line).
        kind: ``EMPTY``, ``TRUNCATED``, ``INVALID`` or ``TOO_DEEP``.
        line: the line of a JSON Lines document it is about, or None for a whole document.
    """

    def __init__(self, reason: str, *, kind: str = INVALID, line: int | None = None) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.reason = reason
        self.kind = kind
        self.line = line


@dataclasses.dataclass(frozen=True, slots=True)
class Decoded:
    """A decoded document and what had to be repaired to read it."""

    value: Any
    warnings: tuple[str, ...] = ()


def _describe(exc: json.JSONDecodeError, text: str) -> DecodeError:
    # A string still open at the end of the text is cut off too (its opening quote is what is reported).
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        return DecodeError(f"truncated JSON: the file ends before the document is complete (line {exc.lineno})",
                           kind=TRUNCATED)
    return DecodeError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")


def decode(data: bytes) -> Decoded:
    """Decode one JSON document.

    Raises:
        DecodeError: for an empty file, truncated or invalid JSON.
    """
    if not data.strip():
        raise DecodeError("empty file", kind=EMPTY)
    try:
        return Decoded(orjson.loads(data))
    except orjson.JSONDecodeError:
        pass
    warnings: list[str] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        warnings.append(f"not valid UTF-8 (first bad byte at offset {exc.start}); bad bytes shown as U+FFFD")
    text = text.removeprefix("\ufeff")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _describe(exc, text) from None
    except RecursionError:
        raise DecodeError("JSON nested too deeply to read", kind=TOO_DEEP) from None
    return Decoded(value, tuple(warnings))


def decode_lines(data: bytes) -> list[tuple[int, Decoded | DecodeError]]:
    """Decode a JSON Lines document: one result per non-blank line, numbered from 1.

    A corrupt line yields its ``DecodeError`` in place, so every other line still loads.
    """
    results: list[tuple[int, Decoded | DecodeError]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            results.append((number, decode(line)))
        except DecodeError as exc:
            results.append((number, DecodeError(exc.reason, kind=exc.kind, line=number)))
    return results


def object_at(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``doc[key]`` when it is a JSON object, else an empty one: an untrusted document may hold anything there."""
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def string_at(doc: Mapping[str, Any], key: str) -> str | None:
    """``doc[key]`` when it is a JSON string, else None."""
    value = doc.get(key)
    return value if isinstance(value, str) else None
