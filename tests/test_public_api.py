"""The library's public API, snapshotted in tests/public_api.json so that a change to it is a decision, not an
accident: ``ares_viewer.__all__`` with the notebook's short names, and for each package of ``ares_viewer/`` (the
layer table of docs/architecture.md) its ``__all__`` (else its top-level public names) and its public modules.
The CLI is a face, not an API: its commands are in docs/cli.md.

After a deliberate change: ``python3 tests/test_public_api.py`` writes the snapshot anew; commit it with the change.
"""

from __future__ import annotations

import ast
import json
import pathlib
from typing import Any

REPO = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = REPO / "ares_viewer"
SNAPSHOT = pathlib.Path(__file__).resolve().parent / "public_api.json"
_FACES = {"cli"}


def _literal(tree: ast.Module, name: str) -> Any:
    """The value of the top-level assignment to ``name`` (a literal), or None."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and any(
                getattr(t, "id", None) == name for t in targets):
            return ast.literal_eval(node.value)
    return None


def _names(init: pathlib.Path) -> list[str]:
    """``__all__`` of a package, else the public names its ``__init__.py`` defines or imports at the top level."""
    tree = ast.parse(init.read_text())
    declared = _literal(tree, "__all__")
    if declared is not None:
        return sorted(declared)
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names |= {a.asname or a.name for a in node.names}
    return sorted(n for n in names if not n.startswith("_"))


def _modules(package: pathlib.Path) -> list[str]:
    found = [p.stem for p in package.glob("*.py") if not p.stem.startswith("_")]
    found += [p.name for p in package.iterdir() if (p / "__init__.py").exists() and not p.name.startswith("_")]
    return sorted(found)


def public_api() -> dict[str, dict[str, list[str]]]:
    top = ast.parse((LIBRARY / "__init__.py").read_text())
    short = sorted({**_literal(top, "_SHORT_NAMES"), **_literal(top, "_SHORT_FUNCTIONS")})
    api = {"ares_viewer": {"names": _names(LIBRARY / "__init__.py"), "short names": short,
                           "modules": _modules(LIBRARY)}}
    for package in sorted(p for p in LIBRARY.iterdir() if (p / "__init__.py").exists() and p.name not in _FACES):
        api[f"ares_viewer.{package.name}"] = {"names": _names(package / "__init__.py"), "modules": _modules(package)}
    return api


def test_the_public_api_is_the_snapshot():
    now = public_api()
    was = json.loads(SNAPSHOT.read_text())
    changed = {}
    for key in sorted(set(now) | set(was)):
        for part in sorted(set(now.get(key, {})) | set(was.get(key, {}))):
            added = sorted(set(now.get(key, {}).get(part, [])) - set(was.get(key, {}).get(part, [])))
            gone = sorted(set(was.get(key, {}).get(part, [])) - set(now.get(key, {}).get(part, [])))
            if added or gone:
                changed[f"{key} {part}"] = {"added": added, "gone": gone}
    assert not changed, ("the public API changed; if that is meant, run python3 tests/test_public_api.py and commit "
                         "tests/public_api.json with the change (a new module meant for its package alone is named "
                         f"_name.py, docs/architecture.md): {json.dumps(changed, indent=1)}")


def test_every_name_of_the_top_level_api_resolves():
    import ares_viewer

    for name in public_api()["ares_viewer"]["names"] + public_api()["ares_viewer"]["short names"]:
        assert getattr(ares_viewer, name) is not None, name


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(public_api(), indent=1) + "\n")
    print(f"wrote {SNAPSHOT}")
