"""docs/architecture.md is the map of the library: its layer table names every package of ``ares_viewer/``, and
the import-linter layers contract in pyproject.toml names the same packages, so neither can drift from the tree.
Functions are held under ruff's complexity caps, with today's exceptions listed here to shrink."""

from __future__ import annotations

import ast
import json
import pathlib
import re
import subprocess
import sys
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


# The functions over one of the complexity caps of pyproject.toml (``[tool.ruff.lint]``: C901 cyclomatic complexity,
# PLR0912 branches, PLR0913 arguments, PLR0915 statements) when the caps came in, each with its figure then:
# ``"file:function": {rule: figure}``. A function may leave this list (it must, once it is under every cap) and a
# figure may only go down; nothing may join it. Length is no rule: a module is as long as its one idea needs.
COMPLEX: dict[str, dict[str, int]] = {
    "ares_viewer/analysis/ending.py:_reason": {"C901": 15, "PLR0912": 14},
    "ares_viewer/container/capture.py:capture_snapshot": {"PLR0913": 9},
    "ares_viewer/counterfactual/__init__.py:run": {"PLR0913": 14},
    "ares_viewer/counterfactual/branching.py:_Runner.__init__": {"PLR0913": 9},
    "ares_viewer/counterfactual/branching.py:search": {"PLR0913": 15},
    "ares_viewer/counterfactual/model_client.py:_post": {"C901": 13, "PLR0915": 51},
    "ares_viewer/counterfactual/model_client.py:openai_client": {"C901": 17, "PLR0915": 57},
    "ares_viewer/formats/base.py:episode": {"PLR0913": 15},
    "ares_viewer/review/labelschema.py:Field.clean": {"C901": 13},
    "ares_viewer/review/queues.py:create": {"PLR0913": 10},
    "ares_viewer/runs/sources.py:_local_walk": {"C901": 14, "PLR0912": 14},
    "ares_viewer/sandbox/box.py:restore": {"PLR0913": 10},
    "ares_viewer/sandbox/commands.py:_exec": {"PLR0913": 9},
    "ares_viewer/snapshots/per_step_snapshot.py:memory_snapshot": {"PLR0913": 11},
    "ares_viewer/snapshots/per_step_writer.py:write_step": {"PLR0913": 9},
    "benchmarks/bench_targets.py:main": {"PLR0915": 71},
    "sample_runs/ares_rollout.py:run_plan": {"PLR0913": 11},
    "testdata/activations.py:write_capture": {"PLR0913": 11},
    "testdata/synthetic.py:episode_dict": {"PLR0913": 9},
    "testdata/synthetic.py:write_boundary_snapshot": {"PLR0913": 11},
}
_CAPPED = ("C901", "PLR0912", "PLR0913", "PLR0915")


def _function_at(path: pathlib.Path, line: int) -> str:
    """The qualified name of the function defined on ``line`` of ``path`` (``Class.method``)."""

    def walk(node: ast.AST, prefix: str) -> str | None:
        for child in ast.iter_child_nodes(node):
            named = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            name = f"{prefix}{getattr(child, 'name', '')}." if named else prefix
            if named and child.lineno == line and not isinstance(child, ast.ClassDef):
                return name[:-1]
            if (found := walk(child, name)) is not None:
                return found
        return None

    return walk(ast.parse(path.read_text()), "") or f"line {line}"


def _complex_functions() -> dict[str, dict[str, int]]:
    """What ruff finds over the caps in the whole repository with no file exempt: ``COMPLEX``'s shape."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", ",".join(_CAPPED),
         "--config", "lint.per-file-ignores={}", "--output-format", "json", "."],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    found: dict[str, dict[str, int]] = {}
    for finding in json.loads(done.stdout):
        path = pathlib.Path(finding["filename"])
        key = f"{path.relative_to(REPO)}:{_function_at(path, finding['location']['row'])}"
        found.setdefault(key, {})[finding["code"]] = int(re.search(r"\((\d+) >", finding["message"])[1])
    return found


def test_no_function_is_more_complex_than_the_caps_allow_except_the_listed_ones_and_those_only_shrink():
    found = _complex_functions()
    new = {key: rules for key, rules in found.items() if key not in COMPLEX}
    assert not new, f"over a complexity cap of pyproject.toml (split them; the list is closed): {new}"
    worse = {key: (rules, COMPLEX[key]) for key, rules in found.items()
             if any(figure > COMPLEX[key].get(rule, 0) for rule, figure in rules.items())}
    assert not worse, f"more complex than when listed (found, listed): {worse}"
    under = {key: sorted(set(rules) - set(found.get(key, {}))) for key, rules in COMPLEX.items()
             if set(rules) - set(found.get(key, {}))}
    assert not under, f"under the cap now: take these out of COMPLEX (and pyproject's per-file-ignores): {under}"


def test_the_files_exempt_from_the_caps_in_pyproject_are_those_of_the_listed_functions():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert set(_CAPPED) <= set(config["select"])
    exempt = {path: set(codes) for path, codes in config["per-file-ignores"].items() if set(codes) & set(_CAPPED)}
    listed: dict[str, set[str]] = {}
    for key, rules in COMPLEX.items():
        listed.setdefault(key.split(":")[0], set()).update(rules)
    assert exempt == listed


def test_the_caps_docs_architecture_states_are_those_of_pyproject():
    lint = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    stated = re.search(r"cyclomatic complexity (\d+),\s+(\d+) branches, (\d+) arguments, (\d+) statements",
                       (REPO / "docs" / "architecture.md").read_text())
    assert stated is not None
    assert [int(n) for n in stated.groups()] == [lint["mccabe"]["max-complexity"], lint["pylint"]["max-branches"],
                                                 lint["pylint"]["max-args"], lint["pylint"]["max-statements"]]


def test_every_document_the_code_points_to_exists():
    """An error or a docstring saying "see docs/x.md" sends a user to a page that is there."""
    named = {
        (str(path.relative_to(REPO)), doc)
        for root in ("ares_viewer", "ares_viewer_app")
        for path in (REPO / root).rglob("*.py")
        for doc in re.findall(r"docs/([\w-]+\.md)", path.read_text())
    }
    missing = sorted((where, doc) for where, doc in named if not (REPO / "docs" / doc).exists())
    assert missing == []
