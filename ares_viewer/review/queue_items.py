"""What a review queue holds: items (episodes or steps of a run) made from any list the app can express.

The overview's filters, a failure or behaviour group (``flagged_ids``) and a compare-runs list give episode ids
(``episode_items``); a search's hits give steps (``step_items``); a review label gives the steps it marks
(``label_items``). Each item keeps its episode file's size and modification time, so a queue can flag files
rewritten since.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ares_viewer.analysis import search
from ares_viewer.analysis.behaviours import flag_index, flag_queries
from ares_viewer.review import records
from ares_viewer.runs import run as run_module
from ares_viewer.runs.index import queries

if TYPE_CHECKING:
    from ares_viewer.review.store import ReviewStore


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    """One thing to label: an episode (``step`` None) or one step of it.

    Attributes:
        item: its position in the queue (from 0).
        run: the run key (``records.run_key``).
        episode_id, step: what it is.
        path: the episode's file when queued (None when unknown).
        fingerprint: that file's ``size:mtime_ns`` when queued (None when it could not be read).
    """

    item: int
    run: str
    episode_id: str
    step: int | None
    path: str | None = None
    fingerprint: str | None = None


def fingerprint(path: str | None) -> str | None:
    """A file's ``size:mtime_ns`` (None for a remote or missing file)."""
    try:
        stat = os.stat(path) if path else None
    except OSError:
        return None
    return None if stat is None else f"{stat.st_size}:{stat.st_mtime_ns}"


def _paths(run: run_module.Run) -> dict[str, str]:
    frame = run.episodes
    return dict(zip(frame["episode_id"].astype(str), frame["path"].astype(str), strict=True))


def episode_items(run: run_module.Run, episode_ids: Iterable[str]) -> list[Item]:
    """One item per episode (in the order given, each once): from the filters, a group, a list.

    Raises:
        KeyError: for an episode the run does not have.
    """
    return step_items(run, ((episode_id, None) for episode_id in episode_ids))


def step_items(run: run_module.Run, steps: Iterable[tuple[str, int | None]]) -> list[Item]:
    """One item per ``(episode_id, step)`` (each once): from a search's hits or a label's steps.

    Raises:
        KeyError: for an episode the run does not have.
    """
    paths, key = _paths(run), records.run_key(run)
    out: list[Item] = []
    for episode_id, step in dict.fromkeys((str(e), None if s is None else int(s)) for e, s in steps):
        if episode_id not in paths:
            raise KeyError(f"no episode {episode_id!r} in {run.location}")
        out.append(Item(len(out), key, episode_id, step, paths[episode_id], fingerprint(paths[episode_id])))
    return out


def label_items(store: ReviewStore, run: run_module.Run, label: str) -> list[Item]:
    """The steps carrying a review label (any case), as step items."""
    return step_items(run, ((n.episode_id, n.step) for n in store.find(run, labels=[label])))


def filter_items(run: run_module.Run, filters: queries.Filters, *, limit: int | None = None) -> list[Item]:
    """The episodes the overview shows under ``filters`` (tasks, outcomes, reward, text, a failure reason...)."""
    ids = [
        str(i)
        for frame in run.queries.stream(filters, columns=["episode_id"], limit=limit)
        for i in frame["episode_id"]
    ]
    return episode_items(run, ids)


def flagged_ids(run: run_module.Run, flags: Iterable[str]) -> list[str]:
    """The episodes showing every behaviour flag of ``flags`` (a behaviour group; the overview's Behaviour filter),
    in run order; the run's flags are read first where they are not yet (``flag_index.update``).

    Raises:
        KeyError: for a name that is not an episode-file flag.
    """
    flag_index.update(run)
    return flag_queries.episode_ids(run, list(flags))


def search_items(run: run_module.Run, query: str, *, regex: bool = False, limit: int = 200) -> list[Item]:
    """The steps a search finds (each once, at most ``limit`` hits)."""
    return step_items(run, ((hit.episode_id, hit.step) for hit in search.hits(run, query, regex=regex, limit=limit)))
