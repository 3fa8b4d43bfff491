"""One small bounded cache for every module that keeps state between calls.

Module state is visible and bounded: a module that caches says so with a module-level
``BoundedCache(maxsize=..., ttl=...)`` and nothing else. Entries are evicted least recently used
first; with ``ttl`` (seconds) an entry also expires that long after it was stored. Every method
takes one lock, so threads (the app serves several sessions from one process) share a cache safely.

Every cache is registered where it is made, here (``caches()``), so one call empties them all: ``clear_all()``,
for a test that must start from nothing, or a notebook after the files under a run changed in place.

Built on ``cachetools`` (a dependency of Streamlit too), which is not thread-safe by itself.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import cachetools

V = TypeVar("V")

_MISSING: Any = object()

# Every live cache: the module caches, and those of live objects (a run's opened episodes) until they go.
_ALL: weakref.WeakSet[BoundedCache[Any]] = weakref.WeakSet()
_ALL_LOCK = threading.Lock()


def caches() -> list[BoundedCache[Any]]:
    """Every cache alive in this process."""
    with _ALL_LOCK:
        return list(_ALL)


def clear_all() -> None:
    """Empty every cache: what the process computes next is computed anew."""
    for found in caches():
        found.clear()


class BoundedCache(Generic[V]):
    """At most ``maxsize`` entries, least recently used evicted first, optionally expiring after ``ttl`` seconds."""

    def __init__(self, maxsize: int, ttl: float | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self.ttl = ttl
        self._lock = threading.Lock()
        self._data: cachetools.Cache = (
            cachetools.TTLCache(maxsize=maxsize, ttl=ttl) if ttl is not None else cachetools.LRUCache(maxsize=maxsize)
        )
        with _ALL_LOCK:
            _ALL.add(self)

    def get(self, key: Hashable, default: V | None = None) -> V | None:
        """The cached value, or ``default`` when there is none (or it expired)."""
        with self._lock:
            return self._data.get(key, default)

    def put(self, key: Hashable, value: V) -> V:
        """Store ``value`` (evicting the least recently used entry when full) and return it."""
        with self._lock:
            self._data[key] = value
        return value

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The cached value, else ``compute()`` stored and returned.

        ``compute`` runs outside the lock, so two threads asking for one missing key may both compute it;
        the later result wins. That keeps a slow computation from blocking every other key.
        """
        with self._lock:
            value = self._data.get(key, _MISSING)
        if value is _MISSING:
            value = self.put(key, compute())
        return value

    def pop(self, key: Hashable, default: V | None = None) -> V | None:
        with self._lock:
            return self._data.pop(key, default)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __repr__(self) -> str:
        ttl = f", ttl={self.ttl:g}" if self.ttl is not None else ""
        return f"BoundedCache(maxsize={self.maxsize}{ttl}, entries={len(self)})"
