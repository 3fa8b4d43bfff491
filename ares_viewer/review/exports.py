"""Exports of reviewed steps: one record per marked step with the exact model input, as JSONL or Parquet; with the
tokens the model ran on, their clipping and (on request) the step's hook arrays where a capture is linked."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import pathlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ares_viewer import activations
from ares_viewer.activations import model_input
from ares_viewer.review.orphans import StepRange
from ares_viewer.review.records import Note, fold, format_time, run_key
from ares_viewer.review.store import ReviewStore
from ares_viewer.runs import run as run_module

EXPORT_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


class ExportError(ValueError):
    """An export cannot be written (unknown format, missing optional dependency)."""


def _note_record(note: Note) -> dict[str, Any]:
    return {"note_id": note.note_id, "label": note.label, "text": note.text, "author": note.author,
            "updated_at": format_time(note.updated_at), "revision": note.revision, "path": note.path}


def _linked(episode: Any, cache: dict[str, Any]) -> activations.Linked | str:
    """The episode's capture (once per episode), or why there is none."""
    if episode.episode_id not in cache:
        try:
            found: activations.Linked | str | None = activations.find(episode)
        except activations.Error as exc:
            found = f"the capture cannot be read: {exc}"
        cache[episode.episode_id] = found if found is not None else \
            "no activation capture for this episode: the tokens the model ran on are not recorded"
    return cache[episode.episode_id]


def _model_input(record: dict[str, Any], episode: Any, step: int, cache: dict[str, Any],
                 activations_dir: str | os.PathLike | None) -> None:
    """The capture's fields of a record (``model_input.FIELDS``), its messages as the model saw them, and its
    hook arrays written under ``activations_dir`` when asked."""
    linked = _linked(episode, cache) if step >= 1 else "step 0 has no model call"
    if isinstance(linked, str):
        record.update(model_input.empty(linked))
        return
    found, seen = model_input.fields(linked, step, record["messages"])
    record.update(found)
    if found["clipped"]:
        record["context_messages"], record["messages"] = record["messages"], seen
    if activations_dir is not None:
        folder = pathlib.Path(activations_dir) / _safe(episode.episode_id) / f"step_{step:04d}"
        try:
            record["activations"] = model_input.write_hooks(linked, step, folder)
        except activations.Error as exc:
            record["activations"] = {"error": str(exc)}


def _safe(name: str) -> str:
    """An episode id as one folder name."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name).lstrip(".") or "_"


def export_records(run: run_module.Run, store: ReviewStore, *, labels: Iterable[str] | None = None,
                   steps: Iterable[tuple[str, int]] | None = None,
                   activations_dir: str | os.PathLike | None = None) -> Iterator[dict[str, Any]]:
    """One record per marked step, with the exact model input of that step.

    Which steps: those given in ``steps`` (``(episode_id, step)``), else those carrying any of
    ``labels`` (in any case: ``fold``), else every step with a live note or label.

    Each record: ``run`` (the run key), ``episode_id``, ``task_name``, ``step``, ``reward`` (the episode's reward),
    ``outcome`` (why it ended: ``completed``, ``truncated``...), ``labels``,
    ``notes`` (dicts), ``orphaned`` (why the step is gone, else None), ``system_prompt``,
    ``messages`` (``[m.to_dict() for m in episode.context(step)]``: the file's own message dicts, so
    ``system_prompt`` + ``messages`` rebuild the model input byte for byte), ``request`` (sampling
    settings of the request), ``response`` (the model's answer) and ``reasoning`` (the reasoning it returned
    apart from the answer, "" when none). Step 0 (FIRST) has no answer: its ``messages`` are the first request
    and its ``response`` and ``reasoning`` are None.

    What the model ran on, from the episode's activation capture (``activations.find``; all None, and
    ``clipping`` saying why, without one): ``prompt_token_ids``, ``prompt_text`` (decoded with the capture's
    tokenizer when one loads offline, else the recorded tokens joined, else None) and ``prompt_text_source``,
    ``tokenizer`` (its folder, or ``"unknown"``), ``clipped`` (True, False or None: unknown), ``clipped_end``
    (``"start"``, ``"end"``, ``"start and end"``, None) and ``clipping`` (the evidence, ``activations.clipping``),
    ``system_prompt_seen`` (whether the prompt held the system prompt: True, False or None),
    ``capture`` and ``capture_step``. A clipped step's ``messages`` are the messages as the model saw them (the cut
    one holds its seen part and ``"cut"``; None when the text cannot tell) and ``context_messages`` the whole
    context; otherwise ``context_messages`` is None and ``messages`` is the whole context. With
    ``activations_dir``, the step's hook arrays are written as ``<dir>/<episode>/step_NNNN/<hook>.npy`` and
    ``activations`` says where (``{"folder", "capture_step", "hooks"}``, or ``{"error"}``); else it is None.
    """
    notes = store.find(run)
    wanted = {fold(label) for label in (labels or ()) if label}
    if steps is not None:
        chosen = list(dict.fromkeys((str(e), int(s)) for e, s in steps))
    else:
        marked = [n for n in notes if not wanted or (n.label and fold(n.label) in wanted)]
        chosen = list(dict.fromkeys((n.episode_id, n.step) for n in marked))
    by_step: dict[tuple[str, int], list[Note]] = {}
    for note in notes:
        by_step.setdefault((note.episode_id, note.step), []).append(note)
    key = run_key(run)
    step_range = StepRange(run, (e for e, _ in chosen))
    captures: dict[str, Any] = {}
    for episode_id, step in chosen:
        attached = by_step.get((episode_id, step), [])
        record: dict[str, Any] = {
            "run": key, "episode_id": episode_id, "task_name": None, "step": step, "reward": None, "outcome": None,
            "labels": sorted({n.label for n in attached if n.label}),
            "notes": [_note_record(n) for n in attached],
            "orphaned": step_range.reason(episode_id, step),
            "system_prompt": None, "messages": None, "request": None, "response": None, "reasoning": None,
            **model_input.empty("the step is gone"), "context_messages": None, "activations": None,
        }
        if record["orphaned"] is None:
            episode = run.episode(episode_id)
            action = step if step >= 1 else 1
            context = episode.context(action) if action < len(episode.steps) else []
            record.update(task_name=episode.task_name, reward=episode.total_reward, outcome=str(episode.outcome),
                          system_prompt=episode.system_prompt,
                          messages=[m.to_dict() for m in context], request=episode.metadata.get("request"),
                          response=episode.step(step).response if step >= 1 else None,
                          reasoning=episode.step(step).reasoning if step >= 1 else None)
            _model_input(record, episode, step, captures, activations_dir)
        yield record


def parquet_available() -> bool:
    """True when pyarrow is installed, so Parquet exports can be written."""
    return importlib.util.find_spec("pyarrow") is not None


def export_format(out: str | os.PathLike) -> str:
    """``jsonl`` or ``parquet``, from a file name's suffix."""
    suffix = pathlib.Path(out).suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise ExportError(f"cannot tell the export format from {os.fspath(out)!r}: name it *.jsonl or *.parquet")
    return EXPORT_FORMATS[suffix]


