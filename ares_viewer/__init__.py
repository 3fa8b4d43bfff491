"""ares-viewer: inspect the episodes RL coding agents produce in ARES environments.

>>> import ares_viewer
>>> run = ares_viewer.open_run("sample_runs/")
>>> run.episodes            # one row per episode
>>> episode = run.episode(run.episodes.episode_id[0])
>>> episode.context(3)      # the exact messages the model answered at action 3
>>> ares_viewer.review.open_store().notes(run=run)   # review notes and labels on steps
"""

from ares_viewer import review
from ares_viewer.model import ContextLink, Episode, Message, Outcome, Step, StepKind, ToolCall, Usage
from ares_viewer.run import EmptyRunError, LoadError, Run, load_episode, open_run
from ares_viewer.sources import LocationError

__all__ = [
    "ContextLink",
    "EmptyRunError",
    "Episode",
    "LoadError",
    "LocationError",
    "Message",
    "Outcome",
    "Run",
    "Step",
    "StepKind",
    "ToolCall",
    "Usage",
    "load_episode",
    "open_run",
    "review",
]
__version__ = "0.1.0"
