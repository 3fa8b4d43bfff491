"""What the agent changed on disk: filesystem diffs between two steps, and one file's history.

Everything here reads recorded snapshots and never needs a Docker daemon: ares-viewer's per-step
snapshots or upstream episode-boundary snapshots, through the one interface ``ares_viewer.snapshots`` declares.
Listing changes only compares manifest entries (for boundary snapshots: sizes and modification times,
and content only where those disagree); file contents are read, and diffed, only for the file a user
looks at.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import itertools
import posixpath
import zlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ares_viewer import snapshots
from ares_viewer.base import sizes, textdiff

if TYPE_CHECKING:
    from ares_viewer import model

# Past this size a side is not diffed line by line: reported by size and hash instead.
MAX_DIFF_BYTES = 2 * 1024 * 1024
_SNIFF_BYTES = 8192

ADDED = "added"
MODIFIED = "modified"
DELETED = "deleted"
TYPE_CHANGED = "type_changed"
CHANGE_KINDS = (ADDED, MODIFIED, DELETED, TYPE_CHANGED)
_ABSENT = (snapshots.DELETED, snapshots.ABSENT)


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
        return None if self.old is None or self.old.type in _ABSENT else self.old.type

    @property
    def new_type(self) -> str | None:
        return None if self.new is None or self.new.type in _ABSENT else self.new.type

    @property
    def mode_changed(self) -> bool:
        return bool(self.old_type and self.new_type and self.old.mode != self.new.mode)

    def describe(self) -> str:
        """One line: kind, path, sizes, modes and link targets."""
        parts = [f"{self.kind:<12} {self.path}"]
        for side, entry in (("old", self.old), ("new", self.new)):
            if entry is None or entry.type in _ABSENT:
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

    def tree(self) -> list[TreeNode]:
        """The changes as a folder tree (see :func:`change_tree`)."""
        return change_tree(self.changes)

    def file_changes(self) -> list[FileChange]:
        """The changes that are not just a folder appearing, disappearing or changing mode (their files are listed
        on their own): what "N files changed" counts."""
        folder_or_none = (None, snapshots.DIR)
        return [c for c in self.changes if not (c.old_type in folder_or_none and c.new_type in folder_or_none)]

    def first_file(self) -> FileChange | None:
        """The changed file a reader most likely wants first (:func:`main_file`, the one ranking the Files page
        uses too); None when no file changed."""
        return main_file(self)

    def change(self, path: str) -> FileChange:
        for change in self.changes:
            if change.path == path:
                return change
        raise KeyError(f"{path} did not change between {_side_label(self.old_step)} and step {self.new_step}")

    def stat_old(self, path: str) -> snapshots.Entry | None:
        """The state of ``path`` on the old side (see ``snapshots.Snapshot.stat``)."""
        return self._old.stat(path) if self._old is not None else self._new.stat_base(path)

    def stat_new(self, path: str) -> snapshots.Entry | None:
        """The state of ``path`` on the new side."""
        return self._new.stat(path)

    def read_old(self, path: str) -> bytes | None:
        """The content of ``path`` on the old side (None when not a recorded file there)."""
        if self._old is None:
            return self._new.read_base(path)
        return self._old.read(path)

    def read_new(self, path: str) -> bytes | None:
        """The content of ``path`` on the new side (None when not a recorded file there)."""
        return self._new.read(path)

    def file_diff(self, path: str, *, max_bytes: int = MAX_DIFF_BYTES) -> FileDiff:
        """The content diff of one changed path (also works for any path, changed or not)."""
        return _file_diff(path, self.stat_old(path), self.stat_new(path), self.read_old, self.read_new, max_bytes)

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


@dataclasses.dataclass(frozen=True, slots=True)
class TreeNode:
    """One row of a change tree: a folder that holds changes, or a changed path.

    Attributes:
        path: the node's path (for a chain of folders shown as one row, the deepest of them).
        name: what the row shows: the last path component, or ``a/b/c`` for a chain of folders whose only content
            is the next folder (as code hosts show them).
        depth: the nesting level (0 at the top).
        children: how many rows sit directly below this one (0 for a plain changed path).
        change: this path's own change, when it changed itself (an added folder does, and has children too).
        counts: the changes at and below this node by kind, the zero ones left out.
    """

    path: str
    name: str
    depth: int
    children: int
    change: FileChange | None
    counts: dict[str, int]

    @property
    def folder(self) -> bool:
        return self.children > 0


def change_tree(changes: Sequence[FileChange]) -> list[TreeNode]:
    """The changed paths as a folder tree, in display order (folders before files, each by name).

    Every folder on the way to a change is a node with the count of changes below it by kind; a folder whose
    only content is one more folder (and which did not change itself) is merged with it into one row.
    """
    own = {c.path: c for c in changes}
    below: dict[str, set[str]] = {}  # folder -> its direct children in the tree
    counts: dict[str, dict[str, int]] = {}
    tops: set[str] = set()
    for change in changes:
        path = change.path
        lead = "/" if path.startswith("/") else ""
        parts = path.strip("/").split("/")
        chain = [lead + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        tops.add(chain[0])
        for parent, child in itertools.pairwise(chain):
            below.setdefault(parent, set()).add(child)
        for node in chain:
            tally = counts.setdefault(node, {})
            tally[change.kind] = tally.get(change.kind, 0) + 1

    def order(paths) -> list[str]:
        return sorted(paths, key=lambda p: (p not in below, posixpath.basename(p).lower(), p))

    nodes: list[TreeNode] = []
    stack = [(path, 0) for path in reversed(order(tops))]
    while stack:
        path, depth = stack.pop()
        name = path if depth == 0 else posixpath.basename(path)  # the top rows show where they are
        # Merge a chain of folders that hold nothing but the next folder.
        while path not in own and len(below.get(path, ())) == 1:
            (only,) = below[path]
            if only not in below:
                break
            path, name = only, f"{name}/{posixpath.basename(only)}"
        kids = order(below.get(path, ()))
        nodes.append(TreeNode(path=path, name=name, depth=depth, children=len(kids), change=own.get(path),
                              counts=counts[path]))
        stack.extend((kid, depth + 1) for kid in reversed(kids))
    return nodes


def visible_nodes(nodes: Sequence[TreeNode], collapsed: Iterable[str]) -> list[TreeNode]:
    """The rows of ``change_tree`` left when the folders in ``collapsed`` are closed (their rows still show)."""
    closed = set(collapsed)
    shown: list[TreeNode] = []
    hide_below: int | None = None
    for node in nodes:
        if hide_below is not None:
            if node.depth > hide_below:
                continue
            hide_below = None
        shown.append(node)
        if node.folder and node.path in closed:
            hide_below = node.depth
    return shown


# Version-control folders: changed by every commit, rarely what a reader is after, so they start closed.
VCS_FOLDERS = frozenset({".git", ".hg", ".svn"})


def initial_collapsed(nodes: Sequence[TreeNode], limit: int, *, keep_open: str | None = None) -> set[str]:
    """Which folders to start closed so that at most about ``limit`` rows show: folders open level by level while
    they fit, except version-control folders (``.git``); the folders on the way to ``keep_open`` (a path being
    looked at) always open."""
    parent: dict[str, str | None] = {}
    path_to: list[TreeNode] = []  # the nodes from the top down to the current one
    for node in nodes:
        del path_to[node.depth:]
        parent[node.path] = path_to[-1].path if path_to else None
        path_to.append(node)
    folders = [n for n in nodes if n.folder]
    opened: set[str] = set()
    shown = sum(1 for n in nodes if n.depth == 0)
    for node in sorted(folders, key=lambda n: n.depth):  # stable: display order within a level
        up = parent[node.path]
        quiet = posixpath.basename(node.path) in VCS_FOLDERS
        if (up is None or up in opened) and not quiet and shown + node.children <= limit:
            opened.add(node.path)
            shown += node.children
    closed = {n.path for n in folders} - opened
    if keep_open:
        closed -= {n.path for n in folders if keep_open.startswith(n.path.rstrip("/") + "/")}
    return closed


def _kind(old: snapshots.Entry | None, new: snapshots.Entry | None) -> str:
    old_type = None if old is None or old.type in _ABSENT else old.type
    new_type = None if new is None or new.type in _ABSENT else new.type
    if old_type is None:
        return ADDED
    if new_type is None:
        return DELETED
    return MODIFIED if old_type == new_type else TYPE_CHANGED


def _file_diff(path, old_entry, new_entry, read_old, read_new, max_bytes: int) -> FileDiff:
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
        notes.append(f"not a regular file on either side: {_state(old_entry)} -> {_state(new_entry)}")
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


def _state(entry: snapshots.Entry | None) -> str:
    """A path's state in words, for notes: ``absent``, ``folder``, ``symlink to x``, ``file``, ..."""
    if entry is None:
        return "unchanged from the base image, not recorded"
    if entry.type == snapshots.SYMLINK:
        return f"symlink to {entry.link_target}"
    return {snapshots.DIR: "folder", snapshots.OTHER: "special file"}.get(entry.type, entry.type)


