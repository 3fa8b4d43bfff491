"""Values as the pages show them: numbers with a dash for unknown, outcomes as badges, long texts clipped."""

from __future__ import annotations

import math

import pandas as pd

from ares_viewer.model import colours, render
from ares_viewer_app.text import escape

# Characters of one message or output shown before "show long texts in full" is asked for:
# the agent elides outputs at 10,000 characters, so this shows a normal one whole.
CLIP = 12_000
# How a value that is not known is shown: in labels (``fmt``) and in tables' empty cells (``panels.tables``), as the
# CLI and the library's text faces show it.
UNKNOWN = render.UNKNOWN


def outcome_badge(outcome: str) -> str:
    """An outcome as coloured markdown."""
    return escape.badge(colours.outcome_colour_name(outcome), outcome)


def fmt(value: object, spec: str = ".3g") -> str:
    """A number for a label; a dash when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return UNKNOWN
    return format(value, spec) if isinstance(value, int | float) else str(value)


def measure(value: object, spec: str, unit: str) -> str:
    """A number with its unit (``12 s``); the dash alone when unknown, never a unit dangling after it."""
    shown = fmt(value, spec)
    return shown if shown == UNKNOWN else f"{shown} {unit}"


def compact(n: float | None) -> str:
    """A count in few characters: 950, 4.5k, 295k, 1.2M; a dash when unknown."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return UNKNOWN
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= limit:
            value = n / limit
            return f"{value:.1f}{suffix}" if value < 10 else f"{value:.0f}{suffix}"
    return f"{n:g}"


def clip(text: str | None, full: bool) -> str:
    """A text as shown: whole when asked for, else its first ``CLIP`` characters and how much is left."""
    text = text or ""
    if full or len(text) <= CLIP:
        return text
    return f"{text[:CLIP]}\n\n[… {len(text) - CLIP:,} more characters: turn on “Show long texts in full”]"
