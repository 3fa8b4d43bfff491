"""The flag index as pages use it: built on first use (a small run at once, a large one when asked, with
progress), then read instantly; and the rates and filters it answers, cached per state of the index. The snapshot
flags likewise: the run's first ``loaders.BEHAVIOUR_EPISODES`` episodes at once, the rest when asked, kept.

The index itself: ``ares_viewer.analysis.behaviours.flag_index`` and ``snapshot_cache`` (docs/behaviours.md).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer import fsdiff
from ares_viewer.analysis import behaviours
from ares_viewer.analysis.behaviours import flag_index, flag_queries, snapshot_cache
from ares_viewer_app.data import loaders

# Runs with at most this many episodes have their flags read without asking (seconds at most); so are up to this
# many changed files of a run whose flags were read before.
AUTO_EPISODES = 2_000
AUTO_FILES = 200


def _progress(unit: str):
    """A progress bar, and the ``progress(done, total)`` that moves it."""
    bar = st.progress(0.0, text="starting…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total if total else 1.0, text=f"{done:,} of {total:,} {unit}")

    return progress


def _build(run: ares_viewer.Run, label: str) -> None:
    with st.status(label, expanded=True) as status:
        progress = _progress("files")

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
    """``ids`` (None: every episode) narrowed to the episodes showing all ``flags``, as the overview lists them: the
    snapshot flags among the episodes whose snapshot flags were read so far.

    Raises:
        flag_queries.NotBuiltError: the run's flags have not been read yet.
    """
    from_files = tuple(n for n in flags if behaviours.FLAGS[n].source == behaviours.EPISODE)
    from_snapshots = tuple(n for n in flags if n not in from_files)
    showing = set(flagged(run.location, table_name(run), from_files)) if from_files else None
    if from_snapshots:  # among the episodes whose snapshot flags were read so far
        shown, _ = snapshot_flagged(run, from_snapshots)
        showing = shown if showing is None else showing & shown
    if showing is None:  # no flag picked
        return list(run.episode_ids) if ids is None else list(ids)
    return sorted(showing if ids is None else showing & set(ids))


def table_name(run: ares_viewer.Run) -> str:
    """The state of the flag index (its table's name), to key cached answers by."""
    path = flag_index.table_path(run)
    return path.name if path is not None else ""


def _snapshot_state(run: ares_viewer.Run) -> tuple[int, ...]:
    """The state of the kept snapshot flags (their database's files), to key cached answers by."""
    base = flag_index.folder(run) / snapshot_cache.FILE
    paths = [base, base.with_name(base.name + "-wal")]
    return tuple(p.stat().st_mtime_ns if p.exists() else 0 for p in paths)


@st.cache_data(max_entries=8, ttl=300, show_spinner=False)
def _snapshot_table(where: str, state: tuple[int, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return snapshot_cache.table(loaders.load_run(where))


def _fill(run: ares_viewer.Run, first: int | None, label: str) -> None:
    with st.status(label, expanded=True) as status:
        done = snapshot_cache.update(run, fsdiff.paths_by_step, first=first, progress=_progress("episodes"),
                                     snapshots_of=fsdiff.snapshot_folders)
        status.update(label=f"Read the snapshot flags of {done:,} episode(s)", state="complete", expanded=False)


def snapshot_flags(run: ares_viewer.Run, key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The snapshot flags of every episode read so far (``snapshot_cache.table``): the run's first
    ``loaders.BEHAVIOUR_EPISODES`` read now, the rest after the button this shows; says how many are covered."""
    first = min(len(run), loaders.BEHAVIOUR_EPISODES)
    table, evidence = _snapshot_table(run.location, _snapshot_state(run))
    if len(table) < first and not set(run.episode_ids[:first]) <= set(table["episode_id"]):
        _fill(run, first, f"Reading the snapshot flags of the first {first:,} episodes…")
        table, evidence = _snapshot_table(run.location, _snapshot_state(run))
    rest = len(run) - len(table)
    if rest > 0 and st.button(
        f"Read the snapshot flags of the other {rest:,} episodes",
        key=f"{key}.read_snapshots",
        help="Every step's snapshot of each episode is read once, in worker processes; the flags are kept in the "
        "cache, so a stopped read continues where it stopped.",
    ):
        _fill(run, None, f"Reading the snapshot flags of {rest:,} episodes…")
        table, evidence = _snapshot_table(run.location, _snapshot_state(run))
    of = f"all {len(table):,}" if len(table) == len(run) else f"{len(table):,} of {len(run):,}"
    st.caption(f"Snapshot flags: of {of} episodes read so far.")
    return table, evidence


def snapshot_flagged(run: ares_viewer.Run, flags: tuple[str, ...]) -> tuple[set[str], int]:
    """The episodes showing every one of the snapshot ``flags`` among those read so far, and how many were read."""
    table, _ = _snapshot_table(run.location, _snapshot_state(run))
    return set(table.loc[table[list(flags)].all(axis=1), "episode_id"]), len(table)
