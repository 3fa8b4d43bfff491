"""``ares-viewer app [RUN]``: the web app, bound to localhost."""

from __future__ import annotations

import argparse

from ares_viewer_app.serving import server


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``app`` command among ``commands``."""
    app = commands.add_parser("app", help="start the web app (bound to localhost; stops on SIGTERM or Ctrl+C)")
    app.add_argument("location", nargs="?", help="the run to open (default: the bundled sample runs)")
    app.add_argument("--address", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    app.add_argument("--port", type=int, help="port (default: Streamlit's)")
    app.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return server.serve(args.location, address=args.address, port=args.port)
