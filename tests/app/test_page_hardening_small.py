"""App faces of the smaller hardening cases (docs/security.md, "Smaller checks")."""

from __future__ import annotations

import pathlib

import page_text
from test_hardening_small import write_similar_runs


def test_the_compare_runs_caption_names_the_colliding_task_names(runs, app):
    write_similar_runs(pathlib.Path(runs["root"]["path"]))
    at = app("compare_runs", run="similar-a", other_run="similar-b")
    assert not at.exception
    [warning] = [c.value for c in at.caption if c.value.startswith("Warning:")]
    shown = page_text.shown(warning)
    assert "'calc__calc-1' and 'calc__calc-1 ' differ only by case, spaces" in shown
    assert "'path__join' and 'p\\u0430th__join'" in shown and "compared as different tasks" in shown
