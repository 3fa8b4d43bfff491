"""What importing the library loads, checked in fresh processes: a helper of ``base`` loads no DuckDB, pandas or
pyarrow, ``import ares_viewer`` loads none of its modules until a name is used, and no layer fills a hook of a
lower one when imported (docs/architecture.md, "Importing the library")."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parent.parent
_HEAVY = ("duckdb", "pandas", "pyarrow", "plotly", "numpy")


def _loaded_by(statement: str) -> tuple[list[str], list[str]]:
    """The modules of the library and the heavy libraries (``_HEAVY``) a fresh process has after ``statement``."""
    script = textwrap.dedent(
        f"""
        import json, sys
        {statement}
        names = sorted(sys.modules)
        print(json.dumps([[n for n in names if n.split(".")[0] == "ares_viewer"],
                          sorted({{n.split(".")[0] for n in names}} & {set(_HEAVY)!r})]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    library, heavy = json.loads(done.stdout)
    return library, heavy


def test_a_base_helper_loads_no_duckdb_pandas_or_pyarrow_and_nothing_else_of_the_library():
    library, heavy = _loaded_by("import ares_viewer.base.sizes")
    assert heavy == []
    assert library == ["ares_viewer", "ares_viewer.base", "ares_viewer.base.sizes"]


def test_import_ares_viewer_loads_nothing_until_a_name_is_used():
    library, heavy = _loaded_by("import ares_viewer")
    assert (library, heavy) == (["ares_viewer"], [])


def test_the_model_loads_nothing_heavy_and_nothing_of_the_layers_above_it():
    library, heavy = _loaded_by("import ares_viewer.model")
    assert heavy == []
    assert [name for name in library if name.split(".")[1:2] not in (["model"], [])] == []


def test_the_names_of_the_package_load_on_first_use_from_their_modules():
    library, _ = _loaded_by("from ares_viewer import Episode, Outcome")
    assert "ares_viewer.model.records" in library and "ares_viewer.runs.run" not in library
    import ares_viewer
    from ares_viewer.analysis import ending
    from ares_viewer.runs import run

    assert ares_viewer.open_run is run.open_run and ares_viewer.ending is ending
    assert all(getattr(ares_viewer, name) is not None for name in ares_viewer.__all__)


def test_no_layer_fills_a_hook_of_the_model_when_imported():
    """The ending of an episode is the analysis layer's function; the model holds no setter for it."""
    from ares_viewer import model

    assert not hasattr(model.records, "explain_endings_with") and not hasattr(model.Episode, "ending")


def test_a_success_that_touched_the_tests_says_so_whether_or_not_the_flags_were_imported():
    """The ending reads the shell commands itself: no module above it hands it a rule when imported."""
    script = textwrap.dedent(
        """
        import sys
        from ares_viewer.analysis import ending
        import json, re, tempfile
        from ares_viewer.runs import run
        from testdata import synthetic
        doc = synthetic.episode_dict(actions=3, reward=1.0)
        action = doc["steps"][2]["action"]["data"][0]
        action["content"] = re.sub(r"```bash\\n.*?\\n```", "```bash\\nrm tests/test_core.py\\n```",
                                   action["content"], flags=re.S)
        episode = run.load_episode(synthetic.write_episode(tempfile.mkdtemp(), doc))
        assert "ares_viewer.analysis.behaviours" not in sys.modules
        print(ending.of(episode).flags)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "touched_tests: step 2, tests/test_core.py (rm tests/test_core.py)" in done.stdout
    from ares_viewer.analysis import ending

    assert not [name for name in vars(ending) if name.endswith("_with")]


def _imported_at_module_level(path: pathlib.Path) -> set[str]:
    import ast

    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(_HEAVY)


def test_the_lower_layers_import_nothing_heavy_at_module_level():
    """docs/architecture.md: base, model and formats import none of DuckDB, pandas, pyarrow and Plotly at module
    level, and runs only DuckDB."""
    allowed = {"base": set(), "model": set(), "formats": set(), "runs": {"duckdb"}}
    found = {}
    for layer, may in allowed.items():
        for path in sorted((REPO / "ares_viewer" / layer).rglob("*.py")):
            if heavy := _imported_at_module_level(path) - may:
                found[str(path.relative_to(REPO))] = sorted(heavy)
    assert found == {}