def _snapshot_map(episode: model.Episode) -> dict[int, snapshots.SnapshotRef]:
    refs = {ref.step_index: ref for ref in snapshots.find(episode)}
    if not refs:
        raise LookupError(f"episode {episode.episode_id} has no recorded snapshots")
    return refs


def _open(refs: dict[int, snapshots.SnapshotRef], step: int, episode_id: str) -> snapshots.Snapshot:
    if step not in refs:
        raise LookupError(f"episode {episode_id} has no snapshot for step {step} (recorded: {sorted(refs)})")
    return snapshots.open(refs[step])


def diff_snapshots(old: snapshots.Snapshot | None, new: snapshots.Snapshot) -> FsDiff:
    """The changes from ``old`` (None: the base image) to ``new``, two snapshots of one episode.

    Raises:
        LookupError: When ``old`` is None and ``new`` is an episode-boundary snapshot (it records no base image).
    """
    changes = []
    for path in new.changed_since(old):
        old_entry = old.stat(path) if old is not None else new.stat_base(path)
        new_entry = new.stat(path)
        changes.append(FileChange(path=path, kind=_kind(old_entry, new_entry), old=old_entry, new=new_entry))
    return FsDiff(episode_id=new.episode_id, old_step=old.step_index if old is not None else None,
                  new_step=new.step_index, changes=tuple(changes), _old=old, _new=new)


