"""What the run adds to its files' rows: harbor trial results, evaluation reports' verdicts, and keys for episode
ids found in several files.

Each concerns few rows (ATIF trajectories in trial folders, mini-swe-agent trajectories, repeated ids): those are
read from DuckDB, worked out by the same functions the rest of the library uses (``formats.harbor``,
``verdicts``), and handed back as small tables that the episode view joins by ``(path, _seq)``. A run of
millions of rollouts with none of them joins nothing.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping
from typing import Any

import duckdb

from ares_viewer.base import locations
from ares_viewer.formats.adapters import atif
from ares_viewer.formats.sidecars import harbor, verdicts
from ares_viewer.runs.index import kept, store

# The columns a trial result or a report's verdict may change; the view takes them from ``overrides``.
OVERRIDDEN = ("task_name", "total_reward", "outcome", "error", "start_time", "end_time", "duration_s", "total_cost")


@dataclasses.dataclass(frozen=True)
class Overrides:
    """Rows changed by a trial result or a verdict: ``table`` (``path``, ``_seq``, ``OVERRIDDEN``,
    ``harbor_result``, ``verdict``, as ``store.select_of`` columns; None when no row is), and the reports joined
    to their runs."""

    table: store.Columns | None
    verdicts: verdicts.Verdicts


def _rows(con: duckdb.DuckDBPyConnection, where: str, params: list[Any]) -> list[dict[str, Any]]:
    columns = ["path", "_seq", "format", *OVERRIDDEN]
    found = con.execute(f"SELECT {', '.join(columns)} FROM raw_episodes WHERE {where} ORDER BY path, _seq",
                        params).fetchall()
    return [dict(zip(columns, row, strict=True)) for row in found]


def overrides(con: duckdb.DuckDBPyConnection, reports: Mapping[str, Mapping[str, str]],
              trials: Mapping[str, Mapping[str, Any]]) -> Overrides:
    """Trial results applied to the ATIF trajectories of their folders, and the reports' verdicts to the
    trajectories that record no reward (``verdicts.join``: each report scores the run it names)."""
    changed: list[dict[str, Any]] = []
    if trials:
        for row in _rows(con, "format = ? AND path LIKE '%trajectory.json'", [atif.NAME]):
            trial = harbor.trial_of(row["path"], row["format"], trials)
            if trial is not None:
                harbor.apply_to_row(row, trial)
                reward = row["total_reward"]
                row["verdict"] = f"verifier ({row['harbor_result']})" if reward is not None else None
                changed.append(row)
    joined = verdicts.join(reports, ())
    if reports:
        formats = sorted(verdicts.APPLIES_TO)
        rows = _rows(con, "format IN (SELECT unnest(?)) AND task_name IS NOT NULL", [formats])
        joined = verdicts.join(reports, (verdicts.run_folder(r["path"], r["task_name"]) for r in rows))
        for row in rows:
            given = verdicts.reward_for(row["format"], row["task_name"], row["total_reward"], row["path"], joined)
            if given is not None:
                row["total_reward"] = given[0]
                row["verdict"] = verdicts.source(given[1], given[2], given[0])
                changed.append(row)
    if not changed:
        return Overrides(None, joined)
    types = {"path": "VARCHAR", "_seq": "BIGINT", **{c: store.ROW_TYPES[c] for c in OVERRIDDEN},
             "harbor_result": "VARCHAR", "verdict": "VARCHAR"}
    return Overrides({name: (kind, [row.get(name) for row in changed]) for name, kind in types.items()}, joined)


def relative(path: str, location: str) -> str:
    """``path`` relative to the run's location when it lies inside it (else whole)."""
    if not locations.is_local(path):
        root = location.rstrip("/")
        return path[len(root) + 1:] if path.startswith(root + "/") else path
    try:
        rel = os.path.relpath(path, location if os.path.isdir(location) else os.path.dirname(location))
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


