"""Questions over a run's flag index (``flag_index``), asked in DuckDB joined to the run's episode table: each
flag's rate among solved and failed episodes (the whole run, per task or per iteration), the episodes showing a
set of flags, and one flag's episodes with their first evidence step. Answers stay small at any run size.

Solved is the run index's rule (``runs.index.queries.SOLVED``: a reward above 0), as ``behaviours.rates`` counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ares_viewer.analysis.behaviours import flag_index, registry
from ares_viewer.analysis.behaviours.rates import RATE_COLUMNS  # the module's name is its function's here
from ares_viewer.runs import run as runs
from ares_viewer.runs.index import queries, store


class NotBuiltError(LookupError):
    """The run's flag index has not been built yet (``flag_index.update``)."""


def _joined(run: runs.Run, columns: str = "") -> str:
    """The episodes the flag index covers, with ``solved``, ``mask`` and ``steps`` (and ``columns`` of the run)."""
    table = flag_index.table_path(run)
    if table is None:
        raise NotBuiltError(f"{run.location}: the flags of its episodes have not been read yet")
    more = f"{columns}, " if columns else ""
    return (
        f"SELECT {more}e.episode_id, e.task_name, {queries.SOLVED} AS solved, f.mask, f.steps FROM episodes e "
        f"JOIN read_parquet({store.literal(str(table))}) f ON e.episode_id = f.episode_id AND e.path = f.path"
    )


def _bits(flags: Sequence[str]) -> int:
    order = flag_index.names()
    unknown = [f for f in flags if f not in order]
    if unknown:
        raise KeyError(f"not an episode-file flag: {', '.join(unknown)}")
    return sum(1 << order.index(f) for f in flags)


def covered(run: runs.Run) -> int:
    """How many of the run's episodes the flag index holds flags for."""
    return int(run.query(f"SELECT count(*) FROM ({_joined(run)})").fetchall()[0][0])


def rate_table(run: runs.Run, *, by: str | None = None, task: str | None = None) -> pd.DataFrame:
    """``behaviours.rates`` of the whole run from the flag index: each episode-file flag's rate among solved and
    failed episodes and the difference; with ``by`` (``"task_name"``, ``"iteration"``), per group; ``task``: only
    that task's episodes."""
    if by is not None and by not in run.relation.columns:
        raise KeyError(f"{run.location}: no column {by!r} to group the flags by")
    order = flag_index.names()
    sums = ", ".join(f"sum(((mask >> {bit}) & 1)::BIGINT) AS f{bit}" for bit in range(len(order)))
    group = f"{by}, " if by else ""
    where = "WHERE task_name = ?" if task is not None else ""
    extra = f"e.{by} AS {by}" if by and by != "task_name" else ""
    sql = (
        f"SELECT {group}solved, count(*) AS n, {sums} FROM ({_joined(run, extra)}) {where} "
        f"GROUP BY {group}solved ORDER BY {group}solved"
    )
    counts = run.query(sql, [task] if task is not None else None).df()
    if by is None:
        return _rates(counts, order)
    parts = [_rates(part, order).assign(**{by: key}) for key, part in counts.groupby(by, sort=True)]
    if not parts:
        return pd.DataFrame(columns=[by, *RATE_COLUMNS])
    return pd.concat(parts, ignore_index=True)[[by, *RATE_COLUMNS]]


def _rates(counts: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """The rate rows of one group from its per-``solved`` counts."""
    solved, failed = counts[counts["solved"]], counts[~counts["solved"].astype(bool)]
    n_solved, n_failed = int(solved["n"].sum()), int(failed["n"].sum())
    rows: list[dict[str, Any]] = []
    for bit, name in enumerate(order):
        column = f"f{bit}"
        in_solved, in_failed = int(solved[column].sum()), int(failed[column].sum())
        solved_rate = in_solved / n_solved if n_solved else math.nan
        failed_rate = in_failed / n_failed if n_failed else math.nan
        rows.append(
            {
                "flag": name,
                "definition": registry.FLAGS[name].definition,
                "source": registry.FLAGS[name].source,
                "solved_rate": solved_rate,
                "failed_rate": failed_rate,
                "difference": solved_rate - failed_rate,
                "solved": in_solved,
                "failed": in_failed,
                "episodes": in_solved + in_failed,
            }
        )
    return pd.DataFrame(rows, columns=list(RATE_COLUMNS))


def episode_ids(run: runs.Run, flags: Sequence[str]) -> list[str]:
    """The episodes showing every one of ``flags`` (in run order): the overview's Behaviour filter."""
    bits = _bits(flags)
    inner = _joined(run, "e.path AS p, e._seq AS q")
    sql = f"SELECT episode_id FROM ({inner}) WHERE mask & {bits} = {bits} ORDER BY p, q"
    return [row[0] for row in run.query(sql).fetchall()]


def evidence(
    run: runs.Run, flag: str, *, task: str | None = None, limit: int = 50, offset: int = 0
) -> tuple[int, pd.DataFrame]:
    """How many episodes show ``flag`` (of ``task`` when given), and a page of them in run order: ``episode_id``,
    ``task_name``, ``solved`` and ``step`` (the first step that shows it)."""
    bit = flag_index.names().index(flag) if flag in flag_index.names() else None
    if bit is None:
        raise KeyError(f"not an episode-file flag: {flag}")
    where = f"mask & {1 << bit} <> 0" + (" AND task_name = ?" if task is not None else "")
    params = [task] if task is not None else None
    inner = _joined(run, "e.path AS p, e._seq AS q")
    total = int(run.query(f"SELECT count(*) FROM ({inner}) WHERE {where}", params).fetchall()[0][0])
    page = run.query(
        f"SELECT episode_id, task_name, solved, steps[{bit + 1}] AS step FROM ({inner}) WHERE {where} "
        f"ORDER BY p, q LIMIT {int(limit)} OFFSET {int(offset)}",
        params,
    ).df()
    return total, page
