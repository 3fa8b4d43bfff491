"""Where per-user state lives: the run indexes (``ares_viewer.runs.index``), snapshot mirrors, review notes.

The user's cache folder (``ARES_VIEWER_CACHE`` overrides it), never a run folder.
"""

from __future__ import annotations

import os
import pathlib

from ares_viewer.base import settings


def cache_dir() -> pathlib.Path:
    """The folder the index cache (and other per-user state) lives in."""
    override = settings.CACHE.get()
    if override:
        return pathlib.Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "ares-viewer"
