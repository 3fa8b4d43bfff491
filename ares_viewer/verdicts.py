"""Evaluation reports: the verdicts that give rewards to episodes whose files record none.

mini-swe-agent's trajectories carry no reward: a SWE-bench run is scored afterwards, by the SWE-bench
harness (``python -m swebench.harness.run_evaluation``) or ``sb-cli``, which write a report such as
``<model>.<run_id>.json``::

    {"total_instances": 2, "resolved_instances": 1, ..., "resolved_ids": ["django__django-11099"],
     "unresolved_ids": ["astropy__astropy-12907"], "empty_patch_ids": [], "error_ids": [], ...}

A report found anywhere in a run (recognized by its content, like every format) gives each episode of that
instance the reward its verdict means: 1.0 for ``resolved``, 0.0 for ``unresolved``, ``empty_patch`` and
``error``. Instances the report lists as incomplete, or does not list, keep no reward. Only episodes that
record no reward of their own get one, and only episodes of formats with one trajectory per instance
(``APPLIES_TO``): several ARES attempts at one task are never given one shared verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Verdict -> reward. Read in this order: an instance in two lists takes the first (resolved wins).
REWARDS: Mapping[str, float] = {"resolved": 1.0, "unresolved": 0.0, "error": 0.0, "empty_patch": 0.0}
_LISTS = {verdict: f"{verdict}_ids" for verdict in REWARDS}
# The formats whose episodes are one trajectory per instance, named by that instance.
APPLIES_TO = frozenset({"mini-swe-agent"})


def sniff(doc: Any) -> bool:
    """Whether a decoded JSON document is an evaluation report (a ``resolved_ids`` list and another id list)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("resolved_ids"), list):
        return False
    return any(isinstance(doc.get(key), list) for key in ("unresolved_ids", "submitted_ids", "completed_ids"))


def read(doc: Mapping[str, Any]) -> dict[str, str]:
    """Instance id -> verdict (``resolved``, ``unresolved``, ``error`` or ``empty_patch``) of a report."""
    found: dict[str, str] = {}
    for verdict, key in _LISTS.items():
        for instance in doc.get(key) or ():
            if isinstance(instance, str):
                found.setdefault(instance, verdict)
    return found


def merge(reports: Mapping[str, Mapping[str, str]]) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str]]]:
    """Join several reports (path -> verdicts) into instance -> ``(verdict, report path)``.

    Reports are taken in path order; when two disagree about an instance, the first one's verdict is kept and
    a warning ``(path, message)`` names the other.
    """
    merged: dict[str, tuple[str, str]] = {}
    warnings = []
    for path in sorted(reports):
        for instance, verdict in reports[path].items():
            known = merged.get(instance)
            if known is None:
                merged[instance] = (verdict, path)
            elif known[0] != verdict:
                warnings.append((path, f"says {instance} is {verdict}; {known[1]} says {known[0]}, which is kept"))
    return merged, warnings


def reward_for(row_format: str, task_name: Any, reward: Any, verdicts: Mapping[str, tuple[str, str]]
               ) -> tuple[float, str, str] | None:
    """``(reward, verdict, report path)`` for an episode that records no reward and has a verdict, else None."""
    if row_format not in APPLIES_TO or reward is not None or not isinstance(task_name, str):
        return None
    known = verdicts.get(task_name)
    if known is None:
        return None
    return REWARDS[known[0]], known[0], known[1]
