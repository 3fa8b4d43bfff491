"""The filesystem changes between two snapshots of one episode, and the content diff of one path.

Everything here reads recorded snapshots and never needs a Docker daemon: ares-viewer's per-step
snapshots or upstream episode-boundary snapshots, through the one interface ``ares_viewer.snapshots`` declares.
Listing changes only compares manifest entries (for boundary snapshots: sizes and modification times,
and content only where those disagree); file contents are read, and diffed, only for the file a user
looks at.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
from typing import TYPE_CHECKING

from ares_viewer import snapshots
from ares_viewer.base import sizes, textdiff
from ares_viewer.fsdiff import _tree as tree

if TYPE_CHECKING:
    pass

# Past this size a side is not diffed line by line: reported by size and hash instead.
MAX_DIFF_BYTES = 2 * 1024 * 1024
_SNIFF_BYTES = 8192

ADDED = "added"
MODIFIED = "modified"
DELETED = "deleted"
TYPE_CHANGED = "type_changed"
CHANGE_KINDS = (ADDED, MODIFIED, DELETED, TYPE_CHANGED)
ABSENT_TYPES = (snapshots.DELETED, snapshots.ABSENT)


_TEXT_CONTROLS = frozenset(b"\t\n\r\f\b\x1b")


def is_binary(data: bytes) -> bool:
    """True when content is not text: a NUL byte near the start (git's rule), or mostly control bytes.

    Text in another encoding than UTF-8 (Latin-1, say) is still text: ``as_text`` shows it safely.
    """
    head = data[:_SNIFF_BYTES]
    if b"\x00" in head:
        return True
    controls = sum(1 for b in head if (b < 0x20 and b not in _TEXT_CONTROLS) or b == 0x7F)
    return controls > len(head) * 0.1


def as_text(data: bytes) -> str:
    """Content shown as text: invalid UTF-8 bytes become visible ``\\xNN`` escapes, never lost."""
    return data.decode("utf-8", errors="backslashreplace")


@dataclasses.dataclass(frozen=True, slots=True)
class FileChange:
    """One path whose state differs between the two sides of a ``FsDiff``.

    Attributes:
        path: absolute path in the container.
        kind: ``added``, ``modified``, ``deleted`` or ``type_changed`` (file <-> symlink <-> folder).
        old, new: the path's entries on each side (None or an absent/deleted entry when missing).
    """

    path: str
    kind: str
    old: snapshots.Entry | None
    new: snapshots.Entry | None

    @property
    def old_type(self) -> str | None:
        return None if self.old is None or self.old.type in ABSENT_TYPES else self.old.type

    @property
    def new_type(self) -> str | None:
        return None if self.new is None or self.new.type in ABSENT_TYPES else self.new.type

    @property
    def mode_changed(self) -> bool:
        old, new = self.old, self.new
        return bool(self.old_type and self.new_type and old is not None and new is not None and old.mode != new.mode)

    def describe(self) -> str:
        """One line: kind, path, sizes, modes and link targets."""
        parts = [f"{self.kind:<12} {self.path}"]
        for side, entry in (("old", self.old), ("new", self.new)):
            if entry is None or entry.type in ABSENT_TYPES:
                continue
            bits = [entry.type]
            if entry.size is not None:
                bits.append(sizes.text(entry.size))
            if entry.mode is not None:
                bits.append(f"mode {entry.mode:o}")
            if entry.link_target is not None:
                bits.append(f"-> {entry.link_target}")
            parts.append(f"{side}: {', '.join(bits)}")
        return "  ".join(parts)


@dataclasses.dataclass(frozen=True, slots=True)
class FileDiff:
    """The content diff of one path.

    Attributes:
        path: the path.
        binary: True when either side is not text (then ``unified`` is empty).
        unified: the unified diff of the text (empty when equal or binary).
        note: why a diff is missing or partial (binary, too large, content not recorded), else None.
        old_text, new_text: each side's text (None when absent, binary or too large).
        old_size, new_size, old_sha256, new_sha256: each side's size and hash when it is a file.
    """

    path: str
    binary: bool
    unified: str
    note: str | None
    old_text: str | None
    new_text: str | None
    old_size: int | None
    new_size: int | None
    old_sha256: str | None
    new_sha256: str | None

    def _repr_html_(self) -> str:
        note = f"<div style='color:#9a6700'>{html.escape(self.note)}</div>" if self.note else ""
        if self.binary or (self.old_text is None and self.new_text is None):
            return f"<div><code>{html.escape(self.path)}</code>{note}</div>"
        body = textdiff.to_html(self.old_text, self.new_text, a_name=f"a{self.path}", b_name=f"b{self.path}",
                                limit=MAX_DIFF_BYTES)
        return f"<div><code>{html.escape(self.path)}</code>{note}{body}</div>"


def _side_label(step: int | None) -> str:
    return "base image" if step is None else f"step {step}"


@dataclasses.dataclass(frozen=True, slots=True)
class FsDiff:
    """The filesystem changes of one episode between two steps (or the base image and a step).

    Attributes:
        episode_id: the episode.
        old_step, new_step: the two sides (``old_step`` None = the base image).
        changes: one entry per path whose state differs, sorted by path.
    """

    episode_id: str
    old_step: int | None
    new_step: int
    changes: tuple[FileChange, ...]
    _old: snapshots.Snapshot | None = dataclasses.field(repr=False, compare=False)
    _new: snapshots.Snapshot = dataclasses.field(repr=False, compare=False)

    def counts(self) -> dict[str, int]:
        """How many paths were added, modified, deleted and type-changed."""
        counts = dict.fromkeys(CHANGE_KINDS, 0)
        for change in self.changes:
            counts[change.kind] += 1
        return counts

    def paths(self) -> list[str]:
        return [c.path for c in self.changes]

    def tree(self) -> list[tree.TreeNode]:
        """The changes as a folder tree (see :func:`.tree.change_tree`)."""
        return tree.change_tree(self.changes)

    def file_changes(self) -> list[FileChange]:
        """The changes that are not just a folder appearing, disappearing or changing mode (their files are listed
        on their own): what "N files changed" counts."""
        folder_or_none = (None, snapshots.DIR)
        return [c for c in self.changes if not (c.old_type in folder_or_none and c.new_type in folder_or_none)]

    def change(self, path: str) -> FileChange:
        for change in self.changes:
            if change.path == path:
                return change
        raise KeyError(f"{path} did not change between {_side_label(self.old_step)} and step {self.new_step}")

    def stat_old(self, path: str) -> snapshots.Entry | None:
        """The state of ``path`` on the old side (see ``snapshots.Snapshot.stat``)."""
        return self._old.stat(path) if self._old is not None else snapshots.with_base(self._new).stat_base(path)

    def stat_new(self, path: str) -> snapshots.Entry | None:
        """The state of ``path`` on the new side."""
        return self._new.stat(path)

    def read_old(self, path: str) -> bytes | None:
        """The content of ``path`` on the old side (None when not a recorded file there)."""
        if self._old is None:
            return snapshots.with_base(self._new).read_base(path)
        return self._old.read(path)

    def read_new(self, path: str) -> bytes | None:
        """The content of ``path`` on the new side (None when not a recorded file there)."""
        return self._new.read(path)

    def file_diff(self, path: str, *, max_bytes: int = MAX_DIFF_BYTES) -> FileDiff:
        """The content diff of one changed path (also works for any path, changed or not)."""
        return diff_entries(path, self.stat_old(path), self.stat_new(path), self.read_old, self.read_new, max_bytes)

    def summary(self) -> str:
        """The change list as text, one path a line."""
        counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in self.counts().items() if n)
        head = f"{_side_label(self.old_step)} -> step {self.new_step}: {counts or 'no changes'}"
        return "\n".join([head, *(c.describe() for c in self.changes)])

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        counts = " · ".join(f"{n} {k.replace('_', ' ')}" for k, n in self.counts().items() if n) or "no changes"
        rows = "".join(
            f"<tr><td style='padding:1px 6px'>{html.escape(c.kind)}</td>"
            f"<td style='padding:1px 6px'><code>{html.escape(c.path)}</code></td>"
            f"<td style='padding:1px 6px'>{html.escape(c.describe().split('  ', 1)[-1])}</td></tr>"
            for c in self.changes[:200]
        )
        diffs = "".join(self.file_diff(c.path)._repr_html_() for c in self.changes[:20]
                        if c.new_type == snapshots.FILE or c.old_type == snapshots.FILE)
        return (f"<div style='font-family:system-ui,sans-serif;font-size:13px'>"
                f"<b>{html.escape(_side_label(self.old_step))} → step {self.new_step}</b>: {counts}"
                f"<table>{rows}</table>{diffs}</div>")



def change_kind(old: snapshots.Entry | None, new: snapshots.Entry | None) -> str:
    old_type = None if old is None or old.type in ABSENT_TYPES else old.type
    new_type = None if new is None or new.type in ABSENT_TYPES else new.type
    if old_type is None:
        return ADDED
    if new_type is None:
        return DELETED
    return MODIFIED if old_type == new_type else TYPE_CHANGED


def diff_entries(path, old_entry, new_entry, read_old, read_new, max_bytes: int) -> FileDiff:
    def side(entry, read):
        if entry is None or entry.type != snapshots.FILE:
            return None, None, None, None
        if entry.size is not None and entry.size > max_bytes:
            note = f"{sizes.text(entry.size)}: larger than {sizes.text(max_bytes)}, not diffed"
            return None, entry.size, entry.sha256, note
        data = read(path)
        if data is None:
            return None, entry.size, entry.sha256, entry.note or "content not recorded in the snapshot"
        return data, len(data), entry.sha256 or hashlib.sha256(data).hexdigest(), None

    old_data, old_size, old_sha, old_note = side(old_entry, read_old)
    new_data, new_size, new_sha, new_note = side(new_entry, read_new)
    notes = [n for n in (old_note, new_note) if n]
    if snapshots.FILE not in (getattr(old_entry, "type", None), getattr(new_entry, "type", None)):
        notes.append(f"not a regular file on either side: {describe_state(old_entry)} -> {describe_state(new_entry)}")
    binary = any(d is not None and is_binary(d) for d in (old_data, new_data))
    old_text = new_text = None
    unified = ""
    if binary:
        notes.append(f"binary content: {sizes.text(old_size or 0)} -> {sizes.text(new_size or 0)}, "
                     f"sha256 {(old_sha or '-')[:12]} -> {(new_sha or '-')[:12]}")
    else:
        old_text = as_text(old_data) if old_data is not None else None
        new_text = as_text(new_data) if new_data is not None else None
        if not notes:
            unified = textdiff.unified(old_text, new_text, a_name=f"a{path}", b_name=f"b{path}", limit=max_bytes)
    return FileDiff(path=path, binary=binary, unified=unified, note="; ".join(notes) or None, old_text=old_text,
                    new_text=new_text, old_size=old_size, new_size=new_size, old_sha256=old_sha, new_sha256=new_sha)


def describe_state(entry: snapshots.Entry | None) -> str:
    """A path's state in words, for notes: ``absent``, ``folder``, ``symlink to x``, ``file``, ..."""
    if entry is None:
        return "unchanged from the base image, not recorded"
    if entry.type == snapshots.SYMLINK:
        return f"symlink to {entry.link_target}"
    return {snapshots.DIR: "folder", snapshots.OTHER: "special file"}.get(entry.type, entry.type)

def diff_snapshots(old: snapshots.Snapshot | None, new: snapshots.Snapshot) -> FsDiff:
    """The changes from ``old`` (None: the base image) to ``new``, two snapshots of one episode.

    Raises:
        LookupError: When ``old`` is None and ``new`` is an episode-boundary snapshot (it records no base image).
    """
    changes = []
    for path in new.changed_since(old):
        old_entry = old.stat(path) if old is not None else snapshots.with_base(new).stat_base(path)
        new_entry = new.stat(path)
        changes.append(FileChange(path=path, kind=change_kind(old_entry, new_entry), old=old_entry, new=new_entry))
    return FsDiff(episode_id=new.episode_id, old_step=old.step_index if old is not None else None,
                  new_step=new.step_index, changes=tuple(changes), _old=old, _new=new)
