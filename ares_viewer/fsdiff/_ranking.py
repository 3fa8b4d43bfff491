"""What a reader looks for first among the changes: which paths are noise (version control, caches) and which
changed file is the main one."""

from __future__ import annotations

import posixpath

from ares_viewer.fsdiff import _changes as changes
from ares_viewer.fsdiff import _tree as tree

# Cache folders: their files change as a side effect of running the code.
CACHE_FOLDERS = ("__pycache__", ".pytest_cache", "node_modules", ".mypy_cache")
# Folders whose files change as a side effect (version control bookkeeping, caches): never "the" changed file.
NOISE_PARTS = tuple(f"/{name}/" for name in (*sorted(tree.VCS_FOLDERS), *CACHE_FOLDERS))
# Changed files whose lines are counted to find the most-changed one (the rest rank by size).
_RANKED_FILES = 40


def is_noise(path: str) -> bool:
    """True for a path under version control or cache folders (``.git/index`` changes with every ``git add``)."""
    return any(part in path + "/" for part in NOISE_PARTS) or path.endswith((".pyc", ".pyo"))


_VCS_PARTS = tuple(f"/{name}/" for name in sorted(tree.VCS_FOLDERS))


def version_control_only(diff: changes.FsDiff) -> list[str]:
    """The changed files when every one is version control's own bookkeeping (``.git/index``, ``.git/objects/...``,
    as ``git add`` writes them), else ``[]``: such a step changed no file of the work tree, and a reader should be
    told so rather than shown ``.git/index``."""
    files = [c.path for c in diff.file_changes()]
    if files and all(any(part in "/" + path.lstrip("/") for part in _VCS_PARTS) for path in files):
        return files
    return []


def internals_words(paths: list[str], shown: int = 2) -> str:
    """The first few of ``paths`` in a line: ``/testbed/.git/index, /testbed/.git/objects/f8/21b0 and 3 more``."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


_CODE_SUFFIXES = frozenset(
    {
        ".py",
        ".pyi",
        ".js",
        ".jsx",
        ".ts",
        ".tsx",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".java",
        ".kt",
        ".rb",
        ".php",
        ".cs",
        ".swift",
        ".scala",
        ".sh",
        ".sql",
        ".lua",
        ".r",
        ".jl",
        ".m",
        ".ml",
        ".hs",
        ".ex",
        ".exs",
        ".clj",
        ".pl",
    }
)


def _is_source(path: str) -> bool:
    name = posixpath.basename(path)
    return not name.startswith(".") and "." in name


def _is_code(path: str) -> bool:
    return posixpath.splitext(path)[1].lower() in _CODE_SUFFIXES


def changed_lines(file_diff: changes.FileDiff) -> int:
    """Lines added plus lines removed in a file diff (0 for a binary or undiffed file)."""
    return sum(
        1 for line in file_diff.unified.splitlines() if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    )


def main_file(diff: changes.FsDiff) -> changes.FileChange | None:
    """The changed file a reader most likely wants first: the most-changed source file (most lines added and
    removed) outside version-control and cache folders, modified files before added ones; dotfiles such as
    ``.gitignore`` only when nothing else changed. None when no file changed."""
    files = diff.file_changes()
    wanted = [c for c in files if not is_noise(c.path)]
    if not wanted:
        return files[0] if files else None
    order = {changes.MODIFIED: 0, changes.ADDED: 1, changes.TYPE_CHANGED: 2, changes.DELETED: 3}

    def weight(change: changes.FileChange) -> int:
        sizes = [e.size for e in (change.old, change.new) if e is not None and e.size is not None]
        return max(sizes, default=0)

    candidates = sorted(
        wanted, key=lambda c: (not _is_source(c.path), order[c.kind], not _is_code(c.path), -weight(c))
    )[:_RANKED_FILES]
    best = candidates[0]
    if best.kind == changes.MODIFIED and _is_source(best.path):
        edited = [c for c in candidates if c.kind == changes.MODIFIED and _is_source(c.path)]
        if len(edited) > 1:
            best = max(edited, key=lambda c: changed_lines(diff.file_diff(c.path)))
    return best
