"""State with an owner: every cache of the library is a ``base.cache.BoundedCache``, registered where it is made so
that ``cache.clear_all()`` empties them all, and every file written whole goes through ``base.atomic``."""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil
import sys

import pytest

import ares_viewer
from ares_viewer.base import atomic, cache

REPO = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = REPO / "ares_viewer"

# functools caches the library may keep: each memoizes a pure function of its arguments (or of the code itself),
# so nothing it holds can go stale.
PURE_MEMOS = {
    "ares_viewer/analysis/shell_commands.py:simple_commands",
    "ares_viewer/analysis/shell_commands.py:_words",
    "ares_viewer/base/jsonbytes.py:_every_char",
    "ares_viewer/base/jsonbytes.py:same_ignoring_case",
    "ares_viewer/formats/adapters/inspect_ai.py:_stem",
    "ares_viewer/formats/adapters/mini_swe_agent.py:_instance",
    "ares_viewer/formats/adapters/mini_swe_agent.py:_base_id",
    "ares_viewer/formats/adapters/tinker.py:_location",
    "ares_viewer/runs/index/kept.py:_code",
}


def _modules() -> list[tuple[pathlib.Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(LIBRARY.rglob("*.py"))]


def test_no_module_writes_a_temporary_file_and_renames_it_in_by_hand():
    """``os.replace``/``os.rename`` belong to ``base.atomic`` (``write_bytes``, ``written``, ``replace_dir``),
    which sweeps what a killed writer left; a hand-written one leaves its ``.tmp`` files behind."""
    found = [f"{path.relative_to(REPO)}:{node.lineno}" for path, tree in _modules()
             if path != LIBRARY / "base" / "atomic.py" for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "os"
             and node.func.attr in ("replace", "rename")]
    assert found == []


def test_the_only_functools_caches_are_of_pure_functions():
    found = set()
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                    "cache" in ast.unparse(d) and "functools" in ast.unparse(d) for d in node.decorator_list):
                found.add(f"{path.relative_to(REPO)}:{node.name}")
    assert found == PURE_MEMOS


def test_clear_all_empties_every_module_cache_of_the_library():
    for info in pkgutil.walk_packages(ares_viewer.__path__, "ares_viewer."):
        if not info.name.startswith("ares_viewer.cli"):
            importlib.import_module(info.name)
    module_caches = [value for module in list(sys.modules.values())
                     if getattr(module, "__name__", "").startswith("ares_viewer.")
                     for value in vars(module).values() if isinstance(value, cache.BoundedCache)]
    assert len(module_caches) >= 10  # the walk found them
    registered = cache.caches()
    assert all(any(found is c for c in registered) for found in module_caches)
    for found in module_caches:
        found.put("a key", "a value")
    cache.clear_all()
    assert all(len(found) == 0 for found in module_caches)


def test_a_file_written_in_a_block_that_raises_leaves_the_old_file_and_no_staging(tmp_path):
    target = tmp_path / "manifest.parquet"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic.written(target) as staged:
        staged.write_bytes(b"half")
        raise RuntimeError("the writer failed")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["manifest.parquet"]
    with atomic.written(target) as staged:
        staged.write_bytes(b"new")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["manifest.parquet"]


def test_a_killed_writers_staging_is_swept_at_the_next_write(tmp_path):
    dead = 2**22 + 12345  # above the kernel's largest pid: no process has it
    left = tmp_path / f".part.parquet.tmp-{dead}-0123456789ab"
    left.write_bytes(b"half")
    with atomic.written(tmp_path / "other.parquet") as staged:
        staged.write_bytes(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.parquet"]
