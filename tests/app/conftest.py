"""AppTest fixtures: the app pointed at small synthetic runs shaped like the real ones."""

from __future__ import annotations

import pathlib

import demo_runs
import pytest
from streamlit import config

import ares_viewer_app

# The app's packaged entry file; pages are switched to by their path relative to it ("views/episode/episode.py").
MAIN = str(pathlib.Path(ares_viewer_app.__file__).resolve().parent / "main.py")


@pytest.fixture
def runs(tmp_path, monkeypatch) -> dict[str, dict[str, str]]:
    """run-a and run-b under a fresh runs folder the app lists; returns their episode ids by label."""
    root = tmp_path / "runs"
    ids = demo_runs.write(root)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    ids["root"] = {"path": str(root)}
    return ids


@pytest.fixture
def app():
    """A factory of AppTests of the app, optionally on a page and with URL parameters."""
    from streamlit.testing.v1 import AppTest

    def make(page: str | None = None, **params: str):
        at = AppTest.from_file(MAIN, default_timeout=60)
        for key, value in params.items():
            at.query_params[key] = value
        if page:
            at.switch_page(f"views/{page}/{page}.py")
        return at.run()

    return make


@pytest.fixture
def exposed():
    """The app as a server bound to every interface (``--server.address 0.0.0.0``): runs outside the runs
    folder are refused."""
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    yield
    config.set_option("server.address", before)

