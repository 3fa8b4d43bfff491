"""Questions asked of a run's episode table in DuckDB: headline figures, failure reasons, per-task and
per-iteration aggregates, histograms, reward bands, and one page of the filtered, sorted table.

Every answer is small whatever the run's size (a figure never gets more than a few thousand marks), so the
app and notebooks can ask them of a run of millions of episodes without loading its table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import duckdb

from ares_viewer.model import blame

if TYPE_CHECKING:
    import pandas as pd

# Failure reasons, as ``run.failure_reasons`` words them (the same rules, in SQL).
_NOT_SOLVED = "completed, not solved (reward ≤ 0)"
_TRUNCATED = "truncated: hit its step or token limit"
_INCOMPLETE = "incomplete: no final step (in progress or cut short)"
_REASON_CHARS = 2000  # the root cause unabridged, as ``run.failure_reasons``
_FIRST_LINE = ("CASE WHEN error IS NOT NULL AND trim(error, ' \t\r\n\x0b\x0c') <> '' "
               "THEN split_part(trim(error, ' \t\r\n\x0b\x0c'), chr(10), 1) ELSE 'no message' END")


def _normalized(expr: str) -> str:
    expr = f"regexp_replace({expr}, '0x[0-9a-fA-F]+|\\b[0-9a-f]{{8,}}\\b', '<id>', 'g')"
    expr = f"""regexp_replace({expr}, '''[^''\\s]{{1,200}}''|"[^"\\s]{{1,200}}"', '''…''', 'g')"""
    return f"regexp_replace({expr}, '\\d+(\\.\\d+)?', 'N', 'g')"


# A completed, unsolved episode that a report explains (the view's ``explained``: what the report says, its failing
# tests named) has that as its reason; the others the outcome's words.
NOT_SOLVED_SAYS = "completed, not solved: "
REASON = f"""CASE
    WHEN outcome = 'completed' AND total_reward <= 0
        THEN coalesce('{NOT_SOLVED_SAYS}' || explained, '{_NOT_SOLVED}')
    WHEN outcome = 'truncated' THEN '{_TRUNCATED}'
    WHEN outcome = 'incomplete' THEN '{_INCOMPLETE}'
    WHEN outcome NOT IN ('completed', 'truncated', 'incomplete')
        THEN outcome || ': ' || left({_normalized(_FIRST_LINE)}, {_REASON_CHARS})
END"""
# Why an episode is not a success, in a few words, for the episode table's ``why`` column: the failure reason's rule,
# with an error's first line as recorded (its root cause included, nothing masked, up to ``WHY_CHARS``); None for a
# solved episode. ``analysis.ending.Ending.why`` is the same rule over a parsed episode.
WHY_COLUMN = "why"
WHY_CHARS = 2000
WHY = f"""CASE
    WHEN outcome NOT IN ('completed', 'truncated', 'incomplete')
        THEN outcome || ': ' || left({_FIRST_LINE}, {WHY_CHARS})
    WHEN outcome = 'completed' AND total_reward IS NULL THEN 'finished without a reward (unscored)'
    ELSE {REASON}
END"""
# ``run.unscored``: finished without anyone scoring it; neither a success nor a failure. Filters and figures
# treat it as a category of its own, named ``UNSCORED_LABEL`` beside the outcomes.
UNSCORED = "(total_reward IS NULL AND coalesce(outcome = 'completed', false))"
UNSCORED_LABEL = "unscored"
# Solved: a reward above 0 (NaN is no reward). Every other episode is unsolved, the unscored ones too.
SOLVED = "coalesce(total_reward > 0 AND NOT isnan(total_reward), false)"
# A failure of the infrastructure (model.blame): scored, unsolved, with an error the rule names as the
# infrastructure's. Left out of the success rate and counted beside it.
INFRASTRUCTURE_FAILURE = f"(NOT {UNSCORED} AND NOT {SOLVED} AND {blame.sql('error')})"
# The reward as ranked best first: NaN ranks with the missing ones, last (DuckDB orders NaN above every number).
_RANKED_REWARD = "CASE WHEN isnan(total_reward) THEN NULL ELSE total_reward END DESC NULLS LAST"
# Has a reward: what the episode table shows and the mean reward averages (NaN is no reward).
HAS_REWARD = "(total_reward IS NOT NULL AND NOT isnan(total_reward))"
# The episodes the reward figures draw: those with a reward. The others (unscored, or failed without a reward) show
# as "–" in the table and are left out of the mean reward, so the figures leave them out too.
_REWARDED = f"(SELECT * FROM episodes WHERE {HAS_REWARD})"
# Sortable columns are those of the table; anything else is refused (never put into SQL).
_DIRECTIONS = {"asc": "ASC", "desc": "DESC"}
# The 10th, 50th and 90th percentiles of the reward as one list (one sort of each group, not three: a third
# less time on a million rollouts) and the band's columns from it.
_QUANTILES = "quantile_cont(total_reward, [0.1, 0.5, 0.9]) AS q"
_BAND = "q[1] AS p10, q[2] AS p50, q[3] AS p90"
# A figure never draws more marks than this.
MAX_MARKS = 2000
# Each episode's place in run order (``k``, from 0) without sorting the table: a file's rows have consecutive
# ``_seq`` values, so a row's place is its file's offset (counts of the files before it) plus its place in
# the file. Only the per-file counts are sorted.
_POSITIONS = """
WITH files AS (SELECT path, min(_seq) AS first, count(*) AS n FROM episodes GROUP BY path),
     offsets AS (SELECT path, first, sum(n) OVER (ORDER BY path) - n AS start FROM files)
SELECT e.*, o.start + e._seq - o.first AS k FROM episodes e JOIN offsets o USING (path)
"""


# The columns ``Queries.positioned`` adds to say where each chunk ends (dropped before a chunk is handed over).
_AT_PATH, _AT_LINE = "__at_path", "__at_line"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclasses.dataclass(frozen=True)
class Filters:
    """What the episode table is narrowed to; empty fields do not filter."""

    tasks: Sequence[str] = ()
    outcomes: Sequence[str] = ()  # ``UNSCORED_LABEL`` among them picks the unscored episodes
    reward: tuple[float, float] | None = None  # inclusive; episodes without a reward stay
    text: str = ""  # in the id, task or error, any case
    reason: str | None = None  # a failure reason (see ``failures``)
    episode_ids: Sequence[str] | None = None  # only these (review labels pick them)
    solved: bool | None = None  # True: solved ones only (``SOLVED``); False: unsolved ones only

    def where(self) -> tuple[str, list[Any]]:
        parts: list[str] = ["TRUE"]
        params: list[Any] = []
        if self.tasks:
            parts.append("task_name IN (SELECT unnest(?))")
            params.append(list(self.tasks))
        if self.outcomes:
            parts.append(f"((outcome IN (SELECT unnest(?)) AND NOT {UNSCORED}) OR ({UNSCORED} AND ?))")
            params += [list(self.outcomes), UNSCORED_LABEL in self.outcomes]
        if self.reward is not None:
            parts.append("(total_reward BETWEEN ? AND ? OR total_reward IS NULL OR isnan(total_reward))")
            params += [float(self.reward[0]), float(self.reward[1])]
        if self.text:
            parts.append("contains(lower(episode_id || ' ' || coalesce(task_name, '') || ' ' || coalesce(error, '')),"
                         " lower(?))")
            params.append(self.text)
        if self.reason is not None:
            parts.append(f"({REASON}) = ?")
            params.append(self.reason)
        if self.episode_ids is not None and len(self.episode_ids) == 1:  # a point query, pushed into the scan
            parts.append("episode_id = ?")
            params.append(self.episode_ids[0])
        elif self.episode_ids is not None:
            parts.append("episode_id IN (SELECT unnest(?))")
            params.append(list(self.episode_ids))
        if self.solved is not None:
            parts.append(SOLVED if self.solved else f"NOT {SOLVED}")
        return " AND ".join(parts), params


# Columns DuckDB may hand back wider or nullable that the table gives as plain numpy types.
_INTEGERS = ("num_actions", "prompt_tokens", "generated_tokens", "nonzero_returncodes", "context_rewrites")


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the episode table with the column types ``Run.episodes`` has (whichever of them are present)."""
    for name in _INTEGERS:
        if name in frame:  # token counts a producer keeps unknown (harbor's null ones) stay missing: pandas' Int64
            frame[name] = frame[name].astype("Int64" if frame[name].isna().any() else "int64")
    if "truncated" in frame:
        frame["truncated"] = frame["truncated"].astype("bool")
    if "total_reward" in frame:
        frame["total_reward"] = frame["total_reward"].astype("float64")
    return frame


class Queries:
    """Aggregate and paging queries over one episode relation (a DuckDB view named ``episodes``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, columns: Sequence[str]) -> None:
        self.con = con
        self.columns = list(columns)

    def _df(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        return self.con.execute(sql, list(params)).df()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        return self.con.execute(sql, list(params)).fetchone()

    def _aggregate(self, sql: str, params: Sequence[Any] = ()) -> tuple:
        return self.con.execute(sql, list(params)).fetchall()[0]  # an aggregate query: always one row

    def count(self, filters: Filters | None = None) -> int:
        where, params = (filters or Filters()).where()
        return int(self._aggregate(f"SELECT count(*) FROM episodes WHERE {where}", params)[0])

    def stats(self) -> dict[str, Any]:
        """Headline figures (``Run.stats``)."""
        (n, scored, wins, infra, rewarded, mean_reward, mean_actions, cost, prompt, generated, *unknown
         ) = self._aggregate(f"""
            SELECT count(*), count(*) FILTER (WHERE NOT {UNSCORED}),
                   count(*) FILTER (WHERE NOT {UNSCORED} AND {SOLVED}),
                   count(*) FILTER (WHERE {INFRASTRUCTURE_FAILURE}),
                   count(total_reward) FILTER (WHERE NOT isnan(total_reward)),
                   avg(total_reward) FILTER (WHERE NOT isnan(total_reward)), avg(num_actions),
                   sum(total_cost) FILTER (WHERE NOT isnan(total_cost)), sum(prompt_tokens), sum(generated_tokens),
                   count(*) FILTER (WHERE total_cost IS NULL OR isnan(total_cost)),
                   count(*) FILTER (WHERE prompt_tokens IS NULL), count(*) FILTER (WHERE generated_tokens IS NULL)
            FROM episodes""")
        outcomes = self.con.execute("SELECT outcome, count(*) n FROM episodes GROUP BY outcome "
                                    "ORDER BY n DESC, outcome").fetchall()
        return {
            "episodes": int(n),
            # Over the episodes the agent can be judged on: scored, less the failures of the infrastructure
            # (model.blame), which are counted beside it.
            "success_rate": wins / (scored - infra) if scored - infra else None,
            "unscored": int(n - scored),
            "scored": int(scored),
            "infrastructure_failures": int(infra),
            "judged": int(scored - infra),
            # Over the episodes that have a reward (recorded or given by a report): failures without one are not
            # averaged in as 0, so this is not the success rate's denominator.
            "mean_reward": float(mean_reward) if mean_reward is not None else None,
            "rewarded": int(rewarded),
            "mean_actions": float(mean_actions) if n else None,
            # Sums over the episodes that know the figure; None when none does (docs/formats.md, "Totals").
            "total_cost": float(cost) if cost is not None else None,
            "prompt_tokens": int(prompt) if prompt is not None else None,
            "generated_tokens": int(generated) if generated is not None else None,
            # How many episodes record none of each (their figure is unknown, never counted as 0).
            "unknown": {name: int(count) for name, count in
                        zip(("total_cost", "prompt_tokens", "generated_tokens"), unknown, strict=True)},
            "outcomes": {o: int(c) for o, c in outcomes},
        }

    def failures(self, *, with_ids: bool = False, first_ids: int | None = None) -> pd.DataFrame:
        """Failure reasons, most frequent first: ``reason``, ``blame`` (``agent`` or ``infrastructure``, by
        ``model.blame``), ``episodes``, ``tasks`` (and ``episode_ids``: all of them in run order, or the first
        ``first_ids``)."""
        cut = "" if first_ids is None else f"[1:{max(0, int(first_ids))}]"
        ids = f", list(episode_id ORDER BY path, _seq){cut} AS episode_ids" if with_ids else ""
        who = (f"CASE WHEN bool_or({blame.sql('error')}) THEN '{blame.Blame.INFRASTRUCTURE}' "
               f"ELSE '{blame.Blame.AGENT}' END")
        frame = self._df(f"""
            SELECT reason, {who} AS blame, count(*) AS episodes, count(DISTINCT task_name) AS tasks{ids}
            FROM (SELECT *, {REASON} AS reason FROM episodes) WHERE reason IS NOT NULL
            GROUP BY reason ORDER BY episodes DESC, min(struct_pack(p := path, s := _seq))""")
        if with_ids:
            frame["episode_ids"] = frame["episode_ids"].map(list)
        return frame

    def values(self, column: str, limit: int = 5000) -> list[Any]:
        """The distinct values of a column, sorted (at most ``limit``; for filter pickers)."""
        self._column(column)
        rows = self.con.execute(f"SELECT DISTINCT {_q(column)} v FROM episodes WHERE v IS NOT NULL ORDER BY v "
                                f"LIMIT {int(limit)}").fetchall()
        return [r[0] for r in rows]

    def reward_range(self) -> tuple[float, float] | None:
        low, high = self._aggregate("SELECT min(total_reward), max(total_reward) FROM episodes "
                              "WHERE total_reward IS NOT NULL AND NOT isnan(total_reward)")
        return None if low is None else (float(low), float(high))

    def _column(self, column: str) -> str:
        if column == WHY_COLUMN:  # computed from the stored columns (see WHY)
            return f"({WHY})"
        if column not in self.columns:
            raise KeyError(f"no column {column!r} in the episode table")
        return _q(column)

    def _selected(self, column: str) -> str:
        return f"({WHY}) AS {WHY_COLUMN}" if column == WHY_COLUMN else self._column(column)

    def page(self, filters: Filters | None = None, *, sort: str | None = None, direction: str = "asc",
             offset: int = 0, limit: int = 100, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """One page of the filtered, sorted episode table (rows in run order unless ``sort`` names a column)."""
        where, params = (filters or Filters()).where()
        order = "path, _seq"
        if sort:
            order = f"{self._column(sort)} {_DIRECTIONS[direction]} NULLS LAST, path, _seq"
        chosen = ", ".join(self._selected(c) for c in (columns or self.columns))
        return self._df(f"SELECT {chosen} FROM episodes WHERE {where} ORDER BY {order} "
                        f"LIMIT {int(limit)} OFFSET {int(offset)}", params)

    def stream(self, filters: Filters | None = None, *, columns: Sequence[str] | None = None,
               limit: int | None = None, chunk: int = 8192) -> Iterator[pd.DataFrame]:
        """The filtered episode table in run order, ``chunk`` rows at a time (about; at most ``limit`` rows in all):
        one query whose rows are fetched as they are read, so memory holds a chunk, not the table."""
        for frame, _ in self.positioned(filters, columns=columns, limit=limit, chunk=chunk):
            yield frame

    def positioned(self, filters: Filters | None = None, *, columns: Sequence[str] | None = None,
                   limit: int | None = None, chunk: int = 8192,
                   after: tuple[str, int] | None = None) -> Iterator[tuple[pd.DataFrame, tuple[str, int]]]:
        """``stream``'s chunks, each with the place in run order of its last row (its ``path`` and its place in that
        file, from 0: the same after the file's partition was rewritten); ``after``: only the rows after that
        place (where a stream cut short carries on)."""
        where, params = (filters or Filters()).where()
        if after is not None:
            where += f" AND (path > ? OR (path = ? AND {_AT_LINE} > ?))"
            params += [after[0], after[0], int(after[1])]
        chosen = ", ".join(self._column(c) for c in (columns or self.columns))
        bound = "" if limit is None else f" LIMIT {max(0, int(limit))}"
        # a row's place in its file (``_seq`` counts from wherever its partition's batch started)
        result = self.con.execute(
            f"WITH placed AS (SELECT *, _seq - min(_seq) OVER (PARTITION BY path) AS {_AT_LINE} FROM episodes) "
            f"SELECT {chosen}, path AS {_AT_PATH}, {_AT_LINE} FROM placed WHERE {where} ORDER BY path, _seq{bound}",
            params)
        vectors = max(1, chunk // 2048)  # DuckDB hands rows over in vectors of 2048
        while True:
            frame = result.fetch_df_chunk(vectors)
            if frame.empty:
                return
            place = (str(frame[_AT_PATH].iat[-1]), int(frame[_AT_LINE].iat[-1]))
            yield typed(frame.drop(columns=[_AT_PATH, _AT_LINE])), place

    def attempts(self, task: str | None, filters: Filters | None = None, *, limit: int = 100,
                 columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The filtered episodes with ``task``'s attempts first, each part best first (highest reward, then fewest
        actions, then run order): the partners worth comparing an attempt at ``task`` with. At most ``limit``."""
        where, params = (filters or Filters()).where()
        chosen = ", ".join(self._column(c) for c in (columns or self.columns))
        return self._df(f"SELECT {chosen} FROM episodes WHERE {where} "
                        f"ORDER BY task_name IS NOT DISTINCT FROM ? DESC, {_RANKED_REWARD}, num_actions, path, _seq "
                        f"LIMIT {int(limit)}", [*params, task])

    def best_other(self, episode_id: str, *, same_task: bool, min_actions: int = 0) -> str | None:
        """The best episode other than ``episode_id`` (highest reward, then fewest actions), at the same task when
        ``same_task``, with at least ``min_actions`` actions (so it has a response at step ``min_actions``); None
        when there is none."""
        task = "AND task_name IS NOT DISTINCT FROM (SELECT task_name FROM episodes WHERE episode_id = ? LIMIT 1)"
        found = self._one(f"SELECT episode_id FROM episodes WHERE episode_id <> ? {task if same_task else ''} "
                          f"AND num_actions >= ? ORDER BY {_RANKED_REWARD}, num_actions, path, _seq LIMIT 1",
                          [episode_id, *([episode_id] if same_task else []), int(min_actions)])
        return None if found is None else str(found[0])

    def unsolved_of_solved_task(self) -> str | None:
        """The first unsolved episode (run order) whose task another attempt solved: the failure a comparison
        explains best. None when no task has both."""
        found = self._one(f"SELECT episode_id FROM episodes WHERE NOT {SOLVED} AND task_name IN "
                          f"(SELECT task_name FROM episodes WHERE {SOLVED}) ORDER BY path, _seq LIMIT 1")
        return None if found is None else str(found[0])

    def reward_histogram(self, bins: int = 20) -> pd.DataFrame:
        """Episodes with a reward per reward bin and outcome: ``low``, ``high``, ``outcome``, ``episodes``. Those
        without one (unscored, or failed without a reward: ``stats()["episodes"] - stats()["rewarded"]``) are left
        out, as from the mean reward. The bins split the rewards' range evenly (the top one includes the highest
        reward); when every reward is the same, the one bin is centred on it."""
        bounds = self._aggregate(f"SELECT min(total_reward), max(total_reward) FROM {_REWARDED}")
        if bounds[0] is None:
            import pandas as pd
            return pd.DataFrame(columns=["low", "high", "outcome", "episodes"])
        low, high = float(bounds[0]), float(bounds[1])
        if high == low:  # every reward the same: one bin centred on it
            low, width = low - 0.5, 1.0
        else:
            width = (high - low) / bins
        frame = self._df(f"""
            SELECT least(floor((total_reward - ?) / ?), {bins - 1})::BIGINT AS bin, outcome,
                   count(*) AS episodes
            FROM {_REWARDED} GROUP BY bin, outcome ORDER BY bin, outcome""",
            [low, width])
        frame["low"] = low + frame["bin"] * width
        frame["high"] = frame["low"] + width
        return frame[["low", "high", "outcome", "episodes"]]

    def per_task(self, limit: int = 40) -> tuple[pd.DataFrame, int]:
        """Per task: ``attempts``, ``scored``, ``successes``, ``rate`` (the ``limit`` most attempted tasks);
        and how many tasks there are in all."""
        total = int(self._aggregate("SELECT count(DISTINCT task_name) FROM episodes")[0])
        frame = self._df(f"""
            SELECT task_name, count(*) AS attempts, count(*) FILTER (WHERE NOT {UNSCORED}) AS scored,
                   count(*) FILTER (WHERE NOT {UNSCORED} AND {SOLVED}) AS successes
            FROM episodes GROUP BY task_name ORDER BY attempts DESC, task_name LIMIT {int(limit)}""")
        frame["rate"] = frame["successes"] / frame["scored"].where(frame["scored"] > 0)
        return frame, total

    def reward_bands(self, by: str | None = None, *, bins: int = 200) -> pd.DataFrame:
        """Reward over the run in at most ``bins`` bins of consecutive episodes with a reward (by start time when
        episodes have one, else in run order): ``x`` (the bin's middle), ``episodes``, ``mean``, ``p10``, ``p50``,
        ``p90``.

        ``by`` names a column to bin by instead (``iteration``): one bin per value when there are few enough.
        """
        if by is not None:
            key = self._column(by)
            return self._df(f"""
                SELECT x, episodes, mean, {_BAND} FROM (
                    SELECT {key}::DOUBLE AS x, count(*) AS episodes, avg(total_reward) AS mean, {_QUANTILES}
                    FROM {_REWARDED} WHERE {key} IS NOT NULL GROUP BY x ORDER BY x LIMIT {MAX_MARKS}) ORDER BY x""")
        total, timed = self._aggregate("SELECT count(*), count(start_time) FROM episodes")
        if not total:
            import pandas as pd
            return pd.DataFrame(columns=["x", "episodes", "mean", "p10", "p50", "p90", "timed"])
        if timed:  # by start time: ordered (episodes with a start time are rarely millions)
            source = f"""SELECT total_reward, start_time AS x,
                             ntile({int(bins)}) OVER (ORDER BY start_time) AS bin FROM {_REWARDED}
                         WHERE start_time IS NOT NULL"""
        else:  # in run order, binned by place: no sort of the table
            source = (f"SELECT total_reward, k AS x, floor(k * {int(bins)} / {int(total)}) AS bin FROM ({_POSITIONS}) "
                      f"WHERE {HAS_REWARD}")
        return self._df(f"""
            SELECT x, episodes, mean, {_BAND}, {'true' if timed else 'false'} AS timed FROM (
                SELECT bin, avg(x) AS x, count(*) AS episodes, avg(total_reward) AS mean, {_QUANTILES}
                FROM ({source}) GROUP BY bin) ORDER BY bin""")

    def per_iteration(self) -> pd.DataFrame:
        """Per training iteration and split: ``iteration``, ``split``, ``episodes``, ``mean``, ``p10``, ``p90`` of
        the reward of the rollouts that have one; empty when the run has no ``iteration`` column."""
        if "iteration" not in self.columns:
            import pandas as pd
            return pd.DataFrame(columns=["iteration", "split", "episodes", "mean", "p10", "p90"])
        split = "coalesce(split::VARCHAR, 'all')" if "split" in self.columns else "'all'"
        return self._df(f"""
            SELECT iteration, split, episodes, mean, q[1] AS p10, q[3] AS p90 FROM (
                SELECT iteration::DOUBLE AS iteration, {split} AS split, count(*) AS episodes,
                       avg(total_reward) AS mean, {_QUANTILES}
                FROM {_REWARDED} WHERE iteration IS NOT NULL GROUP BY ALL ORDER BY split, iteration
                LIMIT {MAX_MARKS}) ORDER BY split, iteration""")

    def actions_grid(self, *, bins: int = 30) -> pd.DataFrame:
        """Episodes with a reward per (actions, reward) cell: ``actions``, ``reward``, ``episodes`` (a heat map, not a
        point per episode)."""
        return self._df(f"""
            WITH b AS (SELECT min(num_actions) a0, max(num_actions) a1, min(total_reward) r0,
                              max(total_reward) r1 FROM {_REWARDED})
            SELECT a0 + (least(floor((num_actions - a0) / greatest((a1 - a0) / {bins}, 1)), {bins})
                         * greatest((a1 - a0) / {bins}, 1)) AS actions,
                   r0 + least(floor((total_reward - r0) / greatest((r1 - r0) / {bins}, 1e-9)), {bins - 1})
                        * greatest((r1 - r0) / {bins}, 1e-9) AS reward,
                   count(*) AS episodes
            FROM {_REWARDED}, b GROUP BY ALL ORDER BY actions, reward""")

    def sample(self, n: int = MAX_MARKS, columns: Sequence[str] = ("episode_id", "task_name", "outcome",
                                                                     "total_reward", "num_actions")) -> pd.DataFrame:
        """At most ``n`` episodes picked evenly over the run (for plots that draw one point per episode)."""
        total = self.count()
        chosen = ", ".join(self._column(c) for c in columns if c in self.columns)
        if total <= n:
            return self._df(f"SELECT {chosen} FROM episodes ORDER BY path, _seq")
        return self._df(f"""SELECT {chosen} FROM ({_POSITIONS})
                            WHERE floor(k * {int(n)} / {int(total)}) <> floor((k - 1) * {int(n)} / {int(total)})
                            ORDER BY k""")
