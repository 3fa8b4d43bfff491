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
OVERRIDDEN = ("task_name", "total_reward", "outcome", "error", "start_time", "end_time", "duration_s", "total_cost",
              "prompt_tokens", "generated_tokens", "num_actions", "nonzero_returncodes", "context_rewrites")
# The figures of a trajectory continued in another file that are the two rows' sums (``continuations``).
_SUMMED = ("num_actions", "total_cost", "prompt_tokens", "generated_tokens", "nonzero_returncodes", "context_rewrites")


@dataclasses.dataclass(frozen=True)
class Overrides:
    """Rows changed by a trial result or a verdict: ``table`` (``path``, ``_seq``, ``OVERRIDDEN``,
    ``harbor_result``, ``verdict``, as ``store.select_of`` columns; None when no row is), and the reports joined
    to their runs."""

    table: store.Columns | None
    verdicts: verdicts.Verdicts
    hidden: store.Columns | None = None
    attached: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    continued: frozenset[str] = frozenset()  # the files of trajectories joined to their continuations


@dataclasses.dataclass
class _Trial:
    """The rows of one harbor trial folder: its ATIF trajectory's, its ``result.json``'s, its agent's own logs'."""

    atif: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    logs: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def continuations(con: duckdb.DuckDBPyConnection) -> tuple[dict[tuple[str, int], dict[str, Any]],
                                                          list[dict[str, Any]]]:
    """ATIF trajectories continued in other files (the ``continued_in`` column), each joined to the trajectories
    that continue it as ``atif.continued`` joins the episodes: the figures summed, one more context rewrite, the
    outcome, error and end the last part's. Returns the joined rows by ``(path, _seq)`` and the continuations'
    rows, hidden (they are part of the episode they continue)."""
    names = {r[0] for r in con.execute("DESCRIBE raw_episodes").fetchall()}
    if "continued_in" not in names:
        return {}, []
    columns = ["path", "_seq", "format", "continued_in", *OVERRIDDEN]
    found = con.execute(f"SELECT {', '.join(columns)} FROM raw_episodes WHERE format = ? AND (continued_in IS NOT "
                        f"NULL OR path IN (SELECT continued_in FROM raw_episodes WHERE continued_in IS NOT NULL)) "
                        f"ORDER BY path, _seq", [atif.NAME]).fetchall()
    rows = [dict(zip(columns, row, strict=True)) for row in found]
    first = {row["path"]: row for row in rows if row["_seq"] == 0}
    following = {row["continued_in"] for row in rows if row["continued_in"]}
    joined: dict[tuple[str, int], dict[str, Any]] = {}
    hidden: list[dict[str, Any]] = []
    for row in rows:
        if row["continued_in"] is None or row["path"] in following:  # not the start of a chain
            continue
        seen = {row["path"]}
        part = first.get(row["continued_in"])
        while part is not None and part["path"] not in seen:
            seen.add(part["path"])
            hidden.append(part)
            for name in _SUMMED:
                if part[name] is not None:
                    row[name] = (row[name] or 0) + part[name]
            row["context_rewrites"] = (row["context_rewrites"] or 0) + 1
            row.update(outcome=part["outcome"], error=part["error"] or row["error"],
                       end_time=part["end_time"] if part["end_time"] is not None else row["end_time"])
            if row["start_time"] is not None and row["end_time"] is not None:
                row["duration_s"] = row["end_time"] - row["start_time"]
            part = first.get(part["continued_in"]) if part["continued_in"] else None
        if len(seen) > 1:  # a continuation outside the run leaves the trajectory as it is
            joined[(row["path"], row["_seq"])] = row
    return joined, hidden


def _trials(con: duckdb.DuckDBPyConnection) -> dict[str, _Trial]:
    """The rows of the run's harbor trial folders, by folder (``harbor.folder_of``)."""
    found: dict[str, _Trial] = {}
    where = "format = ? OR path LIKE '%/agent/%' OR path LIKE '%\\agent\\%'"  # few rows of a big run
    for row in _rows(con, where, [harbor.NAME]):
        folder = harbor.folder_of(row["path"], row["format"])
        if folder is None:
            continue
        trial = found.setdefault(folder, _Trial())
        if row["format"] == harbor.NAME:
            trial.result = row
        elif row["format"] == atif.NAME:
            # agent/trajectory.json's own row; its sub-agents' and other ATIF files (a continuation, a sub-agent's
            # trajectory) stay episodes of their own
            if atif.trial_folder(row["path"]) is not None and row["_seq"] == 0:
                trial.atif = row
        else:  # the agent's own log in another format (mini-swe-agent's)
            trial.logs.append(row)
    return found


