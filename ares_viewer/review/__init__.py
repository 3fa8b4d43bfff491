"""Review sessions: notes and labels on steps (``records``: a note and its rules; ``store``: SQLite), which notes
lost their step (``orphans``), and exports of the marked steps (``exports``, JSONL or Parquet). Team sessions:
``queues`` (a queue's items, assignment, labels, skips, decisions, history), ``queue_items`` (items from filters,
a search or a label), ``labelschema`` (a queue's versioned label schema), ``agreement`` (kappas, Krippendorff's
alpha) and ``queue_export`` (disagreements and the finished set); see docs/review.md.

>>> from ares_viewer import review
>>> store = review.open_store()
>>> store.notes(run="sample_runs/demo-run")          # DataFrame: one row per live note
>>> review.write_export(review.export_records(run, store, labels=["reward hacking"]), "marked.jsonl")
"""

from __future__ import annotations

from ares_viewer.review.exports import (
    EXPORT_FORMATS,
    ExportError,
    export_bytes,
    export_format,
    export_records,
    parquet_available,
    read_export,
    write_export,
)
from ares_viewer.review.orphans import orphan_reason, with_status
from ares_viewer.review.records import (
    MAX_LABEL,
    MAX_TEXT,
    NOTE_COLUMNS,
    ConflictError,
    Note,
    ReviewError,
    fold,
    format_time,
    notes_frame,
    run_key,
)
from ares_viewer.review.store import DB_ENV, SCHEMA, ReviewStore, db_path, open_store

__all__ = [
    "DB_ENV", "EXPORT_FORMATS", "MAX_LABEL", "MAX_TEXT", "NOTE_COLUMNS", "SCHEMA", "ConflictError", "ExportError",
    "Note", "ReviewError", "ReviewStore", "db_path", "export_bytes", "export_format", "export_records", "fold",
    "format_time", "notes_frame", "open_store", "orphan_reason", "parquet_available", "read_export", "run_key",
    "with_status", "write_export",
]
