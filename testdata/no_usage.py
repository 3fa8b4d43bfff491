"""Run files with no token count and no cost anywhere, as a deterministic or a local model leaves them: each
episode's prompt tokens, generated tokens and cost are unknown, never 0 (docs/formats.md, "Totals").

``strip_file`` drops, from a JSON document or a JSON-lines file of any format, every key that records a model
call's usage or cost or a producer's totals; a line that is no JSON stays as it is.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

# What records a model call's usage or cost, or a producer's totals, in any format.
USAGE_KEYS = frozenset({"usage", "cost", "total_cost", "model_stats", "ob_len", "ac_len", "metrics", "final_metrics",
                        "model_usage", "agent_result", "cost_usd"})


def stripped(value: Any) -> Any:
    """``value`` (parsed JSON) without the keys of ``USAGE_KEYS``, at any depth."""
    if isinstance(value, dict):
        return {k: stripped(v) for k, v in value.items() if k not in USAGE_KEYS}
    if isinstance(value, list):
        return [stripped(v) for v in value]
    return value


def strip_file(path: pathlib.Path) -> None:
    """``path`` (a JSON document or JSON lines) rewritten without what records usage and cost."""
    text = path.read_text()
    try:
        path.write_text(json.dumps(stripped(json.loads(text))))
        return
    except json.JSONDecodeError:
        pass
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.dumps(stripped(json.loads(line))) if line.strip() else line)
        except json.JSONDecodeError:
            lines.append(line)
    path.write_text("\n".join(lines) + "\n")


def _first_call_only(value: Any, seen: list[bool]) -> Any:
    if isinstance(value, dict):
        if "usage" in value:
            if seen:
                return {k: v for k, v in value.items() if k not in USAGE_KEYS}
            seen.append(True)
        return {k: _first_call_only(v, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [_first_call_only(v, seen) for v in value]
    return value


def write_mixed_run(root: pathlib.Path) -> dict[str, list[str]]:
    """An ARES run of six episodes (``synthetic.write_run``) under ``root``: two whose files record no usage and no
    cost ("unknown"), one whose first model call alone records them (a total of a few hundred prompt tokens, below
    the others' thousands: numeric and text order differ), three whole. Returns the episode ids by kind."""
    from testdata import synthetic

    synthetic.write_run(root, 6, actions=4)
    files = sorted(root.glob("*.json"))
    for path in files[:2]:
        strip_file(path)
    path = files[2]
    path.write_text(json.dumps(_first_call_only(json.loads(path.read_text()), [])))
    ids = [json.loads(p.read_text())["episode_id"] for p in files]
    return {"unknown": ids[:2], "first_call": ids[2:3], "whole": ids[3:]}
