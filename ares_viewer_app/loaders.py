"""Cached, bounded loaders: which runs exist, and the opened runs themselves.

A ``Run`` keeps a bounded cache of parsed episodes, so caching the Run objects (at most a few)
bounds the episodes in memory too.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

import streamlit as st

import ares_viewer
from ares_viewer import counterfactual, fsdiff, snapshots
from ares_viewer.analysis import align, ending
from ares_viewer.runs import sources
from ares_viewer_app import access

# A checkout's bundled sample runs (an installed wheel has none: it lists the working directory's runs instead).
SAMPLE_RUNS = pathlib.Path(__file__).resolve().parent.parent / "sample_runs"
# Runs that are open at once; each one holds its index table and up to 16 parsed episodes.
MAX_RUNS = 4
# Files and folders looked at per subfolder of the runs folder, to tell whether it holds episode files.
_PICKER_ENTRIES = 20_000


def runs_root() -> str:
    """The folder whose subfolders are the runs the picker lists (``ARES_VIEWER_RUNS`` overrides it)."""
    return os.environ.get("ARES_VIEWER_RUNS") or str(SAMPLE_RUNS if SAMPLE_RUNS.is_dir() else pathlib.Path.cwd())


@st.cache_data(ttl=30, max_entries=8, show_spinner=False)
def list_runs(root: str) -> list[str]:
    """Names of the immediate subfolders of ``root`` that hold episode files ("." when root holds them itself)."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    names = [e.name for e in entries if e.is_dir() and not e.name.startswith((".", "_")) and _holds_files(e.path)]
    if any(e.is_file() and e.name.endswith(".json") for e in entries):
        names.insert(0, ".")
    return names


def _holds_files(folder: str) -> bool:
    try:
        # Enough of a walk to tell whether the folder holds episode files: the picker lists runs, it does not
        # index them.
        limits = dataclasses.replace(sources.Limits.from_env(), max_entries=_PICKER_ENTRIES)
        return bool(sources.list_files(folder, limits))
    except sources.LocationError:
        return False


def _is_counterfactual(run: str) -> bool:
    """Whether ``run`` is inside the folder where counterfactuals are written (the app's own output)."""
    if "://" in run or "::" in run or not os.path.isabs(run):
        return False
    top = os.path.realpath(counterfactual.out_root())
    return os.path.commonpath([os.path.realpath(run), top]) == top


def location(run: str) -> str:
    """Where a run parameter points: a run listed under the root, a folder of counterfactuals (see
    ``counterfactual.out_root``, opened on any server: the app wrote them), or a folder, file, glob or URL.

    Raises:
        access.RefusedLocationError: on a server reachable from other machines, for a location outside the runs
            folder (see :mod:`ares_viewer_app.access`).
    """
    root = runs_root()
    if run in list_runs(root):
        return os.path.normpath(os.path.join(root, run))
    if _is_counterfactual(run):
        return os.path.realpath(run)
    return access.check(run, root=root, address=st.get_option("server.address"))


@st.cache_resource(max_entries=MAX_RUNS, show_spinner="Indexing the run…")
def load_run(where: str) -> ares_viewer.Run:
    """The opened run at a location (raises ``ares_viewer.LocationError`` when it does not exist)."""
    return ares_viewer.open_run(where)


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
