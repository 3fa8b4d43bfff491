"""``ares-viewer show FILE``: an episode, or one step of it, as text."""

from __future__ import annotations

import argparse

from ares_viewer.analysis import ending
from ares_viewer.cli import activations as cli_activations
from ares_viewer.model import render
from ares_viewer.runs import run as runs


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``show`` command among ``commands``."""
    show = commands.add_parser("show", help="show an episode, or one step of it")
    show.add_argument("file", help="an episode file")
    show.add_argument("--step", type=int, help="the step index to show")
    show.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    episode = runs.load_episode(args.file)
    if args.step is None:
        print(render.episode_text(episode, why=ending.of(episode).explanation))
    else:
        print(render.step_text(episode, args.step))
    for line in cli_activations.clipping_lines(episode, args.step):
        print(line)
    return 0
