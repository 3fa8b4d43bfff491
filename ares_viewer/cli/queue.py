"""``ares-viewer queue create|list|status|export``: review queues from the command line (see docs/review.md)."""

from __future__ import annotations

import argparse
import getpass
import json
import pathlib
import sys

from ares_viewer import review
from ares_viewer.review import labelschema, queue_export, queue_items, queues
from ares_viewer.runs import run as run_module
from ares_viewer.runs.index import queries


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``queue`` command and its subcommands among ``commands``."""
    queue = commands.add_parser("queue", help="review queues: create one from a filter, list, progress, export")
    sub = queue.add_subparsers(dest="queue_command", required=True)
    create = sub.add_parser("create", help="a queue of a run's episodes (or steps) chosen by a filter")
    create.add_argument("location", help="the run: folder, file, glob or fsspec URL")
    create.add_argument("name", help="the queue's name")
    create.add_argument("--schema", required=True, help="the label schema: a JSON file or JSON text")
    create.add_argument("--description", default="", help="what the queue is for")
    create.add_argument("--reviewers", default="", help="comma-separated names (items go round robin); none: a pool")
    create.add_argument("--overlap", type=int, default=1, help="reviewers per item (default 1)")
    create.add_argument(
        "--adjudicators", default="", help="comma-separated names who decide disagreements; none: anyone who did "
        "not label the item"
    )
    create.add_argument("--author", default=None, help="who creates it (default: your login name)")
    chosen = create.add_argument_group("which items (overview filters by default: every episode)")
    chosen.add_argument("--task", action="append", default=[], help="only this task (repeatable)")
    chosen.add_argument("--outcome", action="append", default=[], help="only this outcome (repeatable)")
    chosen.add_argument("--text", default="", help="id, task or error containing this text")
    chosen.add_argument("--reason", default=None, help="a failure group: episodes failing for this reason")
    chosen.add_argument(
        "--flag", action="append", default=[], help="a behaviour group: episodes showing this flag (repeatable)"
    )
    chosen.add_argument("--episodes", default=None, help="these episode ids, comma-separated (a compare-runs list)")
    chosen.add_argument("--label", default=None, help="the steps carrying this review label")
    chosen.add_argument("--search", default=None, help="the steps a search for this text finds")
    chosen.add_argument("--limit", type=int, default=None, help="at most this many items")
    for name, text in (
        ("list", "every queue with its progress"),
        ("status", "one queue: progress, agreement, disagreements, changed items"),
    ):
        parser = sub.add_parser(name, help=text)
        if name == "status":
            parser.add_argument("name")
        parser.add_argument("--json", action="store_true", help="as JSON")
    export = sub.add_parser("export", help="a finished queue as a dataset (JSONL or Parquet)")
    export.add_argument("name")
    export.add_argument("--out", required=True, help="the file to write: *.jsonl or *.parquet")
    export.add_argument("--unfinished", action="store_true", help="export even when items still lack labels")
    for parser in (create, *sub.choices.values()):
        if not any(a.dest == "db" for a in parser._actions):
            parser.add_argument("--db", default=None, help=f"the review database (default: ${review.DB_ENV})")
    queue.set_defaults(func=run)


def _schema(text: str) -> labelschema.LabelSchema:
    path = pathlib.Path(text)
    if not text.lstrip().startswith("{") and path.is_file():
        try:
            return labelschema.LabelSchema.parse(path.read_text(encoding="utf-8"))
        except labelschema.SchemaError as exc:
            raise labelschema.SchemaError(f"{path}: {exc}") from exc
    return labelschema.LabelSchema.parse(text)


def _items(args: argparse.Namespace, opened: run_module.Run, store: review.ReviewStore) -> list[queue_items.Item]:
    if sum(x is not None for x in (args.episodes, args.label, args.search)) > 1:
        raise ValueError("choose items by one of --episodes, --label or --search")
    if args.label is not None:
        found = queue_items.label_items(store, opened, args.label)
    elif args.search is not None:
        found = queue_items.search_items(opened, args.search, limit=args.limit or 200)
    else:
        ids = None if args.episodes is None else [i.strip() for i in args.episodes.split(",") if i.strip()]
        if args.flag:
            flagged = queue_items.flagged_ids(opened, args.flag)
            ids = flagged if ids is None else [i for i in ids if i in set(flagged)]
        filters = queries.Filters(
            tasks=args.task, outcomes=args.outcome, text=args.text, reason=args.reason, episode_ids=ids
        )
        found = queue_items.filter_items(opened, filters, limit=args.limit)
    return found[: args.limit] if args.limit else found


def _create(args: argparse.Namespace, store: review.ReviewStore) -> dict:
    schema = _schema(args.schema)
    opened = run_module.open_run(args.location)
    reviewers = [r.strip() for r in args.reviewers.split(",") if r.strip()]
    source = {
        k: getattr(args, k)
        for k in ("location", "task", "outcome", "text", "reason", "flag", "episodes", "label", "search", "limit")
        if getattr(args, k)
    }
    made = queues.create(
        store,
        args.name,
        _items(args, opened, store),
        schema=schema,
        author=args.author or getpass.getuser(),
        description=args.description,
        source=source,
        reviewers=reviewers,
        overlap=args.overlap,
        adjudicators=[r.strip() for r in args.adjudicators.split(",") if r.strip()],
    )
    print(f"created queue {made.name}: {len(queues.items(store, made.name))} {made.kind}", file=sys.stderr)
    return queues.status(store, made.name)


def _status(store: review.ReviewStore, name: str) -> dict:
    return {
        **queues.status(store, name),
        "progress": queues.progress(store, name).to_dict("records"),
        "agreement": queue_export.agreement(store, name),
        "disagreements": queue_export.disagreements(store, name),
        "changed_items": [i.item for i in queues.changed(store, name)],
    }


def _print_status(found: dict) -> None:
    print(
        f"{found['queue']}: {found['items_complete']} of {found['items']} items fully labelled "
        f"({found['labels_given']} of {found['labels_wanted']} labels), {found['items_decided']} decided, "
        f"{found['changed']} changed since queued, schema v{found['schema_version']}"
    )
    for row in found.get("progress", []):
        print(
            f"  {row['reviewer']}: {row['done']} done, {row['skipped']} skipped, {row['in_hand']} in hand, "
            f"{row['left']} left"
        )
    for figure in found.get("agreement", []):
        print(f"  {queue_export.figure_text(figure)}")
    for item in found.get("disagreements", []):
        decided = "decided" if item["decision"] else "to adjudicate"
        print(f"  item {item['item']} ({item['episode_id']}): {', '.join(item['fields'])} differ; {decided}")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except review.ReviewError as exc:  # an unknown queue, a read-only database, an unfinished export
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    readonly = args.queue_command in ("list", "status")
    store = review.open_store(args.db, read_only=readonly)
    if not readonly and not store.writable:
        raise review.ReviewError(store.problem or f"{store.path} is read-only")
    try:
        if args.queue_command == "create":
            _create(args, store)
        elif args.queue_command == "list":
            listed = [
                queues.status(store, q.name) | {"description": q.description, "reviewers": list(q.reviewers)}
                for q in queues.all_queues(store)
            ]
            if args.json:
                print(json.dumps(listed))
            for row in [] if args.json else listed:
                _print_status(row)
        elif args.queue_command == "status":
            found = _status(store, args.name)
            if args.json:
                print(json.dumps(found))
            else:
                _print_status(found)
        else:
            records = list(queue_export.export_records(store, args.name, unfinished=args.unfinished))
            count = queue_export.write_export(records, args.out)
            print(f"wrote {count} item(s) of queue {args.name} to {args.out}", file=sys.stderr)
    finally:
        store.close()
    return 0
