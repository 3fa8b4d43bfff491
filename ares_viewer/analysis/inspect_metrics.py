"""Inspect AI's own metrics of a run's logs (accuracy, stderr, ... as Inspect computed them when it wrote each log),
to show beside the figures ares-viewer computes from the samples, each with the file and field it comes from.

Inspect scores the samples it completed: an errored sample is left out of its metrics, so its accuracy and the
run's success rate may differ; both are shown, each saying what it counts.
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from ares_viewer.base import cache, locations
from ares_viewer.formats.adapters import inspect_ai
from ares_viewer.runs import sources

COLUMNS = ("log", "task", "model", "scorer", "metric", "value", "scored", "samples", "source")


# Local logs' metrics by (path, size, mtime, byte limit): read again when a log's size or time changes.
_CACHE: cache.BoundedCache[tuple[dict[str, Any], ...]] = cache.BoundedCache(maxsize=256)


def _cached(path: str, size: int, mtime_ns: int, max_bytes: int) -> tuple[dict[str, Any], ...]:
    """One local log's metrics, read again when its size or time changes."""
    return _CACHE.get_or_compute((path, size, mtime_ns, max_bytes), lambda: tuple(_read(path, max_bytes)))


def _read(path: str, max_bytes: int) -> list[dict[str, Any]]:
    try:
        data = sources.read_bytes(path, sources.Limits(max_file_bytes=max_bytes))
    except OSError:  # too large or gone: the run's errors say so
        return []
    return inspect_ai.log_metrics(path, data, max_bytes)


def of(run: Any) -> pd.DataFrame:
    """The metrics of every Inspect log the run lists episodes from (``COLUMNS``; no rows when it has none)."""
    paths = [path for (path,) in run.query("SELECT DISTINCT path FROM episodes WHERE format = ? ORDER BY path",
                                           [inspect_ai.NAME]).fetchall()]
    max_bytes = sources.Limits.from_env().max_file_bytes
    rows: list[dict[str, Any]] = []
    for path in paths:
        if locations.is_local(path):
            try:
                stat = os.stat(path)
            except OSError:
                continue
            rows.extend(_cached(path, stat.st_size, stat.st_mtime_ns, max_bytes))
        else:
            rows.extend(_read(path, max_bytes))
    return pd.DataFrame(rows, columns=list(COLUMNS))
