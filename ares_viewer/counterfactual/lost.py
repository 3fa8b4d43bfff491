"""Where a run loses its tasks: each episode's decisive step (from its stored branches) with what the action was,
as one frame, and the counts across the run (``docs/decisive.md``, "Where tasks are lost").

Per episode (:func:`frame`): the outcome, whether a step is decisive (``decisive``), or V does not change
(``no change``: counted as such, never given a step), or fewer than two steps have a value (``not searched``);
for a decisive step its change of V, whether it is sure, its position in the episode (step / actions), the action's
command and kind (:func:`action_kind`), the files it changed (from the per-step snapshots when the episode has them,
else from what the command plainly writes, ``files_from`` says which), the behaviour flags shown at or before it,
and a link to the step on the app's Episode page.

Across the run (:func:`summary`): how often each kind of action is decisive, where in the episode (early, middle,
late: thirds of its actions), per task and per iteration (the run table's ``iteration`` column, where the format
has one), and for solved episodes the step that made them (a rise of V).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ares_viewer import model
from ares_viewer.analysis import align
from ares_viewer.analysis import shell_commands as commands
from ares_viewer.base import agent_text
from ares_viewer.counterfactual import branch_store, branching, values

__all__ = ["COLUMNS", "KINDS", "POSITIONS", "action_kind", "frame", "row", "summary"]

DECISIVE = "decisive"
NO_CHANGE = "no change"
NOT_SEARCHED = "not searched"
# The kinds, in the order the first that fits is taken: what changes the state before what only reads it.
KINDS = ("submit", "delete", "edit", "install", "test run", "search", "read", "run code", "other", "no command")
POSITIONS = ("early", "middle", "late")
_SEARCH = re.compile(r"^(?:grep|egrep|fgrep|rg|ag|ack|find|git\s+grep|locate)\b")
_READ = re.compile(r"^(?:cat|head|tail|less|more|ls|tree|wc|stat|file|diff|nl|git\s+(?:log|status|diff|show|blame))\b"
                   r"|^sed\s+-n\b")
_RUN_CODE = re.compile(r"^(?:python[\d.]*|node|ruby|perl|bash|sh|go\s+run|cargo\s+run|make)\b")
_DELETE = re.compile(r"^(?:rm|unlink|shred|git\s+rm)\b")
COLUMNS = [
    "episode_id", "task_name", "iteration", "outcome", "reward", "state", "decisive_step", "before", "change", "sure",
    "direction", "actions", "position", "where", "kind", "command", "files", "files_from", "flags", "link", "finding",
]


def action_kind(command: str | None, changed: Mapping[str, str] | None = None) -> str:
    """What an action did, in one word (``KINDS``, the first that fits): ``submit`` (the submit marker), ``delete``
    (``rm``, or the snapshots show only deletions), ``edit`` (it writes a file: ``sed -i``, a redirection, ``tee``,
    ``cp``, ``mv``, or the snapshots show a change), ``install`` (a package manager), ``test run`` (a test runner),
    ``search`` (``grep``, ``find``...), ``read`` (``cat``, ``ls``, ``git diff``...), ``run code`` (an interpreter or
    ``make``), ``other``; ``no command`` when the response held none (a format error).

    The command rules are the behaviour flags' (``analysis.shell_commands``) and Compare's
    (``analysis.align.edited_files``); ``changed`` (path -> change kind from snapshots) overrides the command's text
    for edits, since a script can write files its command does not name.
    """
    if command is None or not command.strip():
        return "no command"
    if agent_text.is_submit(command):
        return "submit"
    simple = commands.simple_commands(command)
    if changed:
        return "delete" if set(changed.values()) == {"deleted"} else "edit"
    if any(_DELETE.search(part) for part in simple):
        return "delete"
    if align.edited_files(command):
        return "edit"
    for kind, check in (("install", commands.installs_packages), ("test run", commands.runs_tests)):
        if check(command):
            return kind
    for kind, pattern in (("search", _SEARCH), ("read", _READ), ("run code", _RUN_CODE)):
        if any(pattern.search(part) for part in simple):
            return kind
    return "other"


def where(position: float | None) -> str | None:
    """``early``, ``middle`` or ``late``: the third of the episode's actions a relative position falls in."""
    if position is None:
        return None
    return POSITIONS[min(2, int(position * 3))] if position < 1 else "late"


def link(run_location: str | None, episode_id: str, step: int | None) -> str:
    """The app's Episode page at ``step`` (a URL relative to the app's address)."""
    query = {"run": run_location, "episode": episode_id, "step": step}
    return "episode?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})


def _files(episode: model.Episode, step: int) -> tuple[dict[str, str], str]:
    from ares_viewer import fsdiff

    try:
        by_step = fsdiff.files_by_step(episode)
    except Exception:  # an unreadable snapshot: the command's text says what it can
        by_step = {}
    if by_step:
        return dict(by_step.get(step, {})), "snapshots"
    command = episode.step(step).command
    return dict.fromkeys(sorted(align.edited_files(command)), "edited"), "command"


