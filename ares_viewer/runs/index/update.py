"""Bringing a run's index up to date: only new or changed files are summarized again.

A file is known by its path, size and mtime. A changed or removed file's old rows leave with its partition:
the partition is written again without them (under a new name) and the manifest is replaced last.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import tempfile
from collections.abc import Collection

from ares_viewer.base import atomic, locations
from ares_viewer.runs import index_cache, sources
from ares_viewer.runs.index import builder, store

_LOGGER = logging.getLogger(__name__)
# More partitions than this and the small ones (under _SMALL_PART_BYTES) are merged into one.
_MAX_PARTS = 64
_SMALL_PART_BYTES = 16 * 1024 * 1024


def cache_root() -> pathlib.Path:
    """The folder the run indexes live in (under the user's cache folder, never in a run)."""
    return index_cache.cache_dir() / f"index-v{store.SCHEMA}"


def canonical(location: str) -> str:
    """The spelling of a location an index is keyed by (local paths made absolute)."""
    return locations.Location.of(location).canonical()


def store_for(location: str, *, use_cache: bool = True) -> tuple[store.Store, bool]:
    """The run's index folder in the cache, or a temporary one (``True``: remove it when done) when the cache is
    not wanted or cannot be written (then the run is simply parsed again next time)."""
    if use_cache:
        folder = cache_root() / store.index_key(canonical(location))
        try:
            (folder / "parts").mkdir(parents=True, exist_ok=True)
            return store.Store(folder), False
        except OSError as exc:
            _LOGGER.warning("index cache disabled (%s): %s", folder, exc)
    return store.Store(tempfile.mkdtemp(prefix="ares-viewer-index-")), True


@dataclasses.dataclass(frozen=True)
class Update:
    """The index after an update: its entries by path, and how many files had to be summarized."""

    entries: dict[str, store.FileEntry]
    parsed: int
    changed: frozenset[str] = frozenset()  # the files parsed (new or changed)
    manifest: store.ManifestKey | None = None  # the key of the manifest holding ``entries`` (None: not known)


def _without(target: store.Store, part: str, dropped: set[str]) -> str | None:
    """The partition written again without the rows of ``dropped`` files (None when nothing is left)."""
    source = target.part_path(part)
    name = target.new_part_name()
    with store.connection() as con:
        con.execute("CREATE TEMP TABLE dropped AS SELECT unnest(?) AS path", [sorted(dropped)])
        left = con.execute(f"SELECT count(*) FROM read_parquet('{source}') WHERE path NOT IN (SELECT path FROM dropped)"
                           ).fetchall()[0][0]
        if not left:
            return None
        with atomic.written(target.parts / name) as tmp:
            con.execute(f"COPY (SELECT * FROM read_parquet('{source}') WHERE path NOT IN (SELECT path FROM dropped) "
                        f"ORDER BY path, _seq) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)")
    return name


def _compacted(target: store.Store, entries: dict[str, store.FileEntry]) -> dict[str, store.FileEntry]:
    """Small partitions merged into one once there are many (a run followed for hours adds one per refresh)."""
    sizes = {}
    for part in {e.part for e in entries.values() if e.part}:
        try:
            sizes[part] = os.path.getsize(target.part_path(part))
        except OSError:
            return entries
    small = sorted(p for p, size in sizes.items() if size < _SMALL_PART_BYTES)
    if len(sizes) <= _MAX_PARTS or len(small) < 2:
        return entries
    name = target.new_part_name()
    sources_ = [target.part_path(p) for p in small]
    with store.connection() as con, atomic.written(target.parts / name) as tmp:
        con.execute(f"COPY (SELECT * FROM read_parquet({sources_!r}, union_by_name = true)) TO '{tmp}' "
                    "(FORMAT parquet, COMPRESSION zstd)")
    merged = set(small)
    return {p: dataclasses.replace(e, part=name) if e.part in merged else e for p, e in entries.items()}


def update(target: store.Store, files: list[sources.SourceFile], *, workers: int | None = None,
           damaged: Collection[str] = ()) -> Update:
    """Summarize the files that are new or changed since the index was last written, and commit.

    A partition that is gone or damaged (``store.Store.damaged``, or named in ``damaged``) heals: the files it held
    are read again, as if they had changed.
    """
    known, key = target.read_keyed()
    broken = target.damaged(known) | set(damaged)
    if broken:
        _LOGGER.warning("index %s: %d partition(s) missing or damaged; their files are read again", target.folder,
                        len(broken))
    current = {f.path for f in files}
    changed = [f for f in files
               if (e := known.get(f.path)) is None or e.key != (f.size, f.mtime_ns) or (e.part and e.part in broken)]
    gone = (set(known) - current) | {f.path for f in changed if f.path in known}
    if not changed and not (set(known) - current):
        return Update(known, 0, manifest=key)
    kept = {p: e for p, e in known.items() if p not in gone}
    # Partitions that held a changed or removed file lose its rows; the other files in them move along (a broken
    # one's files are all read again).
    touched = {part for part in (known[p].part for p in gone) if part} - broken
    for part in touched:
        renamed = _without(target, part, {p for p in gone if known[p].part == part})
        for path, entry in list(kept.items()):
            if entry.part == part:
                kept[path] = dataclasses.replace(entry, part=renamed)
    fresh = builder.build(changed, target, workers=workers)
    kept.update((e.path, e) for e in fresh)
    kept = _compacted(target, kept)
    key = target.write_manifest(kept.values(), known)
    return Update(kept, len(changed), frozenset(f.path for f in changed), key)
