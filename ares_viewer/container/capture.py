"""Capture a per-step snapshot from a running Docker container (the writer side of :mod:`ares_viewer.snapshots`).

Only what differs from the base image is stored: the engine's own change list (``container.diff()``) says
which paths were modified, added or deleted, and only those are fetched, through the archive API, and their
content streamed into a temporary file (:class:`~ares_viewer.snapshots.spool.SpooledBlobs`; nothing is ever
extracted onto the host), so memory stays bounded however many bytes changed. The base image's versions of the
touched paths are read from a helper container that is created from the base image but never started, streamed
into a spool the same way (with the base content an earlier step recorded), and recorded once per episode.
Usable by anyone recording ARES episodes::

    import docker
    from ares_viewer import container

    box = docker.from_env().containers.run(image, "sleep infinity", detach=True, network_mode="none")
    container.capture_snapshot(box, image, episode_id, step_index=0, out_dir="runs/my-run")

The Docker SDK is used only through the container object it is given (and that container's client), so
importing this module does not need a daemon.
"""

from __future__ import annotations

import base64
import concurrent.futures
import dataclasses
import fnmatch
import hashlib
import json
import logging
import os
import pathlib
import posixpath
import tarfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ares_viewer import snapshots
from ares_viewer.base import sizes
from ares_viewer.container import labels
from ares_viewer.container.streams import StreamError, archive_to_file
from ares_viewer.snapshots.base import parents
from ares_viewer.snapshots.spool import SpooledBlobs

_LOGGER = logging.getLogger(__name__)

# Paths whose changes are noise for someone reading an agent's work: kernel and device trees, scratch
# space, caches and byte-compiled files. Patterns match a whole path (fnmatch) or any of its parents.
DEFAULT_IGNORE: tuple[str, ...] = (
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/tmp",
    "/var/tmp",
    "/var/cache",
    "/var/log",
    "/root/.cache",
    "*/__pycache__",
    "*.pyc",
    "*/.pytest_cache",
)
DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024
# Kept for callers of earlier versions: the bound on one read out of a container is now
# ``ResourceLimits.capture_max_bytes``.
MAX_ARCHIVE_BYTES = 2 * 1024 * 1024 * 1024
# Archive requests in flight at once while reading a capture's changed paths.
_FETCH_WORKERS = 4

# Go's os.FileMode bits, as the engine reports them in X-Docker-Container-Path-Stat.
_GO_DIR = 1 << 31
_GO_SYMLINK = 1 << 27
_GO_SPECIAL = (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21)  # device, named pipe, socket, char device
_GO_SETUID, _GO_SETGID, _GO_STICKY = 1 << 23, 1 << 22, 1 << 20

_KINDS = {0: "modified", 1: "added", 2: "deleted"}
# Paths the engine adds to a container it starts with an init process (the init binary's mount point).
ENGINE_MOUNTS = ("/usr/sbin/docker-init", "/sbin/docker-init")


class ContainerFilesError(Exception):
    """The engine refused or returned something unusable while reading or writing a container's files: a capture,
    a listing or a restore."""


@dataclasses.dataclass(frozen=True)
class Fetched:
    """A path's state read from a container: its entry (without storage info) and its content if a file.

    Content read into a :class:`SpooledBlobs` is there under ``entry.sha256``, and ``content`` is None.
    """

    entry: snapshots.Entry
    content: bytes | None


