"""Following a live container's filesystem cheaply: one ``exec`` per look reads only what changed since the last."""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from collections.abc import Iterable
from typing import Any

from ares_viewer import snapshots
from ares_viewer.container._listing import (
    FIND_TYPES,
    Listed,
    Records,
    exec_file,
    exec_output,
    parse_listed,
    read_listed,
)
from ares_viewer.container.capture import (
    DEFAULT_IGNORE,
    DEFAULT_MAX_FILE_BYTES,
    ContainerFilesError,
    Fetched,
    ignored,
    tar_items,
    too_large_note,
)
from ares_viewer.snapshots.base import parents
from ares_viewer.snapshots.spool import SpooledBlobs

_LOGGER = logging.getLogger(__name__)

# One exec per look: the container's clock, then every path whose status changed since the last look
# ("DEV TYPE MODE SIZE PATH\0LINK\0"), the current children of the folders among them (to see deletions), and a
# tar stream of the changed regular files small enough to keep. "--" can never be a record: paths start with "/".
_SCAN_SCRIPT = r"""
since="$1"; limit="$2"
date +%s.%N
find / -xdev -newerct "@$since" -printf '%D %y %m %s %p\0%l\0' 2>/dev/null
printf -- '--\0'
find / -xdev -newerct "@$since" -type d -print0 2>/dev/null \
    | xargs -0r sh -c 'find "$@" -mindepth 1 -maxdepth 1 -printf "%p\0"' sh 2>/dev/null
printf -- '--\0'
find / -xdev -newerct "@$since" -type f -size "-${limit}c" -printf '%P\0' 2>/dev/null \
    | tar -C / --null --no-recursion -T - -c -f - 2>/dev/null
exit 0
"""
_LIST_SCRIPT = r"""
date +%s.%N
find / -xdev -printf '%D %y %m %s %p\0%l\0' 2>/dev/null
"""
# Changes made in the last moments before a look are looked at again next time (harmless): file times come
# from a coarse kernel clock that may lag the one ``date`` reads.
_SCAN_MARGIN_S = 0.05


