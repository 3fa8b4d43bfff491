"""A queue's agreement figures, its disagreements, and its export as a dataset (JSONL or Parquet).

One record per item::

    queue, item, item_kind ("episodes" or "steps"), run, episode_id, step, task_name,
    reward, outcome, why                  the episode's reward, how it ended, and why in words (``analysis.ending``)
    system_prompt, messages, request,     the exact model input of the step and its answer (as ``exports``); for
    response, reasoning, orphaned         an episode item, its last step
    prompt_token_ids, ..., context_messages  what the model ran on, from a linked capture (``exports``)
    changed                               True when the episode file was rewritten since the item was queued
    labels                                reviewer -> {"values", "at", "schema_version"} (each reviewer's latest)
    skips                                 reviewer -> their reason
    decision                              {"adjudicator", "values", "reason", "at", "schema_version", "by"} or
                                          None: every decision on the item folded in time order (``decisions``)
    label                                 the final label (``final_label``): every field the reviewers agree on
                                          (a multiple choice: the options all of them chose), the decision's
                                          fields over them; None while a required field is left undecided
    undecided                             the fields (``tags [edits tests]`` for an option) the reviewers differ
                                          on that no decision sets
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

from ares_viewer.activations import model_input
from ares_viewer.analysis import ending
from ares_viewer.model import render
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
    value = render.UNKNOWN if figure["value"] is None else f"{figure['value']:.3f}"
    what = figure["field"] + ("" if figure.get("option") is None else f" [{figure['option']}]")
    return f"Agreement on {what}: {figure['method']} = {value} ({figure['items']} items)"


def _values_differ(name: str, by_reviewer: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the reviewers' latest labels give the field ``name`` different values."""
    return len({json.dumps(v["values"].get(name), sort_keys=True) for v in by_reviewer.values()}) > 1


def _differing(queue: queues.Queue, by_reviewer: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The fields (notes left out) on which the reviewers' latest labels differ."""
    return [f.name for f in queue.schema.fields if f.kind != "note" and _values_differ(f.name, by_reviewer)]


def final_label(
    queue: queues.Queue, by: Mapping[str, Mapping[str, Any]], decided: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """An item's final label and the fields left undecided, from its reviewers' latest labels and its decision.

    Each field takes the decision's value where the decision sets it, else what the reviewers agree on
    (``agreed_values``). The label is None until enough reviewers labelled the item (``overlap``; a lone reviewer's
    label is final only in a queue of one reviewer per item) unless a decision was made, and while a required field
    is undecided; a difference in an optional field never nulls it.
    """
    chosen = {k: v for k, v in (decided["values"] if decided else {}).items() if v is not None}
    if not chosen and len(by) < max(queue.overlap, 1):
        return None, []
    label, undecided = agreed_values(queue, by)
    label.update(chosen)
    undecided = [u for u in undecided if not any(u == name or u.startswith(f"{name} [") for name in chosen)]
    if any(f.required and label.get(f.name) is None for f in queue.schema.fields):
        return None, undecided
    return label, undecided


def agreed_values(queue: queues.Queue, by: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The fields an item's reviewers agree on, and those they differ on (what an adjudicator decides).

    A field takes the value every reviewer gave. A multiple choice they differ on keeps the options all of them
    chose, and each option only some chose is listed (``tags [skips tests]``); any other field they differ on is
    None and listed, but a note (never compared) is None and not listed.
    """
    label: dict[str, Any] = {}
    differ: list[str] = []
    for field in queue.schema.fields:
        values = [v["values"].get(field.name) for v in by.values()]
        if values and not _values_differ(field.name, by):
            label[field.name] = values[0]
        elif field.kind == "multiple" and values:
            sets = [set(v or ()) for v in values]
            label[field.name] = [o for o in field.options if all(o in s for s in sets)]
            differ += [
                f"{field.name} [{o}]"
                for o in field.options
                if any(o in s for s in sets) and not all(o in s for s in sets)
            ]
        else:
            label[field.name] = None
            if field.kind != "note" and values:
                differ.append(field.name)
    return label, differ


def disagreements(store: ReviewStore, name: str) -> list[dict[str, Any]]:
    """Items labelled by two or more reviewers who differ on a field: ``item, episode_id, step, fields, labels,
    agreed_values, decision`` (``agreed_values``: the fields they agree on, what a decision starts from;
    ``decision`` None until an adjudicator decides)."""
    queue, listed = queues.get(store, name), queues.items(store, name)
    labels, decided_on = queues.latest(store, name, "label"), decisions(store, name)
    out = []
    for item, by in sorted(labels.items()):
        fields = _differing(queue, by) if len(by) >= 2 else []
        if fields:
            decided = decided_on.get(item)
            out.append(
                {
                    "item": item,
                    "episode_id": listed[item].episode_id,
                    "step": listed[item].step,
                    "fields": fields,
                    "labels": {r: v["values"] for r, v in sorted(by.items())},
                    "agreed_values": agreed_values(queue, by)[0],
                    "decision": decided,
                }
            )
    return out


def decisions(store: ReviewStore, name: str) -> dict[int, dict[str, Any]]:
    """Item -> its decision: every decision on it folded in time order, each setting only its own fields.

    ``{"adjudicator", "values", "reason", "at", "schema_version"}`` name the latest decision; ``values`` holds every
    field any decision set (a later one wins); ``by`` lists each decision: adjudicator, values, reason, time.
    """
    out: dict[int, dict[str, Any]] = {}
    for event in queues.history(store, name).itertuples():
        if event.kind != "decision":
            continue
        values = {k: v for k, v in event.payload["values"].items() if v is not None}
        made = {
            "adjudicator": event.author,
            "values": values,
            "reason": event.payload.get("reason", ""),
            "at": event.at.isoformat(),
        }
        folded = out.setdefault(int(event.item), {"values": {}, "by": []})
        folded["values"] = {**folded["values"], **values}
        folded["by"].append(made)
        folded.update({k: made[k] for k in ("adjudicator", "reason", "at")}, schema_version=int(event.schema_version))
    return out


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
    labels, decided_on = queues.latest(store, name, "label"), decisions(store, name)
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
        decided = decided_on.get(item.item)
        agreed = None if len(by) < 2 else not _differing(queue, by)
        final, undecided = final_label(queue, by, decided)
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
            "undecided": undecided,
            "agreed": agreed,
            "agreement": figures,
            "schema_version": queue.schema_version,
            "schema": queue.schema.to_dict(),
        }
        yield record


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
        *model_input.FIELDS,
        "context_messages",
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
_NESTED = frozenset({"messages", "request", "labels", "skips", "decision", "label", "agreement", "schema",
                     "context_messages", "prompt_token_ids"})


def write_export(records: Iterable[Mapping[str, Any]], out: str | os.PathLike) -> int:
    """Write queue records to ``out`` (``*.jsonl`` or ``*.parquet``); returns how many were written."""
    records = list(records)
    pathlib.Path(out).write_bytes(export_bytes(records, exports.export_format(out)))
    return len(records)
