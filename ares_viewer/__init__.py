"""ares-viewer: inspect the episodes RL coding agents produce in ARES environments.

>>> import ares_viewer
>>> run = ares_viewer.open_run("sample_runs/")
>>> run.episodes            # one row per episode
>>> episode = run.episode(run.episodes.episode_id[0])
>>> episode.context(3)      # the exact messages the model answered at action 3
>>> ares_viewer.review.open_store().notes(run=run)   # review notes and labels on steps
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ares_viewer import review
    from ares_viewer.model import ContextLink, Episode, Message, Outcome, Step, StepKind, ToolCall, Usage
    from ares_viewer.runs.run import EmptyRunError, LoadError, Run, load_episode, open_run
    from ares_viewer.runs.sources import LocationError

# Every name below is loaded on first use (``__getattr__``), so ``import ares_viewer``, and the import of any of
# its modules, which imports this package first, loads nothing else: a helper of ``base`` stays a helper, and
# DuckDB, pandas and pyarrow load only with the modules that use them (tests/test_imports.py checks it).
# Name -> the module that defines it.
_NAMES = {
    "ContextLink": "ares_viewer.model",
    "EmptyRunError": "ares_viewer.runs.run",
    "Episode": "ares_viewer.model",
    "LoadError": "ares_viewer.runs.run",
    "LocationError": "ares_viewer.runs.sources",
    "Message": "ares_viewer.model",
    "Outcome": "ares_viewer.model",
    "Run": "ares_viewer.runs.run",
    "Step": "ares_viewer.model",
    "StepKind": "ares_viewer.model",
    "ToolCall": "ares_viewer.model",
    "Usage": "ares_viewer.model",
    "load_episode": "ares_viewer.runs.run",
    "open_run": "ares_viewer.runs.run",
}

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

# The modules a notebook imports by their short name (``from ares_viewer import align, plots, search``), as they
# were named before the library's folders became its layers.
_SHORT_NAMES = {
    "aggregate_plots": "ares_viewer.analysis.aggregate_plots",
    "align": "ares_viewer.analysis.align",
    "display": "ares_viewer.model.render",
    "ending": "ares_viewer.analysis.ending",
    "export": "ares_viewer.analysis.docent_export",
    "groups": "ares_viewer.analysis.groups",
    "model_client": "ares_viewer.counterfactual.model_client",
    "plots": "ares_viewer.analysis.plots",
    "review": "ares_viewer.review",
    "run": "ares_viewer.runs.run",
    "search": "ares_viewer.analysis.search",
    "sizes": "ares_viewer.base.sizes",
    "sources": "ares_viewer.runs.sources",
    "textdiff": "ares_viewer.base.textdiff",
    "verdicts": "ares_viewer.formats.sidecars.verdicts",
}


# Functions a notebook calls by their short name, loaded on first use too (name -> its module).
_SHORT_FUNCTIONS = {"compare_runs": "ares_viewer.analysis.compare_runs"}


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, the module a short name stands for (``ares_viewer.align`` is
    ``ares_viewer.analysis.align``), or the function (``ares_viewer.compare_runs``), imported on first use."""
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    if name in _SHORT_NAMES:
        return importlib.import_module(_SHORT_NAMES[name])
    if name in _SHORT_FUNCTIONS:
        return getattr(importlib.import_module(_SHORT_FUNCTIONS[name]), name)
    raise AttributeError(f"module 'ares_viewer' has no attribute {name!r}")
