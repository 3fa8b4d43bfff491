"""Per-step values as process-reward data: one row per estimated step of an episode, as JSONL or Parquet.

A row labels action k of an episode (the step whose state V(k) values) with its Monte Carlo value: ``episode_id``,
``task_name``, ``step``, ``system_prompt``, ``messages`` (the exact messages the model answered when it produced
action k; for step 0, the first request), ``action`` (its response text; None for step 0), ``V``, ``low``,
``high`` (the Wilson interval), ``n``, ``failed``, ``branch_ids`` (the branches counted and failed, so every
label can be traced back to its rollouts) and ``supplied`` (how many of them came with the run, computed elsewhere:
``branching.Branch.supplied``). The terminal step's recorded reward is no estimate and gets no row.
In Parquet, ``messages`` is a JSON string (message contents may be text or lists of parts).

>>> rows = process_rewards.rows(episode, branching.load(episode))
>>> process_rewards.write([episode_a, episode_b], "labels.parquet")
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterable
from typing import Any

from ares_viewer import model
from ares_viewer.counterfactual import branch_store, branching

__all__ = ["rows", "write"]


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
