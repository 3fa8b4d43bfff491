"""Tolerant JSON decoding: fast with orjson, correct for what Python's ``json`` writes.

ARES writes episodes with ``json.dump``, which emits ``NaN`` and ``Infinity`` literals that orjson
refuses; files may also be truncated (a writer killed mid-write) or hold non-UTF-8 bytes. The
fast path is orjson; the fallback is the standard library, and every failure becomes a
``DecodeError`` with a sentence a user can act on.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson


class DecodeError(ValueError):
    """The bytes are not readable JSON; the message says why in plain words."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decoded:
    """A decoded document and what had to be repaired to read it."""

    value: Any
    warnings: tuple[str, ...] = ()


def _describe(exc: json.JSONDecodeError, text: str) -> str:
    # A string still open at the end of the text is cut off too (its opening quote is what is reported).
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        return f"truncated JSON: the file ends before the document is complete (line {exc.lineno})"
    return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"


def decode(data: bytes) -> Decoded:
    """Decode one JSON document.

    Raises:
        DecodeError: for an empty file, truncated or invalid JSON.
    """
    if not data.strip():
        raise DecodeError("empty file")
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
        raise DecodeError(_describe(exc, text)) from None
    except RecursionError:
        raise DecodeError("JSON nested too deeply to read") from None
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
            results.append((number, DecodeError(f"line {number}: {exc}")))
    return results
