"""Groups of rollouts: several attempts at the same prompt, the natural unit to compare side by side.

Formats that sample a prompt several times (Tinker's ``group_idx``) give each episode a ``group``
column in ``Run.episodes``; these functions read it, for notebooks. ``RunGroups`` asks the same of a run's
index in DuckDB (a page of groups, one group's rollouts), for the app's group view at any run size.

>>> from ares_viewer import groups
>>> groups.summary(run.episodes).sort_values("reward_spread", ascending=False).head()
>>> groups.RunGroups(run).table("reward spread", limit=20)
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pandas as pd

from ares_viewer.runs import run as run_module

GROUP_COLUMNS = ("group", "iteration", "split", "task_name", "rollouts", "mean_reward", "min_reward", "max_reward",
                 "reward_spread", "solved")


def has_groups(episodes: pd.DataFrame) -> bool:
    """True when some episode of the table belongs to a group."""
    return "group" in episodes.columns and bool(episodes["group"].notna().any())


def summary(episodes: pd.DataFrame) -> pd.DataFrame:
    """One row per group: its rollouts' count and rewards, in training order (iteration, split, group index).

    ``reward_spread`` (max - min) is what a group-relative advantage learns from: a group whose
    rollouts all score the same teaches nothing.
    """
    if not has_groups(episodes):
        return pd.DataFrame(columns=list(GROUP_COLUMNS))
    con = duckdb.connect()
    try:
        con.register("episodes", episodes)
        return con.execute(_summary_sql(episodes.columns, "training order")).df()[list(GROUP_COLUMNS)]
    finally:
        con.close()


# Each order of the groups in SQL: training order (iteration, split, group index), then the sorts of ``sort``.
_TRAINING = 'iteration NULLS LAST, split NULLS LAST, group_idx NULLS LAST, "group"'
_ORDERS = {"training order": _TRAINING, "reward spread": f"reward_spread DESC NULLS LAST, {_TRAINING}",
           "mean reward": f"mean_reward NULLS LAST, {_TRAINING}"}


# What makes a group: the format's own group (Tinker's ``group_idx``), else the task, for runs that attempt a task
# several times (ARES, mini-swe-agent, Ray runner): a task with two attempts or more is a group of its own.
BY_GROUP, BY_TASK = '"group"', "task_name"


def _summary_sql(columns: Sequence[str], order: str, *, where: str = "TRUE", limit: int | None = None,
                 key: str = BY_GROUP) -> str:
    """The groups of a relation ``episodes`` as ``summary`` rows (a NaN reward counts as none), grouped by ``key``
    (``BY_GROUP`` or ``BY_TASK``)."""
    if order not in _ORDERS:
        raise ValueError(f"unknown order {order!r}; choose from {SORTS}")
    have = set(columns)
    first = {c: f'min("{c}")' if c in have else "NULL" for c in ("iteration", "split", "group_idx")}
    several = "HAVING count(*) >= 2" if key == BY_TASK else ""
    return f"""
        SELECT {key} AS "group", {first["iteration"]} AS iteration, {first["split"]} AS split,
               min(task_name) AS task_name, count(*) AS rollouts, avg(r) AS mean_reward, min(r) AS min_reward,
               max(r) AS max_reward, max(r) - min(r) AS reward_spread,
               avg(CASE WHEN r > 0 THEN 1.0 ELSE 0.0 END) AS solved, {first["group_idx"]} AS group_idx
        FROM (SELECT *, CASE WHEN isnan(total_reward) THEN NULL ELSE total_reward END AS r FROM episodes
              WHERE {key} IS NOT NULL AND {where})
        GROUP BY {key} {several} ORDER BY {_ORDERS[order]}{'' if limit is None else f' LIMIT {int(limit)}'}"""


SORTS = ("reward spread", "training order", "mean reward")


def sort(table: pd.DataFrame, by: str = "reward spread") -> pd.DataFrame:
    """A :func:`summary` table in another order: ``reward spread`` (widest first: the groups a group-relative
    advantage learns from), ``training order`` (as :func:`summary` gives it) or ``mean reward`` (lowest first)."""
    if by == "training order":
        return table.reset_index(drop=True)
    if by == "reward spread":
        return table.sort_values("reward_spread", ascending=False, kind="stable", na_position="last").reset_index(
            drop=True)
    if by == "mean reward":
        return table.sort_values("mean_reward", kind="stable", na_position="last").reset_index(drop=True)
    raise ValueError(f"unknown order {by!r}; choose from {SORTS}")


def rollouts(episodes: pd.DataFrame, group: str) -> pd.DataFrame:
    """The episodes of one group, in trajectory order."""
    if not has_groups(episodes):
        return episodes.iloc[0:0]
    members = episodes[episodes["group"] == group]
    order = "traj_idx" if "traj_idx" in members.columns else "episode_id"
    return members.sort_values(order).reset_index(drop=True)


def group_of(episodes: pd.DataFrame, episode_id: str) -> str | None:
    """The group an episode belongs to (None when it has none)."""
    if not has_groups(episodes):
        return None
    found = episodes.loc[episodes["episode_id"] == episode_id, "group"]
    return found.iloc[0] if len(found) and isinstance(found.iloc[0], str) else None


class RunGroups:
    """The groups of a run, asked of its index (answers stay small at any run size: a page of groups, one group's
    rollouts)."""

    def __init__(self, run: run_module.Run) -> None:
        self.run = run
        self.columns = run.query().columns
        has_own = "group" in self.columns and bool(run.query(
            'SELECT 1 FROM episodes WHERE "group" IS NOT NULL LIMIT 1').fetchall())
        #: ``BY_GROUP`` when the format groups its rollouts, else ``BY_TASK`` (the attempts at one task).
        self.key = BY_GROUP if has_own else BY_TASK

    def exist(self) -> bool:
        """True when some episode of the run belongs to a group (or, by task, when a task has two attempts)."""
        if self.key == BY_GROUP:
            return True
        return bool(self.run.query("SELECT 1 FROM episodes WHERE task_name IS NOT NULL GROUP BY task_name "
                                   "HAVING count(*) >= 2 LIMIT 1").fetchall())

    def table(self, order: str = "reward spread", *, limit: int = 200, groups: Sequence[str] | None = None
              ) -> pd.DataFrame:
        """At most ``limit`` :func:`summary` rows in an order of ``SORTS`` (only ``groups`` when named)."""
        if not self.exist():
            return pd.DataFrame(columns=list(GROUP_COLUMNS))
        where, params = (f"{self.key} IN (SELECT unnest(?))", [list(groups)]) if groups is not None else ("TRUE", [])
        frame = self.run.query(_summary_sql(self.columns, order, where=where, limit=limit, key=self.key),
                               params).df()
        return frame[list(GROUP_COLUMNS)]

    def totals(self) -> dict[str, int]:
        """``groups``, ``rollouts`` in them, and ``uniform``: groups whose rollouts all scored the same."""
        if not self.exist():
            return {"groups": 0, "rollouts": 0, "uniform": 0}
        found = self.run.query(f"SELECT count(*), sum(rollouts), count(*) FILTER (WHERE reward_spread = 0) "
                               f"FROM ({_summary_sql(self.columns, 'training order', key=self.key)})").fetchall()[0]
        return {"groups": int(found[0]), "rollouts": int(found[1] or 0), "uniform": int(found[2])}

    def rollouts(self, group: str) -> pd.DataFrame:
        """The episodes of one group, in trajectory order (by task: in run order)."""
        order = "traj_idx, episode_id" if "traj_idx" in self.columns and self.key == BY_GROUP else "path, _seq"
        chosen = ", ".join(f'"{c}"' for c in self.columns)
        return self.run.query(f"SELECT {chosen} FROM episodes WHERE {self.key} = ? ORDER BY {order}", [group]).df()

    def group_of(self, episode_id: str) -> str | None:
        """The group an episode belongs to (None when it has none)."""
        found = self.run.query(f"SELECT {self.key} FROM episodes WHERE episode_id = ? LIMIT 1",
                               [episode_id]).fetchall()
        if not found or not isinstance(found[0][0], str):
            return None
        return found[0][0] if self.key == BY_GROUP or self.table(groups=[found[0][0]]).shape[0] else None