def compare(episode: model.Episode, old_step: int | None, new_step: int) -> FsDiff:
    """The filesystem changes of ``episode`` from ``old_step`` (None: the base image) to ``new_step``.

    Raises:
        LookupError: when the episode has no snapshot for one of the steps, or when ``old_step`` is None and
            its snapshots are episode-boundary ones (they record no base image).
        snapshots.SnapshotError: when a snapshot is corrupt (the message names it and why).
    """
    refs = _snapshot_map(episode)
    new = _open(refs, new_step, episode.episode_id)
    old = _open(refs, old_step, episode.episode_id) if old_step is not None else None
    return diff_snapshots(old, new)


def previous_step(episode: model.Episode, step: int) -> int | None:
    """The latest step before ``step`` that has a snapshot (None: none has, compare with the base image)."""
    earlier = [ref.step_index for ref in snapshots.find(episode) if ref.step_index < step]
    return max(earlier) if earlier else None


def step_changes(episode: model.Episode, step: int) -> FsDiff:
    """What action ``step`` changed: the previous recorded step against the step itself.

    With a snapshot per step that is step ``step - 1``; step 0 (or the first recorded step) is compared with the
    base image. Raises like :func:`compare`.
    """
    return compare(episode, previous_step(episode, step), step)


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One step at which a path's state changed, with the diff from its previous state."""

    step: int
    kind: str
    entry: snapshots.Entry | None
    diff: FileDiff


