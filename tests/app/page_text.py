"""What an AppTest page shows, as text a test can search."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

# Elements whose value is markdown: the app escapes file and user text in them (``ares_viewer_app.escape``).
_MARKDOWN = ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(markdown: str) -> str:
    """Markdown as the reader sees its text: backslash escapes and the invisible word joiners gone."""
    return _ESCAPED.sub(r"\1", markdown).replace("\u2060", "")


_BLOCK = re.compile(r'<pre data-language="([^"]*)"[^>]*>(.*?)</pre>', re.S)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class TextBlock:
    """A text block (``widgets.text_block``) as the reader sees it: its text and its language."""

    value: str
    language: str


def blocks(node) -> list[TextBlock]:
    """The text blocks under an AppTest node (the page, an expander, ...), in page order."""
    found = []
    for element in node.get("html"):
        for language, body in _BLOCK.findall(str(element.value)):
            found.append(TextBlock(html.unescape(_TAG.sub("", body)), language))
    return found


def of(at) -> str:
    """Everything an AppTest page shows as text, joined (markdown, captions, code, text blocks, alerts)."""
    parts = []
    for kind in ("markdown", "caption", "code", "error", "warning", "info", "success", "text", "title", "subheader"):
        for element in at.get(kind):
            value = str(getattr(element, "value", "") or getattr(element, "body", ""))
            parts.append(shown(value) if kind in _MARKDOWN else value)
    parts += [block.value for block in blocks(at)]
    return "\n".join(parts)
