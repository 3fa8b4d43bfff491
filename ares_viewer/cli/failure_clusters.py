"""``failures --clusters``: a run's failed episodes grouped by root cause (``analysis.failure_clusters``)."""

from __future__ import annotations

import argparse
import sys

import orjson

from ares_viewer.analysis import failure_clusters
from ares_viewer.runs import run


def extend(failures: argparse.ArgumentParser) -> None:
    """Give the ``failures`` command ``--clusters``; without it, the command does what it did."""
    plain = failures.get_default("func")
    failures.add_argument(
        "--clusters",
        action="store_true",
        help="group the failed episodes by root cause read from each episode (the error at the "
        "bottom of its chain, failing tests, last failing command), ids and paths masked",
    )

    def chosen(args: argparse.Namespace) -> int:
        return clusters(args) if args.clusters else plain(args)

    failures.set_defaults(func=chosen)


def clusters(args: argparse.Namespace) -> int:
    opened = run.open_run(args.location)
    found = failure_clusters.of_run(opened)
    shown = args.ids if args.ids is not None else (None if args.json else failure_clusters.EXAMPLES)
    if args.json:
        out = sys.stdout.buffer
        for record in found.to_dict(orient="records"):
            record["episode_ids"] = record["episode_ids"][:shown] if shown is not None else record["episode_ids"]
            out.write(orjson.dumps(record) + b"\n")
        out.flush()
        return 0
    if found.empty:
        print(f"no failed episodes among {len(opened)}")
        return 0
    for record in found.to_dict(orient="records"):
        ids = record["episode_ids"][:shown]
        more = ", ..." if record["episodes"] > len(ids) else ""
        print(
            f"{record['episodes']:>6}  {record['share']:>6.1%}  [{record['kind']}] {record['cause']}  "
            f"(episodes: {', '.join(ids)}{more})"
        )
    return 0
