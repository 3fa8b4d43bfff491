"""The declared types hold: mypy, configured in pyproject.toml ``[tool.mypy]``, checked here.

The library must have no error at all (but for the files listed in ``LIBRARY_BEING_SPLIT`` until their split
lands). The app may keep the errors listed in ``APP_ALLOWED`` (``file:code`` pairs, each with why), and only
while they occur: a fixed one must leave the list, so both lists only shrink.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent

# file:error-code pairs of the app that mypy may report, each with why it is not fixed yet.
_FORMAT_FUNC = "str passed as a widget's format_func: Streamlit types it Callable[[Any], str], str is overloaded"
_UPDATE = "state.update(**{key: value}): mypy cannot tell the key from the url flag"
_OPTIONAL = "an Optional from a lookup the page already checked (the check is elsewhere on the page)"
APP_ALLOWED: dict[str, str] = {
    "ares_viewer_app/review_panel.py:arg-type": f"{_FORMAT_FUNC}; {_OPTIONAL}",
    "ares_viewer_app/state.py:arg-type": _UPDATE,
    "ares_viewer_app/widgets.py:arg-type": f"{_UPDATE}; {_FORMAT_FUNC}",
    "ares_viewer_app/views/compare.py:arg-type": "a row's cells are Step | str | None, read as text by position",
    "ares_viewer_app/views/compare.py:return-value": _OPTIONAL,
    "ares_viewer_app/views/episode.py:arg-type": _OPTIONAL,
    "ares_viewer_app/views/episode.py:call-overload": "dict.get with a {} default on a JSON value",
    "ares_viewer_app/views/files.py:arg-type": _OPTIONAL,
    "ares_viewer_app/views/groups.py:arg-type": _FORMAT_FUNC,
    "ares_viewer_app/views/groups.py:call-overload": "dict.get with a {} default on a JSON value",
    "ares_viewer_app/views/groups.py:return-value": _OPTIONAL,
    "ares_viewer_app/views/review.py:arg-type": f"{_FORMAT_FUNC}; {_OPTIONAL}",
    "ares_viewer_app/views/search.py:arg-type": _FORMAT_FUNC,
}
# Library files another branch is splitting into smaller modules (issue 26): their internal errors are fixed
# there, after the split, and each leaves this list when it is clean. Every other library file must be clean.
LIBRARY_BEING_SPLIT = frozenset(
    {
        "ares_viewer/formats/adapters/ares.py",
        "ares_viewer/formats/adapters/atif.py",
        "ares_viewer/formats/adapters/mini_swe_agent.py",
        "ares_viewer/formats/adapters/ray_runner.py",
        "ares_viewer/formats/adapters/tinker.py",
        "ares_viewer/fsdiff/__init__.py",
        "ares_viewer/snapshots/episode_boundary.py",
    }
)

_ERROR = re.compile(r"^(?P<file>[^:\s]+\.py):\d+: error: .*\[(?P<code>[a-z-]+)\]$")


def _mypy() -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output", "--no-error-summary"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return done.returncode, done.stdout + done.stderr


def test_mypy_finds_no_error_in_the_library_and_only_the_listed_ones_in_the_app():
    status, report = _mypy()
    errors = [m for m in map(_ERROR.match, report.splitlines()) if m]
    assert status == 0 or errors, report  # mypy itself failed (bad configuration): say how
    library = [m.string for m in errors if m["file"].startswith("ares_viewer/")]
    assert not [e for e in library if e.split(":")[0] not in LIBRARY_BEING_SPLIT], "\n".join(library)
    clean = LIBRARY_BEING_SPLIT - {e.split(":")[0] for e in library}
    assert not clean, f"no error left, so leave LIBRARY_BEING_SPLIT: {sorted(clean)}"
    app = {f"{m['file']}:{m['code']}" for m in errors if m["file"].startswith("ares_viewer_app/")}
    assert app <= set(APP_ALLOWED), "\n".join(m.string for m in errors if f"{m['file']}:{m['code']}" not in APP_ALLOWED)
    assert set(APP_ALLOWED) <= app, f"fixed, so leave APP_ALLOWED: {sorted(set(APP_ALLOWED) - app)}"
    others = [m.string for m in errors if not m["file"].startswith(("ares_viewer/", "ares_viewer_app/"))]
    assert not others, "\n".join(others)
