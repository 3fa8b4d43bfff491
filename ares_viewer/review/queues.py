"""Review queues: a set of episodes or steps to label, split among named reviewers, with a versioned label schema.

A queue is made from any list of items the app can express (the overview's filters, a search, a failure group, a
compare-runs list, a label): ``queue_items`` turns those into items, and
``create`` stores them with the schema, the reviewers and how many reviewers label each item (``overlap``).

- **Assignment.** With ``reviewers`` named, each item goes round robin to ``overlap`` of them (``overlap=1``: plain
  round robin). With none named, the queue is an open pool: any reviewer takes the next item that still lacks
  ``overlap`` reviewers. ``next_item`` is one write transaction, so two reviewers asking at once never get the same
  slot; a reviewer asking again gets back the item they hold.
- **History.** Labels, notes, skips, schema changes and decisions are appended to ``queue_events`` with their
  author, time and schema version; nothing is changed or removed. A relabel appends; the latest label counts.
- **Adjudication.** ``decide`` appends an adjudicator's decision beside the reviewers' labels, never over them.
- **Changed items.** Each item keeps its episode file's size and modification time; ``changed`` lists those whose
  file was rewritten since the queue was made.

>>> from ares_viewer.review import queues
>>> q = queues.create(store, "hacks", queue_items.episode_items(run, ids), schema=schema, author="ada",
...                   reviewers=["ada", "bo"], overlap=2)
>>> item = queues.next_item(store, "hacks", "ada")
>>> queues.label(store, "hacks", item.item, "ada", {"verdict": "hack"})
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ares_viewer.review import labelschema, queue_items, records
from ares_viewer.review.store import ReviewStore

KINDS = ("episodes", "steps")
EVENT_KINDS = ("create", "label", "skip", "schema", "decision")


class QueueError(records.ReviewError):
    """A queue operation that cannot be done (unknown queue, a reviewer not assigned, ...), said in words."""


@dataclasses.dataclass(frozen=True, slots=True)
class Queue:
    """A queue as stored: its settings and its schema's latest version."""

    queue_id: str
    name: str
    description: str
    kind: str
    source: dict[str, Any]
    reviewers: tuple[str, ...]
    overlap: int
    created_by: str
    created_at: float
    schema: labelschema.LabelSchema
    schema_version: int
    adjudicators: tuple[str, ...] = ()


def _clean_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > records.MAX_LABEL:
        raise ValueError(f"a queue's name is 1 to {records.MAX_LABEL} characters, not {name!r}")
    return name


def create(
    store: ReviewStore,
    name: str,
    items: Sequence[queue_items.Item],
    *,
    schema: Any,
    author: str,
    description: str = "",
    source: Mapping[str, Any] | None = None,
    reviewers: Sequence[str] = (),
    overlap: int = 1,
    adjudicators: Sequence[str] = (),
) -> Queue:
    """Store a new queue.

    Args:
        store: the review store.
        name: the queue's name (unique in the database).
        items: what to label (``queue_items.episode_items``, ``step_items``, ``label_items``).
        schema: a ``labelschema.LabelSchema``, its dict or JSON.
        author: who creates it.
        description: what the queue is for.
        source: what the items were chosen by (filters, a search...), kept for the record.
        reviewers: named reviewers (items assigned round robin), or none for an open pool.
        overlap: how many reviewers label each item.
        adjudicators: who may decide disagreements; none: anyone who did not label the item.

    Raises:
        ValueError: for an empty name or queue, a bad overlap, or a name already used.
        labelschema.SchemaError: for a schema that cannot be used.
    """
    name, author = _clean_name(name), records.clean_author(author)
    parsed = labelschema.LabelSchema.parse(schema)
    reviewers = tuple(dict.fromkeys(records.clean_author(r) for r in reviewers))
    adjudicators = tuple(dict.fromkeys(records.clean_author(r) for r in adjudicators))
    if not items:
        raise ValueError(f"queue {name!r} has no items: the filter chose nothing")
    kind = "steps" if any(i.step is not None for i in items) else "episodes"  # a queue is of what its items are
    if not isinstance(overlap, int) or overlap < 1 or (reviewers and overlap > len(reviewers)):
        raise ValueError(f"overlap is 1 to the number of reviewers ({len(reviewers) or 'any'}), not {overlap!r}")
    queue_id, now = uuid.uuid4().hex, time.time()

    def insert(db: sqlite3.Connection) -> None:
        if db.execute("SELECT 1 FROM queues WHERE name = ?", (name,)).fetchone():
            raise ValueError(f"a queue named {name!r} already exists in {store.path}")
        db.execute(
            "INSERT INTO queues (queue_id, name, description, kind, source, reviewers, overlap, created_by, "
            "created_at, adjudicators) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                queue_id,
                name,
                description,
                kind,
                json.dumps(dict(source or {})),
                json.dumps(reviewers),
                overlap,
                author,
                now,
                json.dumps(adjudicators),
            ),
        )
        db.execute(
            "INSERT INTO queue_schemas VALUES (?, 1, ?, ?, ?)", (queue_id, json.dumps(parsed.to_dict()), author, now)
        )
        db.executemany(
            "INSERT INTO queue_items VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(queue_id, i, it.run, it.episode_id, it.step, it.path, it.fingerprint) for i, it in enumerate(items)],
        )
        if reviewers:
            db.executemany(
                "INSERT INTO queue_claims VALUES (?, ?, ?, 'assigned', ?)",
                [
                    (queue_id, i, reviewers[(i * overlap + j) % len(reviewers)], now)
                    for i in range(len(items))
                    for j in range(overlap)
                ],
            )
        _event(
            db,
            queue_id,
            None,
            "create",
            author,
            now,
            1,
            {
                "description": description,
                "items": len(items),
                "reviewers": list(reviewers),
                "overlap": overlap,
                "adjudicators": list(adjudicators),
            },
        )

    store.write("creating a queue", insert)
    return get(store, name)


