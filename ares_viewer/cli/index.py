"""``ares-viewer index RUN``: build a run's index, here or on a Ray cluster, into the cache or a shared location."""

from __future__ import annotations

import argparse
import sys
import time

from ares_viewer.runs import run as runs
from ares_viewer.runs.index import ray as index_ray
from ares_viewer.runs.index import shared as index_shared
from ares_viewer.runs.index import update as index_update


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``index`` command among ``commands``."""
    index = commands.add_parser("index", help="build a run's index, here or on a Ray cluster, into the cache or a "
                                              "shared location")
    index.add_argument("location", help="folder, file, glob or fsspec URL")
    index.add_argument("--ray", nargs="?", const="local:2", metavar="ADDRESS",
                       help="build it on a Ray cluster (ADDRESS as ray.init takes it, e.g. auto or ray://host:10001; "
                            "without one: a local cluster of 2 workers)")
    index.add_argument("--index-to", metavar="URL",
                       help="write the index under this folder or fsspec URL (never the run); readers find it with "
                            "ARES_VIEWER_SHARED_INDEX=URL")
    index.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if args.ray:
        try:
            where = index_ray.build_on_ray(args.location, address=args.ray, index_to=args.index_to)
        except ModuleNotFoundError as exc:
            if exc.name != "ray":
                raise
            print("error: Ray is not installed: pip install 'ares-viewer[ray]'", file=sys.stderr)
            return 2
        opened = runs.open_run(args.location, shared_index=args.index_to) if args.index_to else runs.open_run(
            args.location)
    else:
        opened = runs.open_run(args.location)
        where = str(opened.index_store.folder)
        if args.index_to:
            where = index_shared.push(opened.index_store, args.index_to, index_update.canonical(args.location))
    for error in opened.errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"{len(opened):,} episodes, {opened.files_found()}; index at {where} ({time.perf_counter() - start:.1f} s)")
    return 0