class ChangeTracker:
    """Follows a live container's filesystem from a known state, reading only what changed since the last look.

    The engine's change list (``container.diff()``) is exact but slow on engines without native overlay diffs:
    it compares whole trees. A replay looks after every step, so instead one ``exec`` per look asks the
    container for the paths whose status changed since the previous look (``find -newerct``, which a command
    cannot fake: only a clock change could) and the current children of the changed folders (deletions),
    and streams the changed files' content back as one tar. The state is kept relative to the base image, as
    a capture records it, so :meth:`snapshot` compares with recorded steps like :func:`capture_live` does.

    Create one with :meth:`start` right after the container reaches a known state; it needs ``sh``, GNU
    ``find``, ``xargs``, ``date`` and ``tar`` in the container (``start`` returns None when they are missing).
    """

    def __init__(
        self,
        container: Any,
        start: snapshots.Restorable,
        listing: dict[str, Listed],
        since: float,
        *,
        ignore: Iterable[str] = DEFAULT_IGNORE,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self._container = container
        self._start = start
        self._patterns = tuple(ignore)
        self._max_file_bytes = max_file_bytes
        self._since = since
        root = listing.get("/")
        self._root_dev = root.dev if root else None
        self._info = {path: (item.type, item.mode) for path, item in listing.items()}
        self._children: dict[str, set[str]] = {}
        for path in listing:
            if path != "/":
                self._children.setdefault(posixpath.dirname(path), set()).add(path)
        self._entries: dict[str, snapshots.Entry] = dict(start.entries)
        # Content a start state read from a live container holds moves to this tracker's own store: a temporary
        # file, so memory does not grow with the bytes the container changes.
        self._blobs = SpooledBlobs()
        for path, entry in start.entries.items():
            content = start.read(path) if entry.stored_in == snapshots.LIVE_FOLDER and entry.sha256 else None
            if content is not None:
                self._blobs.add(content)
        # Whether a path exists in the base image: what the start state changed or deleted, and every listed
        # path it did not add.
        self._base = {p for p, e in start.entries.items() if e.change in ("modified", "deleted")}
        self._base |= {p for p in listing if p not in start.entries}

    @classmethod
    def start(cls, container: Any, state: snapshots.Restorable, **options: Any) -> ChangeTracker | None:
        """A tracker of ``container``, whose filesystem is ``state`` now; None when the container cannot run it."""
        try:
            out = exec_output(container, ["sh", "-c", _LIST_SCRIPT])
            clock, _, rest = out.partition(b"\n")
            since = float(clock) - _SCAN_MARGIN_S
            listing, _ = parse_listed(rest, 0)
        except (ContainerFilesError, ValueError) as exc:
            _LOGGER.info("container %s cannot be followed by find; captures will use the engine's diff: %s",
                         container.short_id, exc)
            return None
        if "/" not in listing:
            return None
        return cls(container, state, listing, since, **options)

    def snapshot(self, recorded: snapshots.Restorable) -> snapshots.Restorable:
        """The container's filesystem now (its changed files' content in a temporary file), comparable with
        ``recorded`` (a step of its episode)."""
        self._look()
        referred = {e.sha256 for e in self._entries.values() if e.stored_in == snapshots.LIVE_FOLDER and e.sha256}
        self._blobs = self._blobs.compacted(referred)  # content no entry refers to any more is let go
        return snapshots.live_snapshot(recorded, self._entries.values(), self._blobs.subset(referred),
                                       also=(self._start,))

    # ----- one look ------------------------------------------------------------------------------------------

    def _look(self) -> None:
        limit = str(self._max_file_bytes + 1)
        # The answer is read as a stream into a temporary file, then parsed record by record and its tar read
        # member by member: time linear in its size, memory bounded (content goes to the spool).
        with exec_file(self._container, ["sh", "-c", _SCAN_SCRIPT, "sh", f"{self._since:.9f}", limit]) as out:
            clock = out.readline(64).strip()
            try:
                now = float(clock)
            except ValueError as exc:
                raise ContainerFilesError(
                    f"container {self._container.short_id} gave no clock reading: {clock[:80]!r}") from exc
            records = Records(out)
            changed = read_listed(records)
            children = _read_paths(records)
            rest = records.rest()
            start = rest.tell()
            has_tar = bool(rest.read(1))
            rest.seek(start)
            fetched = {
                item.entry.path: item
                for item in tar_items(rest, "/", f"scan of {self._container.short_id}", self._max_file_bytes,
                                      self._blobs)
            } if has_tar else {}
        for path, item in changed.items():
            if item.dev != self._root_dev or path == "/" or ignored(path, self._patterns):
                continue
            if item.type == "d":
                self._deletions(path, children.get(path, set()))
            self._changed(path, item, fetched.get(path))
        self._since = now - _SCAN_MARGIN_S

    def _deletions(self, folder: str, now_there: set[str]) -> None:
        for gone in sorted(self._children.get(folder, set()) - now_there):
            self._forget(gone)
            if not ignored(gone, self._patterns):
                if gone in self._base:
                    self._entries[gone] = snapshots.Entry(path=gone, type=snapshots.DELETED, change="deleted")
                self._parents_changed(gone)
        self._children[folder] = set(now_there)

    def _forget(self, path: str) -> None:
        """Drop ``path`` and everything under it from what the container holds."""
        prefix = path + "/"
        for known in [p for p in self._entries if p == path or p.startswith(prefix)]:
            del self._entries[known]
        stack = [path]
        while stack:
            current = stack.pop()
            self._info.pop(current, None)
            stack.extend(self._children.pop(current, ()))
        self._children.get(posixpath.dirname(path), set()).discard(path)

    def _changed(self, path: str, item: Listed, fetched: Fetched | None) -> None:
        if self._info.get(path, ("",))[0] == "d" and item.type != "d":  # a folder replaced by something else
            for child in sorted(self._children.get(path, ())):
                self._forget(child)
        self._info[path] = (item.type, item.mode)
        self._children.setdefault(posixpath.dirname(path), set()).add(path)
        change = "modified" if path in self._base else "added"
        kind = FIND_TYPES.get(item.type, snapshots.OTHER)
        if kind == snapshots.FILE and fetched is not None and fetched.entry.type == snapshots.FILE:
            entry = dataclasses.replace(fetched.entry, change=change)
            if entry.sha256 is not None:  # its content is in self._blobs
                entry = dataclasses.replace(entry, stored_in=snapshots.LIVE_FOLDER)
        elif kind == snapshots.FILE:
            note = (too_large_note(item.size, self._max_file_bytes) if item.size > self._max_file_bytes
                    else "content not read: the file changed while being read")
            entry = snapshots.Entry(path=path, type=kind, mode=item.mode, size=item.size, note=note, change=change)
        elif kind == snapshots.SYMLINK:
            entry = snapshots.Entry(path=path, type=kind, mode=item.mode, link_target=item.link, change=change)
        else:
            entry = snapshots.Entry(path=path, type=kind, mode=item.mode, change=change)
        self._entries[path] = entry
        self._parents_changed(path)

    def _parents_changed(self, path: str) -> None:
        """The folders above a change count as modified, as in the engine's change list."""
        for parent in parents(path):
            if parent in self._entries or ignored(parent, self._patterns):
                continue
            kind, mode = self._info.get(parent, ("d", None))
            self._entries[parent] = snapshots.Entry(
                path=parent, type=FIND_TYPES.get(kind, snapshots.OTHER), mode=mode,
                change="modified" if parent in self._base else "added",
            )



def _read_paths(records: Records) -> dict[str, set[str]]:
    """NUL-terminated paths up to a ``--`` record, grouped by their folder."""
    by_folder: dict[str, set[str]] = {}
    while True:
        record = records.next()
        if record is None or record == b"--":
            return by_folder
        path = record.decode("utf-8", "surrogateescape")
        by_folder.setdefault(posixpath.dirname(path), set()).add(path)