def _event(
    db: sqlite3.Connection,
    queue_id: str,
    item: int | None,
    kind: str,
    author: str,
    at: float,
    version: int,
    payload: Mapping[str, Any],
) -> None:
    db.execute(
        "INSERT INTO queue_events (queue_id, item, kind, author, at, schema_version, payload) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (queue_id, item, kind, author, at, version, json.dumps(payload)),
    )


_QUEUE = (
    "SELECT q.queue_id, q.name, q.description, q.kind, q.source, q.reviewers, q.overlap, q.created_by, "
    "q.created_at, s.schema, s.version, q.adjudicators FROM queues q JOIN queue_schemas s ON s.queue_id = q.queue_id "
    "WHERE s.version = (SELECT MAX(version) FROM queue_schemas WHERE queue_id = q.queue_id)"
)


def _queue(row: tuple) -> Queue:
    return Queue(
        row[0],
        row[1],
        row[2],
        row[3],
        json.loads(row[4]),
        tuple(json.loads(row[5])),
        row[6],
        row[7],
        row[8],
        labelschema.LabelSchema.parse(row[9]),
        row[10],
        tuple(json.loads(row[11])),
    )


def get(store: ReviewStore, name: str) -> Queue:
    """A queue by name.

    Raises:
        QueueError: when there is no such queue.
    """
    rows = store.select(_QUEUE + " AND q.name = ?", [name])
    if not rows:
        known = [q.name for q in all_queues(store)]
        raise QueueError(f"no queue named {name!r} in {store.path} (queues: {', '.join(known) or 'none'})")
    return _queue(rows[0])


def all_queues(store: ReviewStore) -> list[Queue]:
    """Every queue, oldest first."""
    return [_queue(row) for row in store.select(_QUEUE + " ORDER BY q.created_at, q.name")]


def items(store: ReviewStore, name: str) -> list[queue_items.Item]:
    """A queue's items, in order."""
    queue = get(store, name)
    rows = store.select(
        "SELECT item, run, episode_id, step, path, fingerprint FROM queue_items WHERE queue_id = ? ORDER BY item",
        [queue.queue_id],
    )
    return [queue_items.Item(*row) for row in rows]


def schema_versions(store: ReviewStore, name: str) -> list[labelschema.LabelSchema]:
    """Every version of a queue's schema; version ``v`` at index ``v - 1``."""
    rows = store.select(
        "SELECT schema FROM queue_schemas WHERE queue_id = ? ORDER BY version", [get(store, name).queue_id]
    )
    return [labelschema.LabelSchema.parse(row[0]) for row in rows]


def change_schema(store: ReviewStore, name: str, schema: Any, *, author: str) -> Queue:
    """Append a new schema version; labels written before keep the version they were written under."""
    queue, parsed, author = get(store, name), labelschema.LabelSchema.parse(schema), records.clean_author(author)

    def append(db: sqlite3.Connection) -> None:
        version = (
            db.execute("SELECT MAX(version) FROM queue_schemas WHERE queue_id = ?", (queue.queue_id,)).fetchone()[0] + 1
        )
        now = time.time()
        db.execute(
            "INSERT INTO queue_schemas VALUES (?, ?, ?, ?, ?)",
            (queue.queue_id, version, json.dumps(parsed.to_dict()), author, now),
        )
        _event(db, queue.queue_id, None, "schema", author, now, version, parsed.to_dict())

    store.write("changing a queue's schema", append)
    return get(store, name)


