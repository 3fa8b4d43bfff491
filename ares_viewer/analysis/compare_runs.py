"""Two runs compared task by task: which tasks the second side lost, which it gained, which it does differently,
and whether each difference is more than noise.

The sides are two runs (two checkpoints' evaluations, two models, a rerun after a fix), or two sides of one run
split by a column with two values chosen (``by="iteration", sides=(0, 5)``). Each side's per-task aggregates are
one query of its run's index (DuckDB, grouped by task: the episodes are never loaded into Python); the two small
answers are joined in one DuckDB connection, so a million episodes a side compare in seconds.

Success rates are over the episodes the agent can be judged on, as ``Run.stats`` counts them: unscored episodes and
failures of the infrastructure (``model.blame``) are counted beside the rate, never in it.

Statistics:
- per task, Fisher's exact test (two-sided) on the 2x2 table of successes and failures of the two sides, and the
  Benjamini-Hochberg q-value over the tasks both sides judged (the false discovery rate when calling a task
  significant at ``q < alpha``);
- per side and task, the Wilson score interval of the rate; for the difference, Newcombe's interval built from
  the two (method 10 of Newcombe 1998);
- for the whole run, the exact two-sided sign test over the tasks both sides judged: how many tasks got better
  against how many got worse (tasks whose rates tie leave the test), and the overall rates of both sides.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from ares_viewer.runs import run as runs_run
from ares_viewer.runs.index import queries

if TYPE_CHECKING:
    import os

    import pandas as pd

# z of a two-sided 95% interval.
Z95 = 1.959963984540054
# A task is lost (gained) when the second side's rate is significantly lower (higher) at this q-value.
ALPHA = 0.05
# A task's behaviour changed when its mean actions, cost or tokens differ by more than this fraction of the larger
# of the two means (0.5: one side takes at least twice the other's), or when its most frequent failure differs.
CHANGE = 0.5
# Less than this difference in mean actions is never a change, whatever the fraction (1 action against 2).
MIN_ACTIONS_CHANGE = 1.0

# One row per task and side: attempts, what could be judged, successes, and what the agent did.
_PER_TASK = f"""
WITH e AS (
    SELECT task_name, total_reward, num_actions, total_cost, prompt_tokens + generated_tokens AS tokens,
           {queries.UNSCORED} AS unscored, {queries.SOLVED} AS solved,
           {queries.INFRASTRUCTURE_FAILURE} AS infra, {queries.HAS_REWARD} AS rewarded, {queries.REASON} AS reason
    FROM episodes WHERE $where),
totals AS (
    SELECT task_name, count(*) AS attempts, count(*) FILTER (WHERE unscored) AS unscored,
           count(*) FILTER (WHERE infra) AS infrastructure,
           count(*) FILTER (WHERE NOT unscored AND NOT infra) AS judged,
           count(*) FILTER (WHERE solved) AS successes, avg(total_reward) FILTER (WHERE rewarded) AS mean_reward,
           avg(num_actions) AS mean_actions, avg(total_cost) AS mean_cost, avg(tokens) AS mean_tokens
    FROM e GROUP BY task_name),
reasons AS (
    SELECT task_name, first(reason ORDER BY n DESC, reason) AS top_failure
    FROM (SELECT task_name, reason, count(*) AS n FROM e WHERE reason IS NOT NULL AND NOT solved GROUP BY ALL)
    GROUP BY task_name)
