"""Notes whose step is gone: a run changed (files rewritten, episodes removed) since the notes were written.

Notes are kept either way; these functions say which ones no longer point at a step of the run, and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ares_viewer.runs import run as run_module
from ares_viewer.runs.index import queries

if TYPE_CHECKING:
    import pandas as pd


class StepRange:
    """Which steps a run's episodes have, read from the index (an episode is parsed only to confirm a doubt)."""

    def __init__(self, run: run_module.Run, episode_ids: Iterable[str]) -> None:
        self.run = run
        # Only the episodes asked about, looked up by id: the run's table is never loaded.
        wanted = sorted(set(episode_ids))
        found = run.queries.page(queries.Filters(episode_ids=wanted), limit=len(wanted),
                                 columns=["episode_id", "num_actions"]) if wanted else None
        self.actions = {} if found is None else dict(zip(found["episode_id"], found["num_actions"], strict=True))

    def reason(self, episode_id: str, step: int) -> str | None:
        if episode_id not in self.actions:
            return "episode not in this run"
        if 0 <= step <= int(self.actions[episode_id]):  # step 0 (the first request) .. one per action
            return None
        try:
            steps = len(self.run.episode(episode_id).steps)
        except (KeyError, ValueError, OSError) as exc:
            return f"episode unreadable ({exc})"
        return None if 0 <= step < steps else f"step beyond the end (the episode has steps 0..{steps - 1})"


def orphan_reason(run: run_module.Run, episode_id: str, step: int) -> str | None:
    """Why a step a note names is not in the run any more, or None when it is there."""
    return StepRange(run, [episode_id]).reason(episode_id, step)


def with_status(frame: pd.DataFrame, run: run_module.Run) -> pd.DataFrame:
    """Notes with an ``orphaned`` column: why their step is gone, or None (notes are kept either way)."""
    steps = StepRange(run, frame["episode_id"])
    reasons = [steps.reason(e, int(s)) for e, s in zip(frame["episode_id"], frame["step"], strict=True)]
    import pandas as pd
    return frame.assign(orphaned=pd.Series(reasons, index=frame.index, dtype="object"))
