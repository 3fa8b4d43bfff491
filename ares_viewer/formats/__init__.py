"""Format adapters: detect what a file holds by its content and read it into ``model.Episode``.

Each adapter module offers ``NAME``, ``sniff(doc) -> bool`` and ``parse(doc, path) -> Episode``.
``read_file`` is the one entry point: bytes in, episodes or a plain-words reason out.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Any

from ares_viewer import jsondecode, model
from ares_viewer.formats import ares

ADAPTERS = (ares,)

# Files a run folder holds beside its episodes; valid JSON that is not an episode is skipped too.
_EPISODE_SUFFIXES = (".json",)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, slots=True)
class FileResult:
    """What one file yielded: episodes (or their index rows), an error, or nothing: it is something else."""

    episodes: tuple[model.Episode, ...] = ()
    rows: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    skipped: bool = False
    warnings: tuple[str, ...] = ()


def is_candidate(path: str) -> bool:
    """True for files that may hold episodes (judged by name; content decides)."""
    return path.lower().endswith(_EPISODE_SUFFIXES)


def _looks_like_episode_name(path: str) -> bool:
    return bool(_UUID.match(pathlib.PurePath(path).stem))


def _read(path: str, data: bytes, summaries: bool) -> FileResult:
    try:
        decoded = jsondecode.decode(data)
    except jsondecode.DecodeError as exc:
        return FileResult(error=str(exc))
    for adapter in ADAPTERS:
        if not adapter.sniff(decoded.value):
            continue
        try:
            if summaries:
                row = adapter.summarize(decoded.value, path)
                row["warnings"] = [*decoded.warnings, *row["warnings"]]
                return FileResult(rows=(row,), warnings=tuple(row["warnings"]))
            episode = adapter.parse(decoded.value, path)
        except ValueError as exc:
            return FileResult(error=f"not a readable {adapter.NAME} episode: {exc}")
        if decoded.warnings:
            episode = dataclasses.replace(episode, warnings=decoded.warnings + episode.warnings)
        return FileResult(episodes=(episode,), warnings=episode.warnings)
    if _looks_like_episode_name(path):
        kind = type(decoded.value).__name__
        keys = ", ".join(list(decoded.value)[:6]) if isinstance(decoded.value, dict) else kind
        return FileResult(error=f"named like an episode but not one: no 'steps' and 'episode_id' (found: {keys})")
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