SELECT * FROM totals LEFT JOIN reasons USING (task_name)
"""
_MEASURES = (
    "attempts",
    "unscored",
    "infrastructure",
    "judged",
    "successes",
    "mean_reward",
    "mean_actions",
    "mean_cost",
    "mean_tokens",
    "top_failure",
)
_COUNTS = ("attempts", "unscored", "infrastructure", "judged", "successes")

# The per-task table's ``status``.
LOST, GAINED, SAME, ONLY_A, ONLY_B, UNJUDGED = "lost", "gained", "same", "only A", "only B", "unjudged"


class CompareError(ValueError):
    """Sides that cannot be compared: no such column, not two values to split by, a side with no episodes."""


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a comparison: a run, or the episodes of a run whose column ``by`` holds ``value``."""

    run: runs_run.Run
    by: str | None = None
    value: Any = None

    @property
    def label(self) -> str:
        if self.by is None:
            return self.run.run_id or self.run.location.rstrip("/").rsplit("/", 1)[-1] or self.run.location
        return f"{self.by}={self.value}"

    def where(self) -> tuple[str, list[Any]]:
        """The SQL condition picking this side's episodes of ``run``'s table, and its parameters."""
        if self.by is None:
            return "TRUE", []
        kind = _column_type(self.run, self.by)
        return f"{_quoted(self.by)} = TRY_CAST(? AS {kind})", [str(self.value)]

    def episode_ids(self, tasks: Sequence[str]) -> list[str]:
        """This side's attempts at ``tasks``, in run order: a listed set of tasks as a review queue's episodes."""
        where, params = self.where()
        found = self.run.query(
            f"SELECT episode_id FROM episodes WHERE {where} AND list_contains(?::VARCHAR[], task_name) ORDER BY _seq",
            [*params, [str(t) for t in tasks]],
        ).fetchall()
        return [str(row[0]) for row in found]

    def failure_counts(self) -> pd.DataFrame:
        """Episodes per failure reason on this side: ``reason``, ``episodes``."""
        where, params = self.where()
        return self.run.query(
            f"SELECT reason, count(*) AS episodes FROM (SELECT {queries.REASON} AS reason "
            f"FROM episodes WHERE {where}) WHERE reason IS NOT NULL GROUP BY reason",
            params,
        ).df()

    def aggregates(self) -> Any:
        """Per task (a pyarrow Table, one row per task): ``_MEASURES``."""
        where, params = self.where()
        return self.run.query(_PER_TASK.replace("$where", where), params).to_arrow_table()


