"""Episode-boundary snapshots, the upstream ARES layout (formats.md section 2), read without a Docker daemon.

ARES's proposed snapshot writer saves a whole container filesystem::

    {output_dir}/{snapshot_id}/snapshot.json          metadata, and the conversation at the snapshot
    {output_dir}/{snapshot_id}/container_fs.tar.gz    despite its name usually a folder: a copy of every
                                                      regular file under /; test doubles make it a gzip tar

A snapshot names no episode: it belongs to the episode and step whose conversation equals its
``agent_messages``. Step ``k``'s observation is the request sent after action ``k`` ran (step 0's is the
first request), so a snapshot whose messages equal step ``k``'s observation messages records the state after
action ``k`` ran: the same step numbering as ares-viewer's per-step snapshots (``docs/snapshots.md``).

Both variants are untrusted input. A folder is walked and read without following any symlink (each path is
opened component by component with ``O_NOFOLLOW``); a tarball is scanned with the per-step reader's member
checks (:mod:`.tar_safety`) and read into memory, never extracted. Problems raise
:class:`~.base.SnapshotError` naming the snapshot folder.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import os
import pathlib
import posixpath
import stat
import tarfile
import threading
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

from ares_viewer.base import locations
from ares_viewer.base.cache import BoundedCache
from ares_viewer.runs import companions
from ares_viewer.snapshots import mirror
from ares_viewer.snapshots.base import (
    ABSENT,
    DIR,
    FILE,
    MAX_MANIFEST_BYTES,
    OTHER,
    SNAPSHOTS_DIRNAME,
    SYMLINK,
    Entry,
    Snapshot,
    SnapshotError,
    absolute,
    check_budget,
)
from ares_viewer.snapshots.tar_safety import MAX_MEMBER_BYTES, scan_archive, tree_path

if TYPE_CHECKING:
    from ares_viewer import model

_LOGGER = logging.getLogger(__name__)

SNAPSHOT_JSON = companions.BOUNDARY_SNAPSHOT_JSON
CONTAINER_FS = "container_fs.tar.gz"
# A whole container filesystem: bounded so a hostile folder cannot exhaust memory.
MAX_TREE_ENTRIES = 1_000_000
# Folders looked at per searched location when looking for snapshots beside an episode file.
MAX_SEARCHED_FOLDERS = 20_000
_EMPTY: Mapping[str, Entry] = types.MappingProxyType({})
_READ_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class BoundaryRef:
    """An episode-boundary snapshot linked to a step, found without opening its filesystem.

    Attributes:
        path: The snapshot folder (``{output_dir}/{snapshot_id}``).
        episode_id: The episode whose conversation matches the snapshot's ``agent_messages``.
        step_index: The step after whose execution the conversation equals ``agent_messages``.
        snapshot_id: The snapshot's own id.
        created_at: When it was written (ISO-8601 local time, as the file says), or None.
    """

    path: str
    episode_id: str
    step_index: int
    snapshot_id: str
    created_at: str | None = None

    @property
    def records_base(self) -> bool:
        return False

    def open(self) -> BoundarySnapshot:
        return open_boundary(self)


@dataclasses.dataclass(frozen=True)
class _Header:
    """What linking needs from one ``snapshot.json``: its id and a digest per message."""

    path: str
    snapshot_id: str
    created_at: str | None
    digests: tuple[bytes, ...]  # one per agent message: the whole message
    contents: tuple[bytes, ...]  # one per agent message: role and text only


# ----- linking snapshots to steps -------------------------------------------------------------------------------


def _normal(value: Any) -> Any:
    """A message as compared: keys whose value is null are left out, at any depth (writers differ there)."""
    if isinstance(value, Mapping):
        return {str(k): _normal(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return value


def _digest(value: Any) -> bytes:
    text = json.dumps(_normal(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def _content_digest(role: Any, content: Any) -> bytes:
    return _digest([role, content])


def read_header(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The validated ``snapshot.json`` of a boundary snapshot folder.

    Raises:
        SnapshotError: When it is missing, too large, not a JSON object, or its fields have wrong types.
    """
    folder = pathlib.Path(folder)
    path = folder / SNAPSHOT_JSON
    try:
        info = path.lstat()
    except OSError as exc:
        raise SnapshotError(folder, f"missing {SNAPSHOT_JSON}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise SnapshotError(folder, f"{SNAPSHOT_JSON} is not a regular file")
    if info.st_size > MAX_MANIFEST_BYTES:
        raise SnapshotError(
            folder, f"{SNAPSHOT_JSON} is {info.st_size} bytes, over the {MAX_MANIFEST_BYTES} byte limit"
        )
    try:
        header = json.loads(path.read_bytes().decode("utf-8"))  # Python's json.dump may write NaN: accepted
    except (UnicodeDecodeError, ValueError, OSError) as exc:
        raise SnapshotError(folder, f"{SNAPSHOT_JSON} is not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise SnapshotError(folder, f"{SNAPSHOT_JSON} is nested too deeply to read") from exc
    if not isinstance(header, dict):
        raise SnapshotError(folder, f"{SNAPSHOT_JSON} is not a JSON object")
    checks = {"snapshot_id": str, "created_at": str, "step_count": int, "step_limit": int, "requires_reset": bool,
              "task_type": str, "task_data": dict, "container_type": str, "container_image": str,
              "container_dockerfile_path": str, "container_resources": dict}
    for key, kind in checks.items():
        value = header.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise SnapshotError(folder, f"{SNAPSHOT_JSON} field {key!r} should be {kind.__name__}, "
                                                  f"got {value!r:.80}")
    messages = header.get("agent_messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise SnapshotError(folder, f"{SNAPSHOT_JSON} field 'agent_messages' should be a list of messages")
    return header


# Linking headers by (folder, inode, size, mtime) of their snapshot.json, and a run's snapshot folders by its path.
_HEADER_CACHE: BoundedCache[_Header | SnapshotError] = BoundedCache(maxsize=50_000)
_LISTING_CACHE: BoundedCache[tuple[tuple[Any, ...], list[str]]] = BoundedCache(maxsize=64)


def _header(folder: pathlib.Path) -> _Header | SnapshotError:
    """The linking header of one snapshot folder, cached while its ``snapshot.json`` is unchanged."""
    try:
        info = (folder / SNAPSHOT_JSON).lstat()
        key: tuple[Any, ...] = (str(folder), info.st_ino, info.st_size, info.st_mtime_ns)
    except OSError:
        key = (str(folder),)
    cached = _HEADER_CACHE.get(key)
    if cached is not None:
        return cached
    try:
        raw = read_header(folder)
        messages = raw["agent_messages"]
        result: _Header | SnapshotError = _Header(
            path=str(folder),
            snapshot_id=raw.get("snapshot_id") or folder.name,
            created_at=raw.get("created_at"),
            digests=tuple(_digest(m) for m in messages),
            contents=tuple(_content_digest(m.get("role"), m.get("content")) for m in messages),
        )
    except SnapshotError as exc:
        result = exc
    except RecursionError:  # messages that parse but are nested too deeply to compare
        result = SnapshotError(folder, f"{SNAPSHOT_JSON} has messages nested too deeply to compare")
    except (TypeError, ValueError) as exc:  # a message the digest cannot encode
        result = SnapshotError(folder, f"{SNAPSHOT_JSON} has a message that cannot be compared ({exc})")
    return _HEADER_CACHE.put(key, result)


def _search_roots(run_dir: pathlib.Path) -> list[pathlib.Path]:
    return [run_dir, run_dir / SNAPSHOTS_DIRNAME]


def snapshot_folders(run_dir: str | os.PathLike[str]) -> list[str]:
    """Folders holding a ``snapshot.json`` directly under the run folder or under its ``snapshots/`` folder.

    The search is one level deep in each of those two places (at most ``MAX_SEARCHED_FOLDERS`` folders each),
    skips hidden folders and symlinks, and is cached until either folder's listing changes.
    """
    run_dir = pathlib.Path(run_dir)
    signature = []
    for root in _search_roots(run_dir):
        try:
            info = root.stat()
            signature.append((info.st_ino, info.st_mtime_ns))
        except OSError:
            signature.append(None)
    key = str(run_dir)
    cached = _LISTING_CACHE.get(key)
    if cached is not None and cached[0] == tuple(signature):
        return cached[1]
    found: list[str] = []
    for root, sig in zip(_search_roots(run_dir), signature, strict=True):
        if sig is None:
            continue
        try:
            with os.scandir(root) as entries:
                folders = 0
                for entry in entries:
                    if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                        continue  # episode files and the like: the type comes with the listing, no stat
                    folders += 1
                    if folders > MAX_SEARCHED_FOLDERS:
                        _LOGGER.warning("%s: more than %d folders; boundary snapshots beyond them are not looked at",
                                        root, MAX_SEARCHED_FOLDERS)
                        break
                    if os.path.lexists(os.path.join(entry.path, SNAPSHOT_JSON)):
                        found.append(entry.path)
        except OSError:
            continue
    found.sort()
    _LISTING_CACHE.put(key, (tuple(signature), found))
    return found


def scan(run_dir: str | os.PathLike[str]) -> tuple[list[_Header], list[SnapshotError]]:
    """Every boundary snapshot near a run folder: the readable headers, and an error per unreadable one."""
    headers, errors = [], []
    for folder in snapshot_folders(run_dir):
        result = _header(pathlib.Path(folder))
        (errors if isinstance(result, SnapshotError) else headers).append(result)
    return headers, errors


def _local_dir(episode_path: str) -> pathlib.Path | None:
    if not locations.is_local(episode_path):
        return None  # remote runs: see _remote_scan
    folder = pathlib.Path(episode_path).parent
    return folder if folder.is_dir() else None


# A remote run's boundary snapshots are listed again after a minute (each page view asks for them).
_REMOTE_SEEN: BoundedCache[tuple[list[_Header], list[SnapshotError]]] = BoundedCache(maxsize=64, ttl=60.0)
# Local copy of a remote snapshot's snapshot.json folder -> (filesystem, remote folder): fetched whole on open.
# A registry, not a cache: a linked reference must stay openable.
_REMOTE_ORIGIN: dict[str, tuple[Any, str]] = {}
_ORIGIN_LOCK = threading.Lock()
_HEADERS_KIND = "remote-boundary-headers"
_COPIES_KIND = "remote-boundary"


def _remote_scan(episode_url: str) -> tuple[list[_Header], list[SnapshotError]]:
    """The boundary snapshots beside an episode read through fsspec (``s3://``, ``memory://``...), as :func:`scan`.

    Only each snapshot's ``snapshot.json`` is copied into the local cache to link it; the filesystem copy is
    fetched when the snapshot is opened (:func:`open_boundary`). Nothing is written into the run.
    """
    try:
        fs, path, local = mirror.url_to_fs(episode_url)
        run_dir = posixpath.dirname(path)
        if local:
            return scan(run_dir)
    except (ValueError, OSError) as exc:
        _LOGGER.warning("%s: cannot look for boundary snapshots (%s)", episode_url, exc)
        return [], []
    key = fs.unstrip_protocol(run_dir)
    seen = _REMOTE_SEEN.get(key)
    if seen is not None:
        return seen
    headers, errors = [], []
    for root in (run_dir, posixpath.join(run_dir, SNAPSHOTS_DIRNAME)):
        try:
            found = sorted(fs.glob(posixpath.join(root, "*", SNAPSHOT_JSON)))[:MAX_SEARCHED_FOLDERS]
        except OSError as exc:
            _LOGGER.warning("%s: cannot list %s (%s)", episode_url, root, exc)
            continue
        for json_path in found:
            remote = posixpath.dirname(json_path)
            if posixpath.basename(remote).startswith("."):
                continue
            copy = mirror.mirror_remote(fs, remote, _HEADERS_KIND, posixpath.basename(remote),
                                           only={SNAPSHOT_JSON})
            if copy is None:
                errors.append(SnapshotError(fs.unstrip_protocol(remote),
                                            f"cannot copy {SNAPSHOT_JSON} into the local cache"))
                continue
            with _ORIGIN_LOCK:
                _REMOTE_ORIGIN[str(copy)] = (fs, remote)
            header = _header(copy)
            if isinstance(header, _Header):
                headers.append(header)
            else:  # named by where it is, not by the cache's copy
                errors.append(SnapshotError(fs.unstrip_protocol(remote), header.reason))
    return _REMOTE_SEEN.put(key, (headers, errors))


def _scan_near(episode: model.Episode) -> tuple[list[_Header], list[SnapshotError]]:
    """:func:`scan` of the folder an episode file is in, local or read through fsspec."""
    folder = _local_dir(episode.path)
    if folder is not None:
        return scan(folder)
    if not locations.is_local(episode.path):
        return _remote_scan(episode.path)
    return [], []


def unreadable_near(episode: model.Episode) -> list[SnapshotError]:
    """An error per boundary snapshot beside ``episode``'s file whose ``snapshot.json`` cannot be read.

    Such a snapshot cannot be linked to any step (its conversation is unknown), so it may be this episode's: a
    reader is told which folder it is and why it does not read.
    """
    return _scan_near(episode)[1]


def find_for_episode(episode: model.Episode) -> list[BoundaryRef]:
    """The boundary snapshots whose conversation matches one of ``episode``'s steps, sorted by step.

    A snapshot matches step ``k`` when its ``agent_messages`` equal step ``k``'s observation messages (the
    conversation after action ``k`` ran; null-valued keys are ignored on both sides). A LAST step that records
    no observation matches the conversation it answered followed by its own response (and, optionally, that
    response's result). A snapshot with no messages matches no episode (it fits every episode's start).
    Attempts at one task share their first request, so a step-0 snapshot fits step 0 of each of them (the
    state before any action, in the same task container) and is linked to each. Two snapshots of one step:
    the first by folder name is kept.
    """
    headers = [h for h in _scan_near(episode)[0] if h.digests]
    if not headers:
        return []
    # The step viewer asks on every step: link once per episode while its snapshots' headers stay the same.
    key = (episode.path, episode.episode_id, len(episode.steps), len(episode.messages),
           tuple((h.path, len(h.digests), h.digests[-1]) for h in headers))
    return list(_LINK_CACHE.get_or_compute(key, lambda: _link(episode, headers)))


_LINK_CACHE: BoundedCache[list[BoundaryRef]] = BoundedCache(maxsize=64)


def _link(episode: model.Episode, headers: list[_Header]) -> list[BoundaryRef]:
    """The references of the headers that match a step of ``episode`` (see :func:`find_for_episode`)."""
    memo: dict[int, bytes] = {}  # contexts share their pool messages: digest each message once

    def digests(messages: list[model.Message]) -> tuple[bytes, ...]:
        return tuple(memo.get(id(m)) or memo.setdefault(id(m), _digest(m.to_dict())) for m in messages)

    by_messages: dict[tuple[bytes, ...], int] = {}
    for k in range(len(episode.steps)):
        observed = episode.observation(k)
        if observed is not None:
            by_messages.setdefault(digests(observed), k)
    last = len(episode.steps) - 1
    final: tuple[tuple[bytes, ...], bytes] | None = None
    if last >= 1 and episode.observation(last) is None:
        answered = digests(episode.context(last))
        final = (answered, _content_digest("assistant", episode.step(last).response))
    refs: dict[int, BoundaryRef] = {}
    for header in headers:
        k = by_messages.get(header.digests)
        if k is None and final is not None:
            answered, response = final
            n = len(answered)
            if n + 1 <= len(header.digests) <= n + 2 and header.digests[:n] == answered \
                    and header.contents[n] == response:
                k = last
        if k is None:
            continue
        if k in refs:
            _LOGGER.info("%s: two boundary snapshots of step %d (%s, %s); keeping the first",
                         episode.episode_id, k, refs[k].path, header.path)
            continue
        refs[k] = BoundaryRef(path=header.path, episode_id=episode.episode_id, step_index=k,
                              snapshot_id=header.snapshot_id, created_at=header.created_at)
    return [refs[k] for k in sorted(refs)]


# ----- reading a snapshot's filesystem ---------------------------------------------------------------------------


class _TreeReader:
    """A folder holding a copy of the container's filesystem: walked and read without following symlinks."""

    def __init__(self, snapshot: str, root: pathlib.Path) -> None:
        self.snapshot = snapshot
        self.root = root
        self.mtimes: dict[str, int] = {}
        self.digests: dict[str, str] = {}  # content sha256 by path, computed when a comparison needs it
        self.nlinks: dict[str, int] = {}  # link counts of the files with several links (all inside the copy)

    def index(self) -> dict[str, Entry]:
        entries: dict[str, Entry] = {}
        # Regular files with more than one link: each must have all its links inside the copy (a container's
        # own hard links); one whose other link is outside it could be any file of the host.
        linked: dict[tuple[int, int], list[Any]] = {}
        stack = [("/", str(self.root))]
        while stack:
            inside, real = stack.pop()
            try:
                with os.scandir(real) as listing:
                    children = list(listing)
            except OSError as exc:
                raise SnapshotError(self.snapshot, f"cannot list {inside} in {CONTAINER_FS}: "
                                                             f"{exc.strerror}") from exc
            for child in children:
                path = posixpath.join(inside, child.name)
                if len(entries) >= MAX_TREE_ENTRIES:
                    raise SnapshotError(self.snapshot, f"{CONTAINER_FS} holds more than "
                                                                 f"{MAX_TREE_ENTRIES} paths")
                try:
                    info = child.stat(follow_symlinks=False)
                except OSError:
                    continue  # vanished while walking
                mode = stat.S_IMODE(info.st_mode)
                if stat.S_ISLNK(info.st_mode):
                    target = os.readlink(child.path)  # the container's link, recorded verbatim, never followed
                    entries[path] = Entry(path=path, type=SYMLINK, mode=mode, link_target=target)
                elif stat.S_ISDIR(info.st_mode):
                    entries[path] = Entry(path=path, type=DIR, mode=mode)
                    stack.append((path, child.path))
                elif stat.S_ISREG(info.st_mode):
                    note = None
                    if info.st_size > MAX_MEMBER_BYTES:
                        note = f"{info.st_size} bytes, over the {MAX_MEMBER_BYTES} byte read limit"
                    entries[path] = Entry(path=path, type=FILE, mode=mode, size=info.st_size,
                                                    mtime=int(info.st_mtime), note=note)
                    self.mtimes[path] = info.st_mtime_ns
                    if info.st_nlink > 1:
                        linked.setdefault((info.st_dev, info.st_ino), [info.st_nlink]).append(path)
                else:  # fifo, socket, device node: recorded, never opened
                    entries[path] = Entry(path=path, type=OTHER, mode=mode)
        for nlink, *paths in linked.values():
            if nlink > len(paths):
                raise SnapshotError(self.snapshot, f"{paths[0]} in {CONTAINER_FS} is a hard link to a file outside "
                                                   f"the copy ({nlink} links, {len(paths)} inside); it is not read")
        self.nlinks = {path: nlink for nlink, *paths in linked.values() for path in paths}
        return entries

    def each(self, entries: Iterable[Entry]) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of each regular file in turn."""
        for entry in entries:
            yield entry.path, self.read(entry)

    def read(self, entry: Entry) -> bytes:
        """A regular file's bytes, opening each path component with ``O_NOFOLLOW`` (a symlink is never crossed)."""
        parts = [p for p in entry.path.split("/") if p]
        fds = []
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            fds.append(fd)
            for part in parts[:-1]:
                fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                fds.append(fd)
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            fds.append(fd)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size != entry.size or (
                    info.st_nlink > 1 and self.nlinks.get(entry.path) != info.st_nlink):
                raise SnapshotError(self.snapshot, f"{entry.path} changed since the snapshot was indexed")
            chunks, left = [], info.st_size
            while left > 0:
                chunk = os.read(fd, min(left, _READ_CHUNK))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        except OSError as exc:
            reason = "a symlink is in the way" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror
            raise SnapshotError(self.snapshot, f"cannot read {entry.path}: {reason}") from exc
        finally:
            for fd in reversed(fds):
                os.close(fd)


class _TarReader:
    """A gzip (or plain) tarball of the container's filesystem: scanned and read in memory, never extracted."""

    def __init__(self, snapshot: str, path: pathlib.Path) -> None:
        self.snapshot = snapshot
        self.path = path
        self.mtimes: dict[str, int] = {}
        self.digests: dict[str, str] = {}
        self._members: dict[str, tarfile.TarInfo] = {}
        self._data: bytes | None = None

    def index(self) -> dict[str, Entry]:
        self._members, self._data = scan_archive(pathlib.Path(self.snapshot), self.path, tree=True)
        entries: dict[str, Entry] = {}
        for path, member in self._members.items():
            mode = member.mode & 0o7777
            if member.isdir():
                entries[path] = Entry(path=path, type=DIR, mode=mode)
            elif member.issym():
                entries[path] = Entry(path=path, type=SYMLINK, mode=mode,
                                                link_target=member.linkname)
            elif member.ischr() or member.isblk() or member.isfifo():  # recorded, never opened
                kind = "character device" if member.ischr() else "block device" if member.isblk() else "FIFO"
                entries[path] = Entry(path=path, type=OTHER, mode=mode, note=kind)
            else:
                content = self._content_member(path)
                entries[path] = Entry(path=path, type=FILE, mode=mode, size=content.size,
                                                mtime=int(member.mtime))
                self.mtimes[path] = int(member.mtime) * 10**9
        return entries

    def _content_member(self, path: str) -> tarfile.TarInfo:
        member = self._members[path]
        if member.islnk():  # a hard link: the content is an earlier regular member's
            target = self._members.get(tree_path(member.linkname))
            if target is None or not target.isreg():
                raise SnapshotError(self.snapshot, f"{CONTAINER_FS}: hard link {member.name!r} points at "
                                                             f"{member.linkname!r}, which is not a file in it")
            return target
        return member

    def each(self, entries: Iterable[Entry]) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of each regular file, in the tarball's order: one forward pass, however many."""
        by_member: dict[int, tuple[tarfile.TarInfo, list[str]]] = {}
        for entry in entries:
            member = self._content_member(entry.path)
            by_member.setdefault(member.offset_data, (member, []))[1].append(entry.path)
        ordered = [by_member[offset] for offset in sorted(by_member)]
        if self._data is not None:
            for member, paths in ordered:
                data = self._data[member.offset_data : member.offset_data + member.size]
                yield from ((path, data) for path in paths)
            return
        try:
            with tarfile.open(self.path, "r:*") as tar:
                for member, paths in ordered:
                    handle = tar.extractfile(member)
                    data = handle.read(member.size) if handle is not None else b""
                    yield from ((path, data) for path in paths)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SnapshotError(self.snapshot, f"cannot read {CONTAINER_FS}: {exc}") from exc

    def read(self, entry: Entry) -> bytes:
        member = self._content_member(entry.path)
        if self._data is not None:
            return self._data[member.offset_data : member.offset_data + member.size]
        try:
            with tarfile.open(self.path, "r:*") as tar:
                handle = tar.extractfile(member)
                return handle.read(member.size) if handle is not None else b""
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SnapshotError(self.snapshot, f"cannot read {entry.path} from {CONTAINER_FS}: {exc}") \
                from exc


@dataclasses.dataclass(frozen=True, eq=False)
class BoundarySnapshot:
    """An opened episode-boundary snapshot: the whole filesystem at one step, readable without Docker.

    It implements :class:`~.base.Snapshot`, but it records no base image: ``base_entries`` is empty,
    ``stat_base`` and ``read_base`` return None, and it compares only with another step.

    Attributes:
        path: The snapshot folder.
        snapshot_id: Its id.
        episode_id: The episode it was linked to ("" when opened by path).
        step_index: The step it was linked to (-1 when opened by path).
        base_image: The container image it ran on (``container_image``; "" when unknown).
        image_id: Always None (not recorded).
        workdir: ``/testbed`` when the filesystem has it (the coding agent's folder), else ``/``.
        created_at: When it was written (local time, no zone, as the file says).
        header: The other ``snapshot.json`` fields (step count and limit, task, container), without the messages.
        entries: Every path of the filesystem copy, keyed by absolute container path.
        base_entries: Empty: a boundary snapshot does not record the base image.
    """

    path: str
    snapshot_id: str
    episode_id: str
    step_index: int
    base_image: str
    image_id: str | None
    workdir: str
    created_at: str | None
    header: Mapping[str, Any]
    entries: Mapping[str, Entry]
    base_entries: Mapping[str, Entry] = dataclasses.field(default_factory=lambda: _EMPTY)
    _reader: _TreeReader | _TarReader | None = dataclasses.field(default=None, repr=False)

    def _absolute(self, path: str) -> str:
        return absolute(self.workdir, path)

    @property
    def records_base(self) -> bool:
        """Always False: a whole-filesystem copy records no base image."""
        return False

    def stat_base(self, path: str) -> Entry | None:
        """Always None: the base image is not part of a boundary snapshot."""
        return None

    def changed_since(self, before: Snapshot | None) -> list[str]:
        """Sorted paths whose state differs from ``before``; see :func:`changed_between` (None raises LookupError)."""
        return changed_between(before, self)

    def same_state_as(self, before: Snapshot | None, path: str) -> bool:
        """Whether ``path`` is in the same state in ``before`` and here (None: there is no base to compare with,
        so only a path this copy does not hold counts as the same)."""
        if before is None:
            return self.entries.get(self._absolute(path)) is None
        return same_state(before, self, path)

    def check_restorable(self, *, max_bytes: int | None = None) -> None:
        """A restore compares the copy with its image first: it must name one."""
        if not self.base_image:
            raise SnapshotError(self.path, "this episode-boundary snapshot records no container image, "
                                           "so there is nothing to restore it onto")

    def stat(self, path: str) -> Entry:
        """The state of ``path``: its entry, or an ``absent`` entry when the filesystem copy has no such path."""
        path = self._absolute(path)
        return self.entries.get(path) or Entry(path=path, type=ABSENT)

    def read(self, path: str) -> bytes | None:
        """A regular file's content (None when not a readable regular file here)."""
        entry = self.entries.get(self._absolute(path))
        if entry is None or entry.type != FILE or entry.note is not None or self._reader is None:
            return None
        return self._reader.read(entry)

    def read_base(self, path: str) -> bytes | None:
        """Always None: the base image's files are not part of a boundary snapshot."""
        return None

    def sha256(self, path: str) -> str | None:
        """The sha256 of a regular file's content (computed once, then kept with the snapshot's index)."""
        path = self._absolute(path)
        known = self._reader.digests if self._reader is not None else {}
        if path not in known:
            data = self.read(path)
            if data is None:
                return None
            known[path] = hashlib.sha256(data).hexdigest()
        return known[path]

    def digests(self) -> dict[str, str]:
        """The sha256 of every readable regular file of the copy, by path (one pass over a tarball)."""
        if self._reader is None:
            return {}
        known = self._reader.digests
        missing = [e for p, e in self.entries.items() if e.type == FILE and e.note is None and p not in known]
        for path, data in self._reader.each(missing):
            known[path] = hashlib.sha256(data).hexdigest()
        return {p: known[p] for p, e in self.entries.items() if e.type == FILE and e.note is None}

    def read_many(self, paths: Iterable[str], *, max_bytes: int | None = None) -> dict[str, bytes]:
        """The content of several regular files at once (one pass over a tarball); paths that are not readable
        regular files here are left out.

        Raises:
            SnapshotError: When their total size is over ``max_bytes`` (:func:`~.base.max_read_bytes`), checked
                before anything is read.
        """
        wanted = [self.entries.get(self._absolute(path)) for path in paths]
        files = [e for e in wanted if e is not None and e.type == FILE and e.note is None]
        check_budget(self.path, sum(e.size or 0 for e in files), max_bytes, "reading these files takes")
        return dict(self._reader.each(files)) if self._reader is not None and files else {}

    def changed_paths(self, *, include_dirs: bool = False) -> list[str]:
        """Every path of the copy (it is a whole filesystem, not a change set); folders only on request."""
        return sorted(p for p, e in self.entries.items() if include_dirs or e.type != DIR)

    def deleted_paths(self) -> list[str]:
        """Always empty: deletions are only seen by comparing two snapshots."""
        return []

    def validate(self) -> None:
        """Nothing left to check: the filesystem was indexed (and checked) when the snapshot was opened."""

    def restore_bytes(self) -> int:
        """Every readable regular file's size: what a copy compared with nothing would write."""
        return sum(e.size or 0 for e in self.entries.values() if e.type == FILE and e.note is None)

    def write_archive(self, out: IO[bytes], *, max_bytes: int | None = None) -> int:
        """Refused, as :meth:`to_archive`."""
        return len(self.to_archive(max_bytes=max_bytes))

    def to_archive(self, *, max_bytes: int | None = None) -> bytes:
        """Refused: a whole-filesystem copy records no changes; ``container.against_image`` finds them first."""
        raise SnapshotError(self.path, "an episode-boundary snapshot copies the whole filesystem and "
                                                 "records no changes against its image; compare it with its image "
                                                 "first (container.against_image, as sandbox.restore does)")


# Indexed filesystems by (tarball or folder, inode, mtime, size, and snapshot.json's mtime and size).
_OPEN_CACHE: BoundedCache[tuple[Mapping[str, Entry], _TreeReader | _TarReader]] = BoundedCache(maxsize=4)


def open_boundary(ref_or_path: BoundaryRef | str | os.PathLike[str]) -> BoundarySnapshot:
    """Open a boundary snapshot folder and index its filesystem (a folder tree or a tarball).

    The index of a folder is kept (a few at a time) while its ``snapshot.json`` and ``container_fs.tar.gz``
    are unchanged, so opening the same snapshot again does not walk it again.

    Raises:
        SnapshotError: When ``snapshot.json`` or ``container_fs.tar.gz`` is missing or malformed, the
            filesystem is a symlink, or the tarball is corrupt, truncated or holds unsafe members (absolute
            names, ``..``, links leaving it, duplicates, enormous sizes; device files and FIFOs are recorded).
    """
    if isinstance(ref_or_path, BoundaryRef):
        folder = pathlib.Path(ref_or_path.path)
        episode_id, step_index = ref_or_path.episode_id, ref_or_path.step_index
    else:
        folder = pathlib.Path(ref_or_path)
        episode_id, step_index = "", -1
    with _ORIGIN_LOCK:
        origin = _REMOTE_ORIGIN.get(str(folder))
    if origin is not None:  # a remote run's snapshot: its whole folder is copied into the cache first
        copy = mirror.mirror_remote(*origin, _COPIES_KIND, folder.name)
        if copy is None:
            raise SnapshotError(folder, f"cannot copy {origin[1]} into the local cache")
        folder = copy
    if not folder.is_dir():
        raise SnapshotError(folder, "the snapshot folder does not exist")
    header = read_header(folder)
    fs = folder / CONTAINER_FS
    try:
        info = fs.lstat()
    except OSError as exc:
        raise SnapshotError(folder, f"missing {CONTAINER_FS}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise SnapshotError(folder, f"{CONTAINER_FS} is a symlink; it is not followed")
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise SnapshotError(folder, f"{CONTAINER_FS} is neither a folder nor a file")
    json_info = (folder / SNAPSHOT_JSON).stat()
    key = (str(fs), info.st_ino, info.st_mtime_ns, info.st_size, json_info.st_mtime_ns, json_info.st_size)
    cached = _OPEN_CACHE.get(key)
    if cached is None:
        reader: _TreeReader | _TarReader = (
            _TreeReader(str(folder), fs) if stat.S_ISDIR(info.st_mode) else _TarReader(str(folder), fs)
        )
        cached = _OPEN_CACHE.put(key, (types.MappingProxyType(reader.index()), reader))
    entries, reader = cached
    testbed = entries.get("/testbed")
    return BoundarySnapshot(
        path=str(folder),
        snapshot_id=header.get("snapshot_id") or folder.name,
        episode_id=episode_id,
        step_index=step_index,
        base_image=header.get("container_image") or "",
        image_id=None,
        workdir="/testbed" if testbed is not None and testbed.type == DIR else "/",
        created_at=header.get("created_at"),
        header=types.MappingProxyType({k: v for k, v in header.items() if k != "agent_messages"}),
        entries=entries,
        _reader=reader,
    )


def _same_file(before: BoundarySnapshot, after: BoundarySnapshot, path: str) -> bool:
    """Whether a regular file is unchanged: equal size and modification time (git's and rsync's rule),
    else equal content."""
    old, new = before.entries[path], after.entries[path]
    if old.size != new.size:
        return False
    old_mtime = before._reader.mtimes.get(path) if before._reader else None
    new_mtime = after._reader.mtimes.get(path) if after._reader else None
    if old_mtime is not None and old_mtime == new_mtime:
        return True
    return before.sha256(path) == after.sha256(path)


def same_state(before: BoundarySnapshot, after: BoundarySnapshot, path: str) -> bool:
    """Whether one path is in the same state in two boundary snapshots (absent from both counts as the same)."""
    a, b = before.entries.get(path), after.entries.get(path)
    if a is None or b is None:
        return a is b
    if (a.type, a.mode, a.link_target) != (b.type, b.mode, b.link_target):
        return False
    return a.type != FILE or _same_file(before, after, path)


def changed_between(before: BoundarySnapshot | None, after: BoundarySnapshot) -> list[str]:
    """Sorted paths whose state differs between two boundary snapshots of one episode.

    Folders are listed only when their type or mode changed (an added or removed folder's files are listed).

    Raises:
        LookupError: When ``before`` is None: a boundary snapshot records no base image to compare with.
    """
    if before is None:
        raise LookupError(f"{after.path}: an episode-boundary snapshot records no base image; "
                          "compare it with an earlier step")
    old, new = before.entries, after.entries
    changed = []
    for path in old.keys() | new.keys():
        a, b = old.get(path), new.get(path)
        if a is None or b is None:
            if (a or b).type != DIR:
                changed.append(path)
        elif not same_state(before, after, path):
            changed.append(path)
    return sorted(changed)



class BoundaryFinder:
    """Finds ARES's episode-boundary snapshots (``snapshot.json`` folders) beside the episode file or in its run's
    ``snapshots/`` folder, linked to steps by their conversation."""

    name = "episode-boundary snapshots"

    def handles(self, location: str) -> bool:
        return not locations.is_local(location) or pathlib.Path(location).parent.is_dir()

    def find(self, episode: model.Episode) -> list[BoundaryRef]:
        return find_for_episode(episode)

    def problems(self, episode: model.Episode) -> list[SnapshotError]:
        return unreadable_near(episode)
