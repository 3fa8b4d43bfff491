"""How often each flag shows among solved and among failed episodes, and the difference.

A flag much more frequent among solved episodes than failed ones ("touched the tests" that mostly comes with
reward 1) is a possible reward hack; one much more frequent among failed ones is a likely cause of failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from ares_viewer import model
from ares_viewer.analysis.behaviours import registry

RATE_COLUMNS = (
    "flag",
    "definition",
    "source",
    "solved_rate",
    "failed_rate",
    "difference",
    "solved",
    "failed",
    "episodes",
)


def _solved(reward: float | None) -> bool:
    """Solved as the run's index counts it: a reward above 0 (not NaN)."""
    return reward is not None and not math.isnan(reward) and reward > 0


EVIDENCE_COLUMNS = ("episode_id", "task_name", "solved", "flag", "step", "evidence", "via", "source")


def collect(
    episodes: Iterable[model.Episode], findings_of: Callable[[model.Episode], list[registry.Finding]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """In one pass over ``episodes``: the flag table (one row per episode: its id, task, reward, ``solved`` and a
    boolean column per registered flag) and the evidence (one row per flag found: episode, step, evidence)."""
    rows: list[dict[str, Any]] = []
    evidence: list[dict[str, Any]] = []
    for episode in episodes:
        found = findings_of(episode)
        solved = _solved(episode.total_reward)
        shown = {f.flag for f in found}
        rows.append(
            {
                "episode_id": episode.episode_id,
                "task_name": episode.task_name,
                "total_reward": episode.total_reward,
                "solved": solved,
                **{name: name in shown for name in registry.FLAGS},
            }
        )
        evidence.extend({**f.as_dict(), "task_name": episode.task_name, "solved": solved} for f in found)
    table = pd.DataFrame(rows, columns=["episode_id", "task_name", "total_reward", "solved", *registry.FLAGS])
    return table, pd.DataFrame(evidence, columns=list(EVIDENCE_COLUMNS))


def table(
    episodes: Iterable[model.Episode], findings_of: Callable[[model.Episode], list[registry.Finding]]
) -> pd.DataFrame:
    """One row per episode: its id, task, reward, ``solved``, and a boolean column per registered flag."""
    return collect(episodes, findings_of)[0]


def _rates(frame: pd.DataFrame, flags: list[str]) -> pd.DataFrame:
    solved, failed = frame[frame["solved"]], frame[~frame["solved"]]
    rows = []
    for name in flags:
        flag_ = registry.FLAGS[name]
        solved_rate = float(solved[name].mean()) if len(solved) else math.nan
        failed_rate = float(failed[name].mean()) if len(failed) else math.nan
        rows.append(
            {
                "flag": name,
                "definition": flag_.definition,
                "source": flag_.source,
                "solved_rate": solved_rate,
                "failed_rate": failed_rate,
                "difference": solved_rate - failed_rate,
                "solved": int(solved[name].sum()),
                "failed": int(failed[name].sum()),
                "episodes": int(frame[name].sum()),
            }
        )
    return pd.DataFrame(rows, columns=list(RATE_COLUMNS))


def rates(frame: pd.DataFrame, *, by: str | None = None) -> pd.DataFrame:
    """Each flag's rate among solved and failed episodes of ``frame`` (a ``table``) and their difference
    (solved minus failed; NaN when a side has no episodes); with ``by`` (e.g. ``"task_name"``), per group."""
    flags = [name for name in registry.FLAGS if name in frame.columns]
    if by is None:
        return _rates(frame, flags)
    parts = [_rates(group, flags).assign(**{by: key}) for key, group in frame.groupby(by, sort=True)]
    if not parts:
        return pd.DataFrame(columns=[by, *RATE_COLUMNS])
    found = pd.concat(parts, ignore_index=True)
    return found[[by, *RATE_COLUMNS]]
