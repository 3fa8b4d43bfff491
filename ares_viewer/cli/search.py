"""``ares-viewer search RUN QUERY``: text found in a run's reasoning, thoughts, commands, outputs and prompts, hits
printed as they are found."""

from __future__ import annotations

import argparse
import sys

import orjson

from ares_viewer.analysis import search
from ares_viewer.cli import terminal
from ares_viewer.runs import run as runs


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``search`` command among ``commands``."""
    find = commands.add_parser("search", help="find text in a run's reasoning, thoughts, commands, outputs and "
                                              "prompts; hits as they are found")
    find.add_argument("location", help="folder, file, glob or fsspec URL")
    find.add_argument("query", help="the text to find (a regular expression with --regex)")
    find.add_argument("--regex", action="store_true", help="QUERY is a Python regular expression")
    find.add_argument("--case", action="store_true", help="match case exactly (default: any case)")
    find.add_argument("--field", action="append", default=[], choices=search.FIELDS,
                      help="search only this field (repeatable; default: all)")
    find.add_argument("--limit", type=terminal.count, default=100, metavar="N",
                      help="stop after N hits (default: 100; 0: no limit)")
    find.add_argument("--json", action="store_true", help="one JSON object per hit")
    find.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Hits printed as they are found (bounded by ``--limit``), then how far the search got, on stderr."""
    fields = tuple(dict.fromkeys(args.field)) or search.FIELDS
    try:
        search.Search.check(args.query, regex=args.regex, case=args.case, fields=fields)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    opened = runs.open_run(args.location)
    terminal.report_reading(opened)
    found = search.Search(opened, args.query, regex=args.regex, case=args.case, fields=fields)
    out = sys.stdout.buffer
    episodes: set[str] = set()
    count = 0
    for hit in found.hits(limit=args.limit or None):
        count += 1
        episodes.add(hit.episode_id)
        if args.json:
            out.write(orjson.dumps({"episode_id": hit.episode_id, "task_name": hit.task_name, "step": hit.step,
                                    "field": hit.field, "snippet": hit.snippet, "match": hit.pieces()[1],
                                    "start": hit.start, "end": hit.end}) + b"\n")
        else:
            out.write(f"{hit.episode_id}  step {hit.step}  {hit.field}: {terminal.as_text(hit.snippet)}\n".encode())
        out.flush()
    for error in found.progress.errors:
        print(f"error: {error}", file=sys.stderr)
    print(found.progress.describe(count, len(episodes)), file=sys.stderr)
    return 0 if count else 1