def next_item(store: ReviewStore, name: str, reviewer: str) -> queue_items.Item | None:
    """The item a reviewer works on now: the one they hold, else the next one for them; None when done.

    One write transaction: two reviewers asking at once never take the same slot of an item.

    Raises:
        QueueError: when the queue names its reviewers and ``reviewer`` is not one of them.
    """
    queue, reviewer = get(store, name), records.clean_author(reviewer)
    if queue.reviewers and reviewer not in queue.reviewers:
        raise QueueError(f"{reviewer} is not a reviewer of queue {name!r} ({', '.join(queue.reviewers)})")

    def take(db: sqlite3.Connection) -> int | None:
        held = db.execute(
            "SELECT item FROM queue_claims WHERE queue_id = ? AND reviewer = ? AND state = 'claimed' "
            "ORDER BY item LIMIT 1",
            (queue.queue_id, reviewer),
        ).fetchone()
        if held:
            return held[0]
        if queue.reviewers:
            row = db.execute(
                "SELECT item FROM queue_claims WHERE queue_id = ? AND reviewer = ? AND state = "
                "'assigned' ORDER BY item LIMIT 1",
                (queue.queue_id, reviewer),
            ).fetchone()
        else:
            row = db.execute(
                "SELECT i.item FROM queue_items i WHERE i.queue_id = ?1 AND NOT EXISTS (SELECT 1 FROM queue_claims c "
                "WHERE c.queue_id = ?1 AND c.item = i.item AND c.reviewer = ?2) AND (SELECT count(*) FROM "
                "queue_claims c WHERE c.queue_id = ?1 AND c.item = i.item AND c.state != 'skipped') < ?3 "
                "ORDER BY i.item LIMIT 1",
                (queue.queue_id, reviewer, queue.overlap),
            ).fetchone()
        if row is None:
            return None
        db.execute(
            "INSERT OR REPLACE INTO queue_claims VALUES (?, ?, ?, 'claimed', ?)",
            (queue.queue_id, row[0], reviewer, time.time()),
        )
        return row[0]

    taken = store.write("taking the next item", take)
    return None if taken is None else items(store, name)[taken]


def held(store: ReviewStore, name: str, reviewer: str) -> queue_items.Item | None:
    """The item a reviewer has taken and not yet labelled or skipped (None: none); takes nothing."""
    queue = get(store, name)
    rows = store.select(
        "SELECT item FROM queue_claims WHERE queue_id = ? AND reviewer = ? AND state = 'claimed' ORDER BY item LIMIT 1",
        [queue.queue_id, records.clean_author(reviewer)],
    )
    return items(store, name)[rows[0][0]] if rows else None


def _answer(
    store: ReviewStore,
    name: str,
    item: int,
    reviewer: str,
    kind: str,
    payload: Mapping[str, Any],
    state: str,
    doing: str,
) -> None:
    """Append a reviewer's label or skip of an item they were given, and mark their slot ``state``."""
    queue = get(store, name)

    def append(db: sqlite3.Connection) -> None:
        row = db.execute(
            "SELECT state FROM queue_claims WHERE queue_id = ? AND item = ? AND reviewer = ?",
            (queue.queue_id, item, reviewer),
        ).fetchone()
        if row is None or row[0] == "assigned":
            raise QueueError(f"item {item} of queue {name!r} is not in {reviewer}'s hands: take it with next first")
        now = time.time()
        db.execute(
            "UPDATE queue_claims SET state = ?, at = ? WHERE queue_id = ? AND item = ? AND reviewer = ?",
            (state, now, queue.queue_id, item, reviewer),
        )
        _event(db, queue.queue_id, item, kind, reviewer, now, queue.schema_version, payload)

    store.write(doing, append)


