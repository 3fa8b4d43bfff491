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
    "ares_viewer/counterfactual/branching.py:search": {"PLR0913": 15},
    "ares_viewer/counterfactual/model_client.py:_post": {"C901": 13, "PLR0915": 51},
    "ares_viewer/counterfactual/model_client.py:openai_client": {"C901": 17, "PLR0915": 57},
    "ares_viewer/formats/base.py:episode": {"PLR0913": 15},
    "ares_viewer/review/labelschema.py:Field.clean": {"C901": 13},
    "ares_viewer/review/queues.py:create": {"PLR0913": 10},
    "ares_viewer/runs/sources.py:_local_walk": {"C901": 14, "PLR0912": 14},
    "ares_viewer/sandbox/_box.py:restore": {"PLR0913": 10},
    "ares_viewer/sandbox/commands.py:_exec": {"PLR0913": 9},
    "ares_viewer/snapshots/_per_step_snapshot.py:memory_snapshot": {"PLR0913": 11},
    "ares_viewer/snapshots/_per_step_writer.py:write_step": {"PLR0913": 9},
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


# The app's folders by role (docs/app.md, docs/architecture.md): a page is a package ``views/<page>/`` (its script
# ``<page>.py`` and the parts only it uses), a part two or more pages use is a module of ``panels/``, and the app's
# plumbing is in the folders named here; beside them at the top only ``__init__.py`` and the entry file ``main.py``.
APP = REPO / "ares_viewer_app"
APP_PLUMBING = {"routing", "data", "serving", "text"}


def _app_imports() -> dict[str, set[str]]:
    """Each module of the app (dotted, under ``ares_viewer_app``) with the app's modules it imports, anywhere in it."""
    modules = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
               for p in APP.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                          for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _page_of(module: str) -> str | None:
    """The page whose package holds ``module`` (``ares_viewer_app.views.<page>...``), else None."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "views" else None


def test_the_top_of_the_app_holds_the_entry_file_the_pages_the_panels_and_the_plumbing_folders_only():
    modules = {p.stem for p in APP.glob("*.py")}
    folders = {p.name for p in APP.iterdir() if p.is_dir() and any(p.rglob("*.py"))}  # not a left __pycache__
    assert modules == {"__init__", "main"}, "a module at the top of ares_viewer_app/: put it in its role's folder"
    assert folders == APP_PLUMBING | {"views", "panels"}
    assert all((APP / folder / "__init__.py").is_file() for folder in folders)


def test_each_page_is_a_package_of_its_own_named_by_a_row_of_the_page_table():
    from ares_viewer_app.routing import pages

    views = APP / "views"
    assert {p.stem for p in views.glob("*.py")} == {"__init__"}, "a page is a folder views/<page>/, not a module"
    packages = {p.name for p in views.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert packages == {row.module for row in pages.PAGES}
    for name in packages:
        assert (views / name / "__init__.py").is_file() and (views / name / f"{name}.py").is_file(), name


def test_a_part_of_a_page_is_used_by_that_page_only_and_a_panel_by_two_pages_at_least():
    graph = _app_imports()
    strays = sorted(f"{user} imports {used}" for user, imported in graph.items() for used in imported
                    if _page_of(used) is not None and _page_of(used) != _page_of(user))
    assert not strays, f"a page's part used elsewhere: move it to panels/ ({strays})"

    def reached(start: set[str]) -> set[str]:
        seen, todo = set(), list(start)
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += graph[module]
        return seen

    panels = {m for m in graph if m.startswith("ares_viewer_app.panels.")}
    pages_of = {panel: set() for panel in panels}
    for page in {_page_of(m) for m in graph} - {None}:
        for module in reached({m for m in graph if _page_of(m) == page}) & panels:
            pages_of[module].add(page)
    lonely = {panel: sorted(users) for panel, users in pages_of.items() if len(users) < 2}
    assert not lonely, f"a panel fewer than two pages use: move it into its page's folder ({lonely})"