def capture_snapshot(
    container: Any,
    base_image: str,
    episode_id: str,
    step_index: int,
    out_dir: str | os.PathLike[str],
    workdir: str = "/testbed",
    *,
    ignore: Iterable[str] = DEFAULT_IGNORE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    created_at: float | None = None,
) -> pathlib.Path:
    """Record how ``container`` differs from ``base_image`` now, as step ``step_index`` of an episode.

    Args:
        container: A ``docker.models.containers.Container`` created from ``base_image`` (running or stopped).
        base_image: The image reference the container was created from.
        episode_id: The episode the snapshot belongs to (a UUID4 string).
        step_index: 0 for the initial state, k after action k ran.
        out_dir: The run folder: where the episode's ``{episode_id}.json`` goes. Snapshots are written to
            ``<out_dir>/snapshots/<episode_id>/step_NNNN/``.
        workdir: The task's working directory, recorded for readers and restorers.
        ignore: Path patterns whose changes are not recorded (see ``DEFAULT_IGNORE``).
        max_file_bytes: Files larger than this are recorded (type, size, mode) without content.
        created_at: Unix time to record as the capture time; now when omitted.

    Returns:
        The step folder written.

    Raises:
        ContainerFilesError: When the container was not created from ``base_image`` or the engine misbehaves.
    """
    client = container.client
    image = client.images.get(base_image)
    container.reload()
    if container.attrs.get("Image") != image.id:
        raise ContainerFilesError(f"container {container.short_id} was not created from {base_image} ({image.id})")
    episode_dir = snapshots.episode_snapshots_dir(out_dir, episode_id)
    episode_dir.mkdir(parents=True, exist_ok=True)
    changes = _engine_changes(container, ignore)
    store = SpooledBlobs()
    fetched = _fetch_changes(container, changes, max_file_bytes, store)

    # Content already stored by an earlier step or in the base is referenced, not stored again.
    known = _known_blobs(episode_dir, step_index)
    base_entries = _update_base(
        client, episode_dir, episode_id, base_image, image.id, sorted(changes), max_file_bytes, created_at
    )
    for entry in base_entries.values():
        if entry.stored_in is not None and entry.sha256 is not None:
            known.setdefault(entry.sha256, entry.stored_in)
    folder = snapshots.step_dirname(step_index)
    entries, stored = _entries(changes, fetched, known, folder, f"capture {episode_id} step {step_index}")
    return snapshots.write_step(
        episode_dir,
        episode_id=episode_id,
        step_index=step_index,
        base_image=base_image,
        image_id=image.id,
        workdir=workdir,
        entries=entries,
        blobs=store.subset(stored),
        created_at=snapshots.utc_now(created_at),
    )


def capture_live(
    container: Any,
    recorded: snapshots.Restorable,
    *,
    ignore: Iterable[str] = DEFAULT_IGNORE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> snapshots.Restorable:
    """How ``container`` differs from its base image now, as an in-memory snapshot comparable with ``recorded``.

    The same reading as :func:`capture_snapshot` (the engine's change list, then the changed paths through the
    archive API), but nothing is written into the run: the content is spooled to a temporary file that lives as
    long as the returned snapshot (memory holds one chunk at a time), and the base versions are the ones
    ``recorded``'s episode already holds. Compare with ``fsdiff.diff_snapshots(recorded, live)``.

    Args:
        container: A running or stopped container created from ``recorded.base_image``.
        recorded: A snapshot of the episode the container's state belongs to.
        ignore: Path patterns whose changes are not read (the capture's defaults, so both sides match).
        max_file_bytes: Files larger than this are listed without content.
    """
    changes = _engine_changes(container, ignore)
    store = SpooledBlobs()
    fetched = _fetch_changes(container, changes, max_file_bytes, store)
    entries, stored = _entries(changes, fetched, {}, snapshots.LIVE_FOLDER, f"live {container.short_id}")
    return snapshots.live_snapshot(recorded, entries, store.subset(stored))



# ----- internals -------------------------------------------------------------------------------------------------


def _entries(
    changes: dict[str, str], fetched: dict[str, Fetched], known: dict[str, str], folder: str, what: str
) -> tuple[list[snapshots.Entry], set[str]]:
    """The entries of a capture, and the sha256 of the spooled content to store in ``folder`` (``known``: content
    stored already)."""
    entries, stored = [], set()
    for path, change in sorted(changes.items()):
        if change == "deleted":
            entries.append(snapshots.Entry(path=path, type=snapshots.DELETED, change="deleted"))
            continue
        item = fetched.get(path)
        if item is None:  # changed again while we looked (or vanished): nothing reliable to record
            _LOGGER.warning("%s: %s disappeared during capture", what, path)
            continue
        entry = dataclasses.replace(item.entry, change=change)
        if entry.type == snapshots.FILE and entry.sha256 is not None:
            stored_in = known.get(entry.sha256)
            if stored_in is None:
                stored.add(entry.sha256)
                stored_in = known[entry.sha256] = folder
            entry = dataclasses.replace(entry, stored_in=stored_in)
        entries.append(entry)
    return entries, stored


def ignored(path: str, patterns: tuple[str, ...]) -> bool:
    candidates = [path]
    parent = posixpath.dirname(path)
    while parent not in {"/", ""}:
        candidates.append(parent)
        parent = posixpath.dirname(parent)
    return any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates for pattern in patterns)


