"""The ``ares-viewer`` command: list episodes, search a run, show an episode or one step, start the app, export
reviewed steps.

Each command is a module of this package with an ``add_command(commands)``; ``COMMANDS`` lists them in the order
``ares-viewer --help`` shows them, so a new command is its module and one line there. What the commands share at the
terminal is in ``terminal``. Errors go to stderr with a non-zero exit code; data goes to stdout so it can be piped.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ares_viewer.runs import sources
from ares_viewer.sandbox import commands as sandbox_commands

# The commands, in the order the help lists them: each is the module ``ares_viewer.cli.<name>``, whose
# ``add_command(commands)`` adds it. A new command is its module and its line here. (A command's module becomes
# an attribute of this package as it is imported: ``sandbox`` here is the command, not ``ares_viewer.sandbox``.)
COMMANDS = (
    "episodes",
    "failures",
    "search",
    "index",
    "show",
    "app",
    "export",
    "notes",
    "sandbox",
    "compare",
    "queue",
    "branch",
    "activations",
    "settings",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ares-viewer", description="Inspect ARES agent episodes.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except sources.LocationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:  # said as a location that is not there is: "<path>: no such file or folder"
        print(f"error: {exc.filename}: no such file or folder" if exc.filename else f"error: {exc}", file=sys.stderr)
        return 2
    except sandbox_commands.SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, IndexError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
