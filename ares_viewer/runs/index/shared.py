"""Indexes shared at a folder or fsspec location (an object store): pushed by whoever built them, pulled by
every reader, who then parses only the files that changed since.

A shared root holds one folder per run, named by ``store.index_key`` of the run's location, laid out like a
local index (``manifest.parquet``, ``parts/``). Partitions are immutable and uniquely named, so pulling copies
only the ones not here yet, and the manifest is written last.
"""

from __future__ import annotations

import logging
import os

import fsspec

from ares_viewer.base import atomic
from ares_viewer.runs.index import store

_LOGGER = logging.getLogger(__name__)


def _folder(root: str, location: str) -> str:
    return f"{root.rstrip('/')}/{store.index_key(location)}"


def pull(root: str, location: str, target: store.Store) -> bool:
    """Copy a shared index of ``location`` into ``target`` (missing partitions only); False when none is there.

    An unreachable or unreadable shared index is not an error: the run is then indexed here.
    """
    folder = _folder(root, location)
    try:
        fs, base = fsspec.core.url_to_fs(folder)
        if not fs.exists(f"{base}/manifest.parquet"):
            return False
        target.parts.mkdir(parents=True, exist_ok=True)
        manifest = target.folder / ".shared-manifest.parquet"
        fs.get(f"{base}/manifest.parquet", str(manifest))
        entries = target.read_manifest(manifest)
        for entry in entries.values():
            if entry.part and not os.path.exists(target.part_path(entry.part)):
                with atomic.written(target.part_path(entry.part)) as tmp:
                    fs.get(f"{base}/parts/{entry.part}", str(tmp))
        local = target.read_manifest()
        target.write_manifest({**local, **entries}.values(), local)
        manifest.unlink(missing_ok=True)
        return True
    except (OSError, ValueError, ImportError) as exc:
        _LOGGER.warning("shared index %s not read: %s", folder, exc)
        return False


def push(source: store.Store, root: str, location: str) -> str:
    """Copy a local index to the shared root (partitions first, manifest last); the folder written."""
    folder = _folder(root, location)
    fs, base = fsspec.core.url_to_fs(folder)
    fs.makedirs(f"{base}/parts", exist_ok=True)
    entries = source.read_manifest()
    there = {os.path.basename(p) for p in fs.ls(f"{base}/parts", detail=False)} if fs.exists(f"{base}/parts") else set()
    for part in sorted({e.part for e in entries.values() if e.part} - there):
        fs.put(source.part_path(part), f"{base}/parts/{part}")
    fs.put(str(source.manifest_path), f"{base}/manifest.parquet")
    return folder