def file_history(episode: model.Episode, path: str, *, steps: Sequence[int] | None = None) -> list[HistoryPoint]:
    """The steps at which ``path`` changed (against the previous recorded step; the first against the base).

    Episode-boundary snapshots record no base image: their history starts at the first readable snapshot,
    which is the starting point rather than a change. A corrupt snapshot is skipped rather than ending the
    history; its error is raised only when no snapshot can be read at all.
    """
    refs = _snapshot_map(episode)
    points: list[HistoryPoint] = []
    previous: snapshots.Snapshot | None = None
    errors: list[str] = []
    for step in sorted(steps if steps is not None else refs):
        try:
            current = snapshots.open(refs[step])
        except snapshots.SnapshotError as exc:
            errors.append(str(exc))
            continue
        if previous is None and not current.records_base:
            previous = current  # no base image to compare the first one with: it is the starting point
            continue
        old_entry = previous.stat(path) if previous is not None else current.stat_base(path)
        new_entry = current.stat(path)
        if not current.same_state_as(previous, path):
            read_old = previous.read if previous is not None else current.read_base
            diff = _file_diff(path, old_entry, new_entry, read_old, current.read, MAX_DIFF_BYTES)
            points.append(HistoryPoint(step=step, kind=_kind(old_entry, new_entry), entry=new_entry, diff=diff))
        previous = current
    if errors and len(errors) == len(refs):
        raise snapshots.SnapshotError(refs[min(refs)].path, "; ".join(errors))
    return points


# ----- what a reader looks for first: the edited source, the whole patch, each step's files -------------------------

# Cache folders: their files change as a side effect of running the code.
CACHE_FOLDERS = ("__pycache__", ".pytest_cache", "node_modules", ".mypy_cache")
# Folders whose files change as a side effect (version control bookkeeping, caches): never "the" changed file.
NOISE_PARTS = tuple(f"/{name}/" for name in (*sorted(VCS_FOLDERS), *CACHE_FOLDERS))
# Changed files whose lines are counted to find the most-changed one (the rest rank by size).
_RANKED_FILES = 40


def is_noise(path: str) -> bool:
    """True for a path under version control or cache folders (``.git/index`` changes with every ``git add``)."""
    return any(part in path + "/" for part in NOISE_PARTS) or path.endswith((".pyc", ".pyo"))


_CODE_SUFFIXES = frozenset({
    ".py", ".pyi", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".java", ".kt",
    ".rb", ".php", ".cs", ".swift", ".scala", ".sh", ".sql", ".lua", ".r", ".jl", ".m", ".ml", ".hs", ".ex", ".exs",
    ".clj", ".pl",
})


def _is_source(path: str) -> bool:
    name = posixpath.basename(path)
    return not name.startswith(".") and "." in name


def _is_code(path: str) -> bool:
    return posixpath.splitext(path)[1].lower() in _CODE_SUFFIXES


