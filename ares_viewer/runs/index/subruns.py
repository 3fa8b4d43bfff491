"""Runs inside a run: a folder holding several runs, each episode's run named in a ``run_id`` column.

A producer writes each run into a folder (or a file) of its own, and a folder of runs is often opened whole:
mini-swe-agent's ``output/<run_id>/<instance>/<instance>.traj.json``, Tinker log folders of
``iteration_NNNNNN/`` folders, harbor jobs of trial folders, Inspect AI logs (one ``.eval`` or ``.json`` file per
evaluation of one task). An episode's **run folder** is, read from its file's path and format alone:

- mini-swe-agent: the folder above the instance folder when the file is named after its folder
  (``<run>/<instance>/<instance>.traj.json``), else the file's folder;
- Tinker: the log folder above an ``iteration_NNNNNN`` folder;
- ATIF in a harbor trial (``<job>/<trial>/agent/trajectory.json``): the job folder;
- Inspect AI: the log file itself (without its extension): each log is one evaluation;
- any other format: the file's folder.

When the episodes lie in two run folders or more, the table has a ``run_id`` column: each run folder's path
relative to the deepest folder holding them all (``deepseek_chat_dev`` and ``deepseek_chat_dev_rerun`` for
``output/deepseek_chat_dev`` and ``output/deepseek_chat_dev_rerun``; the folder's own name for episodes lying in it).
A **sub-run** is the episodes of one ``run_id``: ``LOCATION::RUN_ID`` opens it (``split``), and every question
asked of it (``Run.queries``, ``Run.episodes``, compare-runs) sees only its episodes.

A run folder opened alone (``output/deepseek_chat_dev``) has its SWE-bench reports outside it, beside
``output/``: ``nearby_reports`` looks one and two folders above each mini-swe-agent run folder for a report that
names it (``<model>.<run_id>.json``), and says where it looked when it finds none.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from ares_viewer.base import jsondecode, locations
from ares_viewer.formats.adapters import atif, inspect_ai, mini_swe_agent, tinker
from ares_viewer.formats.sidecars import verdicts
from ares_viewer.runs.index import kept, queries, store

COLUMN = "run_id"
# ``LOCATION::RUN_ID``: one run of a folder holding several (fsspec's chained URLs put a URL after ``::``, never this).
SEPARATOR = "::"
# Files looked at in one folder above a run for its reports (a home folder may hold many).
_MAX_ENTRIES = 10_000
# Folders above a run folder looked in for its reports: ``output/<run_id>`` has them beside ``output/``.
_LEVELS_UP = 2


def split(location: str) -> tuple[str, str | None]:
    """``(location, run_id)`` of ``LOCATION::RUN_ID``; ``(location, None)`` for any other location, fsspec's chained
    URLs included (``simplecache::s3://...``, ``zip://member::/data/archive.zip``: a URL or a path from the root
    after the separator)."""
    base, sep, run_id = location.rpartition(SEPARATOR)
    if not sep or not base or not run_id or "://" in run_id or run_id.startswith(("/", "~", "\\")):
        return location, None
    return base, run_id


def _folder(path: str) -> str:
    return f"parse_dirpath({path})"


def folder_sql(path: str = "path", fmt: str = "format") -> str:
    """The SQL of an episode's run folder (the module's rules), from its file's ``path`` and ``fmt``."""
    d = _folder(path)
    return (
        f"CASE WHEN {fmt} = {store.literal(inspect_ai.NAME)} THEN regexp_replace({path}, '\\.[A-Za-z]+$', '') "
        f"WHEN {fmt} = {store.literal(mini_swe_agent.NAME)} AND starts_with(parse_filename({path}), "
        f"parse_filename({d}) || '.') THEN {_folder(d)} "
        f"WHEN {fmt} = {store.literal(tinker.NAME)} AND regexp_matches(parse_filename({d}), '^iteration_[0-9]+$') "
        f"THEN {_folder(d)} "
        f"WHEN {fmt} = {store.literal(atif.NAME)} AND parse_filename({d}) = 'agent' THEN {_folder(_folder(d))} "
        f"ELSE {d} END"
    )


