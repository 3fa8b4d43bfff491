"""The review database's tables for queues (schema 2, adjudicators since 3): added beside the notes, which they
leave as they are.

``queue_claims`` is the only table whose rows change (an assignment's state); everything a reviewer says (labels,
notes, skips, schema changes, decisions) is appended to ``queue_events`` and never changed: SQLite itself refuses
an update or a delete of ``queue_events`` and of the notes' ``revisions`` (``HISTORY_TRIGGERS``, schema 3).
"""

from __future__ import annotations

import sqlite3

DDL = """
CREATE TABLE IF NOT EXISTS queues (
    queue_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    reviewers TEXT NOT NULL,
    overlap INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    adjudicators TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS queue_schemas (
    queue_id TEXT NOT NULL REFERENCES queues (queue_id),
    version INTEGER NOT NULL,
    schema TEXT NOT NULL,
    author TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (queue_id, version)
);
CREATE TABLE IF NOT EXISTS queue_items (
    queue_id TEXT NOT NULL REFERENCES queues (queue_id),
    item INTEGER NOT NULL,
    run TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    step INTEGER,
    path TEXT,
    fingerprint TEXT,
    PRIMARY KEY (queue_id, item)
);
CREATE TABLE IF NOT EXISTS queue_claims (
    queue_id TEXT NOT NULL,
    item INTEGER NOT NULL,
    reviewer TEXT NOT NULL,
    state TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (queue_id, item, reviewer)
);
CREATE TABLE IF NOT EXISTS queue_events (
    event INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id TEXT NOT NULL,
    item INTEGER,
    kind TEXT NOT NULL,
    author TEXT NOT NULL,
    at REAL NOT NULL,
    schema_version INTEGER NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_events_by_item ON queue_events (queue_id, item)
"""

# Schema 3: the history is append-only in SQLite itself, whatever program writes to the file. One statement each
# (a trigger's body holds a ";", so these are not split on it).
HISTORY_TRIGGERS = tuple(
    f"CREATE TRIGGER IF NOT EXISTS {table}_append_only_{action.lower()} BEFORE {action} ON {table} "
    f"BEGIN SELECT RAISE(ABORT, 'the review history is append-only: {table} rows are never changed or removed'); END"
    for table in ("revisions", "queue_events")
    for action in ("UPDATE", "DELETE")
)


def add_adjudicators(db: sqlite3.Connection) -> None:
    """Schema 2 -> 3: the ``adjudicators`` column of ``queues`` (a JSON list; ``[]`` for queues made before)."""
    if "adjudicators" not in {row[1] for row in db.execute("PRAGMA table_info(queues)")}:
        db.execute("ALTER TABLE queues ADD COLUMN adjudicators TEXT NOT NULL DEFAULT '[]'")
