"""What the agent changed on disk: filesystem diffs between two steps, and one file's history.

Everything here reads recorded snapshots and never needs a Docker daemon: ares-viewer's per-step
snapshots or upstream episode-boundary snapshots, through the one interface ``ares_viewer.snapshots`` declares.
Listing changes only compares manifest entries (for boundary snapshots: sizes and modification times,
and content only where those disagree); file contents are read, and diffed, only for the file a user
looks at.

The modules, from the bottom up: ``_tree`` (changes as a folder tree), ``_changes`` (the diff of two snapshots
and of one file), ``_ranking`` (noise paths, the main changed file), ``_git_patch`` (a diff as a git patch) and
``_history`` (an episode's steps: compare two, one step's changes, a file's history). Their public names are
all here: ``fsdiff.compare(...)``.
"""

from __future__ import annotations

from ares_viewer.fsdiff._changes import (
    ADDED,
    CHANGE_KINDS,
    DELETED,
    MAX_DIFF_BYTES,
    MODIFIED,
    TYPE_CHANGED,
    FileChange,
    FileDiff,
    FsDiff,
    as_text,
    diff_snapshots,
    is_binary,
)
from ares_viewer.fsdiff._git_patch import patch
from ares_viewer.fsdiff._history import (
    HistoryPoint,
    compare,
    episode_patch,
    file_history,
    files_by_step,
    paths_by_step,
    previous_step,
    snapshot_folders,
    step_changes,
)
from ares_viewer.fsdiff._ranking import (
    NOISE_PARTS,
    changed_lines,
    internals_words,
    is_noise,
    main_file,
    version_control_only,
)
from ares_viewer.fsdiff._tree import VCS_FOLDERS, TreeNode, change_tree, initial_collapsed, visible_nodes

__all__ = [
    "ADDED", "CHANGE_KINDS", "DELETED", "MAX_DIFF_BYTES", "MODIFIED", "NOISE_PARTS", "TYPE_CHANGED", "VCS_FOLDERS",
    "FileChange", "FileDiff", "FsDiff", "HistoryPoint", "TreeNode", "as_text", "change_tree", "changed_lines",
    "compare", "diff_snapshots", "episode_patch", "file_history", "files_by_step", "initial_collapsed",
    "internals_words", "is_binary", "is_noise", "main_file", "patch", "paths_by_step", "previous_step",
    "snapshot_folders", "step_changes", "version_control_only", "visible_nodes",
]
