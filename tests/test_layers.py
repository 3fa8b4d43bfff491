"""The library's import graph runs one way: the import-linter contracts in pyproject.toml, checked here.

The contracts (layers, the model importing nothing else of the library, no Streamlit in the library, no cycle
between the modules of any package) read every import statement, inside functions too, so an import placed
in a function to dodge a cycle fails like any other. Imports under ``if TYPE_CHECKING:`` are type hints only
and are left out.
"""

from __future__ import annotations

import logging
import os
import pathlib
import subprocess
import sys
import textwrap

from ares_viewer import formats
from ares_viewer.formats import base, registry

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_the_import_contracts_hold(monkeypatch, capsys):
    from importlinter import cli

    monkeypatch.chdir(REPO)
    # import-linter configures logging with disable_existing_loggers: the library's loggers must keep working for
    # the tests that run after this one
    loggers = logging.Logger.manager.loggerDict.values()
    enabled = [x for x in loggers if isinstance(x, logging.Logger) and not x.disabled]
    try:
        status = cli.lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True, no_logo=True)
    finally:
        for logger in enabled:
            logger.disabled = False
    report = capsys.readouterr().out
    assert status == 0, report
    assert "BROKEN" not in report and "0 broken" in report


def test_every_library_module_imports_without_streamlit():
    """A notebook needs no Streamlit: walk the whole package, import every module, and look."""
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import ares_viewer
        names = [m.name for m in pkgutil.walk_packages(ares_viewer.__path__, "ares_viewer.")]
        for name in names:
            importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m == "streamlit" or m.startswith("streamlit."))
        print(len(names), loaded)
        assert not loaded, loaded
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[0]) > 40  # the walk really covered the package


def test_every_registered_adapter_has_the_declared_interface():
    """Each is a ``base.Adapter`` (mypy checks the functions each format module hands it)."""
    assert formats.registry is registry and registry.adapters()
    for adapter in registry.adapters():
        assert isinstance(adapter, base.Adapter), adapter