@dataclasses.dataclass(frozen=True)
class Renamed:
    """Episode ids found in several files: every episode is kept, the likeliest real one (named by its id, else
    with the most actions, else first in run order) under its id and each other one under ``{id}@{its path}``.

    ``table``: ``path``, ``_seq``, ``episode_id`` (the key) of the renamed rows, as ``store.select_of`` columns
    (None when no id repeats);
    ``originals``: key -> the id in the file; ``warnings``: ``(path, message)``, one per repeated id."""

    table: store.Columns | None
    originals: dict[str, str]
    warnings: list[tuple[str, str]]


def renamed(con: duckdb.DuckDBPyConnection, location: str) -> Renamed:
    """The keys of repeated episode ids (the ids found twice first, a hash count; then only their rows)."""
    found = con.execute("""
        SELECT episode_id, path, _seq, num_actions FROM raw_episodes
        WHERE episode_id IN (SELECT episode_id FROM raw_episodes GROUP BY episode_id HAVING count(*) > 1)
        ORDER BY path, _seq""").fetchall()
    if not found:
        return Renamed(None, {}, [])
    by_id: dict[str, list[tuple[str, str, int, int]]] = {}
    for row in found:
        by_id.setdefault(row[0], []).append(row)
    paths, seqs, keys = [], [], []
    originals: dict[str, str] = {}
    warnings = []
    for original, rows in by_id.items():
        ranked = sorted(rows, key=lambda r: (os.path.basename(r[1]).split(".")[0] != original, -(r[3] or 0)))
        keeper = ranked[0]
        for _, path, seq, _ in ranked[1:]:
            key = f"{original}@{relative(path, location)}"
            paths.append(path)
            seqs.append(seq)
            keys.append(key)
            originals[key] = original
        listed = [r[1] for r in rows]
        warnings.append((keeper[1], f"episode id {original} appears in {len(listed)} files: {listed}; this one "
                                    f"keeps the id, the others are listed as {original}@<path>"))
    return Renamed(_renamed_table(paths, seqs, keys), originals, warnings)


def _renamed_table(paths: list[str], seqs: list[int], keys: list[str]) -> store.Columns:
    """The renamed rows as ``store.select_of`` columns: each row's file and place in it, and its key."""
    return {"path": ("VARCHAR", paths), "_seq": ("BIGINT", seqs), "episode_id": ("VARCHAR", keys)}


_KEPT = "renamed-"


def renamed_kept(con: duckdb.DuckDBPyConnection, location: str, folder: pathlib.Path, state: str | None) -> Renamed:
    """:func:`renamed`, kept in the index's ``folder`` for this index ``state`` (``kept.beside``: its parts, never
    rewritten, with their size and mtime, and its location), so a fresh process opening a run of a million rollouts
    does not count its ids again (0.15 s of its first page). With no state (a part that cannot be seen), counted.
    A kept answer that cannot be read, or a folder that cannot be written, only costs the count."""

    def encode(answer: Renamed) -> dict[str, Any]:
        table = {name: values for name, (_, values) in answer.table.items()} if answer.table is not None else None
        return {"table": table, "originals": answer.originals, "warnings": answer.warnings}

    return kept.beside(folder, _KEPT, state, lambda: renamed(con, location), encode, _from_kept)


def _from_kept(saved: dict[str, Any]) -> Renamed:
    table = saved["table"]
    columns: store.Columns | None = None
    if table is not None:
        paths, seqs, keys = (list(table[name]) for name in ("path", "_seq", "episode_id"))
        if not (len(paths) == len(seqs) == len(keys)) or not all(isinstance(s, int) for s in seqs) \
                or not all(isinstance(text, str) for text in (*paths, *keys)):
            raise ValueError("a kept answer of another shape")
        columns = _renamed_table(paths, seqs, keys)
    originals = {str(k): str(v) for k, v in saved["originals"].items()}
    warnings = [(str(path), str(message)) for path, message in saved["warnings"]]
    return Renamed(columns, originals, warnings)
