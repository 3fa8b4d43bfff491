"""Snapshots near an episode that cannot be read well enough to link to a step, shown as errors on its pages.

Such a snapshot (an episode-boundary ``snapshot.json`` that is not valid JSON, say) may be this episode's: the
page says which folder and why, and shows everything else as usual.
"""

from __future__ import annotations

import streamlit as st

from ares_viewer import model, snapshots
from ares_viewer_app.text import escape

# Errors shown one by one at most; the rest are counted.
MAX_SHOWN = 5


def show(episode: model.Episode) -> None:
    """An error per unreadable snapshot near ``episode`` (nothing when there is none)."""
    try:
        found = snapshots.problems(episode)
    except (OSError, ValueError) as exc:
        st.error(f"Cannot look for this episode's snapshots: {escape.md(exc)}", icon=":material/broken_image:")
        return
    for problem in found[:MAX_SHOWN]:
        st.error(f"Cannot read the snapshot {escape.code(problem.path)}: {escape.md(problem.reason)}. It is not "
                 "linked to any step; the rest of the episode reads as usual.", icon=":material/broken_image:")
    if len(found) > MAX_SHOWN:
        st.error(f"… and {len(found) - MAX_SHOWN} more snapshots that cannot be read.", icon=":material/broken_image:")
