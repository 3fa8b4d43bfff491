"""Format adapters: detect what a file holds by its content and read it into ``model.Episode``.

An adapter is a module with:

- ``NAME``: the value of the ``format`` column;
- ``JSONL``: True when its files hold one document per line (the adapter then sees the list of
  decoded lines), False for one JSON document per file;
- ``sniff(doc) -> bool``: whether a decoded document (for JSONL: the first readable line) is its;
- ``parse(doc, path) -> list[Episode]`` and ``summarize(doc, path) -> list[dict]``: the episodes,
  or just their index rows (the columns of ``run.EPISODE_COLUMNS`` plus ``warnings``).

Both may raise ``ValueError`` with a plain-words reason. ``read_file`` and ``summarize_file`` are
the entry points: bytes in, episodes (or rows), per-file errors, or "something else" out.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Any

from ares_viewer import jsondecode, model
from ares_viewer.formats import ares

ADAPTERS = (ares,)

_JSON_SUFFIXES = (".json",)
_JSONL_SUFFIXES = (".jsonl",)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, slots=True)
class FileResult:
    """What one file yielded: episodes (or their index rows), errors, or nothing: it is something else.

    A file can yield both: a JSONL file with one corrupt line loads every other line and reports
    the bad line in ``errors``.
    """

    episodes: tuple[model.Episode, ...] = ()
    rows: tuple[dict[str, Any], ...] = ()
    errors: tuple[str, ...] = ()
    skipped: bool = False


def is_candidate(path: str) -> bool:
    """True for files that may hold episodes (judged by name; content decides)."""
    return path.lower().endswith(_JSON_SUFFIXES + _JSONL_SUFFIXES)


def _looks_like_episode_name(path: str) -> bool:
    return bool(_UUID.match(pathlib.PurePath(path).stem))


def _decode(path: str, data: bytes) -> tuple[Any, bool, list[str], list[str]]:
    """The decoded document, whether it is JSONL, decoding warnings and per-line errors.

    Raises:
        jsondecode.DecodeError: when nothing in the file is readable.
    """
    if path.lower().endswith(_JSONL_SUFFIXES):
        values, warnings, errors = [], [], []
        for _, item in jsondecode.decode_lines(data):
            if isinstance(item, jsondecode.DecodeError):
                errors.append(str(item))
            else:
                values.append(item.value)
                warnings.extend(item.warnings)
        if not values:
            raise jsondecode.DecodeError(errors[0] if errors else "empty file")
        return values, True, warnings, errors
    decoded = jsondecode.decode(data)
    return decoded.value, False, list(decoded.warnings), []


def _read(path: str, data: bytes, summaries: bool) -> FileResult:
    try:
        doc, is_lines, warnings, errors = _decode(path, data)
    except jsondecode.DecodeError as exc:
        return FileResult(errors=(str(exc),))
    for adapter in ADAPTERS:
        if is_lines != adapter.JSONL or not adapter.sniff(doc[0] if is_lines else doc):
            continue
        try:
            if summaries:
                rows = adapter.summarize(doc, path)
                for row in rows:
                    row["warnings"] = [*warnings, *row["warnings"]]
                return FileResult(rows=tuple(rows), errors=tuple(errors))
            episodes = adapter.parse(doc, path)
        except ValueError as exc:
            return FileResult(errors=(f"not a readable {adapter.NAME} episode: {exc}", *errors))
        if warnings:
            episodes = [dataclasses.replace(e, warnings=(*warnings, *e.warnings)) for e in episodes]
        return FileResult(episodes=tuple(episodes), errors=tuple(errors))
    if _looks_like_episode_name(path):
        found = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else f"a JSON {type(doc).__name__}"
        return FileResult(errors=(f"named like an episode but not one: no 'steps' and 'episode_id' (found: {found})",))
    return FileResult(skipped=True)


def read_file(path: str, data: bytes) -> FileResult:
    """Read one file's bytes into episodes.

    Undecodable JSON is an error (the file may be a half-written episode); valid JSON that no
    adapter recognizes is skipped, unless its name is an episode id, which makes it an error.
    """
    return _read(path, data, summaries=False)


def summarize_file(path: str, data: bytes) -> FileResult:
    """Like ``read_file`` but yields only the episodes' index rows (``FileResult.rows``), faster."""
    return _read(path, data, summaries=True)