def trial_rows(con: duckdb.DuckDBPyConnection, trials: Mapping[str, Mapping[str, Any]],
               continued: Mapping[tuple[str, int], dict[str, Any]] | None = None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[str]]]:
    """One episode per harbor trial, whatever files sit in its folder: its ATIF trajectory's row when it has one,
    else its ``result.json``'s (the trial from its result alone). Returns the kept rows with their trial's
    result applied, the rows hidden (the result's row beside a trajectory, the agent's own logs beside either),
    and the hidden logs by trial folder (attached to the trial's episode when it opens)."""
    changed: list[dict[str, Any]] = []
    hidden: list[dict[str, Any]] = []
    attached: dict[str, list[str]] = {}
    for folder, found in _trials(con).items():
        keeper = found.atif or found.result
        if keeper is not None and continued:  # a trajectory continued in another file: the joined row
            keeper = continued.get((keeper["path"], keeper["_seq"]), keeper)
        if keeper is None:  # an agent's log with neither a trajectory nor a result beside it: an episode itself
            continue
        hidden += [row for row in (found.result, *found.logs) if row is not None and row is not keeper]
        if found.logs:
            attached[folder] = [row["path"] for row in found.logs]
        trial = trials.get(folder)
        if trial is not None:
            harbor.apply_to_row(keeper, trial)
            keeper[store.EXPLAINED] = trial.get(harbor.EXPLAINED)  # its verifier's failing tests (``harbor.read``)
            reward = keeper["total_reward"]
            keeper["verdict"] = f"verifier ({keeper['harbor_result']})" if reward is not None else None
            changed.append(keeper)
    return changed, hidden, attached


def _rows(con: duckdb.DuckDBPyConnection, where: str, params: list[Any]) -> list[dict[str, Any]]:
    columns = ["path", "_seq", "format", *OVERRIDDEN]
    found = con.execute(f"SELECT {', '.join(columns)} FROM raw_episodes WHERE {where} ORDER BY path, _seq",
                        params).fetchall()
    return [dict(zip(columns, row, strict=True)) for row in found]


def overrides(con: duckdb.DuckDBPyConnection, reports: Mapping[str, Mapping[str, str]],
              trials: Mapping[str, Mapping[str, Any]]) -> Overrides:
    """Trial results applied to the ATIF trajectories of their folders, and the reports' verdicts to the
    trajectories that record no reward (``verdicts.join``: each report scores the run it names)."""
    continued, hidden_parts = continuations(con)
    changed, hidden, attached = trial_rows(con, trials, continued)
    changed += [row for key, row in continued.items() if all((r["path"], r["_seq"]) != key for r in changed)]
    hidden += [row for row in hidden_parts if all((r["path"], r["_seq"]) != (row["path"], row["_seq"])
                                                  for r in hidden)]
    joined = verdicts.join(reports, ())
    if reports:
        formats = sorted(verdicts.APPLIES_TO)
        rows = _rows(con, "format IN (SELECT unnest(?)) AND task_name IS NOT NULL", [formats])
        folders = [verdicts.run_folder(r["path"], r["task_name"]) for r in rows]
        joined = verdicts.join(reports, folders)
        reader = verdicts.Reader()
        for row, folder in zip(rows, folders, strict=True):
            given = verdicts.reward_for(row["format"], row["task_name"], row["total_reward"], row["path"], joined,
                                        folder=folder)
            if given is not None:
                row["total_reward"] = given[0]
                row["verdict"] = verdicts.source(given[1], given[2], given[0])
                if given[0] <= 0:  # why it is not a success, as the episode's ending says it
                    tests = reader.tests(given[2], row["task_name"])
                    row[store.EXPLAINED] = verdicts.says(given[1], tests, given[2])
                changed.append(row)
    hidden_table: store.Columns | None = None
    if hidden:
        hidden_table = {"path": ("VARCHAR", [row["path"] for row in hidden]),
                        "_seq": ("BIGINT", [row["_seq"] for row in hidden])}
    parts = frozenset(path for path, _ in continued)
    if not changed:
        return Overrides(None, joined, hidden_table, attached, parts)
    types = {"path": "VARCHAR", "_seq": "BIGINT", **{c: store.ROW_TYPES[c] for c in OVERRIDDEN},
             "harbor_result": "VARCHAR", "verdict": "VARCHAR", store.EXPLAINED: "VARCHAR"}
    return Overrides({name: (kind, [row.get(name) for row in changed]) for name, kind in types.items()}, joined,
                     hidden_table, attached, parts)


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


def renamed(con: duckdb.DuckDBPyConnection, location: str, source: str = "raw_episodes") -> Renamed:
    """The keys of repeated episode ids (the ids found twice first, a hash count; then only their rows) among the
    rows of ``source`` (the rows the run lists: none hidden as part of another episode)."""
    found = con.execute(f"""
        SELECT episode_id, path, _seq, num_actions FROM {source}
        WHERE episode_id IN (SELECT episode_id FROM {source} GROUP BY episode_id HAVING count(*) > 1)
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


def renamed_kept(con: duckdb.DuckDBPyConnection, location: str, folder: pathlib.Path, state: str | None,
                 source: str = "raw_episodes") -> Renamed:
    """:func:`renamed`, kept in the index's ``folder`` for this index ``state`` (``kept.beside``: its parts, never
    rewritten, with their size and mtime, and its location), so a fresh process opening a run of a million rollouts
    does not count its ids again (0.15 s of its first page). With no state (a part that cannot be seen), counted.
    A kept answer that cannot be read, or a folder that cannot be written, only costs the count."""

    def encode(answer: Renamed) -> dict[str, Any]:
        table = {name: values for name, (_, values) in answer.table.items()} if answer.table is not None else None
        return {"table": table, "originals": answer.originals, "warnings": answer.warnings}

    return kept.beside(folder, _KEPT, state, lambda: renamed(con, location, source), encode, _from_kept)


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
