"""``ares-viewer episodes RUN``: a run's episodes, as a table or one JSON object per line."""

from __future__ import annotations

import argparse
import sys

import orjson

from ares_viewer.cli import terminal
from ares_viewer.runs import run as runs
from ares_viewer.runs.index import queries as index_queries

# The columns ``episodes`` prints as a table (``--json`` gives every column).
_LISTED = ["episode_id", "task_name", "outcome", "total_reward", "num_actions", "duration_s", "total_cost"]


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``episodes`` command among ``commands``."""
    episodes = commands.add_parser("episodes", help="list a run's episodes")
    episodes.add_argument("location", help="folder, file, glob or fsspec URL")
    episodes.add_argument("--json", action="store_true", help="one JSON object per line (every column)")
    episodes.add_argument("--limit", type=terminal.count, metavar="N", help="only the first N (a note on stderr says "
                                                                            "how many more there are)")
    episodes.add_argument("--unsolved", action="store_true", help="only episodes without a reward above 0")
    episodes.add_argument("--task", action="append", default=[], help="only this task's episodes (repeatable)")
    episodes.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    opened = runs.open_run(args.location)
    terminal.report_reading(opened)
    if not len(opened):
        print(f"{args.location}: no episodes found ({opened.files_found()})", file=sys.stderr)
        return 1
    filters = index_queries.Filters(tasks=tuple(args.task), solved=False if args.unsolved else None)
    total = opened.queries.count(filters)
    if not total:
        print(f"{args.location}: no episodes match (of {len(opened):,})", file=sys.stderr)
        return 1
    chunks = opened.queries.stream(filters, columns=None if args.json else _LISTED, limit=args.limit)
    if args.json:
        out = sys.stdout.buffer
        for chunk in chunks:
            for record in chunk.to_dict(orient="records"):
                out.write(orjson.dumps({k: terminal.clean(v) for k, v in record.items()}) + b"\n")
            out.flush()
    else:
        terminal.print_table(chunks)
    if args.limit is not None and total > args.limit:
        print(f"{total - args.limit:,} more episode(s) of {total:,} not shown (raise --limit)", file=sys.stderr)
    return 0