def _engine_changes(container: Any, ignore: Iterable[str]) -> dict[str, str]:
    """The engine's change list (``docker diff``): path -> added, modified or deleted, less the ignored paths.

    The engine's init (``ResourceLimits.run_options``) is mounted at ``/usr/sbin/docker-init``: its mount point
    and the folders modified only to hold it are the engine's, not the container's own changes.
    """
    patterns = tuple(ignore)
    changes = {
        item["Path"]: _KINDS[item["Kind"]]
        for item in container.diff() or []
        if item.get("Kind") in _KINDS and not ignored(item["Path"], patterns)
    }
    for mount in ENGINE_MOUNTS:
        if changes.pop(mount, None) != "added":
            continue
        for parent in parents(mount):
            inside = parent + "/"
            if changes.get(parent) == "modified" and not any(p.startswith(inside) for p in changes):
                del changes[parent]
    return changes


def _fetch_changes(
    container: Any, changes: dict[str, str], max_file_bytes: int, store: SpooledBlobs
) -> dict[str, Fetched]:
    """Read every added or modified path, fetching each added folder tree in one archive request; file content
    goes into ``store``.

    The requests are independent (one per path not under an added folder, which is fetched whole), so a few
    run at once: each is a round trip to the engine, and the engine answers them in parallel.
    """
    present = {path for path, change in changes.items() if change != "deleted"}
    # A path under an added path comes with that path's archive: an added path with children is a folder.
    roots = [
        path for path in sorted(present)
        if not any(parent in present and changes[parent] == "added" for parent in parents(path))
    ]
    fetched: dict[str, Fetched] = {}

    def fetch(path: str) -> list[Fetched]:
        stat = _stat(container, path)
        if stat is None:
            return []
        mode = _perm(stat["mode"])
        if stat["mode"] & _GO_DIR and changes[path] != "added":
            # A modified folder only says that something inside changed; its children are listed on their own.
            return [Fetched(snapshots.Entry(path=path, type=snapshots.DIR, mode=mode), None)]
        if stat["mode"] & _GO_SPECIAL:
            return [Fetched(snapshots.Entry(path=path, type=snapshots.OTHER, mode=mode), None)]
        if not stat["mode"] & (_GO_DIR | _GO_SYMLINK) and stat["size"] > max_file_bytes:
            return [Fetched(_too_large(path, stat), None)]
        return [item for item in _archive_items(container, path, max_file_bytes, store)
                if item.entry.path in present]

    if len(roots) <= 1:
        results = [fetch(path) for path in roots]
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(_FETCH_WORKERS, len(roots))) as pool:
            results = list(pool.map(fetch, roots))
    for items in results:
        for item in items:
            fetched[item.entry.path] = item
    return fetched


