"""The changes between two snapshots as one patch in git's format (what ``git diff --binary --full-index``
prints)."""

from __future__ import annotations

import base64
import hashlib
import zlib

from ares_viewer import snapshots
from ares_viewer.base import sizes, textdiff
from ares_viewer.fsdiff import _changes as changes
from ares_viewer.fsdiff import _ranking as ranking


def patch(diff: changes.FsDiff, *, include_noise: bool = False) -> str:
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
        if not include_noise and ranking.is_noise(change.path):
            continue
        parts.append(_git_patch(diff, change))
    return "".join(parts)


# A side of a file in a patch: git's mode (0o100644, 0o100755, 0o120000) and the content (a symlink's target).
_GitSide = tuple[int, bytes]
_NO_OBJECT = "0" * 40


def _git_patch(diff: changes.FsDiff, change: changes.FileChange) -> str:
    """One change in git's patch format, or a ``#`` note line when a patch cannot carry it."""
    if change.old_type in (None, snapshots.DIR) and change.new_type in (None, snapshots.DIR):
        if change.old_type == snapshots.DIR and change.new_type is None:
            return (
                f"# {change.path}: folder deleted (its files are in this patch only where the snapshots "
                "recorded them)\n"
            )
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
    kind = None if entry is None or entry.type in changes.ABSENT_TYPES else entry.type
    if entry is None or kind in (None, snapshots.DIR):
        return None, None
    if kind == snapshots.SYMLINK:
        return (_GIT_SYMLINK, (entry.link_target or "").encode("utf-8", "surrogateescape")), None
    if kind != snapshots.FILE:
        return None, f"{changes.describe_state(entry)}"
    if entry.size is not None and entry.size > changes.MAX_DIFF_BYTES:
        return None, f"{sizes.text(entry.size)}: larger than {sizes.text(changes.MAX_DIFF_BYTES)}"
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
    return (
        '"' + "".join(escapes.get(c, f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c) for c in name) + '"'
    )


def _git_block(path: str, old: _GitSide | None, new: _GitSide | None) -> str:
    name = path.lstrip("/")
    a_name, b_name = _git_quote(f"a/{name}"), _git_quote(f"b/{name}")
    lines = [f"diff --git {a_name} {b_name}"]
    if old is None:
        if new is None:
            raise ValueError(f"{path} is absent on both sides: there is nothing to patch")
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
        lines += [
            f"--- {a_name if old is not None else '/dev/null'}",
            f"+++ {b_name if new is not None else '/dev/null'}",
        ]
    return "\n".join(lines) + "\n" + hunks


def _patch_text(data: bytes) -> str | None:
    """Content as text for a patch, None when it must go as binary (not text, or not UTF-8: kept byte-exact)."""
    if changes.is_binary(data):
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
        chunk = packed[start : start + 52]
        length = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        lines.append(length + base64.b85encode(chunk, pad=True).decode("ascii"))
    return [*lines, ""]
