"""``ares-viewer notes``: review notes and labels: list a run's, or re-file a moved run's."""

from __future__ import annotations

import argparse
import sys

import orjson

from ares_viewer import review


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``notes`` command, with ``list`` and ``move``, among ``commands``."""
    notes = commands.add_parser("notes", help="review notes and labels: list them, or re-file a moved run's")
    notes_commands = notes.add_subparsers(dest="notes_command", required=True)
    notes_list = notes_commands.add_parser("list", help="the notes of a run, oldest first")
    notes_list.add_argument("location", help="the run: folder, file, glob or fsspec URL")
    notes_list.add_argument("--label", action="append", default=[], help="only notes with this label (repeatable)")
    notes_list.add_argument("--json", action="store_true", help="one JSON object per line")
    notes_list.set_defaults(func=list_notes)
    notes_move = notes_commands.add_parser("move", help="re-file the notes of a run that moved to a new location")
    notes_move.add_argument("old", help="where the run was (its notes are filed under it)")
    notes_move.add_argument("new", help="where it is now")
    notes_move.set_defaults(func=move)
    for command in (notes_list, notes_move):
        command.add_argument("--db", help="the review database (default: $ARES_VIEWER_REVIEW_DB or beside the cache)")


def list_notes(args: argparse.Namespace) -> int:
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


def move(args: argparse.Namespace) -> int:
    try:
        with review.open_store(args.db) as store:
            moved = store.move_run(args.old, args.new)
    except review.ReviewError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"moved {moved} note(s) from {review.run_key(args.old)} to {review.run_key(args.new)}", file=sys.stderr)
    return 0 if moved else 1