def changed_lines(file_diff: FileDiff) -> int:
    """Lines added plus lines removed in a file diff (0 for a binary or undiffed file)."""
    return sum(1 for line in file_diff.unified.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++ ", "--- ")))


def main_file(diff: FsDiff) -> FileChange | None:
    """The changed file a reader most likely wants first: the most-changed source file (most lines added and
    removed) outside version-control and cache folders, modified files before added ones; dotfiles such as
    ``.gitignore`` only when nothing else changed. None when no file changed."""
    files = diff.file_changes()
    wanted = [c for c in files if not is_noise(c.path)]
    if not wanted:
        return files[0] if files else None
    order = {MODIFIED: 0, ADDED: 1, TYPE_CHANGED: 2, DELETED: 3}

    def weight(change: FileChange) -> int:
        sizes = [e.size for e in (change.old, change.new) if e is not None and e.size is not None]
        return max(sizes, default=0)

    candidates = sorted(wanted, key=lambda c: (not _is_source(c.path), order[c.kind], not _is_code(c.path),
                                               -weight(c)))[:_RANKED_FILES]
    best = candidates[0]
    if best.kind == MODIFIED and _is_source(best.path):
        edited = [c for c in candidates if c.kind == MODIFIED and _is_source(c.path)]
        if len(edited) > 1:
            best = max(edited, key=lambda c: changed_lines(diff.file_diff(c.path)))
    return best


def patch(diff: FsDiff, *, include_noise: bool = False) -> str:
    """The changes as one patch in git's format, file by file: what ``git diff --binary --full-index`` prints.

    ``git apply`` (or ``patch -p1``, text files only) in a folder holding the old side's files gives the new
    side's: each file has a ``diff --git`` header; added and deleted files have ``new file mode`` / ``deleted file
    mode`` and ``/dev/null`` for the missing side; mode changes (git knows only 644, 755 and symlinks) have ``old
    mode`` / ``new mode``; a file that is not UTF-8 text is a ``GIT binary patch`` (which ``patch -p1`` skips); a
    symlink's content is its target; a file that turns into a symlink (or back) is a deletion and an addition.
    Paths are relative to the container's root (``a/testbed/app.py``).

    Version-control and cache folders are left out unless ``include_noise``. What a patch cannot carry gets a
    ``# path: ...`` line naming it and why (git skips such lines): a file too large to diff or whose content the
    snapshot does not hold, a special file, a deleted folder's files the snapshots never recorded.
    """
    parts = []
    for change in diff.changes:
        if not include_noise and is_noise(change.path):
            continue
        parts.append(_git_patch(diff, change))
    return "".join(parts)


# A side of a file in a patch: git's mode (0o100644, 0o100755, 0o120000) and the content (a symlink's target).
_GitSide = tuple[int, bytes]
_NO_OBJECT = "0" * 40


def _git_patch(diff: FsDiff, change: FileChange) -> str:
    """One change in git's patch format, or a ``#`` note line when a patch cannot carry it."""
    if change.old_type in (None, snapshots.DIR) and change.new_type in (None, snapshots.DIR):
        if change.old_type == snapshots.DIR and change.new_type is None:
            return (f"# {change.path}: folder deleted (its files are in this patch only where the snapshots "
                    "recorded them)\n")
        return ""  # git has no folders: a folder's files are listed on their own
    old, old_why = _git_side(change.path, change.old, diff.read_old)
    new, new_why = _git_side(change.path, change.new, diff.read_new)
    if old_why or new_why:
        why = "; ".join(w for w in (old_why, new_why) if w)
        return f"# {change.path}: {change.kind.replace('_', ' ')}, not in this patch ({why})\n"
    if old is not None and new is not None and (old[0] == _GIT_SYMLINK) != (new[0] == _GIT_SYMLINK):
        return _git_block(change.path, old, None) + _git_block(change.path, None, new)  # as git: delete, add
    return _git_block(change.path, old, new)


_GIT_SYMLINK = 0o120000


def _git_side(path: str, entry: snapshots.Entry | None, read) -> tuple[_GitSide | None, str | None]:
    """A side as git sees it, ``(side or None when absent, None)``; ``(None, why)`` when a patch cannot carry it."""
    kind = None if entry is None or entry.type in _ABSENT else entry.type
    if kind in (None, snapshots.DIR):
        return None, None
    if kind == snapshots.SYMLINK:
        return (_GIT_SYMLINK, (entry.link_target or "").encode("utf-8", "surrogateescape")), None
    if kind != snapshots.FILE:
        return None, f"{_state(entry)}"
    if entry.size is not None and entry.size > MAX_DIFF_BYTES:
        return None, f"{sizes.text(entry.size)}: larger than {sizes.text(MAX_DIFF_BYTES)}"
    data = read(path)
    if data is None:
        return None, entry.note or "content not recorded in the snapshot"
    return (0o100755 if (entry.mode or 0) & 0o100 else 0o100644, data), None


def _git_object_id(data: bytes) -> str:
    """The id git gives a blob of this content (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _git_quote(name: str) -> str:
    """A path as git writes it in a header: C-quoted when it holds a quote, a backslash or a control character."""
    if not any(c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return name
    escapes = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
    return '"' + "".join(escapes.get(c, f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                         for c in name) + '"'


def _git_block(path: str, old: _GitSide | None, new: _GitSide | None) -> str:
    name = path.lstrip("/")
    a_name, b_name = _git_quote(f"a/{name}"), _git_quote(f"b/{name}")
    lines = [f"diff --git {a_name} {b_name}"]
    if old is None:
        lines.append(f"new file mode {new[0]:o}")
    elif new is None:
        lines.append(f"deleted file mode {old[0]:o}")
    elif old[0] != new[0]:
        lines += [f"old mode {old[0]:o}", f"new mode {new[0]:o}"]
    old_data = old[1] if old is not None else None
    new_data = new[1] if new is not None else None
    old_id = _git_object_id(old_data) if old_data is not None else _NO_OBJECT
    new_id = _git_object_id(new_data) if new_data is not None else _NO_OBJECT
    if old_id == new_id:  # a mode change only
        return "\n".join(lines) + "\n"
    same_mode = f" {old[0]:o}" if old is not None and new is not None and old[0] == new[0] else ""
    lines.append(f"index {old_id}..{new_id}{same_mode}")
    old_text, new_text = (_patch_text(d) if d is not None else "" for d in (old_data, new_data))
    if old_text is None or new_text is None:
        lines += ["GIT binary patch", *_git_literal(new_data or b""), *_git_literal(old_data or b"")]
        return "\n".join(lines) + "\n"
    hunks = textdiff.exact_hunks(old_text, new_text)
    if hunks:  # an empty file added or deleted has none
        lines += [f"--- {a_name if old is not None else '/dev/null'}",
                  f"+++ {b_name if new is not None else '/dev/null'}"]
    return "\n".join(lines) + "\n" + hunks


def _patch_text(data: bytes) -> str | None:
    """Content as text for a patch, None when it must go as binary (not text, or not UTF-8: kept byte-exact)."""
    if is_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _git_literal(data: bytes) -> list[str]:
    """A ``literal`` hunk of a git binary patch: the content zlib-compressed, in base85 lines of 52 bytes."""
    packed = zlib.compress(data, 9)
    lines = [f"literal {len(data)}"]
    for start in range(0, len(packed), 52):
        chunk = packed[start:start + 52]
        length = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        lines.append(length + base64.b85encode(chunk, pad=True).decode("ascii"))
    return [*lines, ""]


def episode_patch(episode: model.Episode) -> FsDiff | None:
    """What the whole episode changed: its first recorded step (what the agent first saw) against its last.

    This is what ``git add -A && git diff`` submits when the task's repository starts clean at the first step.
    None when the episode has fewer than two snapshots.
    """
    refs = sorted(ref.step_index for ref in snapshots.find(episode))
    if len(refs) < 2:
        return None
    return compare(episode, refs[0], refs[-1])


def files_by_step(episode: model.Episode) -> dict[int, dict[str, str]]:
    """The files each recorded step changed (against the previous recorded step) and how: path -> ``added``,
    ``modified``, ``deleted`` or ``type_changed``. Version-control and cache folders are left out; steps without a
    snapshot are missing. Empty when the episode has no snapshots.

    A snapshot that cannot be read leaves its step out rather than failing.
    """
    found: dict[int, dict[str, str]] = {}
    previous: snapshots.Snapshot | None = None
    for ref in sorted(snapshots.find(episode), key=lambda r: r.step_index):
        try:
            current = snapshots.open(ref)
        except snapshots.SnapshotError:
            previous = None
            continue
        if previous is not None:
            changed = {}
            for path in current.changed_since(previous):
                old, new = previous.stat(path), current.stat(path)
                if not is_noise(path) and snapshots.FILE in {getattr(old, "type", None), getattr(new, "type", None)}:
                    changed[path] = _kind(old, new)
            found[ref.step_index] = changed
        previous = current
    return found