@dataclasses.dataclass(frozen=True)
class SignTest:
    """The exact two-sided sign test over tasks: how many got better on B, how many worse, how many tied."""

    better: int
    worse: int
    ties: int
    p_value: float | None


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Two sides compared task by task.

    Attributes:
        tasks: one row per task either side attempted (see ``columns``), the most significant differences first.
        a, b: the two sides; ``overall_a``/``overall_b`` their headline figures (``episodes``, ``judged``,
            ``successes``, ``rate``, ``unscored``, ``infrastructure``).
        sign_test: the paired test over tasks.
        alpha, change: the thresholds used (``ALPHA``, ``CHANGE``).
    """

    a: Side
    b: Side
    tasks: pd.DataFrame
    overall_a: dict[str, Any]
    overall_b: dict[str, Any]
    sign_test: SignTest
    alpha: float = ALPHA
    change: float = CHANGE

    columns = (
        "task_name",
        "status",
        *(f"{m}_{s}" for s in "ab" for m in _MEASURES),
        "rate_a",
        "rate_b",
        "difference",
        "low",
        "high",
        "p_value",
        "q_value",
        "changes",
    )

    @property
    def labels(self) -> tuple[str, str]:
        return self.a.label, self.b.label

    def lost(self) -> pd.DataFrame:
        """Tasks solved on A at least once and never on B (B judged some attempts), or significantly worse on B."""
        return self.tasks[self.tasks["status"] == LOST]

    def gained(self) -> pd.DataFrame:
        """Tasks solved on B and never on A, or significantly better on B."""
        return self.tasks[self.tasks["status"] == GAINED]

    def significance(self, listed: pd.DataFrame) -> str | None:
        """In words, when no task of ``listed`` (the lost or gained list) differs significantly (every q ≥ ``alpha``,
        or no q at all): what puts them on the list is then only that one side solved them and the other never did,
        which chance alone may do. None when ``listed`` is empty or one of them is significant."""
        if listed.empty:
            return None
        q = listed["q_value"].dropna()
        if bool((q < self.alpha).any()):
            return None
        smallest = f" (the smallest is {q.min():.3g})" if len(q) else ""
        return (f"No difference here is significant: every q ≥ {self.alpha}{smallest}. These tasks are listed only "
                "because one side solved them and the other never did, which chance alone can do at these numbers "
                "of attempts.")

    def changed(self) -> pd.DataFrame:
        """Tasks whose behaviour differs beyond ``change``: mean actions, cost, tokens, or the top failure."""
        return self.tasks[self.tasks["changes"].map(len) > 0]

    def counts(self) -> dict[str, int]:
        status = self.tasks["status"].value_counts()
        return {
            "tasks": len(self.tasks),
            **{s: int(status.get(s, 0)) for s in (LOST, GAINED, SAME, ONLY_A, ONLY_B, UNJUDGED)},
            "changed": len(self.changed()),
        }

    def pair(self, task: str) -> tuple[tuple[Side, str], tuple[Side, str]] | None:
        """The two episodes that say most about ``task``'s difference: the first judged failure of the side that did
        worse (B on a tie) and the best attempt of the other side; ``((side, episode_id), (side, episode_id))``,
        failing one first. None when a side has no attempt at the task."""
        row = self.tasks[self.tasks["task_name"] == task]
        if row.empty or row["status"].iloc[0] in (ONLY_A, ONLY_B):
            return None
        worse_is_a = bool(row["difference"].iloc[0] > 0)
        worse, better = (self.a, self.b) if worse_is_a else (self.b, self.a)
        failing = _episode(worse, task, f"NOT {queries.SOLVED}", best=False) or _episode(
            worse, task, "TRUE", best=False
        )
        best = _episode(better, task, "TRUE", best=True)
        if failing is None or best is None:
            return None
        return (worse, failing), (better, best)

    def failure_shift(self) -> pd.DataFrame:
        """The failure reasons (``Run.failures``'s) that grew or shrank: ``reason``, ``episodes_a``, ``episodes_b``,
        and ``share_a``, ``share_b`` (of each side's episodes) and ``change`` (B's share less A's), largest change
        first."""
        frames = [side.failure_counts() for side in (self.a, self.b)]
        both = frames[0].merge(frames[1], on="reason", how="outer", suffixes=("_a", "_b"))
        for s, overall in (("a", self.overall_a), ("b", self.overall_b)):
            both[f"episodes_{s}"] = both[f"episodes_{s}"].fillna(0).astype("int64")
            both[f"share_{s}"] = both[f"episodes_{s}"] / max(1, overall["episodes"])
        both["change"] = both["share_b"] - both["share_a"]
        return both.sort_values(
            ["change", "reason"], key=lambda c: -c.abs() if c.name == "change" else c, kind="stable"
        ).reset_index(drop=True)

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values (``ares-viewer compare-runs --json``)."""
        rows = self.tasks.astype(object).where(self.tasks.notna(), None).to_dict("records")
        return {
            "a": self.a.label,
            "b": self.b.label,
            "alpha": self.alpha,
            "change": self.change,
            "overall": {"a": self.overall_a, "b": self.overall_b},
            "sign_test": dataclasses.asdict(self.sign_test),
            "counts": self.counts(),
            "significance": {"lost": self.significance(self.lost()), "gained": self.significance(self.gained())},
            # where the reports of a side's unscored mini-swe-agent runs were looked for (``Run.missing_reports``)
            "missing_reports": {"a": [m for _, m in self.a.run.missing_reports],
                                "b": [m for _, m in self.b.run.missing_reports]},
            "tasks": rows,
        }


def compare_runs(
    a: runs_run.Run | str | os.PathLike,
    b: runs_run.Run | str | os.PathLike | None = None,
    *,
    by: str | None = None,
    sides: Sequence[Any] | None = None,
    alpha: float = ALPHA,
    change: float = CHANGE,
) -> Comparison:
    """Compare two runs (``a``, ``b``: runs or locations) task by task, or two sides of ``a`` split by the column
    ``by`` (``sides``: its two values, A's first; left out when the column holds exactly two values).

    Raises:
        CompareError: no such column, not two values to split by, or a side without episodes.
    """
    run_a = a if isinstance(a, runs_run.Run) else runs_run.open_run(a)
    if b is not None and by is None:
        side_a, side_b = Side(run_a), Side(b if isinstance(b, runs_run.Run) else runs_run.open_run(b))
    elif b is None and by is not None:
        first, second = _split_values(run_a, by, sides)
        side_a, side_b = Side(run_a, by, first), Side(run_a, by, second)
    else:
        raise CompareError("compare two runs (a and b), or one run split by a column (a and by), not both")
    with duckdb.connect() as con:
        con.register("side_a", side_a.aggregates())
        con.register("side_b", side_b.aggregates())
        chosen = ", ".join(f"{s}.{m} AS {m}_{s[-1]}" for s in ("side_a", "side_b") for m in _MEASURES)
        table = con.sql(
            f"SELECT coalesce(side_a.task_name, side_b.task_name) AS task_name, {chosen} "
            "FROM side_a FULL OUTER JOIN side_b ON side_a.task_name IS NOT DISTINCT FROM side_b.task_name "
            "ORDER BY task_name"
        ).df()
    tasks = _with_statistics(table, alpha, change)
    overall = [_overall(tasks, "a"), _overall(tasks, "b")]
    for side, figures in zip((side_a, side_b), overall, strict=True):
        if not figures["episodes"]:
            raise CompareError(f"{side.label} has no episodes")
    return Comparison(side_a, side_b, tasks, overall[0], overall[1], sign_test(tasks), alpha, change)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _column_type(run: runs_run.Run, column: str) -> str:
    columns = run.queries.columns
    if column not in columns:
        raise CompareError(f"{run.location} has no column {column!r} (its columns: {', '.join(columns)})")
    return str(run.query(f"SELECT {_quoted(column)} FROM episodes LIMIT 0").types[0])


def _split_values(run: runs_run.Run, by: str, sides: Sequence[Any] | None) -> tuple[Any, Any]:
    _column_type(run, by)
    if sides is not None:
        if len(sides) != 2:
            raise CompareError(f"sides: two values of {by!r}, not {len(sides)}")
        return sides[0], sides[1]
    values = run.queries.values(by, limit=3)
    if len(values) != 2:
        shown = ", ".join(map(str, values[:2])) + (", ..." if len(values) > 2 else "")
        raise CompareError(
            f"the column {by!r} holds {'more than two' if len(values) > 2 else len(values)} "
            f"value(s) ({shown}): name the two sides to compare"
        )
    return values[0], values[1]


def _overall(tasks: pd.DataFrame, side: str) -> dict[str, Any]:
    """A side's headline figures, summed from its per-task rows (``low``, ``high``: the rate's 95% interval)."""
    sums = {name: int(tasks[f"{name}_{side}"].sum()) for name in _COUNTS}
    rate = sums["successes"] / sums["judged"] if sums["judged"] else None
    low, high = wilson(sums["successes"], sums["judged"]) if sums["judged"] else (None, None)
    return {
        "episodes": sums["attempts"],
        "judged": sums["judged"],
        "successes": sums["successes"],
        "rate": rate,
        "unscored": sums["unscored"],
        "infrastructure": sums["infrastructure"],
        "low": low,
        "high": high,
    }


def _episode(side: Side, task: str, condition: str, *, best: bool) -> str | None:
    """An attempt at ``task`` on ``side`` meeting ``condition``: the best one (reward, then fewest actions) or the
    first judged one in run order."""
    where, params = side.where()
    order = (
        "CASE WHEN isnan(total_reward) THEN NULL ELSE total_reward END DESC NULLS LAST, num_actions, path, _seq"
        if best
        else f"{queries.UNSCORED} OR {queries.INFRASTRUCTURE_FAILURE}, path, _seq"
    )
    found = side.run.query(
        f"SELECT episode_id FROM episodes WHERE {where} AND task_name IS NOT DISTINCT FROM ? "
        f"AND {condition} ORDER BY {order} LIMIT 1",
        [*params, task],
    ).fetchall()
    return str(found[0][0]) if found else None


# ----- statistics ---------------------------------------------------------------------------------


def fisher_exact(a_yes: int, a_no: int, b_yes: int, b_no: int) -> float:
    """Two-sided p-value of Fisher's exact test on the table ``[[a_yes, a_no], [b_yes, b_no]]``: the probability,
    under the hypergeometric law with the margins fixed, of a table no more likely than the one seen."""
    n = a_yes + a_no + b_yes + b_no
    row, col = a_yes + a_no, a_yes + b_yes
    low, high = max(0, row + col - n), min(row, col)
    if low == high:
        return 1.0
    logs = _log_factorials(n)
    k = np.arange(low, high + 1)
    log_p = (
        logs[row]
        + logs[n - row]
        + logs[col]
        + logs[n - col]
        - logs[n]
        - logs[k]
        - logs[row - k]
        - logs[col - k]
        - logs[n - row - col + k]
    )
    p = np.exp(log_p - log_p.max())
    seen = p[a_yes - low]
    return float(min(1.0, p[p <= seen * (1 + 1e-7)].sum() / p.sum()))


_LOG_FACTORIALS = np.zeros(1)


def _log_factorials(n: int) -> np.ndarray:
    global _LOG_FACTORIALS
    if len(_LOG_FACTORIALS) <= n:
        size = max(n + 1, 2 * len(_LOG_FACTORIALS))
        _LOG_FACTORIALS = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, size)))))
    return _LOG_FACTORIALS


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """The Benjamini-Hochberg q-values of ``p_values`` (NaN stays NaN and does not count as a test)."""
    p = np.asarray(p_values, dtype=float)
    q = np.full(len(p), np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    if not len(tested):
        return q
    order = tested[np.argsort(p[tested], kind="stable")]
    ranked = p[order] * len(order) / np.arange(1, len(order) + 1)
    q[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return q


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate of ``successes`` out of ``n`` (NaN, NaN when ``n`` is 0)."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(a_yes: int, a_n: int, b_yes: int, b_n: int) -> tuple[float, float]:
    """Newcombe's interval of ``rate_b - rate_a``, from the two Wilson intervals."""
    if a_n <= 0 or b_n <= 0:
        return math.nan, math.nan
    pa, pb = a_yes / a_n, b_yes / b_n
    (la, ua), (lb, ub) = wilson(a_yes, a_n), wilson(b_yes, b_n)
    d = pb - pa
    return d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2), d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)


