"""Where an episode's activations live, and which capture step belongs to which trajectory step.

The layout, beside the episode files of a run (as the recorder lays out snapshots):

    <run>/<episode file>                      e.g. <episode_id>.json
    <run>/activations/<episode_id>/           a saved TrajectoryActivations (``capture``)

An episode id holding ``/`` (Tinker's ``run/it3/train/g0/t1``) is a nested folder. When no folder is named
after the id, ``activations/<episode file's stem>/`` is tried (a file of one episode); then the folder attached to
the episode with ``ares-viewer activations attach`` (``attached``: a capture kept where the user chose). The run
folder is only read, never written; ``looked_in`` lists the places tried. Opening the run does not walk
``activations/`` (``sources.COMPANION_FOLDERS``).

Steps: capture step ``i`` is the ``i``-th model call, whose response is the action of trajectory step ``i + 1``
(trajectory step 0 is the first request and has no action).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import TYPE_CHECKING

from ares_viewer.activations import attached
from ares_viewer.activations import capture as capture_mod
from ares_viewer.base import locations
from ares_viewer.runs.sources import ACTIVATIONS_DIRNAME

if TYPE_CHECKING:
    from ares_viewer import model

# ACTIVATIONS_DIRNAME: a companion folder of the run, which its listing does not walk (``sources.COMPANION_FOLDERS``):
# its captures are neither episodes nor other files, and their .pt files are read only when a view asks.


def _beside(episode: model.Episode) -> list[pathlib.Path]:
    """The folders beside the run a capture of the episode may be in, in the order tried."""
    if not locations.is_local(episode.path):
        return []
    episode_file = pathlib.Path(episode.path)
    root = episode_file.parent / ACTIVATIONS_DIRNAME
    out = []
    for name in dict.fromkeys((episode.episode_id, episode_file.stem)):
        parts = pathlib.PurePosixPath(name).parts
        if not parts or any(p in ("", ".", "..") for p in parts) or pathlib.PurePosixPath(name).is_absolute():
            continue  # an id that would leave the activations folder
        out.append(root.joinpath(*parts))
    return out


def folder_for(episode: model.Episode) -> str | None:
    """The capture folder of an episode (beside its run, else attached to it), or None when it has none."""
    for folder in _beside(episode):
        if capture_mod.is_capture(folder):
            return str(folder)
    chosen = attached.folder_of(episode.path, episode.episode_id)
    return chosen if chosen is not None and capture_mod.is_capture(chosen) else None


def looked_in(episode: model.Episode) -> list[str]:
    """Where a capture of the episode was looked for, each place with what was found there (for a page or the CLI
    to say when there is none)."""
    places = [f"{folder}/ ({'a capture' if capture_mod.is_capture(folder) else 'not there'})"
              for folder in _beside(episode)]
    if not places:
        places.append(f"beside the run: not looked (the episode is not a local file: {episode.path})")
    chosen = attached.folder_of(episode.path, episode.episode_id)
    if chosen is None:
        places.append(f"folders attached with `ares-viewer activations attach` ({attached.db_path()}): none for "
                      "this episode")
    else:
        there = "a capture" if capture_mod.is_capture(chosen) else f"no {capture_mod.METADATA} there now"
        places.append(f"{chosen}/ (attached with `ares-viewer activations attach`: {there})")
    return places


def find(episode: model.Episode, reader: str = "auto") -> Linked | None:
    """The episode's activations linked to its steps, or None when none were saved beside it.

    Raises:
        capture.CaptureError: a capture folder is there but its ``metadata.json`` cannot be read.
    """
    folder = folder_for(episode)
    return None if folder is None else link(episode, capture_mod.Capture(folder, reader))


def link(episode: model.Episode, capture: capture_mod.Capture) -> Linked:
    """Pair an episode with a capture (e.g. one saved elsewhere), checking that their step counts agree."""
    warnings = list(capture.warnings)
    if len(capture) != episode.num_actions:
        warnings.append(f"the capture has {len(capture)} model calls; the episode has {episode.num_actions} "
                        "actions (the extra ones are not shown beside steps)")
    return Linked(episode, capture, tuple(warnings))


@dataclasses.dataclass(frozen=True, slots=True)
class Linked:
    """An episode and its activations."""

    episode: model.Episode
    capture: capture_mod.Capture
    warnings: tuple[str, ...] = ()

    def capture_step(self, step: int) -> int | None:
        """The capture step of trajectory step ``step`` (the model call that produced its action), or None."""
        i = step - 1
        return i if i in self.capture.steps else None

    def trajectory_step(self, capture_step: int) -> int:
        """The trajectory step whose action capture step ``capture_step`` produced."""
        return capture_step + 1

    def steps(self) -> list[int]:
        """The trajectory steps that have activations."""
        return [self.trajectory_step(i) for i in self.capture.steps if i + 1 < len(self.episode.steps)]

