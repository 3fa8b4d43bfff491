"""Cached, bounded loaders: which runs exist, the opened runs, and what is computed from them (nothing drawn).

A ``Run`` keeps a bounded cache of parsed episodes, so caching the Run objects (at most a few)
bounds the episodes in memory too.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer import counterfactual, fsdiff, sandbox, snapshots
from ares_viewer.analysis import align, compare_runs, ending
from ares_viewer.analysis import failing_tests as failing_tests_module
from ares_viewer.base import locations, settings
from ares_viewer.runs import sources
from ares_viewer.runs.index import subruns
from ares_viewer_app.serving import access

# A checkout's bundled sample runs (an installed wheel has none: it lists the working directory's runs instead).
SAMPLE_RUNS = pathlib.Path(__file__).resolve().parents[2] / "sample_runs"
# Runs that are open at once; each one holds its index table and up to 16 parsed episodes.
MAX_RUNS = 4
# Files and folders looked at per subfolder of the runs folder, to tell whether it holds episode files.
_PICKER_ENTRIES = 20_000


def runs_root() -> str:
    """The folder whose subfolders are the runs the picker lists (``ARES_VIEWER_RUNS`` overrides it)."""
    return settings.RUNS.get() or str(SAMPLE_RUNS if SAMPLE_RUNS.is_dir() else pathlib.Path.cwd())


def exposed() -> bool:
    """Whether the server is reachable from other machines (``access.is_local`` of its address is false)."""
    return not access.is_local(st.get_option("server.address"))


def list_runs(root: str) -> list[str]:
    """Names of the immediate subfolders of ``root`` that hold episode files ("." when root holds them itself); on
    an exposed server, not a symlink out of ``root``, and counting only files that resolve inside it."""
    return _runs_under(root, exposed())


@st.cache_data(ttl=30, max_entries=8, show_spinner=False)
def _runs_under(root: str, confined: bool) -> list[str]:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    within = root if confined else None
    names = [e.name for e in entries if e.is_dir() and not e.name.startswith((".", "_"))
             and (within is None or sources.inside(e.path, within)) and _holds_files(e.path, within)]
    if any(e.is_file() and e.name.endswith(".json") for e in entries):
        names.insert(0, ".")
    return names


def forget_runs() -> None:
    """Forget the listed runs: the next ``list_runs`` looks at the folder again ("Reload run", a new run folder)."""
    _runs_under.clear()


def _holds_files(folder: str, within: str | None) -> bool:
    try:
        # Enough of a walk to tell whether the folder holds episode files: the picker lists runs, it does not
        # index them.
        limits = dataclasses.replace(sources.Limits.from_env(), max_entries=_PICKER_ENTRIES)
        return bool(sources.list_files(folder, limits, within=within))
    except sources.LocationError:
        return False


def _is_counterfactual(run: str) -> bool:
    """Whether ``run`` is inside the folder where counterfactuals are written (the app's own output)."""
    if not locations.is_local(run) or not os.path.isabs(run):
        return False
    top = os.path.realpath(counterfactual.out_root())
    return os.path.commonpath([os.path.realpath(run), top]) == top


def location(run: str) -> str:
    """Where a run parameter points: a run listed under the root, a folder of counterfactuals (see
    ``counterfactual.out_root``, opened on any server: the app wrote them), or a folder, file, glob or URL.

    ``NAME::RUN_ID`` is one run of the folder ``NAME`` points to (``subruns``): the folder's location with it.

    Raises:
        access.RefusedLocationError: on a server reachable from other machines, for a location outside the runs
            folder (see :mod:`ares_viewer_app.serving.access`).
    """
    base, sub_run = subruns.split(run)
    if sub_run is not None:
        return f"{location(base)}{subruns.SEPARATOR}{sub_run}"
    root = runs_root()
    address = st.get_option("server.address")
    if run in list_runs(root):
        # Checked again on an exposed server: the folder may have become a symlink out of the root since listed.
        return access.check(os.path.normpath(os.path.join(root, run)), root=root, address=address)
    fresh = os.path.join(root, run)
    if run not in (".", "..") and "/" not in run and os.sep not in run and os.path.isdir(fresh) \
            and _holds_files(fresh, root if exposed() else None):
        forget_runs()  # a run folder made since the list was cached: the next list names it
        return access.check(os.path.normpath(fresh), root=root, address=address)
    if _is_counterfactual(run):
        return os.path.realpath(run)
    return access.check(run, root=root, address=address)


def other_runs(run: ares_viewer.Run, name: str) -> list[str]:
    """The runs a page may set beside ``run`` (named ``name`` in the URL): the other runs of its folder when it holds
    several (``NAME::RUN_ID``), then the other runs under the runs folder."""
    folder = subruns.split(name)[0]
    inside = [f"{folder}{subruns.SEPARATOR}{run_id}" for run_id in run.run_ids]
    return [n for n in [*inside, *list_runs(runs_root())] if location(n) != run.location]


def _within(where: str) -> str | None:
    """On an exposed server, the folder no file of the run at ``where`` may resolve outside of: the runs folder
    for a run under it (or a glob), else the run's own location (the operator's run, a counterfactual folder).
    None on a local server, and for a URL."""
    where = subruns.split(where)[0]  # one run of a folder: the folder's
    if not exposed() or "://" in where or "::" in where:
        return None
    root = runs_root()
    return root if any(ch in where for ch in "*?[") or sources.inside(where, root) else where


def load_run(where: str) -> ares_viewer.Run:
    """The opened run at a location (raises ``ares_viewer.LocationError`` when it does not exist); on an exposed
    server its files are those that resolve inside its folder (``_within``): symlinks out of it are left out."""
    return _opened(where, _within(where))


def comparison(run_a: ares_viewer.Run, run_b: ares_viewer.Run, by: str | None, sides: tuple[str, str] | None
               ) -> compare_runs.Comparison:
    """Two runs (or two sides of one) compared task by task (``compare_runs``), kept while both are unchanged."""
    return _compared(run_a.location, run_b.location, by, sides, (len(run_a), len(run_b)), run_a, run_b)


@st.cache_resource(max_entries=8, ttl=300, show_spinner="Comparing the runs task by task…")
def _compared(where_a: str, where_b: str, by: str | None, sides: tuple[str, str] | None, sizes: tuple[int, int],
              _run_a: ares_viewer.Run, _run_b: ares_viewer.Run) -> compare_runs.Comparison:
    if by is not None:
        return compare_runs.compare_runs(_run_a, by=by, sides=sides)
    return compare_runs.compare_runs(_run_a, _run_b)


@st.cache_data(max_entries=8, ttl=60, show_spinner="Reading the evaluation reports' tests…")
def failing_tests(location: str, episodes: int, _run: ares_viewer.Run) -> pd.DataFrame:
    """The run's failing tests (``analysis.failing_tests``), kept a minute per location and size of the run."""
    return failing_tests_module.of_run(_run)


@st.cache_resource(max_entries=MAX_RUNS, show_spinner="Indexing the run…")
def _opened(where: str, within: str | None) -> ares_viewer.Run:
    return ares_viewer.open_run(where, within=within)


def forget_opened() -> None:
    """Forget the opened runs: the next ``load_run`` reads each one again ("Reload run")."""
    _opened.clear()


@st.cache_resource(max_entries=8, ttl=300, show_spinner="Comparing the snapshots…")
def changes_between(where: str, episode_id: str, old: int | None, new: int) -> fsdiff.FsDiff:
    """The filesystem diff of two steps of an episode (kept for a few pairs: stepping back and forth is instant)."""
    return fsdiff.compare(load_run(where).episode(episode_id), old, new)


@st.cache_data(max_entries=8, ttl=300, show_spinner="Writing the patch…")
def patch_bytes(where: str, episode_id: str, old: int | None, new: int) -> bytes:
    """:func:`changes_between` as one patch in git's format (the Files page's downloads)."""
    return fsdiff.patch(changes_between(where, episode_id, old, new)).encode()


@st.cache_resource(show_spinner=False, max_entries=1)
def docker_engine() -> Any:
    """One Docker client for the server's sessions (a failure is not cached: the next rerun tries again)."""
    return sandbox.connect()


@st.cache_data(max_entries=32, show_spinner=False)
def step_files(where: str, episode_id: str) -> dict[int, dict[str, str]] | None:
    """The files each step of an episode changed and how (path -> change kind), from its snapshots (None when it
    has none or they do not read)."""
    episode = load_run(where).episode(episode_id)
    try:
        return fsdiff.files_by_step(episode) or None
    except (snapshots.SnapshotError, LookupError, OSError):
        return None


@st.cache_data(max_entries=32, show_spinner="Aligning the steps…")
def alignment(where: str, a: str, b: str, where_b: str | None = None) -> list[align.Pair]:
    """The aligned steps of two episodes, by command and, where snapshots say, by the files changed; ``b`` is
    in the run at ``where_b`` when given (a counterfactual beside its parent), else in the same run."""
    where_b = where_b or where
    return align.align_episodes(load_run(where).episode(a), load_run(where_b).episode(b),
                                files_a=step_files(where, a), files_b=step_files(where_b, b))


@st.cache_data(max_entries=32, show_spinner=False)
def contrast(where_a: str, a: str, where_b: str, b: str) -> tuple[list[align.Activity], list[align.Activity]]:
    """What episode ``a`` (of the run at ``where_a``) did that ``b`` never did, and the other way round
    (``align.contrast`` on their snapshots' changed files and submitted patches); once per pair, not on every
    rerun of the Compare page (#33)."""
    files_a, files_b = step_files(where_a, a), step_files(where_b, b)
    return align.contrast(load_run(where_a).episode(a), load_run(where_b).episode(b), files_a=files_a,
                          files_b=files_b, patch_a=submission(where_a, a)[0], patch_b=submission(where_b, b)[0])


@st.cache_data(max_entries=32, show_spinner=False)
def submission(where: str, episode_id: str) -> tuple[str, str]:
    """What an episode submitted: ``(patch, where it comes from)``, the library's answer the Episode page shows
    (``ending.of``); when the recording does not say, what the snapshots' first step against the last changed;
    empty when neither is recorded."""
    episode = load_run(where).episode(episode_id)
    end = ending.of(episode)
    if end.submission is not None:
        return end.submission, end.submission_source
    try:
        whole = fsdiff.episode_patch(episode)
    except (snapshots.SnapshotError, LookupError, OSError) as exc:
        return "", f"the snapshots do not read: {exc}"
    if whole is None:
        return "", "no output and no snapshots recorded"
    return fsdiff.patch(whole), f"the snapshots, step {whole.old_step} → step {whole.new_step}"


# Episodes whose snapshot flags the Behaviours page reads at once (and rubric search offers); the rest on a button.
BEHAVIOUR_EPISODES = 2_000
