"""docs/architecture.md is the map of the library: its layer table names every package of ``ares_viewer/``, and
the import-linter layers contract in pyproject.toml names the same packages, so neither can drift from the tree."""

from __future__ import annotations

import pathlib
import re
import tomllib

REPO = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = REPO / "ares_viewer"


def _packages_on_disk() -> set[str]:
    """The top-level packages and modules of the library, as a newcomer sees them in ``ls ares_viewer``."""
    names = {p.name for p in LIBRARY.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.stem for p in LIBRARY.glob("*.py") if p.stem != "__init__"}
    return names


def _layer_table() -> list[str]:
    """The ``package`` cells of the layer table in docs/architecture.md, in order."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer")]
    return [row.split("|")[2] for row in rows]


def test_the_layer_table_names_every_package_of_the_library_and_nothing_else():
    named = set()
    for cell in _layer_table():
        named |= {n.rstrip("/").removesuffix(".py") for n in re.findall(r"`([\w./]+)`", cell)}
    named.discard("ares_viewer_app")
    assert named == _packages_on_disk()


def test_the_import_contract_layers_are_the_packages_on_disk():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contract = next(
        c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("Layers: the folders")
    )
    layered = set()
    for layer in contract["layers"]:
        layered |= {m.strip() for m in re.split(r"[|:]", layer)}
    library = {m.removeprefix("ares_viewer.") for m in layered if m.startswith("ares_viewer.")}
    assert library == _packages_on_disk()


def test_no_module_of_the_library_or_the_app_is_over_500_lines():
    long = {
        str(path.relative_to(REPO)): n
        for root in ("ares_viewer", "ares_viewer_app")
        for path in (REPO / root).rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 500
    }
    assert long == {}
