"""Where episode files are: a folder, one file, a glob, or an fsspec URL.

Local paths are walked with ``os.scandir`` (fast stats for the index); anything with a URL scheme
goes through fsspec, so remote runs need no special code.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import pathlib

import fsspec

from ares_viewer import formats

# Folders that hold other things than episodes: per-step snapshots, VCS and caches, and the filesystem copy
# of an episode-boundary snapshot (a folder despite its name, holding a whole container's files).
_SKIP_DIRS = frozenset({"snapshots", ".git", "__pycache__", ".ipynb_checkpoints", "node_modules",
                        "container_fs.tar.gz"})


class LocationError(FileNotFoundError):
    """The location does not exist or cannot be listed; the message says which and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class SourceFile:
    """One file of a run, with what the index keys it by."""

    path: str
    size: int
    mtime_ns: int


def _has_glob(location: str) -> bool:
    return any(ch in location for ch in "*?[")


def _is_url(location: str) -> bool:
    return "://" in location


def _local_walk(root: str) -> list[SourceFile]:
    found: list[SourceFile] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            if folder == root:
                raise LocationError(f"{root}: cannot list the folder ({exc.strerror})") from exc
            continue
        for entry in entries:
            if entry.name.startswith(".") and entry.name not in (".", ".."):
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIP_DIRS:
                    stack.append(entry.path)
            elif entry.is_file() and formats.is_candidate(entry.name):
                st = entry.stat()
                found.append(SourceFile(entry.path, st.st_size, st.st_mtime_ns))
    return sorted(found, key=lambda f: f.path)


def _local_file(path: str) -> SourceFile:
    st = os.stat(path)
    return SourceFile(path, st.st_size, st.st_mtime_ns)


def _mtime_ns(info: dict) -> int:
    mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
    if hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    try:
        return int(float(mtime) * 1e9)
    except (TypeError, ValueError):
        return 0


def _remote(location: str) -> list[SourceFile]:
    fs, path = fsspec.core.url_to_fs(location)
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    if protocol in ("file", "local"):
        return list_files(path)
    if _has_glob(path):
        infos = {p: fs.info(p) for p in fs.glob(path)}
    elif fs.isdir(path):
        infos = fs.find(path, detail=True)
    elif fs.exists(path):
        infos = {path: fs.info(path)}
    else:
        raise LocationError(f"{location}: no such file or folder")
    files = []
    for name, info in infos.items():
        parts = set(pathlib.PurePosixPath(name).parts)
        if info.get("type") == "directory" or parts & _SKIP_DIRS or not formats.is_candidate(name):
            continue
        files.append(SourceFile(fs.unstrip_protocol(name), int(info.get("size") or 0), _mtime_ns(info)))
    return sorted(files, key=lambda f: f.path)


def list_files(location: str | os.PathLike) -> list[SourceFile]:
    """The candidate episode files at a location, sorted by path.

    Raises:
        LocationError: when the location does not exist or cannot be read.
    """
    location = os.fspath(location)
    if _is_url(location):
        try:
            return _remote(location)
        except LocationError:
            raise
        except (OSError, ValueError, ImportError) as exc:
            raise LocationError(f"{location}: cannot open ({type(exc).__name__}: {exc})") from exc
    location = os.path.expanduser(location)
    if os.path.isdir(location):
        return _local_walk(os.path.abspath(location))
    if os.path.isfile(location):
        return [_local_file(os.path.abspath(location))]
    if _has_glob(location):
        matches = sorted(glob.glob(location, recursive=True))
        return [_local_file(os.path.abspath(p)) for p in matches if os.path.isfile(p) and formats.is_candidate(p)]
    raise LocationError(f"{location}: no such file or folder")


def read_bytes(path: str) -> bytes:
    """The whole content of a file (local path or URL)."""
    if _is_url(path):
        with fsspec.open(path, "rb") as handle:
            return handle.read()
    with open(path, "rb") as handle:
        return handle.read()
