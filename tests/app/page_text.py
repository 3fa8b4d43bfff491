"""What an AppTest page shows, as text a test can search."""

from __future__ import annotations


def of(at) -> str:
    """Everything an AppTest page shows as text, joined (markdown, captions, code, alerts)."""
    parts = []
    for kind in ("markdown", "caption", "code", "error", "warning", "info", "success", "text", "title", "subheader"):
        parts.extend(str(getattr(e, "value", "") or getattr(e, "body", "")) for e in at.get(kind))
    return "\n".join(parts)