def export_bytes(records: Iterable[Mapping[str, Any]], fmt: str) -> bytes:
    """Records as a JSONL or Parquet file's bytes.

    JSONL: one JSON object per line, written with Python's ``json`` (ASCII-escaped, so any string
    round-trips). Parquet (needs pyarrow) has the same columns, with ``notes``, ``messages``, ``request``,
    ``context_messages`` and ``activations`` held as JSON text in ``notes_json``, ``messages_json``,
    ``request_json``, ``context_messages_json`` and ``activations_json``.

    Raises:
        ExportError: for an unknown format, or Parquet without pyarrow.
    """
    records = list(records)
    if fmt == "jsonl":
        return b"".join(json.dumps(r).encode("ascii") + b"\n" for r in records)
    if fmt != "parquet":
        raise ExportError(f"unknown export format {fmt!r}: jsonl or parquet")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ExportError("writing Parquet needs pyarrow: pip install 'ares-viewer[parquet]' "
                          "(or export to a .jsonl file)") from exc
    columns: dict[str, list[Any]] = {name: [] for name in (
        "run", "episode_id", "task_name", "step", "reward", "outcome", "labels", "orphaned", "system_prompt",
        "response", "reasoning", "notes_json", "messages_json", "request_json", "prompt_token_ids", "prompt_text",
        "prompt_text_source", "tokenizer", "clipped", "clipped_end", "clipping", "system_prompt_seen", "capture",
        "capture_step",
        "context_messages_json", "activations_json")}
    for record in records:
        for name in columns:
            if name.endswith("_json"):
                value = record.get(name.removesuffix("_json"))
                columns[name].append(None if value is None else json.dumps(value))
            else:
                columns[name].append(record.get(name))
    schema = pa.schema([("run", pa.string()), ("episode_id", pa.string()), ("task_name", pa.string()),
                        ("step", pa.int64()), ("reward", pa.float64()), ("outcome", pa.string()),
                        ("labels", pa.list_(pa.string())), ("orphaned", pa.string()),
                        ("system_prompt", pa.string()), ("response", pa.string()), ("reasoning", pa.string()),
                        ("notes_json", pa.string()),
                        ("messages_json", pa.string()), ("request_json", pa.string()),
                        ("prompt_token_ids", pa.list_(pa.int64())), ("prompt_text", pa.string()),
                        ("prompt_text_source", pa.string()), ("tokenizer", pa.string()), ("clipped", pa.bool_()),
                        ("clipped_end", pa.string()), ("clipping", pa.string()),
                        ("system_prompt_seen", pa.bool_()), ("capture", pa.string()),
                        ("capture_step", pa.int64()), ("context_messages_json", pa.string()),
                        ("activations_json", pa.string())])
    sink = io.BytesIO()
    pq.write_table(pa.table(columns, schema=schema), sink)
    return sink.getvalue()


def write_export(records: Iterable[Mapping[str, Any]], out: str | os.PathLike) -> int:
    """Write records to ``out`` (format from its suffix); returns how many were written."""
    records = list(records)
    data = export_bytes(records, export_format(out))
    pathlib.Path(out).write_bytes(data)
    return len(records)


def read_export(path: str | os.PathLike) -> list[dict[str, Any]]:
    """An export read back as the records ``export_records`` made (Parquet's JSON columns decoded)."""
    if export_format(path) == "jsonl":
        with open(path, encoding="ascii") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    import pyarrow.parquet as pq

    out = []
    for row in pq.read_table(path).to_pylist():
        for name in [n for n in row if n.endswith("_json")]:
            value = row.pop(name)
            row[name.removesuffix("_json")] = None if value is None else json.loads(value)
        out.append(row)
    return out
