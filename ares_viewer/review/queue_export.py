"""A queue's agreement figures, its disagreements, and its export as a dataset (JSONL or Parquet).

One record per item::

    queue, item, item_kind ("episodes" or "steps"), run, episode_id, step, task_name,
    reward, outcome, why                  the episode's reward, how it ended, and why in words (``analysis.ending``)
    system_prompt, messages, request,     the exact model input of the step and its answer (as ``exports``); for
    response, reasoning, orphaned         an episode item, its last step
    changed                               True when the episode file was rewritten since the item was queued
    labels                                reviewer -> {"values", "at", "schema_version"} (each reviewer's latest)
    skips                                 reviewer -> their reason
    decision                              {"adjudicator", "values", "reason", "at", "schema_version"} or None
    label                                 the adjudicated label: the decision, else the reviewers' shared values
                                          when they all agree, else None
    agreed                                True / False when two or more reviewers labelled it, else None
    agreement                             the queue's figures per field, per option of a multiple choice (the
                                          same on every record)
    schema_version, schema                the schema's latest version and its fields

Parquet holds nested values as JSON text in ``<name>_json`` columns; ``exports.read_export`` reads either back.
"""

from __future__ import annotations

import io
import json
import math
import os
import pathlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ares_viewer.analysis import ending
from ares_viewer.review import agreement as agreement_module
from ares_viewer.review import exports, queue_items, queues
from ares_viewer.review.store import ReviewStore
from ares_viewer.runs import run as run_module


def agreement(store: ReviewStore, name: str) -> list[dict[str, Any]]:
    """Per field of the latest schema (notes left out): ``field, option, kind, method, value, items`` (``items``: those
    rated by two or more reviewers).

    A single choice uses Cohen's kappa (two reviewers on every item), Fleiss' kappa (the same number on every item)
    or Krippendorff's nominal alpha. A multiple choice gives one figure per option (``option`` names it; None for
    the other fields): each reviewer who labelled an item said yes or no to each option (choosing none is no to
    each), and that yes/no label gets the same figure. Scores use Krippendorff's interval alpha. ``value`` is None
    when it cannot be computed (too few items, or one category only).
    """
    queue, labels = queues.get(store, name), queues.latest(store, name, "label")
    out = []
    for field in queue.schema.fields:
        if field.kind == "note":
            continue
        given = [
            {r: v["values"][field.name] for r, v in by.items() if v["values"].get(field.name) is not None}
            for by in labels.values()
        ]
        parts: list[tuple[str | None, str, list[dict[str, Any]]]]  # (option, method or "" to pick one, units)
        if field.kind == "score":
            parts = [(None, "krippendorff_alpha_interval", given)]
        elif field.kind == "multiple":  # a reviewer whose schema had the field and chose nothing said no to each
            asked = [
                {r: v["values"][field.name] or [] for r, v in by.items() if field.name in v["values"]}
                for by in labels.values()
            ]
            parts = [(o, "", [{r: o in chosen for r, chosen in u.items()} for u in asked]) for o in field.options]
        else:
            parts = [(None, "", given)]
        for option, method, units in parts:
            if method:
                value = agreement_module.krippendorff_alpha(units)
            else:
                method, value = agreement_module.nominal(units)
            out.append(
                {
                    "field": field.name,
                    "option": option,
                    "kind": field.kind,
                    "method": method,
                    "value": None if math.isnan(value) else round(value, 4),
                    "items": sum(len(u) >= 2 for u in units),
                }
            )
    return out


def figure_text(figure: Mapping[str, Any]) -> str:
    """One agreement figure in words: ``Agreement on tags [edits tests]: cohen_kappa = 0.400 (4 items)``."""
    value = "–" if figure["value"] is None else f"{figure['value']:.3f}"
    what = figure["field"] + ("" if figure.get("option") is None else f" [{figure['option']}]")
    return f"Agreement on {what}: {figure['method']} = {value} ({figure['items']} items)"