def _flags(episode: model.Episode, step: int) -> list[str]:
    from ares_viewer.analysis import behaviours

    try:
        found = behaviours.episode_findings(episode)
    except Exception:  # a flag that cannot read the episode: the others still count
        return []
    return sorted({f.flag for f in found if f.step is not None and f.step <= step})


def row(episode: model.Episode, found: branching.Search, *, run_location: str | None = None,
        iteration: Any = None) -> dict[str, Any]:
    """One episode's row (``COLUMNS``)."""
    solved = None if episode.total_reward is None else episode.total_reward >= values.SUCCESS_AT
    known = [e for e in found.curve if e.value is not None]
    decisive = found.decisive
    out: dict[str, Any] = dict.fromkeys(COLUMNS)
    out.update(episode_id=episode.episode_id, task_name=episode.task_name, iteration=iteration,
               outcome=None if solved is None else "solved" if solved else "failed", reward=episode.total_reward,
               actions=episode.num_actions, finding=found.describe(), link=link(run_location, episode.episode_id, None))
    if decisive is None:
        out["state"] = NO_CHANGE if len(known) >= 2 else NOT_SEARCHED
        return out
    step = decisive.step
    command = episode.step(step).command if 0 < step <= episode.steps[-1].index else None
    changed, source = _files(episode, step) if command is not None else ({}, None)
    position = step / episode.num_actions if episode.num_actions else None
    out.update(state=DECISIVE, decisive_step=step, before=decisive.before, change=decisive.change,
               sure=decisive.sure, direction="drop" if decisive.change < 0 else "rise", position=position,
               where=where(position), kind=action_kind(command, changed if source == "snapshots" else None),
               command=command, files=sorted(changed), files_from=source, flags=_flags(episode, step),
               link=link(run_location, episode.episode_id, step))
    return out


def frame(episodes: Iterable[model.Episode], *, store: branch_store.Folder | None = None,
          run_location: str | None = None, iterations: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per episode (``COLUMNS``) from what is stored for it (``branching.load``: no branch is run)."""
    rows = [row(e, branching.load(e, store), run_location=run_location,
                iteration=(iterations or {}).get(e.episode_id)) for e in episodes]
    return pd.DataFrame(rows, columns=COLUMNS)


def of_run(run: Any, episodes: Iterable[model.Episode] | None = None, *,
           store: branch_store.Folder | None = None) -> pd.DataFrame:
    """:func:`frame` for a run's episodes (all of them by default), with the run table's ``iteration`` column
    when it has one."""
    table = run.episodes
    iterations = dict(zip(table["episode_id"], table["iteration"], strict=True)) if "iteration" in table else None
    chosen = episodes if episodes is not None else (run.episode(i) for i in table["episode_id"])
    return frame(chosen, store=store, run_location=run.location, iterations=iterations)


def summary(lost: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The counts across the run, each a frame:

    - ``states``: episodes per outcome and state (``decisive``, ``no change``, ``not searched``);
    - ``kinds``: per kind of action, the decisive steps of failed episodes (drops) and of solved ones (rises);
    - ``positions``: the same per third of the episode (``early``, ``middle``, ``late``);
    - ``tasks`` and ``iterations``: per task (and iteration), episodes, decisive ones, no change, not searched,
      and the mean relative position of the decisive step;
    - ``made``: the solved episodes' steps that made them (a rise), one row each.
    """
    decided = lost[lost["state"] == DECISIVE]
    lost_steps = decided[(decided["outcome"] == "failed") & (decided["direction"] == "drop")]
    made = decided[(decided["outcome"] == "solved") & (decided["direction"] == "rise")]

    def count(by: str, order: tuple[str, ...]) -> pd.DataFrame:
        table = pd.DataFrame({"lost (failed, drop)": lost_steps[by].value_counts(),
                              "made (solved, rise)": made[by].value_counts()}).reindex(list(order)).fillna(0)
        return table.astype(int).rename_axis(by).reset_index()

    def per(column: str) -> pd.DataFrame:
        if lost[column].isna().all():
            return pd.DataFrame(columns=[column, "episodes", "decisive", "no change", "not searched", "position"])
        grouped = lost.groupby(column, dropna=False)
        return pd.DataFrame({
            "episodes": grouped.size(),
            "decisive": grouped["state"].apply(lambda s: int((s == DECISIVE).sum())),
            "no change": grouped["state"].apply(lambda s: int((s == NO_CHANGE).sum())),
            "not searched": grouped["state"].apply(lambda s: int((s == NOT_SEARCHED).sum())),
            "position": grouped["position"].mean(),
        }).reset_index()

    states = (lost.assign(outcome=lost["outcome"].fillna("unknown")).groupby(["outcome", "state"]).size()
              .rename("episodes").reset_index())
    return {"states": states, "kinds": count("kind", KINDS), "positions": count("where", POSITIONS),
            "tasks": per("task_name"), "iterations": per("iteration"),
            "made": made[["episode_id", "task_name", "decisive_step", "change", "sure", "kind", "command", "link"]]}
