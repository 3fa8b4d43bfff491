"""What the agents did: behaviour flags with evidence (the step and the command, file or error that shows each).

``findings(episode)`` runs every episode-file flag; with ``changes_of`` (a function giving the files each step
changed, ``fsdiff``'s ``paths_by_step``) the snapshot flags too, cached per episode. ``rates`` turns a table of
flags into each flag's rate among solved and failed episodes. The flags and their rules: docs/behaviours.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd

from ares_viewer import model
from ares_viewer.analysis.behaviours import episode_flags, registry, snapshot_flags
from ares_viewer.analysis.behaviours.rates import collect, rates, table
from ares_viewer.base import cache

FLAGS = registry.FLAGS
Finding = registry.Finding
Hit = registry.Hit
EPISODE = registry.EPISODE
SNAPSHOTS = registry.SNAPSHOTS
flag = registry.flag

# Snapshot flags read every step's snapshot: computed once per episode file and kept.
_SNAPSHOT_FINDINGS: cache.BoundedCache[tuple[registry.Finding, ...]] = cache.BoundedCache(maxsize=512)

__all__ = [
    "EPISODE",
    "FLAGS",
    "SNAPSHOTS",
    "Finding",
    "Hit",
    "collect",
    "episode_findings",
    "episode_flags",
    "findings",
    "flag",
    "rates",
    "run_table",
    "snapshot_findings",
    "snapshot_flags",
    "table",
]


def episode_findings(episode: model.Episode) -> list[registry.Finding]:
    """The episode-file flags ``episode`` shows, in registration order."""
    return registry.findings(registry.EPISODE, episode)


def snapshot_findings(
    episode: model.Episode, changes_of: Callable[[model.Episode], registry.StepChanges]
) -> tuple[registry.Finding, ...]:
    """The snapshot flags ``episode`` shows, from ``changes_of(episode)``; cached by (file, episode)."""

    def compute() -> tuple[registry.Finding, ...]:
        return tuple(registry.findings(registry.SNAPSHOTS, episode, changes_of(episode)))

    return _SNAPSHOT_FINDINGS.get_or_compute((episode.path, episode.episode_id), compute)


def run_table(
    episodes: Iterable[model.Episode], changes_of: Callable[[model.Episode], registry.StepChanges] | None = None
) -> pd.DataFrame:
    """One row per episode of ``episodes`` (a ``Run`` or any episodes) with a boolean column per flag; the snapshot
    flags only with ``changes_of`` (``fsdiff.paths_by_step``). Feed it to ``rates``::

        frame = behaviours.run_table(ares_viewer.open_run("runs/demo"), fsdiff.paths_by_step)
        behaviours.rates(frame, by="task_name")
    """
    return table(episodes, lambda episode: findings(episode, changes_of))


def findings(
    episode: model.Episode, changes_of: Callable[[model.Episode], registry.StepChanges] | None = None
) -> list[registry.Finding]:
    """Every flag ``episode`` shows: the episode-file ones, and the snapshot ones when ``changes_of`` is given."""
    found = episode_findings(episode)
    if changes_of is not None:
        found.extend(snapshot_findings(episode, changes_of))
    return found
