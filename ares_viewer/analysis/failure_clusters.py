"""Failed episodes grouped by their root cause, read from each episode: the error at the bottom of its chain,
else the tests its verifier failed, else its last failing command's error; ids, paths and numbers masked so one
cause is one cluster.

``Run.failures()`` groups by the one-line error the index holds; this reads the episodes themselves (the
recorded chain, the verifier's output, the commands), so completed-but-wrong episodes split by what failed.
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pandas as pd

from ares_viewer import model
from ares_viewer.analysis import ending

if TYPE_CHECKING:
    from ares_viewer.runs import run as run_module

COLUMNS = ("cause", "kind", "episodes", "share", "examples", "episode_ids")
# Failed episodes read at the most from a run (each is parsed); past that the clusters cover the first ones.
MAX_EPISODES = 5_000
EXAMPLES = 3
_CAUSE_CHARS = 2000  # the root cause unabridged (its volatile parts masked)
# Failing tests named in a cause at the most (the rest counted).
_TESTS = 20

# Volatile parts of a message, in the order they are masked: paths, hex and long ids, quoted text, numbers.
_MASKS = (
    (re.compile(r"(?<![\w.])(?:/[\w.@+-]+){2,}/?|\b[\w.-]+(?:/[\w.@+-]+)+\.\w+\b"), "<path>"),
    (re.compile(r"0x[0-9a-fA-F]+|\b(?=[0-9a-f-]*\d)[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b"), "<id>"),
    (re.compile(r"'[^'\s]{1,200}'|\"[^\"\s]{1,200}\""), "'…'"),  # quoted words; a quoted sentence stays
    (re.compile(r"\d+(?:\.\d+)?"), "N"),
)
# The line of a command's output that names its error: a Python exception, or an ``error:`` line.
_ERROR_LINE = re.compile(r"^(?:[\w.]*(?:Error|Exception|Exit|Interrupt)\b.*|.*\berror:.*)$", re.M | re.I)


def mask(text: str) -> str:
    """``text``'s first line with paths, ids, quoted text and numbers replaced, so alike failures read alike."""
    line = text.strip().split("\n", 1)[0]
    for pattern, placeholder in _MASKS:
        line = pattern.sub(placeholder, line)
    return line[:_CAUSE_CHARS]


def _last_failing(episode: model.Episode) -> model.Step | None:
    for step in reversed(episode.actions):
        if step.returncode not in (None, 0) or step.failure is not None:
            return step
    return None


def _tests(end: ending.Ending) -> str:
    """The failing tests by how they failed (the files that say so are in the episode's explanation)."""
    parts = []
    for how in (ending.STILL_FAILING, ending.BROKEN, ending.FAILED):
        names = [t.name for t in end.failing_tests if t.how == how]
        if names:
            more = f" and {len(names) - _TESTS} more" if len(names) > _TESTS else ""
            named = f"{', '.join(names[:_TESTS])}{more}"
            parts.append(named if how == ending.FAILED else f"{how}: {named}")
    return "; ".join(parts)


def cause(episode: model.Episode) -> tuple[str, str]:
    """The root cause of a failed episode and where it was read, from its ending (``analysis.ending``):
    ``(cause, kind)``, ``kind`` being ``error`` (the root cause of its error), ``tests`` (the tests a report or the
    verifier's output names), ``report`` (an evaluation report's verdict naming no test), ``command`` or
    ``outcome``."""
    end = ending.of(episode)
    if end.root_cause:
        return f"error: {mask(end.root_cause)}", "error"
    if end.failing_tests:
        return f"tests failed: {_tests(end)}", "tests"
    verdict = episode.metadata.get("verdict")
    if isinstance(verdict, str) and verdict:
        return f"the SWE-bench evaluation says {verdict.replace('_', ' ')}", "report"
    step = _last_failing(episode)
    if step is not None:
        program = (step.command or "").split()[0] if (step.command or "").split() else "?"
        found = _ERROR_LINE.findall(step.output or "")
        what = step.failure or f"exit {step.returncode}"
        detail = f": {mask(found[-1])}" if found else ""
        return f"last failing command {program} ({what}){detail}", "command"
    return f"{episode.outcome.value}, nothing failed", "outcome"


def _failed(episode: model.Episode) -> bool:
    reward = episode.total_reward
    solved = reward is not None and not math.isnan(reward) and reward > 0
    unscored = reward is None and episode.outcome is model.Outcome.COMPLETED
    return not solved and not unscored


def clusters(episodes: Iterable[model.Episode], *, total: int | None = None) -> pd.DataFrame:
    """The failed episodes among ``episodes`` grouped by ``cause``, most episodes first: ``cause``, ``kind``,
    ``episodes``, ``share`` (of ``total``, default: of the episodes given), ``examples`` (the first ids) and
    ``episode_ids``."""
    members: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    seen = 0
    for episode in episodes:
        seen += 1
        if _failed(episode):
            members[cause(episode)].append(episode.episode_id)
    whole = total if total is not None else seen
    rows = [
        {
            "cause": text,
            "kind": kind,
            "episodes": len(ids),
            "share": len(ids) / whole if whole else math.nan,
            "examples": ids[:EXAMPLES],
            "episode_ids": ids,
        }
        for (text, kind), ids in members.items()
    ]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.sort_values(["episodes", "cause"], ascending=[False, True], kind="stable").reset_index(drop=True)


def of_run(run: run_module.Run, *, limit: int = MAX_EPISODES) -> pd.DataFrame:
    """``clusters`` of a run's unsolved episodes (the first ``limit`` of them), shares of the whole run."""
    ids = [
        row[0]
        for row in run.query(
            "SELECT episode_id FROM episodes WHERE NOT coalesce(total_reward > 0 AND NOT isnan(total_reward), false) "
            "ORDER BY path, _seq LIMIT ?",
            [limit],
        ).fetchall()
    ]
    return clusters((run.episode(i) for i in ids), total=len(run))
