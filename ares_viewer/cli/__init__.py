"""The ``ares-viewer`` command: list episodes, search a run, show an episode or one step, start the app, export
reviewed steps.

Errors go to stderr with a non-zero exit code; data goes to stdout so it can be piped.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import pathlib
import re
import sys
import time
from collections.abc import Iterator, Sequence

import orjson
import pandas as pd

from ares_viewer import review, sandbox
from ares_viewer.analysis import docent_export, ending, search
from ares_viewer.base import settings
from ares_viewer.base.durations import parse_duration
from ares_viewer.cli import activations as cli_activations
from ares_viewer.cli import branch as cli_branch
from ares_viewer.cli import compare as cli_compare
from ares_viewer.cli import failure_clusters as cli_failure_clusters
from ares_viewer.cli import queue as cli_queue
from ares_viewer.formats.export import atif_export
from ares_viewer.model import render as display
from ares_viewer.runs import run, sources
from ares_viewer.runs.index import queries as index_queries
from ares_viewer.runs.index import ray as index_ray
from ares_viewer.runs.index import shared as index_shared
from ares_viewer.runs.index import update as index_update
from ares_viewer_app import server


def _clean(value: object) -> object:
    """JSON-safe values: NaN becomes null (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _report_reading(opened: run.Run) -> None:
    """The files that could not be read, and a listing cut short by its bounds, on stderr."""
    for error in opened.errors:
        print(f"error: {error}", file=sys.stderr)
    if opened.listing_cut:
        print(f"warning: {opened.listing_cut}", file=sys.stderr)


# The columns ``episodes`` prints as a table (``--json`` gives every column).
_LISTED = ["episode_id", "task_name", "outcome", "total_reward", "num_actions", "duration_s", "total_cost"]


def _float(value: float) -> str:
    return f"{value:.4g}"


def _cell_widths(frame: pd.DataFrame) -> pd.DataFrame:
    """How wide each cell prints (``to_string`` with ``_float``)."""
    widths = {}
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_float_dtype(column):
            widths[name] = column.map(lambda v: 3 if v != v else len(_float(v)))
        else:
            widths[name] = column.map(lambda v: len(str(v)) if v is not None and v == v else 3)
    return pd.DataFrame(widths, index=frame.index)


def _print_table(chunks: Iterator[pd.DataFrame]) -> int:
    """Rows as one table, printed a chunk at a time; returns how many. A chunk is laid out together with the rows
    that set each column's width so far, so the columns stay aligned unless a later row is wider (a table of one
    chunk prints exactly as pandas prints it)."""
    widest: pd.DataFrame | None = None
    count = 0
    for chunk in chunks:
        framed = chunk if widest is None else pd.concat([widest, chunk], ignore_index=True)
        lines = framed.to_string(index=False, float_format=_float).split("\n")
        print("\n".join(lines if widest is None else lines[1 + len(widest):]), flush=True)
        count += len(chunk)
        widest = framed.loc[sorted(set(_cell_widths(framed).idxmax()))].reset_index(drop=True)
    return count


def _episodes(args: argparse.Namespace) -> int:
    opened = run.open_run(args.location)
    _report_reading(opened)
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
                out.write(orjson.dumps({k: _clean(v) for k, v in record.items()}) + b"\n")
            out.flush()
    else:
        _print_table(chunks)
    if args.limit is not None and total > args.limit:
        print(f"{total - args.limit:,} more episode(s) of {total:,} not shown (raise --limit)", file=sys.stderr)
    return 0


def _index(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if args.ray:
        try:
            where = index_ray.build_on_ray(args.location, address=args.ray, index_to=args.index_to)
        except ModuleNotFoundError as exc:
            if exc.name != "ray":
                raise
            print("error: Ray is not installed: pip install 'ares-viewer[ray]'", file=sys.stderr)
            return 2
        opened = run.open_run(args.location, shared_index=args.index_to) if args.index_to else run.open_run(
            args.location)
    else:
        opened = run.open_run(args.location)
        where = str(opened.index_store.folder)
        if args.index_to:
            where = index_shared.push(opened.index_store, args.index_to, index_update.canonical(args.location))
    for error in opened.errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"{len(opened):,} episodes, {opened.files_found()}; index at {where} ({time.perf_counter() - start:.1f} s)")
    return 0


def _failures(args: argparse.Namespace) -> int:
    opened = run.open_run(args.location)
    _report_reading(opened)
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
                  f"Docker), left out of the success rate: {_rate(stats['success_rate'])} of {stats['judged']:,} "
                  "episodes the agent can be judged on")
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


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


