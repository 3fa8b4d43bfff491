"""A whole-filesystem state compared with its image: an episode-boundary snapshot as the changes a restore applies.

An episode-boundary snapshot copies every file of the container rather than recording changes, so to restore
it, or to compare a live container with it, it is compared with its image first (:func:`against_image`).
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Callable, Iterable
from typing import Any

from ares_viewer import snapshots
from ares_viewer.base.cache import BoundedCache
from ares_viewer.container import labels
from ares_viewer.container._listing import FIND_TYPES, exec_output, parse_listed
from ares_viewer.container.capture import DEFAULT_IGNORE, ENGINE_MOUNTS, ContainerFilesError, ignored
from ares_viewer.container.limits import ResourceLimits
from ares_viewer.snapshots.base import parents

# Files the engine gives every container (bind mounts and its marker): never part of a state to restore.
_ENGINE_FILES = frozenset({"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.dockerenv", *ENGINE_MOUNTS})
# Every path of an image with its type, mode, size and link, then the sha256 of every regular file.
_PROBE_SCRIPT = r"""
find / -xdev -printf '%D %y %m %s %p\0%l\0' 2>/dev/null
printf -- '--\0'
find / -xdev -type f -print0 2>/dev/null | xargs -0r sha256sum -z
"""


@dataclasses.dataclass(frozen=True)
class _ImagePath:
    """One path of an image, as the probe listed it."""

    type: str
    mode: int
    size: int
    link: str
    sha256: str | None


# Image listings by image id: a replay compares several snapshots of one episode against the same image.
_IMAGE_LISTINGS: BoundedCache[dict[str, _ImagePath]] = BoundedCache(maxsize=2)


def _changed_in_copy(copy: dict[str, Any], listing: dict[str, _ImagePath], digests: dict[str, str]) -> dict[str, str]:
    """The copy's paths the image lacks (``added``) or holds with another type, mode, link or content
    (``modified``), in the copy's order."""
    changes: dict[str, str] = {}
    for path, entry in copy.items():
        there = listing.get(path)
        if there is None:
            changes[path] = "added"
        elif (there.type, there.mode, there.link if there.type == snapshots.SYMLINK else None) != (
            entry.type, entry.mode, entry.link_target
        ) or (entry.type == snapshots.FILE and there.sha256 != digests.get(path)):
            changes[path] = "modified"
    return changes


def _deleted_from_copy(copy: dict[str, Any], listing: dict[str, _ImagePath],
                       patterns: tuple[str, ...]) -> dict[str, str]:
    """The image's paths missing from the copy, taken as ``deleted`` only in folders the copy holds (below the
    top level), symlinks only when the copy records any, folders only when the image holds files in them."""
    copies_links = any(entry.type == snapshots.SYMLINK for entry in copy.values())
    holds_files = {parent for path, there in listing.items() if there.type == snapshots.FILE
                   for parent in parents(path)}
    deleted: dict[str, str] = {}
    for path, there in listing.items():
        if path in copy or path in _ENGINE_FILES or ignored(path, patterns):
            continue
        parent = posixpath.dirname(path)
        if parent == "/" or parent not in copy:
            # A folder the copy does not hold (or one deleted whole: its own entry says so); top-level folders
            # are never taken as deleted: a copy of part of the filesystem holds only some of them.
            continue
        if there.type == snapshots.FILE or (there.type == snapshots.SYMLINK and copies_links) or (
            there.type == snapshots.DIR and path in holds_files
        ):
            deleted[path] = "deleted"
    return deleted


