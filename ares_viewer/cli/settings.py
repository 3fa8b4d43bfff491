"""``ares-viewer settings``: every ``ARES_VIEWER_*`` setting, its value and where it came from."""

from __future__ import annotations

import argparse

import orjson

from ares_viewer.base import settings


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``settings`` command among ``commands``."""
    shown = commands.add_parser("settings", help="every ARES_VIEWER_* setting: its value and where it came from")
    shown.add_argument("--json", action="store_true", help="one JSON object per line (with the default and meaning)")
    shown.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = settings.report()
    for line in ([orjson.dumps(row).decode() for row in rows] if args.json else settings.table(rows)):
        print(line)
    return 0