def sign_test(tasks: pd.DataFrame) -> SignTest:
    """The exact two-sided sign test of the per-task rate differences (tasks both sides judged; ties left out)."""
    d = tasks["difference"].dropna()
    better, worse = int((d > 0).sum()), int((d < 0).sum())
    n = better + worse
    if not n:
        return SignTest(better, worse, len(d), None)
    tail = sum(math.comb(n, k) for k in range(min(better, worse) + 1))
    return SignTest(better, worse, len(d) - n, min(1.0, 2 * tail / 2**n))


def _with_statistics(table: pd.DataFrame, alpha: float, change: float) -> pd.DataFrame:
    for column in (f"{m}_{s}" for m in _COUNTS for s in "ab"):
        table[column] = table[column].fillna(0).astype("int64")
    judged_a, judged_b = table["judged_a"], table["judged_b"]
    table["rate_a"] = table["successes_a"] / judged_a.where(judged_a > 0)
    table["rate_b"] = table["successes_b"] / judged_b.where(judged_b > 0)
    table["difference"] = table["rate_b"] - table["rate_a"]
    rows = list(zip(table["successes_a"], judged_a, table["successes_b"], judged_b, strict=True))
    intervals = [newcombe(*row) for row in rows]
    table["low"] = [i[0] for i in intervals]
    table["high"] = [i[1] for i in intervals]
    table["p_value"] = [fisher_exact(sa, na - sa, sb, nb - sb) if na and nb else math.nan for sa, na, sb, nb in rows]
    table["q_value"] = benjamini_hochberg(table["p_value"])
    table["status"] = [_status(row, alpha) for row in table.itertuples()]
    table["changes"] = [_changes(row, change) for row in table.itertuples()]
    ordered = table.assign(_sig=table["q_value"].fillna(2.0), _size=-table["difference"].abs().fillna(0))
    ordered = ordered.sort_values(["_sig", "_size", "task_name"], kind="stable").drop(columns=["_sig", "_size"])
    return ordered[list(Comparison.columns)].reset_index(drop=True)


