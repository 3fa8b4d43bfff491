"""``ares-viewer failures RUN``: why a run's episodes failed, reasons with their counts (``--clusters``: by root
cause, in ``failure_clusters``)."""

from __future__ import annotations

import argparse
import sys

import orjson

from ares_viewer.analysis import ending
from ares_viewer.cli import failure_clusters, terminal
from ares_viewer.model import render
from ares_viewer.runs import run as runs


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``failures`` command among ``commands``."""
    failures = commands.add_parser("failures", help="why a run's episodes failed: reasons with their counts")
    failures.add_argument("location", help="folder, file, glob or fsspec URL")
    failures.add_argument("--json", action="store_true", help="one JSON object per line")
    failures.add_argument("--ids", type=int, metavar="N",
                          help="episode ids listed per reason (default: 3 in the text, all of them with --json)")
    failures.set_defaults(func=run)
    failure_clusters.extend(failures)


def run(args: argparse.Namespace) -> int:
    opened = runs.open_run(args.location)
    terminal.report_reading(opened)
    # Only the ids shown are fetched: three per reason in the text, all of them (or --ids) as JSON.
    shown = args.ids if args.ids is not None else (None if args.json else 3)
    failures = opened.queries.failures(with_ids=True, first_ids=shown)
    if args.json:
        out = sys.stdout.buffer
        for record in failures.to_dict(orient="records"):
            out.write(orjson.dumps(record) + b"\n")
        out.flush()
    elif failures.empty:
        print(f"no failed episodes among {len(opened)}")
    else:
        stats = opened.stats()
        if stats["infrastructure_failures"]:
            print(f"{stats['infrastructure_failures']:,} failure(s) of the infrastructure (model API, connection, "
                  f"Docker), left out of the success rate: {render.rate_text(stats['success_rate'])} of "
                  f"{stats['judged']:,} episodes the agent can be judged on")
        for record in failures.to_dict(orient="records"):
            listed = record["episode_ids"]
            ids = ", ".join(listed) + (", ..." if record["episodes"] > len(listed) else "")
            print(f"{record['episodes']:>6}  [{record['blame']}] {record['reason']}  ({record['tasks']} task(s); "
                  f"episodes: {ids})")
            for episode_id in listed:  # what each listed episode's explanation adds to the reason: its failing tests
                said = ending.of(opened.episode(episode_id)).tests_words()
                if said and said not in record["reason"]:
                    print(f"{'':>8}{episode_id}: {said}")
    return 0

