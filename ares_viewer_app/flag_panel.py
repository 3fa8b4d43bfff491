"""The flag index as pages use it: built on first use (a small run at once, a large one when asked, with
progress), then read instantly; and the rates and filters it answers, cached per state of the index.

The index itself: ``ares_viewer.analysis.behaviours.flag_index`` (docs/behaviours.md).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer.analysis.behaviours import flag_index, flag_queries
from ares_viewer_app import loaders

# Runs with at most this many episodes have their flags read without asking (seconds at most); so are up to this
# many changed files of a run whose flags were read before.
AUTO_EPISODES = 2_000
AUTO_FILES = 200


def _build(run: ares_viewer.Run, label: str) -> None:
    with st.status(label, expanded=True) as status:
        bar = st.progress(0.0, text="starting…")

        def progress(done: int, total: int) -> None:
            bar.progress(done / total if total else 1.0, text=f"{done:,} of {total:,} files")

        result = flag_index.update(run, progress=progress)
        status.update(
            label=f"Read the flags of {result.episodes:,} episode(s) in {result.read:,} file(s)",
            state="complete",
            expanded=False,
        )
    if result.failed:
        st.warning(
            f"{len(result.failed):,} file(s) could not be read for flags; their episodes are left out. "
            f"The first: {next(iter(result.failed.items()))}"
        )


def ready(run: ares_viewer.Run, key: str) -> bool:
    """Whether the run's flag index can be asked: built now when the run is small (or few files changed),
    otherwise after the user presses the button this shows. A stale index is still asked meanwhile."""
    found = flag_index.coverage(run)
    if found.current:
        return True
    built = found.manifest.table is not None and len(found.stale) < found.files
    if len(run) <= AUTO_EPISODES or (built and len(found.stale) <= AUTO_FILES):
        _build(run, f"Reading the flags of {len(found.stale):,} file(s)…")
        return True
    what = f"the {len(found.stale):,} new or changed file(s)" if built else f"all {len(run):,} episodes"
    if st.button(
        f"Read the flags of {what}",
        key=f"{key}.read_flags",
        help="Every episode file is parsed once, in worker processes; the flags are kept in the cache.",
    ):
        _build(run, f"Reading the flags of {what}…")
        return True
    if built:
        st.caption("Flags as last read: some files changed since.")
    return built


@st.cache_data(max_entries=32, ttl=300, show_spinner=False)
def rates(where: str, table: str, by: str | None, task: str | None) -> pd.DataFrame:
    """``flag_queries.rate_table`` of the run at ``where``, per state of its flag index (``table``)."""
    return flag_queries.rate_table(loaders.load_run(where), by=by, task=task)


@st.cache_data(max_entries=32, ttl=300, show_spinner=False)
def flagged(where: str, table: str, flags: tuple[str, ...]) -> list[str]:
    """``flag_queries.episode_ids``, per state of the flag index (``table``)."""
    return flag_queries.episode_ids(loaders.load_run(where), flags)


@st.cache_data(max_entries=8, ttl=300, show_spinner=False)
def covered(where: str, table: str) -> int:
    return flag_queries.covered(loaders.load_run(where))


def among(run: ares_viewer.Run, flags: list[str], ids: list[str] | None) -> list[str]:
    """``ids`` (None: every episode) narrowed to the episodes showing all ``flags``, as the overview lists them.

    Raises:
        flag_queries.NotBuiltError: the run's flags have not been read yet.
    """
    showing = set(flagged(run.location, table_name(run), tuple(flags)))
    return sorted(showing if ids is None else showing & set(ids))


def table_name(run: ares_viewer.Run) -> str:
    """The state of the flag index (its table's name), to key cached answers by."""
    path = flag_index.table_path(run)
    return path.name if path is not None else ""
