"""One fsspec mirror for both kinds of snapshot: a remote folder copied file by file into the local cache.

A run read through fsspec (``s3://``, ``gs://``, ``memory://``...) has its snapshot folders copied into the index
cache folder (``ARES_VIEWER_CACHE``), never into the run, and read from there like local ones. Archives are
copied as they are, never extracted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import posixpath
import shutil
import threading
from collections.abc import Collection
from typing import Any

from ares_viewer.runs import index_cache

_LOGGER = logging.getLogger(__name__)


def url_to_fs(url: str) -> tuple[Any, str, bool]:
    """The fsspec filesystem of ``url``, the path on it, and whether that filesystem is the local one.

    Raises:
        ValueError, OSError: As fsspec does for a URL it cannot resolve.
    """
    import fsspec  # an optional dependency for remote runs only

    fs, path = fsspec.core.url_to_fs(url)
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    return fs, path, protocol in ("file", "local")


def mirror_remote(fs: Any, remote: str, kind: str, name: str, *, only: Collection[str] | None = None
                  ) -> pathlib.Path | None:
    """Copy a folder of a remote filesystem file by file into the local cache; the copy's path (None on failure).

    The copy is ``<cache>/<kind>/<hash of the remote folder>/<hash of its listing>/<name>``, in the index cache
    folder (``ARES_VIEWER_CACHE``), never in the run. It is fetched again only when the remote listing (names,
    sizes, modification times) changes. A copy is written beside its place and renamed into it whole, and never
    replaced: processes and threads mirroring the same folder at once (a search's branches) each get a whole
    copy, and none removes the copy another is reading. Files are copied as they are: archives are never
    extracted.

    Args:
        fs: An fsspec filesystem.
        remote: The folder's path on ``fs``.
        kind: The cache subfolder (what the copies are).
        name: The copy's folder name (a plain name).
        only: Copy only these top-level names of the folder (default: everything under it).
    """
    try:
        listing = fs.find(remote, detail=True)
    except OSError as exc:
        _LOGGER.warning("%s: cannot list it (%s)", remote, exc)
        return None
    files: dict[str, str] = {}
    for remote_name, info in sorted(listing.items()):
        relative = posixpath.relpath(remote_name, remote)
        parts = pathlib.PurePosixPath(relative).parts
        if info.get("type") == "directory":
            continue
        if relative.startswith("/") or not parts or any(part in ("", ".", "..") for part in parts):
            _LOGGER.warning("%s: member %r is not a plain relative path; skipped", remote, remote_name)
            continue
        if only is None or parts[0] in only:
            files[relative] = remote_name
    stamp = json.dumps([[r, listing[n].get("size"), str(listing[n].get("mtime") or listing[n].get("LastModified"))]
                        for r, n in files.items()])
    folder = index_cache.cache_dir() / kind / hashlib.sha256(fs.unstrip_protocol(remote).encode()).hexdigest()[:24]
    version = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    mirror = folder / version / name
    if mirror.is_dir():  # a version folder exists only whole: it is renamed into place once its files are all there
        return mirror
    partial = folder / f".{version}.partial-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        target_root = partial / name
        target_root.mkdir(parents=True, exist_ok=True)
        for relative, remote_name in files.items():
            target = target_root.joinpath(*pathlib.PurePosixPath(relative).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fs.cat_file(remote_name))
        partial.rename(folder / version)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if mirror.is_dir():  # another process or thread put the same version in place first: it is as good
            return mirror
        _LOGGER.warning("%s: cannot copy it into the cache (%s)", remote, exc)
        return None
    _drop_versions(folder, keep=version)
    return mirror


def _drop_versions(folder: pathlib.Path, keep: str) -> None:
    """Remove the copies of earlier listings of a remote folder (never one being written: their names start
    with a dot). A reader of an earlier version loses it only when the remote folder changed meanwhile."""
    for entry in folder.iterdir():
        if entry.name != keep and not entry.name.startswith("."):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
