"""``ares-viewer activations``: attach a capture folder kept where the user chose to an episode, forget it, or say
where an episode's capture is (and where it was looked for); and the clipping lines ``show`` prints."""

from __future__ import annotations

import argparse
import sys

from ares_viewer import activations, model
from ares_viewer.activations import attached, clipping
from ares_viewer.runs import run as run_module


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``activations`` command among ``commands``."""
    command = commands.add_parser("activations", help="activation captures: attach one kept elsewhere to an "
                                                      "episode, or say where an episode's capture is")
    sub = command.add_subparsers(dest="activations_command", required=True)
    attach = sub.add_parser("attach", help="link a capture folder (TrajectoryActivations.save's) to an episode; "
                                           "remembered in the cache folder, nothing is written to the run")
    attach.add_argument("location", help="the run: folder, file or glob")
    attach.add_argument("episode_id", help="the episode's id")
    attach.add_argument("folder", help="the capture folder (holding metadata.json and step_NNNN.pt)")
    attach.set_defaults(func=_attach)
    detach = sub.add_parser("detach", help="forget the capture folder attached to an episode")
    detach.add_argument("location", help="the run: folder, file or glob")
    detach.add_argument("episode_id", help="the episode's id")
    detach.set_defaults(func=_detach)
    where = sub.add_parser("where", help="the episode's capture, or every place it was looked for")
    where.add_argument("location", help="the run: folder, file or glob")
    where.add_argument("episode_id", help="the episode's id")
    where.set_defaults(func=_where)


def _episode(args: argparse.Namespace) -> model.Episode:
    return run_module.open_run(args.location).episode(args.episode_id)


def _attach(args: argparse.Namespace) -> int:
    episode = _episode(args)
    try:
        folder = attached.attach(episode.path, episode.episode_id, args.folder)
        linked = activations.find(episode)
    except (attached.AttachError, *activations.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if linked is None or linked.capture.folder != folder:
        shown = linked.capture.folder if linked is not None else "none"
        print(f"attached {folder} to {episode.episode_id}; a capture beside the run is opened first: {shown}",
              file=sys.stderr)
        return 0
    print(f"attached {folder} to {episode.episode_id}: {len(linked.capture)} model call(s) of model "
          f"{linked.capture.model_name}, beside steps {_ranges(linked.steps())}")
    for warning in linked.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _detach(args: argparse.Namespace) -> int:
    episode = _episode(args)
    gone = attached.detach(episode.path, episode.episode_id)
    print(f"{'forgot the capture attached to' if gone else 'no capture was attached to'} {episode.episode_id}")
    return 0


def _where(args: argparse.Namespace) -> int:
    episode = _episode(args)
    folder = activations.folder_for(episode)
    if folder is not None:
        print(folder)
        return 0
    print(f"no capture found for {episode.episode_id}; looked in:", file=sys.stderr)
    for place in activations.looked_in(episode):
        print(f"  {place}", file=sys.stderr)
    return 1


def _ranges(steps: list[int]) -> str:
    return f"{steps[0]}..{steps[-1]}" if steps else "none"


def clipping_lines(episode: model.Episode, step: int | None) -> list[str]:
    """For ``show``: whether each model call (or step ``step``'s) ran on a clipped prompt, from the episode's
    capture; nothing when it has none."""
    try:
        linked = activations.find(episode)
    except activations.Error as exc:
        return [f"activations: cannot be read ({exc})"]
    if linked is None:
        return []
    steps = linked.steps() if step is None else [step] if linked.capture_step(step) is not None else []
    return [f"step {k} prompt (capture {linked.capture.folder}): {clipping.of_step(linked, k).sentence()}"
            for k in steps]