def _update_base(
    client: Any,
    episode_dir: pathlib.Path,
    episode_id: str,
    base_image: str,
    image_id: str,
    paths: list[str],
    max_file_bytes: int,
    created_at: float | None,
) -> dict[str, snapshots.Entry]:
    """Record the base image's versions of paths not yet in the episode's base manifest; return all of them."""
    base_dir = episode_dir / snapshots.BASE_DIRNAME
    entries = snapshots.read_manifest_entries(base_dir)
    missing = [path for path in paths if path not in entries]
    if not missing and (base_dir / snapshots.MANIFEST_NAME).exists():
        return entries
    blobs = _spool_archive(base_dir / snapshots.BLOBS_NAME)
    helper = None
    try:
        for path in missing:  # sorted: parents come before their children
            parent_entry = next((entries[p] for p in parents(path) if p in entries), None)
            if parent_entry is not None and parent_entry.type in {snapshots.ABSENT, snapshots.FILE, snapshots.SYMLINK}:
                # Nothing can live under a path that is absent or not a folder in the base image.
                entries[path] = snapshots.Entry(path=path, type=snapshots.ABSENT)
                continue
            if helper is None:
                helper = client.containers.create(
                    base_image,
                    command=["true"],
                    network_disabled=True,
                    labels=labels.project_labels(labels.ROLE_BASE_READER, episode_id),
                )
            entries[path] = _read_base_path(helper, path, max_file_bytes, blobs)
    finally:
        if helper is not None:
            helper.remove(force=True)
    snapshots.write_base(
        episode_dir,
        episode_id=episode_id,
        base_image=base_image,
        image_id=image_id,
        entries=entries.values(),
        blobs=blobs,
        created_at=snapshots.utc_now(created_at),
    )
    return entries


def _read_base_path(helper: Any, path: str, max_file_bytes: int, blobs: SpooledBlobs) -> snapshots.Entry:
    stat = _stat(helper, path)
    if stat is None:
        return snapshots.Entry(path=path, type=snapshots.ABSENT)
    if stat["mode"] & _GO_DIR:
        return snapshots.Entry(path=path, type=snapshots.DIR, mode=_perm(stat["mode"]))
    if stat["mode"] & _GO_SPECIAL:
        return snapshots.Entry(path=path, type=snapshots.OTHER, mode=_perm(stat["mode"]))
    if not stat["mode"] & _GO_SYMLINK and stat["size"] > max_file_bytes:
        return _too_large(path, stat)
    for item in _archive_items(helper, path, max_file_bytes, blobs):
        if item.entry.path == path:
            entry = item.entry
            if entry.type == snapshots.FILE and entry.sha256 is not None:  # its content is in ``blobs``
                entry = dataclasses.replace(entry, stored_in=snapshots.BASE_DIRNAME)
            return entry
    raise ContainerFilesError(f"the engine's archive of {path} did not contain it")


def _stat(container: Any, path: str) -> dict[str, Any] | None:
    """The engine's stat of a path (HEAD on the archive endpoint: no content is sent), None if absent."""
    api = container.client.api
    # docker-py has no public call for this HEAD request; the endpoint is the documented archive API.
    response = api.head(api._url("/containers/{0}/archive", container.id), params={"path": path})
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise ContainerFilesError(f"stat of {path} in {container.short_id} failed: HTTP {response.status_code}")
    header = response.headers.get("X-Docker-Container-Path-Stat")
    if not header:
        raise ContainerFilesError(f"stat of {path} in {container.short_id} returned no stat header")
    return json.loads(base64.b64decode(header))


def _archive_items(
    container: Any, path: str, max_file_bytes: int, store: SpooledBlobs | None = None
) -> Iterator[Fetched]:
    """The entries of ``path``'s archive (the path itself and, for a folder, everything under it)."""
    try:
        archive = archive_to_file(container, path)
    except StreamError as exc:
        raise ContainerFilesError(str(exc)) from exc
    with archive:
        yield from tar_items(archive, posixpath.dirname(path), f"archive of {path}", max_file_bytes, store)


