"""The format adapters this viewer reads, in the order their ``sniff`` is asked: ``ADAPTERS``, then the ones
other packages add through the ``ares_viewer.formats`` entry-point group.

A file's format is the first adapter whose ``sniff`` claims its first record. The built-in adapters come first
and are strict, so an added format reads only files none of them claims; its entry point names a
``base.Adapter`` (``[project.entry-points."ares_viewer.formats"] myformat = "mypackage.myformat:ADAPTER"``).
Entry points are read on the first record no built-in adapter claims, once per process.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from typing import Any

from ares_viewer.base import cache
from ares_viewer.formats.adapters import ares, atif, inspect_ai, mini_swe_agent, ray_runner, tinker
from ares_viewer.formats.base import Adapter

# Sniffed in this order; each sniff is strict enough that no two claim the same record.
ADAPTERS: tuple[Adapter, ...] = (
    ares.ADAPTER,
    mini_swe_agent.ADAPTER,
    ray_runner.ADAPTER,
    tinker.ADAPTER,
    atif.ADAPTER,
    inspect_ai.ADAPTER,
)

ENTRY_POINTS = "ares_viewer.formats"
"""The entry-point group through which another package adds a format."""

_PLUGINS: cache.BoundedCache[tuple[Adapter, ...]] = cache.BoundedCache(maxsize=1)


def _load_plugins() -> tuple[Adapter, ...]:
    """The adapters of the ``ares_viewer.formats`` entry points, by entry-point name. One that fails to load, is
    no ``base.Adapter`` or takes a name already read is left out with a warning naming it and why."""
    found: list[Adapter] = []
    names = {adapter.NAME for adapter in ADAPTERS}
    for point in sorted(importlib.metadata.entry_points(group=ENTRY_POINTS), key=lambda p: p.name):
        where = f"format entry point {point.name!r} ({point.value})"
        try:
            adapter = point.load()
        except Exception as exc:  # another package's code: whatever it raises leaves that format out, not the rest
            warnings.warn(f"{where} left out: it failed to load ({type(exc).__name__}: {exc})", stacklevel=2)
            continue
        if not isinstance(adapter, Adapter):
            warnings.warn(f"{where} left out: it names a {type(adapter).__name__}, not an "
                          "ares_viewer.formats.base.Adapter", stacklevel=2)
        elif adapter.NAME in names:
            warnings.warn(f"{where} left out: the format {adapter.NAME!r} is read already", stacklevel=2)
        else:
            names.add(adapter.NAME)
            found.append(adapter)
    return tuple(found)


def plugins() -> tuple[Adapter, ...]:
    """The adapters other packages add (read from their entry points on first use)."""
    return _PLUGINS.get_or_compute(ENTRY_POINTS, _load_plugins)


def adapters() -> tuple[Adapter, ...]:
    """Every adapter, in sniffing order: ``ADAPTERS``, then the added ones."""
    return ADAPTERS + plugins()


def sniff(doc: Any) -> Adapter | None:
    """The adapter that claims a decoded record, or None when none does."""
    claimed = next((a for a in ADAPTERS if a.sniff(doc)), None)
    return claimed if claimed is not None else next((a for a in plugins() if a.sniff(doc)), None)


def misnamed(path: str) -> str | None:
    """Why a file named like one format's files is an error when no adapter claims it (None for other names)."""
    return next((reason for a in adapters() if (reason := a.misnamed(path))), None)
