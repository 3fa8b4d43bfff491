"""The Episode page's step timeline, drawn as SVG here and shown by a few lines of script (``step_component``).

It shows what ``plots.step_timeline`` shows (seconds per step, model and command time stacked, red for a failed
command; tokens per call; rewards, review labels, dashed context rewrites; the current step shaded), with each
step's summary on hover and a click going to that step. The Plotly figure, which notebooks keep, took about a fifth
of the browser's time on a 200-step Episode page and was mounted again at every step (#33); this drawing is
plain SVG, built once per episode and review labels, and only the current step's shade changes from step to step.
Every text from a file is escaped.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import streamlit as st

from ares_viewer.analysis import plots
from ares_viewer_app.data import loaders
from ares_viewer_app.views.episode import step_component

# The drawing's coordinates (it is scaled to the page's width): the plot between LEFT and WIDTH - RIGHT; the
# seconds' bars in BARS (top, height), the tokens' lines in TOKENS, the step numbers below them.
WIDTH, LEFT, RIGHT = 1000, 64, 8
BARS = (48, 120)
TOKENS = (184, 56)
HEIGHT = 262
_CURRENT_MARK = "<!--current step-->"
_COLOURS = plots.TIMELINE_COLOURS
_TICK_STEPS = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000)

# The component's drawing: the SVG, shade included (``step_component`` runs it when either changes).
_DRAW = """
function draw(root, data) {
  root.innerHTML = data.svg;
}
"""
_CSS = """
.ares-timeline svg { width: 100%; height: auto; display: block; font-family: inherit; }
[class*="st-key-"][class*="_timeline_box"]:has(.ares-timeline svg) .ares-timeline-picture { display: none !important; }
.ares-timeline [data-step] { cursor: pointer; }
.ares-timeline [data-step]:hover { fill: rgba(128, 128, 128, 0.12); }
"""
_component = step_component.register("ares_viewer.step_timeline", "ares-timeline", "[data-step]", _DRAW, _CSS)


def _x(position: int, count: int) -> tuple[float, float]:
    """The left edge and width of the slot of the step at ``position`` of ``count``."""
    slot = (WIDTH - LEFT - RIGHT) / max(count, 1)
    return LEFT + position * slot, slot


def _tick_every(count: int) -> int:
    return next((t for t in _TICK_STEPS if count / t <= 20), _TICK_STEPS[-1])


def _text(x: float, y: float, text: str, *, anchor: str = "end", colour: str = "currentColor", size: int = 11,
          extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" fill="{colour}"{extra}>'
            f"{html.escape(text)}</text>")


def _lines(values: pd.Series, count: int, scale: float, colour: str) -> list[str]:
    """A polyline per run of known values (a gap where a step's tokens are unknown)."""
    top, height = TOKENS
    runs: list[list[str]] = [[]]
    for position, value in enumerate(values):
        if math.isnan(value) or value < 0:  # the tokens are floats: NaN where unknown
            runs.append([])
            continue
        left, slot = _x(position, count)
        runs[-1].append(f"{left + slot / 2:.1f},{top + height - value / scale * height:.1f}")
    return [f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
            for points in runs if points]


def _legend(*, split: bool) -> list[str]:
    """The legend's swatches and names, in a row under the title (model seconds apart when ``split``)."""
    legend = [("model seconds", _COLOURS["model"]) if split else None,
              ("command seconds" if split else "seconds", _COLOURS["ok"]),
              ("failed command", _COLOURS["failed"]), ("prompt tokens", _COLOURS["prompt"]),
              ("generated tokens", _COLOURS["generated"])]
    parts = []
    x = 0.0
    for name, colour in filter(None, legend):
        parts.append(f'<rect x="{x:.1f}" y="24" width="10" height="10" fill="{colour}"/>')
        parts.append(_text(x + 14, 33, name, anchor="start"))
        x += 24 + 6.2 * len(name)
    return parts


def drawing(steps: pd.DataFrame, labels: Mapping[int, Sequence[str]] | None = None) -> str:
    """The SVG of the step timeline of ``steps`` (``Episode.steps_frame()``), with a place for the current step's
    shade (:func:`marked` fills it)."""
    bars = plots.timeline_steps(steps)
    frame = steps[steps["kind"] != "FIRST"]
    count = len(bars)
    parts = [f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'aria-label="{html.escape(plots.TIMELINE_TITLE, quote=True)}">',
             _text(0, 14, plots.TIMELINE_TITLE, anchor="start", size=13)]
    parts += _legend(split=bool(bars["split"].any()))
    parts.append(_CURRENT_MARK)
    if not count:
        parts.append(_text(WIDTH / 2, BARS[0] + BARS[1] / 2, "No action was taken: no step to chart.", anchor="middle"))
        return "".join(parts) + "</svg>"
    top, height = BARS
    base = top + height
    most = float(bars["top"].max()) or 1.0
    parts += [_text(LEFT - 6, top + 4, f"{most:.3g} s"), _text(LEFT - 6, base, "0 s"),
              f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" stroke="#8c959f" stroke-width="0.5"/>']
    rewards = dict(zip(frame["index"], pd.to_numeric(frame["reward"], errors="coerce"), strict=True))
    for position, row in enumerate(bars.itertuples()):
        left, slot = _x(position, count)
        width, inner = slot * 0.85, left + slot * 0.075
        model_h, seconds_h = row.model / most * height, row.seconds / most * height
        if model_h > 0:
            parts.append(f'<rect x="{inner:.1f}" y="{base - model_h:.1f}" width="{width:.1f}" height="{model_h:.1f}" '
                         f'fill="{_COLOURS["model"]}"/>')
        if seconds_h > 0:
            colour = _COLOURS["failed" if row.failed else "ok"]
            parts.append(f'<rect x="{inner:.1f}" y="{base - model_h - seconds_h:.1f}" width="{width:.1f}" '
                         f'height="{seconds_h:.1f}" fill="{colour}"/>')
        above = base - model_h - seconds_h - 4
        reward = rewards.get(row.index)
        if reward is not None and not math.isnan(reward) and reward != 0:
            parts.append(_text(left + slot / 2, above, f"★ {reward:g}", anchor="middle", colour=_COLOURS["reward"]))
            above -= 13
        names = (labels or {}).get(row.index)
        if names:
            parts.append(_text(left + slot / 2, above, "▼ " + ", ".join(names), anchor="middle",
                               colour=_COLOURS["label"]))
    tokens = {column: pd.to_numeric(frame[column], errors="coerce").astype("float64")
              for column in ("prompt_tokens", "generated_tokens")}
    most_tokens = max((float(v.max()) for v in tokens.values() if v.notna().any()), default=0.0) or 1.0
    t_top, t_height = TOKENS
    parts += [_text(LEFT - 6, t_top + 4, f"{most_tokens:,.0f}"), _text(LEFT - 6, t_top + t_height, "0"),
              _text(12, t_top + t_height / 2, "tokens", anchor="middle",
                    extra=f' transform="rotate(-90 12 {t_top + t_height / 2})"'),
              _text(12, top + height / 2, "seconds", anchor="middle",
                    extra=f' transform="rotate(-90 12 {top + height / 2})"')]
    for column, colour in (("prompt_tokens", _COLOURS["prompt"]), ("generated_tokens", _COLOURS["generated"])):
        parts += _lines(tokens[column], count, most_tokens, colour)
    rewritten = set(frame.loc[frame["context_rewritten"].astype(bool), "index"])
    every = _tick_every(count)
    for position, step in enumerate(bars["index"]):
        left, slot = _x(position, count)
        if step in rewritten:
            parts.append(f'<line x1="{left + slot / 2:.1f}" y1="{top}" x2="{left + slot / 2:.1f}" '
                         f'y2="{t_top + t_height}" stroke="{_COLOURS["rewrite"]}" stroke-dasharray="4 3"/>')
        if step % every == 0:
            parts.append(_text(left + slot / 2, HEIGHT - 6, str(step), anchor="middle"))
    # Last, so they take the clicks and the hover: a step's whole column, its summary as the tooltip.
    for position, row in enumerate(bars.itertuples()):
        left, slot = _x(position, count)
        parts.append(f'<rect data-step="{row.index}" x="{left:.1f}" y="{top}" width="{slot:.1f}" '
                     f'height="{t_top + t_height - top}" fill="transparent"><title>{html.escape(row.summary)}'
                     "</title></rect>")
    return "".join(parts) + "</svg>"


def marked(svg: str, steps: Sequence[int], current: int | None) -> str:
    """``svg`` (a :func:`drawing` of the steps ``steps``, in order) with step ``current`` shaded; unchanged when it
    has no column (the first request, or None)."""
    if current is None or current not in steps:
        return svg
    left, slot = _x(list(steps).index(current), len(steps))
    shade = (f'<rect data-current-step="{current}" x="{left:.1f}" y="{BARS[0]}" width="{slot:.1f}" '
             f'height="{TOKENS[0] + TOKENS[1] - BARS[0]}" fill="{_COLOURS["current"]}"/>')
    return svg.replace(_CURRENT_MARK, shade, 1)


def picture(svg: str, steps: Sequence[int], current: int | None) -> str:
    """The timeline as a still picture, for ``st.html``: an image of the SVG (its hover texts left out, as an image
    shows none), step ``current`` shaded, as wide as the chart. Drawn with the page's other HTML, where the component
    (hover texts, clicks) comes a few frames later (#33: the timeline with the content); the component's CSS hides
    the picture once it has drawn (``!important``: Streamlit's own rules for HTML come later)."""
    still = _TITLES.sub("", marked(svg, steps, current))
    data = base64.b64encode(still.encode("utf-8")).decode("ascii")
    shaded = "" if current is None else str(int(current))
    return (f'<img class="ares-timeline-picture" data-current-step="{shaded}" alt="" '
            f'width="100%" src="data:image/svg+xml;base64,{data}">')


_TITLES = re.compile(r"<title>.*?</title>", re.S)


def show(svg: str, steps: Sequence[int], current: int | None, key: str, on_click: Callable[[int], None], *,
         still: bool = False) -> None:
    """The timeline ``svg`` with step ``current`` shaded; a click on a step calls ``on_click`` with its index
    before the page runs again. ``still``: its ``picture`` first, until the component has drawn (a page just
    opened)."""
    with st.container(key=f"{key.replace('.', '_')}_timeline_box"):
        if still:
            st.html(picture(svg, steps, current))
        # "drawing" names what is drawn, so the script replaces the SVG only when it changed.
        step_component.show(_component, key, {"svg": marked(svg, steps, current),
                                              "drawing": f"{hash(svg)}.{current}"}, on_click)


@st.cache_data(max_entries=16, show_spinner=False)
def step_timeline(where: str, episode_id: str, labels: tuple[tuple[int, tuple[str, ...]], ...]
                  ) -> tuple[str, tuple[int, ...]]:
    """An episode's step timeline with no step shaded (``drawing``) and the steps it charts, in order:
    drawn once per episode and review labels, so stepping only moves the shade (#33)."""
    frame = loaders.load_run(where).episode(episode_id).steps_frame()
    steps = tuple(int(i) for i in frame.loc[frame["kind"] != "FIRST", "index"])
    return drawing(frame, dict(labels)), steps
