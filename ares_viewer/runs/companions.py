"""Companion folders: what a run keeps beside its episode files, and how a listing knows one.

Per-step and episode-boundary snapshots (``snapshots/``) and activation captures (``activations/``) are read on
demand by the packages that own them (``snapshots``, ``activations``), which take their folder and file names from
here. A listing (``sources``) does not walk into a companion folder (a big run holds a capture and a snapshot
folder per episode), but a folder counts as one only when it holds what those writers write:

    snapshots/<episode_id>/base/manifest.json, snapshots/<episode_id>/step_NNNN/manifest.json   per-step
    snapshots/<snapshot_id>/snapshot.json                                                       episode-boundary
    activations/<episode_id>/metadata.json beside step_0000.pt, step_0001.pt, ...               captures
    tasks/<task>/task.json                                                                      verifier recipes

(an episode id holding ``/`` is a nested folder). A folder merely named ``snapshots`` or ``activations`` (a user's
folder of episodes) is walked like any other. Recognizing one looks at a few of its folders, depth first, never
at all of it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping

SNAPSHOTS_DIRNAME = "snapshots"
ACTIVATIONS_DIRNAME = "activations"
TASKS_DIRNAME = "tasks"  # the verifier's recipe per task (``sandbox.task_recipe``; the recorder writes them)
COMPANION_FOLDERS: Mapping[str, str] = {SNAPSHOTS_DIRNAME: "per-step snapshots",
                                        ACTIVATIONS_DIRNAME: "activation captures",
                                        TASKS_DIRNAME: "verifier recipes"}

# What the writers put in them (``snapshots._per_step_writer``, ``snapshots.episode_boundary``, ARES's
# ``TrajectoryActivations.save`` and the recorder).
SNAPSHOT_BASE_DIRNAME = "base"
SNAPSHOT_STEP_DIR_RE = re.compile(r"^step_(\d{1,9})$")
SNAPSHOT_MANIFEST = "manifest.json"
BOUNDARY_SNAPSHOT_JSON = "snapshot.json"
CAPTURE_METADATA = "metadata.json"
TASK_RECIPE = "task.json"
CAPTURE_FIRST_STEP = "step_0000.pt"  # steps are numbered from 0 without gaps (``activations.capture``)

# How much of a folder named like a companion is looked at to recognize it: folders listed, entries read of each
# listing, and folders deep (a nested episode id's capture lies a few levels down).
PEEK_FOLDERS = 16
PEEK_ENTRIES = 1000
PEEK_DEPTH = 12

# ``isfile(path)``; ``subfolders(path, at_most)``: the paths of the folders among a folder's first ``at_most``
# entries, hidden ones left out.
IsFile = Callable[[str], bool]
Subfolders = Callable[[str, int], Iterable[str]]


def folder_name(path: str) -> str:
    """The last part of a local or fsspec path (``/`` or ``\\`` separated)."""
    return re.split(r"[/\\]", path.rstrip("/\\"))[-1]


def _snapshot(folder: str, isfile: IsFile, join: Callable[[str, str], str]) -> bool:
    name = folder_name(folder)
    if (name == SNAPSHOT_BASE_DIRNAME or SNAPSHOT_STEP_DIR_RE.match(name)) and isfile(join(folder, SNAPSHOT_MANIFEST)):
        return True
    return isfile(join(folder, BOUNDARY_SNAPSHOT_JSON))


def _capture(folder: str, isfile: IsFile, join: Callable[[str, str], str]) -> bool:
    return isfile(join(folder, CAPTURE_METADATA)) and isfile(join(folder, CAPTURE_FIRST_STEP))


def _recipe(folder: str, isfile: IsFile, join: Callable[[str, str], str]) -> bool:
    return isfile(join(folder, TASK_RECIPE))


_MARKS = {SNAPSHOTS_DIRNAME: _snapshot, ACTIVATIONS_DIRNAME: _capture, TASKS_DIRNAME: _recipe}


def is_companion(folder: str, isfile: IsFile, subfolders: Subfolders,
                 join: Callable[[str, str], str] = os.path.join) -> bool:
    """Whether ``folder`` is a companion folder: named as one (``COMPANION_FOLDERS``) and holding, among the first
    ``PEEK_FOLDERS`` folders found depth first, a snapshot or a capture as its writer lays it out."""
    marked = _MARKS.get(folder_name(folder))
    if marked is None:
        return False
    stack, listed = [(folder, 0)], 0
    while stack and listed < PEEK_FOLDERS:
        current, depth = stack.pop()
        if current != folder and marked(current, isfile, join):
            return True
        if depth >= PEEK_DEPTH:
            continue
        listed += 1
        try:
            children = sorted(subfolders(current, PEEK_ENTRIES))
        except OSError:
            continue
        stack.extend((child, depth + 1) for child in reversed(children))
    return False


def local_subfolders(path: str, at_most: int) -> list[str]:
    """``Subfolders`` of a local folder (symlinks are not followed)."""
    found = []
    with os.scandir(path) as listing:
        for _, entry in zip(range(at_most), listing, strict=False):
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                found.append(entry.path)
    return found


def is_local_companion(folder: str) -> bool:
    """``is_companion`` for a local folder."""
    return is_companion(folder, os.path.isfile, local_subfolders)
