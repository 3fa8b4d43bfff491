"""The changes between two snapshots of one episode as a folder tree, in display order, and which folders start
closed so a long list stays readable."""

from __future__ import annotations

import dataclasses
import itertools
import posixpath
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ares_viewer.fsdiff._changes import FileChange


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
        nodes.append(
            TreeNode(path=path, name=name, depth=depth, children=len(kids), change=own.get(path), counts=counts[path])
        )
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
        del path_to[node.depth :]
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