def _common(folders: Sequence[str]) -> str:
    """The deepest folder holding every one of ``folders`` (by whole path components)."""
    split_up = [f.split("/") for f in folders]
    common = []
    for parts in zip(*split_up, strict=False):
        if any(p != parts[0] for p in parts):
            break
        common.append(parts[0])
    return "/".join(common)


@dataclasses.dataclass(frozen=True, slots=True)
class RunIds:
    """The run folders of a table's episodes: ``root`` (the deepest folder holding them all) and the ``run_id`` of
    each (``names``, sorted)."""

    root: str
    names: tuple[str, ...]

    def folder_of(self, run_id: str) -> str:
        """The run folder of ``run_id`` (one of ``names``)."""
        own = posixpath.basename(self.root.rstrip("/")) or self.root
        return self.root if run_id == own else f"{self.root}/{run_id}"

    def files_sql(self, run_id: str) -> str:
        """The SQL of the distinct ``path`` of the files of ``raw_episodes`` whose run is ``run_id``."""
        folder = self.folder_of(run_id)
        return (f"SELECT path FROM (SELECT DISTINCT path, format FROM raw_episodes) "
                f"WHERE ({folder_sql()}) = {store.literal(folder)}")

    def sql(self, path: str = "path", fmt: str = "format") -> str:
        """The SQL of an episode's ``run_id``."""
        folder = folder_sql(path, fmt)
        own = posixpath.basename(self.root.rstrip("/")) or self.root
        return (f"CASE WHEN ({folder}) = {store.literal(self.root)} THEN {store.literal(own)} "
                f"WHEN starts_with(({folder}), {store.literal(self.root + '/')}) "
                f"THEN substr(({folder}), {len(self.root) + 2}) ELSE ({folder}) END")