def _differing(queue: queues.Queue, by_reviewer: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The fields (notes left out) on which the reviewers' latest labels differ."""
    return [
        f.name
        for f in queue.schema.fields
        if f.kind != "note"
        and len({json.dumps(v["values"].get(f.name), sort_keys=True) for v in by_reviewer.values()}) > 1
    ]


def disagreements(store: ReviewStore, name: str) -> list[dict[str, Any]]:
    """Items labelled by two or more reviewers who differ on a field: ``item, episode_id, step, fields, labels,
    decision`` (``decision`` None until an adjudicator decides)."""
    queue, listed = queues.get(store, name), queues.items(store, name)
    labels, decisions = queues.latest(store, name, "label"), queues.latest(store, name, "decision")
    out = []
    for item, by in sorted(labels.items()):
        fields = _differing(queue, by) if len(by) >= 2 else []
        if fields:
            decided = _decision(decisions.get(item))
            out.append(
                {
                    "item": item,
                    "episode_id": listed[item].episode_id,
                    "step": listed[item].step,
                    "fields": fields,
                    "labels": {r: v["values"] for r, v in sorted(by.items())},
                    "decision": decided,
                }
            )
    return out


def _decision(by_adjudicator: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """The latest decision on an item, whoever made it."""
    if not by_adjudicator:
        return None
    adjudicator, latest = max(by_adjudicator.items(), key=lambda pair: pair[1]["at"])
    return {
        "adjudicator": adjudicator,
        "values": latest["values"],
        "reason": latest["reason"],
        "at": latest["at"].isoformat(),
        "schema_version": latest["schema_version"],
    }


def export_records(store: ReviewStore, name: str, *, unfinished: bool = False) -> Iterator[dict[str, Any]]:
    """One record per item of a finished queue (see the module's docstring for the fields).

    Raises:
        queues.QueueError: when the queue is not finished (every item labelled ``overlap`` times), unless
            ``unfinished``.
    """
    queue, listed = queues.get(store, name), queues.items(store, name)
    state = queues.status(store, name)
    if not state["finished"] and not unfinished:
        raise queues.QueueError(
            f"queue {name!r} is not finished ({state['items_complete']} of {state['items']} "
            "items fully labelled): finish it, or export it as unfinished"
        )
    labels, decisions = queues.latest(store, name, "label"), queues.latest(store, name, "decision")
    skips: dict[int, dict[str, str]] = {}
    for event in queues.history(store, name).itertuples():
        if event.kind == "skip":
            skips.setdefault(int(event.item), {})[event.author] = event.payload["reason"]
    figures = agreement(store, name)
    changed = {i.item for i in queues.changed(store, name)}
    opened: dict[str, run_module.Run] = {}
    for item in listed:
        run = opened.get(item.run) or opened.setdefault(item.run, run_module.Run(item.run))
        by = labels.get(item.item, {})
        decided = _decision(decisions.get(item.item))
        agreed = None if len(by) < 2 else not _differing(queue, by)
        final = _final(decided, by, agreed, queue.overlap)
        record: dict[str, Any] = {
            "queue": queue.name,
            "item": item.item,
            "item_kind": queue.kind,
            **_model_input(run, store, item),
            "changed": item.item in changed,
            "labels": {r: {**v, "at": v["at"].isoformat()} for r, v in sorted(by.items())},
            "skips": skips.get(item.item, {}),
            "decision": decided,
            "label": final,
            "agreed": agreed,
            "agreement": figures,
            "schema_version": queue.schema_version,
            "schema": queue.schema.to_dict(),
        }
        yield record


def _final(
    decided: Mapping[str, Any] | None, by: Mapping[str, Mapping[str, Any]], agreed: bool | None, overlap: int
) -> Any:
    """The adjudicated label: the decision, else the values all reviewers gave, else a lone reviewer's (overlap 1)."""
    if decided is not None:
        return decided["values"]
    if agreed or (len(by) == 1 and overlap == 1):
        return next(iter(by.values()))["values"]
    return None


def _model_input(run: run_module.Run, store: ReviewStore, item: queue_items.Item) -> dict[str, Any]:
    """The item's step as ``exports`` gives it (exact messages and answer), with the episode's "why"."""
    step, why = item.step, None
    if item.episode_id in run:
        episode = run.episode(item.episode_id)
        why = ending.of(episode).explanation
        if step is None:
            step = max(len(episode.steps) - 1, 0)
    (found,) = exports.export_records(run, store, steps=[(item.episode_id, step or 0)])
    keep = (
        "run",
        "episode_id",
        "step",
        "task_name",
        "reward",
        "outcome",
        "system_prompt",
        "messages",
        "request",
        "response",
        "reasoning",
        "orphaned",
    )
    return {**{k: found[k] for k in keep}, "why": why}


def export_bytes(records: Iterable[Mapping[str, Any]], fmt: str) -> bytes:
    """Queue records as JSONL or Parquet bytes (Parquet: nested values as JSON text in ``<name>_json``)."""
    records = list(records)
    if fmt != "parquet":
        return exports.export_bytes(records, fmt)
    import pyarrow as pa
    import pyarrow.parquet as pq

    flat = [
        {
            (f"{k}_json" if isinstance(v, dict | list) or k in _NESTED else k): (
                json.dumps(v) if isinstance(v, dict | list) or k in _NESTED else v
            )
            for k, v in r.items()
        }
        for r in records
    ]
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(flat), sink)
    return sink.getvalue()


# Fields that are nested on some records and None on others: always JSON text, so every row has one column type.
_NESTED = frozenset({"messages", "request", "labels", "skips", "decision", "label", "agreement", "schema"})


def write_export(records: Iterable[Mapping[str, Any]], out: str | os.PathLike) -> int:
    """Write queue records to ``out`` (``*.jsonl`` or ``*.parquet``); returns how many were written."""
    records = list(records)
    pathlib.Path(out).write_bytes(export_bytes(records, exports.export_format(out)))
    return len(records)