def _status(row: Any, alpha: float) -> str:
    if not row.attempts_b:
        return ONLY_A
    if not row.attempts_a:
        return ONLY_B
    if not row.judged_a or not row.judged_b:
        return UNJUDGED
    significant = row.q_value < alpha
    if (row.successes_a and not row.successes_b) or (significant and row.difference < 0):
        return LOST
    if (row.successes_b and not row.successes_a) or (significant and row.difference > 0):
        return GAINED
    return SAME


def _changes(row: Any, change: float) -> list[str]:
    """What the agent does differently at a task, in words (``actions 4 → 9``), beyond the ``change`` fraction."""
    if not row.attempts_a or not row.attempts_b:
        return []
    found = []
    for name, a, b, shown in (
        ("actions", row.mean_actions_a, row.mean_actions_b, "{:.1f}"),
        ("cost", row.mean_cost_a, row.mean_cost_b, "${:.4f}"),
        ("tokens", row.mean_tokens_a, row.mean_tokens_b, "{:,.0f}"),
    ):
        if a is None or b is None or math.isnan(a) or math.isnan(b) or max(a, b) <= 0:
            continue
        if name == "actions" and abs(a - b) < MIN_ACTIONS_CHANGE:
            continue
        if abs(a - b) > change * max(a, b):
            found.append(f"{name} {shown.format(a)} → {shown.format(b)}")
    fa, fb = row.top_failure_a, row.top_failure_b
    if isinstance(fa, str) and isinstance(fb, str) and fa != fb:
        found.append(f"top failure “{fa}” → “{fb}”")
    return found


