"""The declared types hold: mypy, configured in pyproject.toml ``[tool.mypy]``, checked here beside the layers.

The library must have no error at all. The app may keep the errors listed in ``APP_ALLOWED`` (``file:code``
pairs, each with why), and only while they occur: a fixed one must leave the list, so the list only shrinks.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent

# file:error-code pairs of the app that mypy may report, each with why it is not fixed yet.
_FORMAT_FUNC = "str passed as a widget's format_func: Streamlit types it Callable[[Any], str], str is overloaded"
_OPTIONAL = "an Optional from a lookup the page already checked (the check is elsewhere on the page)"
_JSON_GET = "dict.get with a {} default on a JSON value"
APP_ALLOWED: dict[str, str] = {
    "ares_viewer_app/panels/choosers.py:arg-type": f"{_FORMAT_FUNC}; selectbox(index=None) shows the placeholder, "
    "typed int",
    "ares_viewer_app/views/compare/compare.py:arg-type": "a row's cells are Step | str | None, read as text by "
    f"position; {_OPTIONAL}",
    "ares_viewer_app/views/compare_runs/compare_runs.py:arg-type": "query parameters read as one value or a list",
    "ares_viewer_app/views/compare_runs/compare_runs.py:call-overload": _JSON_GET,
    "ares_viewer_app/views/compare_runs/compare_runs.py:index": "query parameters read as one value or a list",
    "ares_viewer_app/views/episode/episode.py:arg-type": _OPTIONAL,
    "ares_viewer_app/views/files/files.py:arg-type": _OPTIONAL,
}

_ERROR = re.compile(r"^(?P<file>[^:\s]+\.py):\d+: error: .*\[(?P<code>[a-z-]+)\]$")


def _cache() -> pathlib.Path:
    """mypy's cache for this checkout, under the user's cache folder as ``.ci/run`` keeps its installs: a fresh clone
    at the same place reuses it (mypy compares the files' hashes when their times differ), a rerun takes seconds."""
    home = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    return home / "ares-viewer" / "mypy" / hashlib.sha1(str(REPO).encode()).hexdigest()[:12]


def _mypy() -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output", "--no-error-summary", "--cache-dir", str(_cache())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return done.returncode, done.stdout + done.stderr


def test_mypy_finds_no_error_in_the_library_and_only_the_listed_ones_in_the_app(missing):
    if importlib.util.find_spec("mypy") is None:
        missing("mypy is not installed (it is in the test extra: pip install -e '.[test]')")
    status, report = _mypy()
    errors = [m for m in map(_ERROR.match, report.splitlines()) if m]
    assert status == 0 or errors, report  # mypy itself failed (bad configuration): say how
    library = [m.string for m in errors if m["file"].startswith("ares_viewer/")]
    assert not library, "\n".join(library)
    app = {f"{m['file']}:{m['code']}" for m in errors if m["file"].startswith("ares_viewer_app/")}
    assert app <= set(APP_ALLOWED), "\n".join(m.string for m in errors if f"{m['file']}:{m['code']}" not in APP_ALLOWED)
    assert set(APP_ALLOWED) <= app, f"fixed, so leave APP_ALLOWED: {sorted(set(APP_ALLOWED) - app)}"
    others = [m.string for m in errors if not m["file"].startswith(("ares_viewer/", "ares_viewer_app/"))]
    assert not others, "\n".join(others)