def label(store: ReviewStore, name: str, item: int, reviewer: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Record a reviewer's label of an item (under the schema's latest version); returns the values as stored.

    Raises:
        labelschema.SchemaError: for values that do not fit the schema.
        QueueError: when the reviewer was not given the item.
    """
    cleaned = get(store, name).schema.clean(values)
    _answer(store, name, item, records.clean_author(reviewer), "label", cleaned, "done", "saving a label")
    return cleaned


def skip(store: ReviewStore, name: str, item: int, reviewer: str, reason: str) -> None:
    """Pass an item over, saying why; in an open pool its slot goes to another reviewer."""
    reason = records.clean_text(reason)
    if not reason:
        raise ValueError("a skip needs a reason")
    _answer(
        store, name, item, records.clean_author(reviewer), "skip", {"reason": reason}, "skipped", "skipping an item"
    )


def decide(
    store: ReviewStore, name: str, item: int, adjudicator: str, values: Mapping[str, Any], reason: str = ""
) -> dict[str, Any]:
    """Record an adjudicator's decision on an item, beside (never over) its reviewers' labels.

    A decision sets only the fields given a value (a multiple choice given ``[]`` is set to none of its options);
    the other fields of the item's final label stay what the reviewers agree on (``queue_export.final_label``).

    Raises:
        labelschema.SchemaError: for a value that does not fit, a field the schema lacks, or no field set.
    """
    queue, adjudicator = get(store, name), records.clean_author(adjudicator)
    cleaned = queue.schema.clean_partial(values)
    if not cleaned:
        raise labelschema.SchemaError("a decision sets at least one field")
    if not 0 <= item < len(items(store, name)):
        raise QueueError(f"queue {name!r} has no item {item}")
    if queue.adjudicators and adjudicator not in queue.adjudicators:
        raise QueueError(
            f"{adjudicator} is not an adjudicator of queue {name!r} ({', '.join(queue.adjudicators)} decide)"
        )
    if adjudicator in latest(store, name, "label").get(item, {}):
        raise QueueError(f"{adjudicator} labelled item {item}: its disagreement is decided by someone who did not")

    def append(db: sqlite3.Connection) -> None:
        _event(
            db,
            queue.queue_id,
            item,
            "decision",
            adjudicator,
            time.time(),
            queue.schema_version,
            {"values": cleaned, "reason": records.clean_text(reason)},
        )

    store.write("saving a decision", append)
    return cleaned


def history(store: ReviewStore, name: str) -> pd.DataFrame:
    """Every event of a queue, oldest first: ``event, item, kind, author, at (UTC), schema_version, payload``."""
    rows = store.select(
        "SELECT event, item, kind, author, at, schema_version, payload FROM queue_events "
        "WHERE queue_id = ? ORDER BY event",
        [get(store, name).queue_id],
    )
    frame = pd.DataFrame(rows, columns=["event", "item", "kind", "author", "at", "schema_version", "payload"])
    frame["at"] = pd.to_datetime(frame["at"], unit="s", utc=True)
    frame["payload"] = [json.loads(p) for p in frame["payload"]]
    return frame


def latest(store: ReviewStore, name: str, kind: str) -> dict[int, dict[str, dict[str, Any]]]:
    """Item -> author -> their latest ``kind`` event (``label`` or ``decision``): values, time, schema version."""
    found: dict[int, dict[str, dict[str, Any]]] = {}
    for row in history(store, name).itertuples():
        if row.kind == kind:
            values = row.payload["values"] if kind == "decision" else row.payload
            found.setdefault(int(row.item), {})[row.author] = {
                "values": values,
                "at": row.at,
                "schema_version": int(row.schema_version),
                **({"reason": row.payload.get("reason", "")} if kind == "decision" else {}),
            }
    return found


def progress(store: ReviewStore, name: str) -> pd.DataFrame:
    """Per reviewer: ``reviewer, assigned, done, skipped, in_hand, left`` (``left``: assigned, not yet taken)."""
    rows = store.select(
        "SELECT reviewer, state, count(*) FROM queue_claims WHERE queue_id = ? GROUP BY 1, 2",
        [get(store, name).queue_id],
    )
    table: dict[str, dict[str, int]] = {}
    for reviewer, state, count in rows:
        table.setdefault(reviewer, {})[state] = count
    out = [
        {
            "reviewer": r,
            "assigned": sum(s.values()),
            "done": s.get("done", 0),
            "skipped": s.get("skipped", 0),
            "in_hand": s.get("claimed", 0),
            "left": s.get("assigned", 0),
        }
        for r, s in sorted(table.items())
    ]
    return pd.DataFrame(out, columns=["reviewer", "assigned", "done", "skipped", "in_hand", "left"])


def status(store: ReviewStore, name: str) -> dict[str, Any]:
    """The queue's progress: items, labels wanted and given, items fully labelled, decided, changed, finished."""
    queue, listed = get(store, name), items(store, name)
    labelled = latest(store, name, "label")
    decided = latest(store, name, "decision")
    complete = sum(len(labelled.get(i.item, {})) >= queue.overlap for i in listed)
    return {
        "queue": queue.name,
        "items": len(listed),
        "overlap": queue.overlap,
        "labels_wanted": len(listed) * queue.overlap,
        "labels_given": sum(len(by) for by in labelled.values()),
        "items_complete": complete,
        "items_decided": len(decided),
        "changed": len(changed(store, name)),
        "finished": complete == len(listed),
        "schema_version": queue.schema_version,
    }


def changed(store: ReviewStore, name: str) -> list[queue_items.Item]:
    """Items whose episode file was rewritten (or removed) since they were queued."""
    return [
        i for i in items(store, name) if i.fingerprint is not None and queue_items.fingerprint(i.path) != i.fingerprint
    ]
