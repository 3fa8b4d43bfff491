"""A run's episode table as a DuckDB view over its index's partitions, with what the run adds to the rows.

The view ``episodes`` has the public columns, plus ``warnings`` and ``_seq`` (a row's place in its file;
run order is ``path, _seq``). Harbor trial results, evaluation reports' verdicts (and the ``verdict`` column
saying where each reward came from) and the keys of repeated episode ids are joined in (``joins``). Nothing is
loaded into Python until asked for.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from ares_viewer.formats.sidecars import harbor, verdicts
from ares_viewer.runs import sources
from ares_viewer.runs.index import joins, kept, queries, store, subruns

if TYPE_CHECKING:
    import pandas as pd


# A run of at most this many episodes is copied into memory when its table is made (a few MB): a query then reads
# no file (the episode list of 300 episodes in 3 ms instead of 8 to 20), and no partition replaced by another
# process can fail it. A larger run is a view over its partitions, read by each query.
IN_MEMORY_ROWS = 20_000
# Each table's ``key``: never the same for two tables of one process, so what is kept of one table's answers is never
# taken for another's (an object's ``id`` can come back after it is collected).
_KEYS = itertools.count()


def _empty_select() -> str:
    typed = ", ".join(f"NULL::{store.ROW_TYPES[name]} AS {name}" for name in store.EPISODE_COLUMNS)
    return f"SELECT {typed}, []::VARCHAR[] AS warnings, 0::BIGINT AS _seq WHERE false"


class EpisodeTable:
    """The episode rows of one index state; ``columns`` are the public ones (common first, then the others).

    Attributes:
        reports: evaluation reports (path -> instance id -> verdict); ``verdicts``: them joined to their runs.
        trials: harbor trial results by trial folder.
        originals: the key of an episode listed under ``{id}@{path}`` -> its id in the file.
        notes: ``(path, message)`` warnings of the run as a whole (reports applied by location, repeated ids).
        errors: ``(path, reason)`` of reports that disagree.
        key: this table's own number in the process (what ``Run.queries`` keeps its answers under).
        state: a big run's index state (``kept.state``: its answers are kept on disk under it in ``folder``, the
            index's own); None for a run small enough to ask again.
        run_ids: the run folders of the episodes (``subruns``): with two or more, the view has a ``run_id`` column.
        sub_run: the one run of them this table shows (``LOCATION::RUN_ID``), or None for all.
    """

    def __init__(self, target: store.Store, entries: Mapping[str, store.FileEntry], location: str = "",
                 sub_run: str | None = None) -> None:
        self.con = store.database()
        self.key = next(_KEYS)
        self._lock = threading.Lock()
        parts = target.live_parts(entries)
        self.reports: dict[str, dict[str, str]] = {
            p: orjson.loads(e.verdicts) for p, e in sorted(entries.items()) if e.kind == "verdicts" and e.verdicts}
        self.trials: dict[str, dict[str, Any]] = {}
        for path, entry in sorted(entries.items()):
            if entry.kind == "trial" and entry.trial and harbor.is_result(path):  # an index of older versions
                trial = orjson.loads(entry.trial)
                self.trials[trial["folder"]] = trial
        source = f"read_parquet({parts!r}, union_by_name = true)" if parts else f"({_empty_select()})"
        small = sum(e.rows for e in entries.values() if e.part) <= IN_MEMORY_ROWS
        self.con.execute(f"CREATE {'TABLE' if small else 'VIEW'} raw_episodes AS SELECT * FROM {source}")
        folders = subruns.run_folders(self.con) if small else subruns.run_folders_kept(
            self.con, target.folder, kept.state(location, parts, {}))
        self.run_ids = subruns.run_ids(folders)
        self.sub_run = sub_run
        if sub_run is not None and sub_run not in self.run_ids.names:
            raise sources.LocationError(f"{location}{subruns.SEPARATOR}{sub_run}: no such run; the runs of "
                                        f"{location}: {', '.join(self.run_ids.names)}")
        # a run folder opened alone: its reports beside it (mini-swe-agent's ``<model>.<run_id>.json``)
        nearby = subruns.nearby_reports(folders, location, self.reports)
        self.reports.update(nearby.found)
        changed = joins.overrides(self.con, self.reports, self.trials)
        # A big run's id count, and its answers, are kept beside its parts; a small one's are quicker to do again.
        self.folder = target.folder
        shown = location if sub_run is None else f"{location}{subruns.SEPARATOR}{sub_run}"
        self.state = None if small else kept.state(shown, parts, {"reports": self.reports, "trials": self.trials})
        listed = "raw_episodes"
        if changed.hidden is not None:  # rows that are part of another episode (a harbor trial's agent log)
            self._table("hidden", changed.hidden)
            self.con.execute("CREATE VIEW listed_episodes AS SELECT e.* FROM raw_episodes e "
                             "ANTI JOIN hidden h ON e.path = h.path AND e._seq = h._seq")
            listed = "listed_episodes"
        repeated = joins.renamed(self.con, location, listed) if small else joins.renamed_kept(
            self.con, location, target.folder, self.state, listed)
        self.verdicts: verdicts.Verdicts = changed.verdicts
        self.errors = list(changed.verdicts.errors)
        self.notes = [*changed.verdicts.notes, *repeated.warnings]
        self.originals = repeated.originals
        # harbor trials' agent logs that are no episodes of their own, by trial folder
        self.attached = changed.attached
        # ATIF trajectories joined to their continuations in the run (``joins.continuations``), by file
        self.continued = changed.continued
        self._create_view(changed.table, repeated.table, bool(self.reports or self.trials), changed.hidden)
        # mini-swe-agent runs no report scores: where their reports were looked for (not a warning: a run on other
        # tasks than SWE-bench's has none; said where its episodes are called unscored)
        self.missing_reports = self._unscored_notes(nearby)
        names = [r[0] for r in self.con.execute("DESCRIBE episodes").fetchall()]
        extra = sorted(set(names) - set(store.EPISODE_COLUMNS) - set(store.INTERNAL))
        self.columns = [*store.EPISODE_COLUMNS, *extra]
        self.queries = queries.Queries(self.cursor(), self.columns)

    def _unscored_notes(self, nearby: subruns.Nearby) -> list[tuple[str, str]]:
        """For each mini-swe-agent run folder no report names whose trajectories keep no reward: where the run
        looked for its report. One query counts them for every such folder, each file's run folder worked out once
        (a query a folder, each row's run folder worked out, took 7 to 10 ms each for 2,000 rows)."""
        folders = list(nearby.looked)
        if not folders:
            return []
        counts = dict(self.con.execute(
            f"SELECT folder, sum(n) FROM (SELECT path, ({subruns.folder_sql()}) AS folder, n FROM (SELECT path, "
            "format, count(*) AS n FROM episodes WHERE total_reward IS NULL GROUP BY path, format)) "
            "WHERE folder IN (SELECT unnest(?::VARCHAR[])) AND starts_with(path, folder || '/') GROUP BY folder",
            [folders]).fetchall())
        return [(folder, subruns.unscored_note(folder, places, int(counts[folder])))
                for folder, places in nearby.looked.items() if counts.get(folder)]

    def _create_view(self, overrides: store.Columns | None, renamed: store.Columns | None, with_verdict: bool,
                     hidden: store.Columns | None = None) -> None:
        # the rows' own explanation (their verifier's failing tests), when any row has one
        own = any(r[0] == store.EXPLAINED for r in self.con.execute("DESCRIBE raw_episodes").fetchall())
        nothing = f"NULL::VARCHAR AS {store.EXPLAINED}"
        several = len(self.run_ids.names) > 1
        if overrides is None and renamed is None and not with_verdict and hidden is None and not several:
            self.con.execute(f"CREATE VIEW episodes AS SELECT *{'' if own else ', ' + nothing} FROM raw_episodes")
            return
        replaced, added, joined, where = [], [], "", ""
        if several:  # which run of the folder each episode is (``subruns``)
            added.append(f"{self.run_ids.sql('e.path', 'e.format')} AS {subruns.COLUMN}")
        if hidden is not None:  # the table ``hidden`` (made in ``__init__``)
            joined += " LEFT JOIN hidden h ON e.path = h.path AND e._seq = h._seq"
            where = " WHERE h._seq IS NULL"
        if overrides is not None:
            self._table("overrides", overrides)
            replaced += [f"CASE WHEN o._seq IS NULL THEN e.{c} ELSE o.{c} END AS {c}" for c in joins.OVERRIDDEN]
            if any(v is not None for v in overrides["harbor_result"][1]):
                added.append("o.harbor_result")
            if own:  # a report's or trial's explanation first, as the episode's ending
                replaced.append(f"coalesce(o.{store.EXPLAINED}, e.{store.EXPLAINED}) AS {store.EXPLAINED}")
            else:
                added.append(f"o.{store.EXPLAINED}")
            joined += " LEFT JOIN overrides o ON e.path = o.path AND e._seq = o._seq"
        elif not own:
            added.append(nothing)
        if renamed is not None:
            self._table("renamed", renamed)
            replaced.append("coalesce(r.episode_id, e.episode_id) AS episode_id")
            joined += " LEFT JOIN renamed r ON e.path = r.path AND e._seq = r._seq"
        if with_verdict:  # where each reward came from: a report (which), the trial's verifier, the file, or nowhere
            recorded = f"CASE WHEN e.total_reward IS NOT NULL THEN {store.literal(verdicts.RECORDED)} END"
            added.append(f"CASE WHEN o._seq IS NOT NULL THEN o.verdict ELSE {recorded} END AS verdict"
                         if overrides is not None else f"{recorded} AS verdict")
        replace = f" REPLACE ({', '.join(replaced)})" if replaced else ""
        select = f"SELECT e.*{replace}{''.join(', ' + a for a in added)} FROM raw_episodes e{joined}{where}"
        if several and self.sub_run is not None:  # one run of the folder: every question sees only its episodes
            # its files found once (a semi-join per question: 0.1 s at a million files, where the run folder worked
            # out per row took seconds)
            self.con.execute(f"CREATE TABLE sub_run_files AS {self.run_ids.files_sql(self.sub_run)}")
            select = f"SELECT * FROM ({select}) WHERE path IN (SELECT path FROM sub_run_files)"
        self.con.execute(f"CREATE VIEW episodes AS {select}")

    def _table(self, name: str, columns: store.Columns) -> None:
        select, params = store.select_of(columns)
        self.con.execute(f"CREATE TABLE {name} AS {select}", params)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own to this table's database (one per thread)."""
        return self.con.cursor()

    def relation(self) -> duckdb.DuckDBPyRelation:
        """The public columns, in run order, as a lazy DuckDB relation."""
        chosen = ", ".join(f'"{c}"' for c in self.columns)
        return self.cursor().sql(f"SELECT {chosen} FROM episodes ORDER BY path, _seq")

    def frame(self) -> pd.DataFrame:
        return queries.typed(self.relation().df())

    def scalar(self, sql: str, params: list | None = None):
        return self.cursor().execute(sql, params or []).fetchone()

    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.cursor().execute(sql, params or []).fetchall()

    def close(self) -> None:
        self.con.close()

