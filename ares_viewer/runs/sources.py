"""Where episode files are: a folder, one file, a glob, or an fsspec URL.

Local paths are walked with ``os.scandir`` (fast stats for the index); anything with a URL scheme
goes through fsspec, so remote runs need no special code.

Listing and reading are bounded, so a location that is far too big (``/``, a whole bucket) or a file that is
far too large costs bounded time and memory:

- a walk looks at most ``ARES_VIEWER_WALK_MAX_ENTRIES`` files and folders (default 500,000) and goes at most
  ``ARES_VIEWER_WALK_MAX_DEPTH`` folders deep (default 12); past either bound it stops, keeps what it found and
  says so in ``Listing.cut``;
- one file is read only up to ``ARES_VIEWER_MAX_FILE_MB`` megabytes (default 512): a larger one is an error
  for that file (``FileTooLargeError``), judged by its size before reading and again while reading.

A walk never enters a symlinked folder. Given ``within`` (a server reachable from other machines passes its runs
folder), a listing also leaves out every file whose real path, symlinks resolved, lies outside that folder, and
refuses a location that resolves outside it: a symlink in a run cannot bring in a file from elsewhere on disk.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import itertools
import os
import pathlib
import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import fsspec

from ares_viewer import formats
from ares_viewer.base import locations, settings
from ares_viewer.formats.sidecars import harbor
from ares_viewer.runs import companions

# Companion folders (``companions``): what a run keeps beside its episode files, each read on demand by the package
# that owns it. A listing does not walk into one: it notes where they are (``Listing.companions``), so they count as
# part of the run, not as other files. A folder only named like one (holding episodes) is walked like any other.
SNAPSHOTS_DIRNAME = companions.SNAPSHOTS_DIRNAME
ACTIVATIONS_DIRNAME = companions.ACTIVATIONS_DIRNAME
COMPANION_FOLDERS = companions.COMPANION_FOLDERS
# Folders that hold other things than episodes: VCS and caches, and the filesystem copy of an episode-boundary
# snapshot (a folder despite its name, holding a whole container's files).
_SKIP_DIRS = frozenset({".git", "__pycache__", ".ipynb_checkpoints", "node_modules", "container_fs.tar.gz"})

MAX_ENTRIES_ENV = settings.WALK_MAX_ENTRIES.name
MAX_DEPTH_ENV = settings.WALK_MAX_DEPTH.name
MAX_FILE_MB_ENV = settings.MAX_FILE_MB.name
# Files and folders one walk looks at: a run of 100,000 episodes fits; the whole disk does not.
DEFAULT_MAX_ENTRIES = settings.WALK_MAX_ENTRIES.default
# Folders below the location a walk enters (runs nest episodes 1-3 folders deep).
DEFAULT_MAX_DEPTH = settings.WALK_MAX_DEPTH.default
# Megabytes of one episode file read at most (a 250-step ARES episode with full contexts is about 30 MB).
DEFAULT_MAX_FILE_MB = settings.MAX_FILE_MB.default
_MB = 1024 * 1024


class LocationError(FileNotFoundError):
    """The location does not exist or cannot be listed; the message says which and why."""


class FileTooLargeError(OSError):
    """A file is larger than one file may be (``ARES_VIEWER_MAX_FILE_MB``); the message says how large."""


@dataclasses.dataclass(frozen=True, slots=True)
class SourceFile:
    """One file of a run, with what the index keys it by."""

    path: str
    size: int
    mtime_ns: int


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """How far a walk goes and how much of one file is read (see the module's docstring for the settings)."""

    max_entries: int = DEFAULT_MAX_ENTRIES
    max_depth: int = DEFAULT_MAX_DEPTH
    max_file_bytes: int = DEFAULT_MAX_FILE_MB * _MB

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The limits the environment sets (a missing setting keeps its default).

        Raises:
            settings.SettingError: a setting is not a whole number above zero.
        """
        return cls(max_entries=settings.WALK_MAX_ENTRIES.get(environ), max_depth=settings.WALK_MAX_DEPTH.get(environ),
                   max_file_bytes=settings.MAX_FILE_MB.get(environ) * _MB)


@dataclasses.dataclass(frozen=True, slots=True)
class Listing:
    """The candidate files at a location, why the listing stopped early (None when it is complete), and the
    companion folders found beside the files (``COMPANION_FOLDERS``: paths, sorted; not walked into)."""

    files: list[SourceFile]
    cut: str | None = None
    companions: tuple[str, ...] = ()

    def companion_kinds(self) -> list[str]:
        """What the companion folders hold (``COMPANION_FOLDERS``' words), each once, in declared order."""
        names = {companions.folder_name(path) for path in self.companions}
        return [what for name, what in COMPANION_FOLDERS.items() if name in names]


def _has_glob(location: str) -> bool:
    return any(ch in location for ch in "*?[")


def _cut_message(location: str, limits: Limits, entries: bool, depth: bool) -> str | None:
    reasons = []
    if entries:
        reasons.append(f"stopped after looking at {limits.max_entries:,} files and folders ({MAX_ENTRIES_ENV})")
    if depth:
        reasons.append(f"folders more than {limits.max_depth} levels deep were not searched ({MAX_DEPTH_ENV})")
    if not reasons:
        return None
    return f"{location}: the listing is incomplete: " + "; ".join(reasons) + ". Only the files found are shown."


def inside(path: str, folder: str) -> bool:
    """Whether ``path``, symlinks resolved, is ``folder`` (resolved too) or lies under it."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _local_walk(root: str, limits: Limits, within: str | None = None) -> Listing:
    found: list[SourceFile] = []
    found_companions: list[str] = []
    stack = [(root, 0)]
    seen = 0
    too_many = too_deep = False
    while stack and not too_many:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(itertools.islice(listing, limits.max_entries - seen + 1))
        except OSError as exc:
            if folder == root:
                raise LocationError(f"{root}: cannot list the folder ({exc.strerror})") from exc
            continue
        if seen + len(entries) > limits.max_entries:
            entries = entries[:limits.max_entries - seen]
            too_many = True
        seen += len(entries)
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in COMPANION_FOLDERS and companions.is_local_companion(entry.path):
                        found_companions.append(entry.path)
                        continue
                    if entry.name in _SKIP_DIRS:
                        continue
                    if depth >= limits.max_depth:
                        too_deep = True
                    else:
                        stack.append((entry.path, depth + 1))
                elif formats.is_candidate(entry.name) and entry.is_file():
                    if within is not None and entry.is_symlink() and not inside(entry.path, within):
                        continue  # a link out of the folder the walk is confined to
                    st = entry.stat()
                    found.append(SourceFile(entry.path, st.st_size, st.st_mtime_ns))
            except OSError:  # vanished or unreadable since the folder was listed
                continue
    return Listing(sorted(found, key=lambda f: f.path), _cut_message(root, limits, too_many, too_deep),
                   tuple(sorted(found_companions)))


def _local_file(path: str) -> SourceFile:
    st = os.stat(path)
    return SourceFile(path, st.st_size, st.st_mtime_ns)


def _in_skipped_folder(path: str, pattern: str, is_companion: Callable[[str], bool]) -> bool:
    """Whether a glob's match lies in a folder a walk skips, below the pattern's fixed part (a pattern may name
    ``snapshots`` itself: only folders its wildcards reached count)."""
    fixed = 0
    for part in pathlib.PurePath(pattern).parts:
        if _has_glob(part):
            break
        fixed += 1
    parts = pathlib.PurePath(path).parts
    for i in range(fixed, len(parts) - 1):
        if parts[i] in _SKIP_DIRS:
            return True
        if parts[i] in COMPANION_FOLDERS and is_companion(str(pathlib.PurePath(*parts[:i + 1]))):
            return True
    return False


def _local_glob(pattern: str, limits: Limits, within: str | None = None) -> Listing:
    matches = list(itertools.islice(glob.iglob(pattern, recursive=True), limits.max_entries + 1))
    cut = len(matches) > limits.max_entries
    companion = functools.cache(companions.is_local_companion)
    files = []
    for match in matches[:limits.max_entries]:
        if within is not None and not inside(match, within):
            continue
        if formats.is_candidate(match) and not _in_skipped_folder(match, pattern, companion) and os.path.isfile(match):
            try:
                files.append(_local_file(os.path.abspath(match)))
            except OSError:
                continue
    return Listing(sorted(files, key=lambda f: f.path), _cut_message(pattern, limits, cut, False))


def _mtime_ns(info: dict) -> int:
    mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
    if hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    try:
        return int(float(mtime) * 1e9)
    except (TypeError, ValueError):
        return 0


def _remote_companion(fs) -> Callable[[str], bool]:
    """``companions.is_companion`` for folders of an fsspec filesystem (each folder judged once)."""

    def subfolders(path: str, at_most: int) -> list[str]:
        listed = itertools.islice(fs.ls(path, detail=True), at_most)
        return [info["name"] for info in listed if info.get("type") == "directory"
                and not info["name"].rstrip("/").rsplit("/", 1)[-1].startswith(".")]

    return functools.cache(lambda folder: companions.is_companion(folder, fs.isfile, subfolders, posixpath.join))


class _RemoteWalk:
    """Everything under a remote folder as ``(name, info)``, pruned like a local walk; ``too_deep`` once walked."""

    def __init__(self, fs, path: str, limits: Limits, is_companion: Callable[[str], bool]) -> None:
        self.fs, self.path, self.limits, self.is_companion = fs, path, limits, is_companion
        self.too_deep = False
        self.companions: list[str] = []

    def __iter__(self) -> Iterator[tuple[str, dict]]:
        base = self.path.rstrip("/").count("/")
        for folder, dirs, files in self.fs.walk(self.path, maxdepth=self.limits.max_depth + 1, detail=True):
            folder = folder.rstrip("/")
            for name in [n for n in dirs if n in _SKIP_DIRS or n.startswith(".") or n in COMPANION_FOLDERS]:
                if name in COMPANION_FOLDERS:
                    if not self.is_companion(f"{folder}/{name}"):
                        continue  # named like one, holding something else: walked
                    self.companions.append(self.fs.unstrip_protocol(f"{folder}/{name}"))
                del dirs[name]
            if dirs and folder.count("/") - base >= self.limits.max_depth:
                self.too_deep = True
            yield from ((info.get("name") or f"{folder}/{name}", info) for name, info in files.items())
            yield from ((f"{folder}/{name}", {"type": "directory"}) for name in dirs)


def _remote(location: str, limits: Limits) -> Listing:
    fs, path = fsspec.core.url_to_fs(location)
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
    if protocol in ("file", "local"):
        return listing(path, limits)
    walk = None
    companion = _remote_companion(fs)
    if _has_glob(path):
        infos: Iterable[tuple[str, dict]] = ((p, fs.info(p)) for p in fs.glob(path, maxdepth=limits.max_depth + 1))
    elif fs.isdir(path):
        infos = walk = _RemoteWalk(fs, path, limits, companion)
    elif fs.exists(path):
        infos = [(path, fs.info(path))]
    else:
        raise LocationError(f"{location}: no such file or folder")
    taken = list(itertools.islice(infos, limits.max_entries + 1))
    too_many = len(taken) > limits.max_entries
    files = []
    for name, info in taken[:limits.max_entries]:
        skipped = _has_glob(path) and _in_skipped_folder(name, path, companion)
        if info.get("type") == "directory" or skipped or not formats.is_candidate(name):
            continue
        files.append(SourceFile(fs.unstrip_protocol(name), int(info.get("size") or 0), _mtime_ns(info)))
    cut = _cut_message(location, limits, too_many, bool(walk and walk.too_deep))
    return Listing(sorted(files, key=lambda f: f.path), cut, tuple(sorted(walk.companions)) if walk else ())


def listing(location: str | os.PathLike, limits: Limits | None = None, *, within: str | None = None) -> Listing:
    """The candidate episode files at a location, sorted by path, within the walk's bounds.

    Args:
        location: a folder, file, glob or fsspec URL.
        limits: the walk's bounds (the environment's when None).
        within: a local folder no listed file may lie outside of once symlinks are resolved (None: any).

    Raises:
        LocationError: when the location does not exist or cannot be read, or resolves outside ``within``.
    """
    limits = limits or Limits.from_env()
    location = os.fspath(location)
    if within is not None and locations.is_local(location) and not _has_glob(location) \
            and not inside(os.path.expanduser(location), within):
        raise LocationError(f"{location}: resolves outside {within} (symlinks out of it are not followed)")
    if not locations.is_local(location):
        try:
            return _remote(location, limits)
        except LocationError:
            raise
        except (OSError, ValueError, ImportError) as exc:
            raise LocationError(f"{location}: cannot open ({type(exc).__name__}: {exc})") from exc
    location = os.path.expanduser(location)
    if os.path.isdir(location):
        return _local_walk(os.path.abspath(location), limits, within)
    if os.path.isfile(location):
        return Listing([_local_file(os.path.abspath(location))])
    if _has_glob(location):
        return _local_glob(location, limits, within)
    raise LocationError(f"{location}: no such file or folder")


def list_files(location: str | os.PathLike, limits: Limits | None = None, *,
               within: str | None = None) -> list[SourceFile]:
    """The candidate episode files at a location, sorted by path (``listing(...).files``).

    Raises:
        LocationError: when the location does not exist or cannot be read (or resolves outside ``within``).
    """
    return listing(location, limits, within=within).files


def _too_large(size: int, limit: int) -> FileTooLargeError:
    return FileTooLargeError(f"the file is {size / _MB:,.0f} MB, over the {limit / _MB:,.0f} MB one file may be "
                             f"({MAX_FILE_MB_ENV} raises it)")


def read_bytes(path: str, limits: Limits | None = None) -> bytes:
    """The whole content of a file (local path or URL), at most ``limits.max_file_bytes`` of it.

    Raises:
        FileTooLargeError: when the file is larger (by its size, or by what reading it gives).
        OSError: when it cannot be read.
    """
    limit = (limits or Limits.from_env()).max_file_bytes
    opener = fsspec.open(path, "rb") if not locations.is_local(path) else open(path, "rb")  # noqa: SIM115
    with opener as handle:
        size = getattr(handle, "size", None) if not locations.is_local(path) else os.fstat(handle.fileno()).st_size
        if isinstance(size, int) and size > limit:
            raise _too_large(size, limit)
        # Asked for at most one byte past the size the file says it has (a file that grew shows as too large all
        # the same): ``read(n)`` allocates n bytes first, and n = the limit (512 MiB) took 7 times as long as the
        # read itself on episode files of a few MB.
        data = handle.read((size if isinstance(size, int) else limit) + 1)
        if isinstance(size, int) and len(data) > size and len(data) <= limit:
            data += handle.read(limit + 1 - len(data))  # grew while read: the rest, up to the limit
    if len(data) > limit:
        raise _too_large(max(len(data), size or 0), limit)
    return data


def read_tail(path: str, most: int) -> tuple[bytes, int]:
    """The last ``most`` bytes of a file (local path or URL) and the file's whole size: a test runner's summary,
    which comes last, without reading a log of any size whole.

    Raises:
        OSError: when it cannot be read (FileNotFoundError when it is not there).
    """
    opener = fsspec.open(path, "rb") if not locations.is_local(path) else open(path, "rb")  # noqa: SIM115
    with opener as handle:
        size = getattr(handle, "size", None) if not locations.is_local(path) else os.fstat(handle.fileno()).st_size
        if isinstance(size, int) and size > most:
            handle.seek(size - most)
        data = handle.read(most)
    return data, size if isinstance(size, int) else len(data)


def read_text_tail(path: str, most: int) -> tuple[str, int] | None:
    """``read_tail`` as text (UTF-8, an undecodable byte replaced), or None when the file is not there or cannot be
    read: for an optional file beside an episode (a harbor trial's verifier output), without which it still opens."""
    try:
        data, size = read_tail(path, most)
    except OSError:
        return None
    return data.decode("utf-8", "replace"), size


def test_output(trial: Mapping[str, Any]) -> tuple[str, int] | None:
    """A harbor trial's verifier output (``harbor.test_output_path``): its last ``harbor.TEST_OUTPUT_BYTES`` as
    text and the file's size, or None when it is not there (``read_text_tail``)."""
    return read_text_tail(harbor.test_output_path(trial), harbor.TEST_OUTPUT_BYTES)