def against_image(
    client: Any,
    state: Any,
    *,
    ignore: Iterable[str] = DEFAULT_IGNORE,
) -> snapshots.Restorable:
    """A whole-filesystem state (an episode-boundary snapshot) as an in-memory step snapshot of its image.

    An episode-boundary snapshot copies every file of the container rather than recording changes, so to
    restore it, or to compare a live container with it, it is compared with its image: files whose type,
    mode and content differ become ``modified`` or ``added``, and the image's files missing from the copy
    become ``deleted`` (only in folders the copy holds, and symlinks only when the copy records symlinks at
    all: a copy that skipped them must not delete them). The folders above a change count as modified, as in
    the engine's change list, so the result compares with live captures like a recorded step does.

    Every file of the copy is read (and so checked) before the engine is asked anything, in one pass for a
    tarball; the image is listed once per process by a throwaway container without network, removed at once.

    Args:
        client: A ``docker.DockerClient`` whose engine has ``state.base_image``.
        state: An opened snapshot that records no base image (an episode-boundary one).
        ignore: Path patterns left out on both sides (the capture's defaults, so comparisons agree).

    Raises:
        snapshots.SnapshotError: When the snapshot names no image or a file of it cannot be read.
        ContainerFilesError: When the image cannot be listed (it lacks ``find``, ``xargs`` or ``sha256sum``).
    """
    if not state.base_image:
        raise snapshots.SnapshotError(state.path, "it records no container image, so there is nothing to restore "
                                                  "it onto")
    patterns = tuple(ignore)
    copy = {
        path: entry
        for path, entry in state.entries.items()
        if path != "/" and path not in _ENGINE_FILES and entry.type in (snapshots.FILE, snapshots.DIR,
                                                                       snapshots.SYMLINK)
        and not ignored(path, patterns)
    }
    digests = {path: digest for path, digest in state.digests().items() if path in copy}
    image = client.images.get(state.base_image)
    listing = _image_listing(client, image)
    changes = _changed_in_copy(copy, listing, digests)
    changes.update(_deleted_from_copy(copy, listing, patterns))
    for path in list(changes):
        for parent in parents(path):
            if parent in copy and parent not in changes:
                changes[parent] = "modified" if parent in listing else "added"

    contents = state.read_many(p for p, change in changes.items() if change != "deleted" and p in digests)
    entries, base_entries, blobs = [], {}, {}
    for path, change in sorted(changes.items()):
        there = listing.get(path)
        base_entries[path] = snapshots.Entry(
            path=path, type=there.type, mode=there.mode, size=there.size if there.type == snapshots.FILE else None,
            sha256=there.sha256, link_target=there.link if there.type == snapshots.SYMLINK else None,
        ) if there is not None else snapshots.Entry(path=path, type=snapshots.ABSENT)
        if change == "deleted":
            entries.append(snapshots.Entry(path=path, type=snapshots.DELETED, change="deleted"))
            continue
        entry = dataclasses.replace(copy[path], change=change)
        digest = digests.get(path)
        if digest is not None:
            blobs[digest] = contents[path]
            entry = dataclasses.replace(entry, sha256=digest, stored_in=snapshots.LIVE_FOLDER)
        entries.append(entry)
    return snapshots.memory_snapshot(
        state.path,
        episode_id=state.episode_id,
        step_index=state.step_index,
        base_image=state.base_image,
        image_id=image.id,
        workdir=state.workdir,
        entries=entries,
        base_entries=base_entries,
        blobs=blobs,
    )


def _image_listing(client: Any, image: Any) -> dict[str, _ImagePath]:
    """Every path of ``image`` on its root filesystem, listed by a short-lived container of it."""
    listing = _IMAGE_LISTINGS.get(image.id)
    if listing is not None:
        return listing
    probe = client.containers.run(
        image.id, command=["sleep", "infinity"], detach=True, network_mode="none",
        labels=labels.project_labels(labels.ROLE_IMAGE_PROBE), **ResourceLimits().run_options(),
    )
    name = image.tags[0] if image.tags else image.id
    try:
        out = exec_output(probe, ["sh", "-c", _PROBE_SCRIPT])
    except ContainerFilesError as exc:
        raise ContainerFilesError(f"could not list the files of {name} ({exc}); it needs find, xargs and sha256sum") \
            from exc
    finally:
        probe.remove(force=True)
    listed, offset = parse_listed(out, 0)
    root = listed.get("/")
    if root is None:
        raise ContainerFilesError(f"could not list the files of {name}; it needs find, xargs and sha256sum")
    digests = {}
    for record in out[offset:].split(b"\0"):
        if len(record) > 66:  # "<64 hex digits>  <path>"
            digests[record[66:].decode("utf-8", "surrogateescape")] = record[:64].decode("ascii")
    listing = {
        path: _ImagePath(FIND_TYPES.get(item.type, snapshots.OTHER), item.mode, item.size, item.link,
                         digests.get(path))
        for path, item in listed.items()
        if item.dev == root.dev
    }
    return _IMAGE_LISTINGS.put(image.id, listing)



# Snapshots compared with their image, by (folder, the opened index's identity): a replay compares the live
# container with each of them after its step, and a fork with the next one.
_AS_CHANGES: BoundedCache[tuple[Any, snapshots.Restorable]] = BoundedCache(maxsize=4)


def as_changes(
    client: Any, snapshot: snapshots.Snapshot, *, progress: Callable[[str], None] | None = None
) -> snapshots.Restorable:
    """A snapshot as changes against its base image, ready to restore or to compare with a live container.

    One that records its base image is that already; one that does not (a whole-filesystem copy) is compared
    with its image by :func:`against_image`, once per opened snapshot.

    Args:
        client: A ``docker.DockerClient`` whose engine has the snapshot's image.
        snapshot: An opened snapshot.
        progress: Called with a line of text when a comparison with the image starts.
    """
    if snapshots.restorable(snapshot):
        return snapshot
    key = (snapshot.path, id(snapshot.entries))
    known = _AS_CHANGES.get(key)
    if known is not None and known[0] is snapshot.entries:
        return known[1]
    if progress is not None:
        progress(f"Comparing the episode-boundary snapshot's {len(snapshot.entries)} paths with {snapshot.base_image}")
    changes = against_image(client, snapshot)
    _AS_CHANGES.put(key, (snapshot.entries, changes))  # the entries kept alive, so their id is not reused
    return changes
