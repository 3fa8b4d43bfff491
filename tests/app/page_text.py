"""What an AppTest page shows, as text a test can search."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass

# Elements whose value is markdown: the app escapes file and user text in them (``ares_viewer_app.text.escape``).
_MARKDOWN = ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(markdown: str) -> str:
    """Markdown as the reader sees its text: backslash escapes and the invisible word joiners gone."""
    return _ESCAPED.sub(r"\1", markdown).replace("\u2060", "")


_BLOCK = re.compile(r'<pre data-language="([^"]*)"[^>]*>(.*?)</pre>', re.S)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class TextBlock:
    """A text block (``blocks.text_block``) as the reader sees it: its text and its language."""

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


def _step_list_data(at) -> dict:
    [element] = [e for e in at.get("bidi_component") if e.proto.component_name == "ares_viewer.step_list"]
    return json.loads(element.proto.json)


def step_list(at):
    """The Episode page's step list as its rows (indexed by step, a column per column shown)."""
    import pandas as pd

    data = _step_list_data(at)
    frame = pd.DataFrame(data["rows"], columns=data["columns"])
    return frame.set_index("step", drop=False)


def step_list_marks(at) -> tuple[int, list[int]]:
    """The step list's highlighted row (the current step) and its shaded rows (the steps with find hits)."""
    data = _step_list_data(at)
    return data["current"], data["hits"]


_FIGURE = re.compile(r'<div data-ares-figure="[^"]*"[^>]*><div[^>]*>([^<]*)</div><div[^>]*>([^<]*)</div></div>')


def figures(at) -> dict[str, str]:
    """The labelled figures a page shows in rows (``blocks.figures``): label -> value, as the reader sees them."""
    return {html.unescape(label): html.unescape(value)
            for element in at.get("html") for label, value in _FIGURE.findall(str(element.value))}


_FIGURE_HELP = re.compile(r'<div data-ares-figure="([^"]*)" title="([^"]*)"')


def figure_helps(at) -> dict[str, str]:
    """The help of each labelled figure that has one (shown when the pointer rests on it): label -> help."""
    return {html.unescape(label): html.unescape(help_)
            for element in at.get("html") for label, help_ in _FIGURE_HELP.findall(str(element.value))}


@dataclass(frozen=True)
class Chart:
    """A chart drawn as SVG and shown as HTML (``analysis.svg_plots.html``), as the reader sees it: its title, the
    drawing's texts (axes, ticks, legend), its links (``data-episode``, ``href``, hover ``title``, ``top`` in % of
    its height) and its other hover texts."""

    title: str
    texts: list[str]
    links: list[dict]
    tips: list[str]


_CHART = re.compile(r'<div class="ares-chart" data-chart="([^"]*)">')
_ATTRS = re.compile(r'([\w-]+)="([^"]*)"')


def charts(at) -> dict[str, Chart]:
    """The SVG charts a page shows, by name (``data-chart``: ``overview.dist``, ...)."""
    import base64
    import xml.etree.ElementTree as ET

    found = {}
    bodies = [str(element.proto.body) for element in at.get("html")]
    starts = [(body, [m.start() for m in _CHART.finditer(body)]) for body in bodies]
    # one element may hold several charts (the Overview's grid): each chart is its body from its own start
    for body in [body[a:b] for body, at_ in starts if at_ for a, b in zip(at_, [*at_[1:], None], strict=True)]:
        named = _CHART.search(body)
        title = re.search(r'<div class="ares-chart-title"[^>]*>([^<]*)</div>', body).group(1)
        drawing = base64.b64decode(re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', body).group(1))
        texts = [t.text or "" for t in ET.fromstring(drawing).iter("{http://www.w3.org/2000/svg}text")]
        links, tips = [], []
        for tag, attrs in re.findall(r"<(a|span) ([^>]*)>", body):
            values = {k: html.unescape(v) for k, v in _ATTRS.findall(attrs)}
            if tag == "a":
                values["top"] = float(re.search(r"top:([\d.]+)%", values["style"]).group(1))
                links.append(values)
            else:
                tips.append(values["title"])
        found[html.unescape(named.group(1))] = Chart(html.unescape(title), texts, links, tips)
    return found
