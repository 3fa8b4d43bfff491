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
checks (:mod:`._tar_safety`) and read into memory, never extracted. Problems raise
:class:`~.base.SnapshotError` naming the snapshot folder.

This module finds snapshots, links them to steps and opens them; the opened snapshot and its two filesystem
readers are ``episode_boundary_snapshot.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import posixpath
import stat
import threading
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ares_viewer.base import locations
from ares_viewer.base.cache import BoundedCache
from ares_viewer.runs import companions
from ares_viewer.snapshots import mirror
from ares_viewer.snapshots.base import (
    DIR,
    MAX_MANIFEST_BYTES,
    SNAPSHOTS_DIRNAME,
    Entry,
    SnapshotError,
)
from ares_viewer.snapshots.episode_boundary_snapshot import (
    CONTAINER_FS,
    BoundarySnapshot,
    TarReader,
    TreeReader,
)

if TYPE_CHECKING:
    from ares_viewer import model

_LOGGER = logging.getLogger(__name__)

SNAPSHOT_JSON = companions.BOUNDARY_SNAPSHOT_JSON
# Folders looked at per searched location when looking for snapshots beside an episode file.
MAX_SEARCHED_FOLDERS = 20_000


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
    signature: list[tuple[int, int] | None] = []
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
    headers: list[_Header] = []
    errors: list[SnapshotError] = []
    for folder in snapshot_folders(run_dir):
        result = _header(pathlib.Path(folder))
        if isinstance(result, SnapshotError):
            errors.append(result)
        else:
            headers.append(result)
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
    for index in range(len(episode.steps)):
        observed = episode.observation(index)
        if observed is not None:
            by_messages.setdefault(digests(observed), index)
    last = len(episode.steps) - 1
    final: tuple[tuple[bytes, ...], bytes] | None = None
    if last >= 1 and episode.observation(last) is None:
        answered = digests(episode.context(last))
        final = (answered, _content_digest("assistant", episode.step(last).response))
    refs: dict[int, BoundaryRef] = {}
    for header in headers:
        k: int | None = by_messages.get(header.digests)
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


# Indexed filesystems by (tarball or folder, inode, mtime, size, and snapshot.json's mtime and size).
_OPEN_CACHE: BoundedCache[tuple[Mapping[str, Entry], TreeReader | TarReader]] = BoundedCache(maxsize=4)


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
        reader: TreeReader | TarReader = (
            TreeReader(str(folder), fs) if stat.S_ISDIR(info.st_mode) else TarReader(str(folder), fs)
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