def tar_items(
    buffer: IO[bytes], parent: str, what: str, max_file_bytes: int, store: SpooledBlobs | None = None
) -> Iterator[Fetched]:
    """The entries of a tar stream (a seekable file) whose member names are relative to ``parent``.

    A regular file's content (up to ``max_file_bytes``) is streamed into ``store`` when one is given (the entry's
    sha256 names it there), else read into ``Fetched.content``.
    """
    contents: dict[str, Fetched] = {}  # regular files so far, for the hard links that repeat them
    with tarfile.open(fileobj=buffer, mode="r:") as tar:
        for member in tar:
            name = member.name.rstrip("/")
            if name.startswith("/") or ".." in name.split("/"):
                raise ContainerFilesError(f"{what} holds an unsafe member name {member.name!r}")
            full = posixpath.join(parent, name)
            mode = member.mode & 0o7777
            mtime = int(member.mtime) if member.mtime and member.mtime > 0 else None
            if member.isdir():
                yield Fetched(snapshots.Entry(path=full, type=snapshots.DIR, mode=mode, mtime=mtime), None)
            elif member.issym():
                entry = snapshots.Entry(
                    path=full, type=snapshots.SYMLINK, mode=mode, link_target=member.linkname, mtime=mtime
                )
                yield Fetched(entry, None)
            elif member.islnk():
                # A hard link repeats an earlier member of this archive: same content, its own path.
                target = contents.get(posixpath.join(parent, member.linkname.rstrip("/")))
                if target is None:
                    yield _file(full, mode, None, member.size, max_file_bytes, mtime)
                else:
                    entry = dataclasses.replace(target.entry, path=full, mode=mode, mtime=mtime)
                    yield Fetched(entry, target.content)
            elif member.isreg():
                handle = tar.extractfile(member)
                if handle is None or member.size > max_file_bytes:
                    item = _file(full, mode, None, member.size, max_file_bytes, mtime)
                elif store is not None:
                    digest = store.add_stream(handle, member.size)
                    item = Fetched(snapshots.Entry(path=full, type=snapshots.FILE, mode=mode, size=member.size,
                                                   sha256=digest, mtime=mtime), None)
                else:
                    item = _file(full, mode, handle.read(), member.size, max_file_bytes, mtime)
                contents[full] = item
                yield item
            else:
                yield Fetched(snapshots.Entry(path=full, type=snapshots.OTHER, mode=mode), None)


def too_large_note(size: int, limit: int) -> str:
    """Why a file's content was not stored: its size is over the per-file limit."""
    return f"content not stored: {sizes.text(size)} is over the limit of {sizes.text(limit)}"


def _file(
    path: str, mode: int, data: bytes | None, size: int, max_file_bytes: int, mtime: int | None = None
) -> Fetched:
    if data is None or size > max_file_bytes:
        note = too_large_note(size, max_file_bytes)
        entry = snapshots.Entry(path=path, type=snapshots.FILE, mode=mode, size=size, note=note, mtime=mtime)
        return Fetched(entry, None)
    digest = hashlib.sha256(data).hexdigest()
    entry = snapshots.Entry(path=path, type=snapshots.FILE, mode=mode, size=len(data), sha256=digest, mtime=mtime)
    return Fetched(entry, data)


def _too_large(path: str, stat: dict[str, Any]) -> snapshots.Entry:
    note = f"content not stored: {stat['size']} bytes is over the capture limit"
    return snapshots.Entry(path=path, type=snapshots.FILE, mode=_perm(stat["mode"]), size=stat["size"], note=note)


def _perm(go_mode: int) -> int:
    mode = go_mode & 0o777
    if go_mode & _GO_SETUID:
        mode |= 0o4000
    if go_mode & _GO_SETGID:
        mode |= 0o2000
    if go_mode & _GO_STICKY:
        mode |= 0o1000
    return mode



def _known_blobs(episode_dir: pathlib.Path, step_index: int) -> dict[str, str]:
    """sha256 -> folder for the content the closest earlier step references."""
    earlier = [ref for ref in snapshots.list_steps(episode_dir) if ref.step_index < step_index]
    if not earlier:
        return {}
    entries = snapshots.read_manifest_entries(earlier[-1].path)
    return {e.sha256: e.stored_in for e in entries.values() if e.sha256 and e.stored_in}


def _spool_archive(path: pathlib.Path) -> SpooledBlobs:
    """The blobs of an archive this process wrote earlier, streamed into a spool (so the base archive can be
    rewritten with more without holding its content in memory); an empty spool when there is none.

    Raises:
        ContainerFilesError: When a member's content does not match the sha256 that names it.
    """
    blobs = SpooledBlobs()
    if not path.is_file():
        return blobs
    with tarfile.open(path, "r:*") as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isreg() else None
            if handle is not None and blobs.add_stream(handle, member.size) != member.name:
                raise ContainerFilesError(f"{path}: member {member.name!r} does not hold the content its name says")
    return blobs

