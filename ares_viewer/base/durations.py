"""Durations as people type them on a command line: ``90``, ``90s``, ``30m``, ``2h``, ``1d``, ``1w``."""

from __future__ import annotations

import re

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``30m``, ``2h``, ``1d`` or ``1w`` (``sandbox cleanup --older-than``).

    Raises:
        ValueError: For anything else.
    """
    match = _DURATION_RE.match(text or "")
    if match is None:
        raise ValueError(f"{text!r} is not a duration like 90s, 30m, 2h or 1d")
    return float(match.group(1)) * _UNITS[match.group(2)]