# Letters of other scripts drawn like Latin ones (after NFKC and casefold): a task name typed with one compares as
# another task. A first rule, not Unicode's whole confusables table.
_LOOK_ALIKES = {
    ord(other): latin
    for other, latin in {
        "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y",  # Cyrillic
        "\u0445": "x", "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u0501": "d", "\u04bb": "h",
        "\u051b": "q", "\u051d": "w", "\u04cf": "l",
        "\u03bf": "o", "\u03b1": "a", "\u03b9": "i", "\u03bd": "v", "\u03ba": "k", "\u03c1": "p",  # Greek
        "\u03c7": "x", "\u03c5": "u",
    }.items()
}  # fmt: skip


def similar_task_names(names: Iterable[Any]) -> list[str]:
    """A warning per group of task names that differ only by case, spaces (leading, trailing, repeated), invisible
    characters, Unicode form (NFC, NFD, compatibility forms) or a look-alike letter of another script: the
    comparison counts them as different tasks. Each warning names the colliding names (``ascii`` form, so the
    difference shows). Empty when no names collide."""
    groups: dict[str, set[str]] = {}
    for name in names:
        if isinstance(name, str):
            groups.setdefault(_name_key(name), set()).add(name)
    warnings = []
    for _, found in sorted(groups.items()):
        if len(found) > 1:
            shown = [ascii(n) for n in sorted(found)]
            warnings.append(f"task names {', '.join(shown[:-1])} and {shown[-1]} differ only by case, spaces, "
                            "invisible characters, Unicode form or look-alike letters: they are compared as "
                            "different tasks")
    return warnings


def _name_key(name: str) -> str:
    """What is left of a task name for telling two apart: NFKC, casefolded, invisible characters dropped, spaces
    collapsed and stripped, look-alike letters as their Latin twins."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    visible = "".join(c for c in folded if unicodedata.category(c) not in ("Cf", "Cc") or c in "\t\n")
    return " ".join(visible.split()).translate(_LOOK_ALIKES)