def run_folders(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """The distinct ``(run folder, format)`` of the episodes of ``raw_episodes``: one query over its distinct files
    (about 2.5 s at a million mini-swe-agent files on two busy cores; milliseconds for a Tinker run's few files)."""
    return [(str(r[0]), str(r[1])) for r in con.execute(
        f"SELECT DISTINCT {folder_sql()}, format FROM (SELECT DISTINCT path, format FROM raw_episodes) ORDER BY ALL"
    ).fetchall() if r[0] is not None]


_KEPT = "run-folders-"


def run_folders_kept(con: duckdb.DuckDBPyConnection, folder: pathlib.Path, state: str | None
                     ) -> list[tuple[str, str]]:
    """:func:`run_folders`, kept in the index's ``folder`` for this index ``state`` (``kept.beside``), so a fresh
    process opening a big run does not read every file's path again. With no state, worked out."""
    return kept.beside(folder, _KEPT, state, lambda: run_folders(con), list,
                       lambda saved: [(str(f), str(k)) for f, k in saved])


def run_ids(folders: Sequence[tuple[str, str]]) -> RunIds:
    """The ``run_id`` of each run folder (``run_folders``), relative to the deepest folder holding them all."""
    found = sorted({f for f, _ in folders})
    root = _common(found) if len(found) > 1 else (found[0] if found else "")
    return RunIds(root, tuple(sorted({_name(root, f) for f in found})))


def _name(root: str, folder: str) -> str:
    """A run folder's ``run_id``: its path below ``root``, or the root's own name."""
    if folder == root:
        return posixpath.basename(root.rstrip("/")) or root
    return folder[len(root) + 1:] if folder.startswith(root + "/") else folder


@dataclasses.dataclass(frozen=True, slots=True)
class Nearby:
    """Reports found outside the run for its mini-swe-agent run folders (``found``: path -> instance -> verdict),
    and, per run folder that none names, the folders looked in (``looked``)."""

    found: dict[str, dict[str, str]]
    looked: dict[str, tuple[str, ...]]


def _reports_in(folder: str, name: str) -> list[str]:
    """The JSON files directly in ``folder`` whose name names the run ``name`` (``<model>.<name>.json``)."""
    found = []
    try:
        with os.scandir(folder) as listing:
            for n, entry in enumerate(listing):
                if n >= _MAX_ENTRIES:
                    break
                if entry.name.endswith(f".{name}.json") and entry.is_file():
                    found.append(entry.path)
    except OSError:
        return []
    return sorted(found)


def _read_report(path: str) -> dict[str, str] | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(verdicts.MAX_REPORT_BYTES + 1)
        if len(data) > verdicts.MAX_REPORT_BYTES:
            return None
        doc = jsondecode.decode(data).value
    except (OSError, ValueError, RecursionError):
        return None
    return verdicts.read(doc, path) if verdicts.sniff(doc) else None


def _inside(path: str, location: str) -> bool:
    return path == location or path.startswith(location.rstrip("/") + "/")


def nearby_reports(folders: Sequence[tuple[str, str]], location: str, known: Mapping[str, Any]) -> Nearby:
    """The reports, outside a local ``location``, that name a mini-swe-agent run folder of its episodes (among
    ``folders``, the ``run_folders``): looked for one and two folders above each run folder
    (``<model>.<run_id>.json``), where mini-swe-agent's users keep them beside ``output/``. Reports already in the
    run (``known``) count as found; a URL is not looked around."""
    if not locations.is_local(location) or not os.path.isdir(location):
        return Nearby({}, {})
    top = os.path.abspath(location)
    runs = [f for f, kind in folders if kind == mini_swe_agent.NAME]
    found: dict[str, dict[str, str]] = {}
    looked: dict[str, tuple[str, ...]] = {}
    for folder in runs:
        name = posixpath.basename(folder)
        if any(name in verdicts.run_ids(path) for path in known):
            continue
        above, places = folder, [folder]
        for _ in range(_LEVELS_UP):
            above = os.path.dirname(above)
            if not above or above == places[-1]:
                break
            places.append(above)
            if _inside(above, top):  # walked with the run: its reports are known
                continue
            for path in _reports_in(above, name):
                if path not in known and (report := _read_report(path)) is not None:
                    found[path] = report
        if not any(name in verdicts.run_ids(path) for path in found):
            looked[folder] = tuple(places)
    return Nearby(found, looked)


def per_run(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Each run's headline figures, counted as ``Run.stats`` counts them (the success rate over the episodes the
    agent can be judged on): ``run_id``, ``episodes``, ``judged``, ``successes``, ``success_rate`` (None when none is
    judged), ``unscored``, ``infrastructure``; ``[]`` when the table has no ``run_id`` column."""
    if COLUMN not in [r[0] for r in con.execute("DESCRIBE episodes").fetchall()]:
        return []
    rows = con.execute(f"""
        SELECT {COLUMN}, count(*),
               count(*) FILTER (WHERE NOT {queries.UNSCORED} AND NOT {queries.INFRASTRUCTURE_FAILURE}),
               count(*) FILTER (WHERE NOT {queries.UNSCORED} AND {queries.SOLVED}),
               count(*) FILTER (WHERE {queries.UNSCORED}), count(*) FILTER (WHERE {queries.INFRASTRUCTURE_FAILURE})
        FROM episodes GROUP BY ALL ORDER BY 1""").fetchall()
    return [{"run_id": r[0], "episodes": int(r[1]), "judged": int(r[2]), "successes": int(r[3]),
             "success_rate": r[3] / r[2] if r[2] else None, "unscored": int(r[4]), "infrastructure": int(r[5])}
            for r in rows]


def around(location: str) -> tuple[tuple[str, int], ...]:
    """The folders above a local ``location`` that :func:`nearby_reports` may look in, with their mtimes: a report
    put there (or removed) changes them, so a table made before is made again."""
    if not locations.is_local(location):
        return ()
    found, folder = [], os.path.abspath(location)
    for _ in range(_LEVELS_UP):
        above = os.path.dirname(folder)
        if above == folder:
            break
        folder = above
        try:
            found.append((folder, os.stat(folder).st_mtime_ns))
        except OSError:
            found.append((folder, 0))
    return tuple(found)


def unscored_note(folder: str, places: Sequence[str], count: int) -> str:
    """What the run says of a mini-swe-agent run folder no report names, whose trajectories keep no reward."""
    name = posixpath.basename(folder)
    where = ", ".join(places[:-1]) + (" and " if len(places) > 1 else "") + places[-1]
    return (f"no evaluation report names run {name} (<model>.{name}.json): looked in {where}; its {count} "
            "trajectory(ies) keep no reward (unscored). Put the report in one of those folders, or open a folder "
            "holding both the run and its report")