# Control characters in a run's text must not drive the terminal: shown as escapes.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def _as_text(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _search(args: argparse.Namespace) -> int:
    """Hits printed as they are found (bounded by ``--limit``), then how far the search got, on stderr."""
    fields = tuple(dict.fromkeys(args.field)) or search.FIELDS
    try:
        search.Search.check(args.query, regex=args.regex, case=args.case, fields=fields)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    opened = run.open_run(args.location)
    _report_reading(opened)
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
            out.write(f"{hit.episode_id}  step {hit.step}  {hit.field}: {_as_text(hit.snippet)}\n".encode())
        out.flush()
    for error in found.progress.errors:
        print(f"error: {error}", file=sys.stderr)
    print(found.progress.describe(count, len(episodes)), file=sys.stderr)
    return 0 if count else 1


def _show(args: argparse.Namespace) -> int:
    episode = run.load_episode(args.file)
    if args.step is None:
        print(display.episode_text(episode, why=ending.of(episode).explanation))
    else:
        print(display.step_text(episode, args.step))
    for line in cli_activations.clipping_lines(episode, args.step):
        print(line)
    return 0


def _app(args: argparse.Namespace) -> int:
    return server.serve(args.location, address=args.address, port=args.port)


def _file_name(episode_id: str, taken: set[str]) -> str:
    """A file name for an episode's id, unlike every name in ``taken`` (ids that differ only in characters a
    file name cannot hold, ``a/b`` and ``a_b``, get the id's hash beside it instead of overwriting each other)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", episode_id).strip("._") or "episode"
    if name.lower() in taken:
        name = f"{name}-{hashlib.sha256(episode_id.encode()).hexdigest()[:12]}"
    taken.add(name.lower())
    return name


def _has_episodes(opened: run.Run, args: argparse.Namespace) -> bool:
    """Whether the run holds every ``--episode`` asked for (else the first missing one is named on stderr)."""
    unknown = [e for e in args.episode or () if e not in opened]
    if unknown:
        print(f"error: no episode {unknown[0]!r} in {args.location}", file=sys.stderr)
    return not unknown


def _export_atif(args: argparse.Namespace) -> int:
    """Episodes as ATIF trajectories: one ``.json`` file, or a folder of ``{episode id}.json`` files. An episode
    that cannot be read is reported and skipped; the others are written."""
    opened = run.open_run(args.location)
    if not _has_episodes(opened, args):
        return 2
    ids = args.episode or opened.episode_ids
    out = pathlib.Path(args.out)
    if out.suffix.lower() == ".json":
        if len(ids) != 1:
            print(f"error: {len(ids)} episodes do not fit in one file; give --episode, or a folder as --out",
                  file=sys.stderr)
            return 2
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(atif_export.dumps(opened.episode(ids[0])), encoding="utf-8")
        print(f"wrote 1 ATIF trajectory to {out}", file=sys.stderr)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    written, failed = 0, 0
    for episode_id in ids:
        try:
            document = atif_export.dumps(opened.episode(episode_id))
        except (KeyError, OSError, ValueError) as exc:
            failed += 1
            print(f"error: {episode_id}: {exc}", file=sys.stderr)
            continue
        (out / f"{_file_name(episode_id, taken)}.json").write_text(document, encoding="utf-8")
        written += 1
    print(f"wrote {written} ATIF trajector{'y' if written == 1 else 'ies'} to {out}"
          + (f"; {failed} episode(s) could not be read" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


def _export_docent(args: argparse.Namespace) -> int:
    """Episodes as Docent agent runs in one JSON Lines file, added to Docent too when a server is configured. An
    episode that cannot be read is reported and skipped; the others are written."""
    opened = run.open_run(args.location)
    if not _has_episodes(opened, args):
        return 2
    try:
        written = docent_export.write(opened, args.out, episodes=args.episode or None)
    except docent_export.ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for error in written.errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"wrote {written.runs} Docent agent run{'' if written.runs == 1 else 's'} to {written.path}"
          + (f"; {len(written.errors)} episode(s) could not be read" if written.errors else ""), file=sys.stderr)
    try:
        server = docent_export.configured()
        if server is not None:
            collection, sent = docent_export.send(written.path, server, name=pathlib.Path(args.location).name)
            print(f"sent {sent} agent run(s) to Docent collection {collection} at {server.url}", file=sys.stderr)
    except docent_export.ExportError as exc:
        print(f"error: not sent to Docent: {exc}", file=sys.stderr)
        return 1
    return 1 if written.errors else 0


def _export(args: argparse.Namespace) -> int:
    if args.format == "atif":
        return _export_atif(args)
    if args.format == "docent":
        return _export_docent(args)
    review.export_format(args.out)  # a bad suffix fails before any work
    opened = run.open_run(args.location)
    store = review.open_store(args.db, read_only=True)
    if store.problem:
        print(f"warning: {store.problem}", file=sys.stderr)
    elif not store.path.exists():
        print(f"warning: no review database at {store.path} (set --db or ${review.DB_ENV})", file=sys.stderr)
    try:
        with store:
            hooks = _hooks_dir(args.out) if args.with_activations else None
            records = list(review.export_records(opened, store, labels=args.label, activations_dir=hooks))
    except review.ReviewError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    count = review.write_export(records, args.out)
    orphaned = sum(1 for r in records if r["orphaned"])
    gone = f" ({orphaned} of them orphaned: their step is gone, no prompt)" if orphaned else ""
    what = f"labelled {', '.join(args.label)}" if args.label else "with notes or labels"
    print(f"wrote {count} step(s) {what} to {args.out}{gone}", file=sys.stderr)
    return 0


def _hooks_dir(out: str) -> str:
    """Where ``--with-activations`` writes the steps' hook arrays: ``<out's stem>.activations/`` beside it."""
    path = pathlib.Path(out)
    return str(path.with_name(path.stem + ".activations"))


def _notes_list(args: argparse.Namespace) -> int:
    store = review.open_store(args.db, read_only=True)
    if store.problem:
        print(f"warning: {store.problem}", file=sys.stderr)
    try:
        with store:
            found = store.find(args.location, labels=args.label or None)
    except review.ReviewError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        for note in found:
            print(orjson.dumps({"run": note.run, "episode_id": note.episode_id, "step": note.step, "path": note.path,
                                "label": note.label, "text": note.text, "author": note.author,
                                "updated_at": note.updated_at, "revision": note.revision,
                                "note_id": note.note_id}).decode())
        return 0
    if not found:
        print(f"no notes on {review.run_key(args.location)} in {store.path}", file=sys.stderr)
        return 0
    for note in found:
        where = f"{note.episode_id} step {note.step}" + (f" {note.path}" if note.path else "")
        label = f"[{note.label}] " if note.label else ""
        print(f"{where}  {label}{note.text}  ({note.author}, {review.format_time(note.updated_at)})")
    return 0


def _notes_move(args: argparse.Namespace) -> int:
    try:
        with review.open_store(args.db) as store:
            moved = store.move_run(args.old, args.new)
    except review.ReviewError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"moved {moved} note(s) from {review.run_key(args.old)} to {review.run_key(args.new)}", file=sys.stderr)
    return 0 if moved else 1


def _sandbox_list(args: argparse.Namespace) -> int:
    found = sandbox.list_sandboxes(session=args.session)
    if args.json:
        for info in found:
            print(orjson.dumps({"id": info.container_id, "name": info.name, "image": info.image, "state": info.state,
                                "role": info.role, "episode_id": info.episode_id, "step": info.step,
                                "session": info.session, "created_at": info.created_at,
                                "age_s": round(info.age_s(), 1)}).decode())
        return 0
    if not found:
        print("no ares-viewer containers", file=sys.stderr)
        return 0
    print(f"{'ID':<12}  {'STATE':<8}  {'ROLE':<12}  {'AGE':>7}  {'SESSION':<16}  {'STEP':>4}  EPISODE")
    for info in found:
        print(f"{info.short_id:<12}  {info.state:<8}  {info.role or '-':<12}  {info.age_s():>6.0f}s  "
              f"{info.session or '-':<16}  {info.step if info.step is not None else '-':>4}  {info.episode_id or '-'}")
    return 0


def _sandbox_cleanup(args: argparse.Namespace) -> int:
    older = parse_duration(args.older_than) if args.older_than else None
    removed = sandbox.cleanup(older_than_s=older, session=args.session)
    for container_id in removed:
        print(container_id[:12])
    print(f"removed {len(removed)} container(s)", file=sys.stderr)
    return 0


def _settings(args: argparse.Namespace) -> int:
    rows = settings.report()
    for line in ([orjson.dumps(row).decode() for row in rows] if args.json else settings.table(rows)):
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ares-viewer", description="Inspect ARES agent episodes.")
    commands = parser.add_subparsers(dest="command", required=True)

    episodes = commands.add_parser("episodes", help="list a run's episodes")
    episodes.add_argument("location", help="folder, file, glob or fsspec URL")
    episodes.add_argument("--json", action="store_true", help="one JSON object per line (every column)")
    episodes.add_argument("--limit", type=_count, metavar="N", help="only the first N (a note on stderr says how "
                                                                     "many more there are)")
    episodes.add_argument("--unsolved", action="store_true", help="only episodes without a reward above 0")
    episodes.add_argument("--task", action="append", default=[], help="only this task's episodes (repeatable)")
    episodes.set_defaults(func=_episodes)

    failures = commands.add_parser("failures", help="why a run's episodes failed: reasons with their counts")
    failures.add_argument("location", help="folder, file, glob or fsspec URL")
    failures.add_argument("--json", action="store_true", help="one JSON object per line")
    failures.add_argument("--ids", type=int, metavar="N",
                          help="episode ids listed per reason (default: 3 in the text, all of them with --json)")
    failures.set_defaults(func=_failures)
    cli_failure_clusters.extend(failures)

    find = commands.add_parser("search", help="find text in a run's reasoning, thoughts, commands, outputs and "
                                              "prompts; hits as they are found")
    find.add_argument("location", help="folder, file, glob or fsspec URL")
    find.add_argument("query", help="the text to find (a regular expression with --regex)")
    find.add_argument("--regex", action="store_true", help="QUERY is a Python regular expression")
    find.add_argument("--case", action="store_true", help="match case exactly (default: any case)")
    find.add_argument("--field", action="append", default=[], choices=search.FIELDS,
                      help="search only this field (repeatable; default: all)")
    find.add_argument("--limit", type=_count, default=100, metavar="N",
                      help="stop after N hits (default: 100; 0: no limit)")
    find.add_argument("--json", action="store_true", help="one JSON object per hit")
    find.set_defaults(func=_search)

    index = commands.add_parser("index", help="build a run's index, here or on a Ray cluster, into the cache or a "
                                              "shared location")
    index.add_argument("location", help="folder, file, glob or fsspec URL")
    index.add_argument("--ray", nargs="?", const="local:2", metavar="ADDRESS",
                       help="build it on a Ray cluster (ADDRESS as ray.init takes it, e.g. auto or ray://host:10001; "
                            "without one: a local cluster of 2 workers)")
    index.add_argument("--index-to", metavar="URL",
                       help="write the index under this folder or fsspec URL (never the run); readers find it with "
                            "ARES_VIEWER_SHARED_INDEX=URL")
    index.set_defaults(func=_index)

    show = commands.add_parser("show", help="show an episode, or one step of it")
    show.add_argument("file", help="an episode file")
    show.add_argument("--step", type=int, help="the step index to show")
    show.set_defaults(func=_show)

    app = commands.add_parser("app", help="start the web app (bound to localhost; stops on SIGTERM or Ctrl+C)")
    app.add_argument("location", nargs="?", help="the run to open (default: the bundled sample runs)")
    app.add_argument("--address", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    app.add_argument("--port", type=int, help="port (default: Streamlit's)")
    app.set_defaults(func=_app)

    export = commands.add_parser("export", help="export reviewed steps with their exact prompts (JSONL/Parquet), "
                                                "or episodes as ATIF trajectories (--format atif) or Docent agent "
                                                "runs (--format docent)")
    export.add_argument("location", help="the run: folder, file, glob or fsspec URL")
    export.add_argument("--format", choices=("review", "atif", "docent"), default="review",
                        help="review: reviewed steps (the default); atif: whole episodes as ATIF trajectories; "
                             "docent: whole episodes as Docent agent runs, one JSON object a line (sent to Docent "
                             "too when $ARES_VIEWER_DOCENT_URL is set)")
    export.add_argument("--episode", action="append", default=[],
                        help="with --format atif or docent: only this episode (repeatable; default: every episode)")
    export.add_argument("--label", action="append", default=[], help="only steps with this label (repeatable)")
    export.add_argument("--out", required=True, help="the file to write: *.jsonl or *.parquet; with --format atif "
                                                     "a *.json file (one episode) or a folder; with --format "
                                                     "docent a .jsonl file (never in the run's folder)")
    export.add_argument("--db", help="the review database (default: $ARES_VIEWER_REVIEW_DB or beside the cache)")
    export.add_argument("--with-activations", action="store_true",
                        help="review format: also write each step's hook arrays from its capture as .npy files "
                             "under <out's stem>.activations/ beside the export")
    export.set_defaults(func=_export)

    notes = commands.add_parser("notes", help="review notes and labels: list them, or re-file a moved run's")
    notes_commands = notes.add_subparsers(dest="notes_command", required=True)
    notes_list = notes_commands.add_parser("list", help="the notes of a run, oldest first")
    notes_list.add_argument("location", help="the run: folder, file, glob or fsspec URL")
    notes_list.add_argument("--label", action="append", default=[], help="only notes with this label (repeatable)")
    notes_list.add_argument("--json", action="store_true", help="one JSON object per line")
    notes_list.set_defaults(func=_notes_list)
    notes_move = notes_commands.add_parser("move", help="re-file the notes of a run that moved to a new location")
    notes_move.add_argument("old", help="where the run was (its notes are filed under it)")
    notes_move.add_argument("new", help="where it is now")
    notes_move.set_defaults(func=_notes_move)
    for command in (notes_list, notes_move):
        command.add_argument("--db", help="the review database (default: $ARES_VIEWER_REVIEW_DB or beside the cache)")

    box = commands.add_parser("sandbox", help="the project's live containers (restored steps)")
    box_commands = box.add_subparsers(dest="sandbox_command", required=True)
    box_list = box_commands.add_parser("list", help="list every ares-viewer container, found by label")
    box_list.add_argument("--session", help="only this session's containers")
    box_list.add_argument("--json", action="store_true", help="one JSON object per line")
    box_list.set_defaults(func=_sandbox_list)
    box_cleanup = box_commands.add_parser("cleanup", help="remove ares-viewer containers")
    box_cleanup.add_argument("--older-than", metavar="AGE", help="only those older than AGE (90s, 30m, 2h, 1d)")
    box_cleanup.add_argument("--session", help="only this session's containers")
    box_cleanup.set_defaults(func=_sandbox_cleanup)

    for module in (cli_compare, cli_queue, cli_branch, cli_activations):
        module.add_command(commands)
    shown = commands.add_parser("settings", help="every ARES_VIEWER_* setting: its value and where it came from")
    shown.add_argument("--json", action="store_true", help="one JSON object per line (with the default and meaning)")
    shown.set_defaults(func=_settings)
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
    except _sandbox_error() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, IndexError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


def _count(text: str) -> int:
    """A count for ``--limit``: a whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (a whole number, 0 or more)")
    return int(text)


def _sandbox_error() -> type[Exception]:
    return sandbox.SandboxError


if __name__ == "__main__":
    sys.exit(main())
