"""``ares-viewer export RUN --out PATH``: reviewed steps with their exact prompts (JSONL/Parquet), or episodes as
ATIF trajectories (``--format atif``) or Docent agent runs (``--format docent``)."""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import sys

from ares_viewer import review
from ares_viewer.analysis import docent_export
from ares_viewer.formats.export import atif_export
from ares_viewer.runs import run as runs


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``export`` command among ``commands``."""
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
    export.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.format == "atif":
        return _atif(args)
    if args.format == "docent":
        return _docent(args)
    review.export_format(args.out)  # a bad suffix fails before any work
    opened = runs.open_run(args.location)
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


def _file_name(episode_id: str, taken: set[str]) -> str:
    """A file name for an episode's id, unlike every name in ``taken`` (ids that differ only in characters a
    file name cannot hold, ``a/b`` and ``a_b``, get the id's hash beside it instead of overwriting each other)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", episode_id).strip("._") or "episode"
    if name.lower() in taken:
        name = f"{name}-{hashlib.sha256(episode_id.encode()).hexdigest()[:12]}"
    taken.add(name.lower())
    return name


def _has_episodes(opened: runs.Run, args: argparse.Namespace) -> bool:
    """Whether the run holds every ``--episode`` asked for (else the first missing one is named on stderr)."""
    unknown = [e for e in args.episode or () if e not in opened]
    if unknown:
        print(f"error: no episode {unknown[0]!r} in {args.location}", file=sys.stderr)
    return not unknown


def _atif(args: argparse.Namespace) -> int:
    """Episodes as ATIF trajectories: one ``.json`` file, or a folder of ``{episode id}.json`` files. An episode
    that cannot be read is reported and skipped; the others are written."""
    opened = runs.open_run(args.location)
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


def _docent(args: argparse.Namespace) -> int:
    """Episodes as Docent agent runs in one JSON Lines file, added to Docent too when a server is configured. An
    episode that cannot be read is reported and skipped; the others are written."""
    opened = runs.open_run(args.location)
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


def _hooks_dir(out: str) -> str:
    """Where ``--with-activations`` writes the steps' hook arrays: ``<out's stem>.activations/`` beside it."""
    path = pathlib.Path(out)
    return str(path.with_name(path.stem + ".activations"))
