"""Per-step values as process-reward data: one row per estimated step of an episode, as JSONL or Parquet.

A row labels action k of an episode (the step whose state V(k) values) with its Monte Carlo value: ``episode_id``,
``task_name``, ``step``, ``system_prompt``, ``messages`` (the exact messages the model answered when it produced
action k; for step 0, the first request), ``action`` (its response text; None for step 0), ``V``, ``low``,
``high`` (the Wilson interval), ``n``, ``failed``, ``branch_ids`` (the branches counted and failed, so every
label can be traced back to its rollouts) and ``supplied`` (how many of them came with the run, computed elsewhere:
``branching.Branch.supplied``). The terminal step's recorded reward is no estimate and gets no row.
In Parquet, ``messages`` is a JSON string (message contents may be text or lists of parts).

The same values in TRL's *stepwise supervision* layout (the ``PRMTrainer``'s dataset type, as PRM800K and
Math-Shepherd are published): :func:`stepwise_rows` gives one row per run of consecutive valued actions of an
episode, ``prompt`` (str: the system prompt and the messages the model saw before the run's first action, each as
``role: content``), ``completions`` (list of str: the actions' response texts, in order) and ``labels`` (list of
bool, one per completion). **Threshold rule:** action k's label is ``V(k) >= threshold`` (default 0.5, the share
of rollouts from the state after action k that solved the task; ``threshold`` just above 0 gives Math-Shepherd's
hard label, "some rollout succeeds"). The values stay beside the labels: ``values``, ``low``, ``high``, ``n`` and
``steps`` (lists aligned with ``completions``), with ``episode_id``, ``task_name`` and ``threshold``. An action
without a value is never given a label: an episode whose valued actions have gaps (a bisection probes some steps
only) gives one row per run of consecutive valued actions, each with the context before it as its prompt. The
recorded terminal step's reward labels the last action (``n`` 0: known, not estimated).

>>> rows = process_rewards.rows(episode, branching.load(episode))
>>> process_rewards.write([episode_a, episode_b], "labels.parquet")
>>> process_rewards.write_stepwise([episode_a, episode_b], "prm.jsonl")  # datasets.load_dataset("json", ...)
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterable
from typing import Any

from ares_viewer import model
from ares_viewer.counterfactual import branch_store, branching

__all__ = ["THRESHOLD", "rows", "stepwise_rows", "write", "write_stepwise"]

THRESHOLD = 0.5


def rows(episode: model.Episode, found: branching.Search) -> list[dict[str, Any]]:
    """The labelled steps of ``episode`` from its search results (steps without a counted branch left out)."""
    out = []
    for e in found.curve:
        if e.recorded or e.value is None:
            continue
        if e.step == 0:
            messages, action = episode.observation(0) or [], None
        else:
            messages, action = episode.context(e.step), episode.step(e.step).response
        out.append(
            {
                "episode_id": episode.episode_id,
                "task_name": episode.task_name,
                "step": e.step,
                "system_prompt": episode.system_prompt,
                "messages": [m.to_dict() for m in messages],
                "action": action,
                "V": e.value,
                "low": e.low,
                "high": e.high,
                "n": e.n,
                "failed": e.failed,
                "branch_ids": [b.episode_id for b in found.of_step(e.step) if b.episode_id is not None],
                "supplied": sum(1 for b in found.of_step(e.step) if b.supplied),
            }
        )
    return out


def write(episodes: Iterable[model.Episode], path: str | os.PathLike, store: branch_store.Folder | None = None) -> int:
    """The stored values of ``episodes`` (``branching.load``, from ``store`` when given) to ``path``: ``.jsonl`` or
    ``.parquet``; the rows written.

    Raises:
        ValueError: the path ends in neither.
    """
    path = pathlib.Path(path)
    if path.suffix not in {".jsonl", ".parquet"}:
        raise ValueError(f"{path}: process-reward data is written as .jsonl or .parquet, not {path.suffix or '(none)'}")
    table = [row for episode in episodes for row in rows(episode, branching.load(episode, store))]
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as out:
            for row in table:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = [{**row, "messages": json.dumps(row["messages"], ensure_ascii=False)} for row in table]
        schema = pa.schema(
            [
                ("episode_id", pa.string()),
                ("task_name", pa.string()),
                ("step", pa.int64()),
                ("system_prompt", pa.string()),
                ("messages", pa.string()),
                ("action", pa.string()),
                ("V", pa.float64()),
                ("low", pa.float64()),
                ("high", pa.float64()),
                ("n", pa.int64()),
                ("failed", pa.int64()),
                ("branch_ids", pa.list_(pa.string())),
            ]
        )
        pq.write_table(pa.Table.from_pylist(flat, schema=schema), path)
    return len(table)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _prompt(episode: model.Episode, step: int) -> str:
    """What the model saw before action ``step``: the system prompt, then each message as ``role: content``."""
    seen = episode.context(step) if step > 0 else []
    parts = [f"system: {episode.system_prompt}"] if episode.system_prompt else []
    parts += [f"{m.role}: {_text(m.to_dict().get('content'))}" for m in seen]
    return "\n\n".join(parts)


def stepwise_rows(episode: model.Episode, found: branching.Search, threshold: float = THRESHOLD
                  ) -> list[dict[str, Any]]:
    """``episode``'s actions with a value in TRL's stepwise layout (the module's docstring): one row per run of
    consecutive valued actions."""
    valued = {e.step: e for e in found.curve if e.value is not None and e.step > 0}
    runs: list[list[int]] = []
    for step in sorted(valued):
        if runs and runs[-1][-1] == step - 1:
            runs[-1].append(step)
        else:
            runs.append([step])
    out = []
    for steps in runs:
        estimates = [valued[k] for k in steps]
        out.append({
            "prompt": _prompt(episode, steps[0]),
            "completions": [episode.step(k).response or "" for k in steps],
            "labels": [bool(e.value is not None and e.value >= threshold) for e in estimates],
            "values": [e.value for e in estimates],
            "low": [e.low for e in estimates],
            "high": [e.high for e in estimates],
            "n": [e.n for e in estimates],
            "steps": steps,
            "episode_id": episode.episode_id,
            "task_name": episode.task_name,
            "threshold": threshold,
        })
    return out


def write_stepwise(episodes: Iterable[model.Episode], path: str | os.PathLike,
                   store: branch_store.Folder | None = None, threshold: float = THRESHOLD) -> int:
    """The stored values of ``episodes`` in TRL's stepwise layout to ``path`` (``.jsonl`` or ``.parquet``, both
    loadable with ``datasets.load_dataset``); the rows written.

    Raises:
        ValueError: the path ends in neither, or the threshold is not in (0, 1].
    """
    path = pathlib.Path(path)
    if path.suffix not in {".jsonl", ".parquet"}:
        raise ValueError(f"{path}: stepwise data is written as .jsonl or .parquet, not {path.suffix or '(none)'}")
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold {threshold} is not in (0, 1]: a label says V(k) >= threshold")
    table = [row for e in episodes for row in stepwise_rows(e, branching.load(e, store), threshold)]
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as out:
            for row in table:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return len(table)
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        ("prompt", pa.string()), ("completions", pa.list_(pa.string())), ("labels", pa.list_(pa.bool_())),
        ("values", pa.list_(pa.float64())), ("low", pa.list_(pa.float64())), ("high", pa.list_(pa.float64())),
        ("n", pa.list_(pa.int64())), ("steps", pa.list_(pa.int64())), ("episode_id", pa.string()),
        ("task_name", pa.string()), ("threshold", pa.float64()),
    ])
    pq.write_table(pa.Table.from_pylist(table, schema=schema), path)
    return len(table)
