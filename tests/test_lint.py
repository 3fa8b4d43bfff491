"""The project's own style rules (pyproject's ruff settings) hold for every Python file in the repository."""

from __future__ import annotations

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    found = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                           cwd=REPO, capture_output=True, text=True)
    assert found.returncode == 0, found.stdout[-4000:] + found.stderr[-2000:]
