"""The run overview's reward charts drawn as SVG here, for pages that show them as plain HTML (the app's Overview).

They show what ``plots`` and ``aggregate_plots`` show (the same data in, the same titles, axes and the "no reward"
band of the episodes without one, never drawn at 0), without a chart library in the browser: Plotly's module and
its four charts were most of the Overview's browser time (#46). A chart is a :class:`Chart`: the drawing (axes,
marks, legend) and its marks' places, each with its hover text and, for a point that is an episode, a link.
:func:`html` lays it out as an image of the drawing under HTML links: Streamlit's ``st.html`` keeps HTML (links,
``title`` tooltips, inline styles) but drops inline SVG, so the drawing is an image and each mark a transparent
link or tooltip over it, placed in percentages so that they scale with the image.

Every text from a file (task names, episode ids, outcomes) is escaped in the SVG and in the HTML.

>>> from ares_viewer.analysis import svg_plots
>>> svg_plots.html(svg_plots.reward_vs_actions(run.episodes, link=lambda e: f"episode?episode={e}"))
"""

from __future__ import annotations

import base64
import dataclasses
import html as _html
import math
import time
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

from ares_viewer.analysis import aggregate_plots, plots
from ares_viewer.model import colours
from ares_viewer.runs import run as runs

Link = Callable[[str], str]
"""An episode id to the URL that opens it."""

WIDTH, HEIGHT = 560, 300
_TOP, _RIGHT, _BOTTOM = 44, 14, 48  # room for the legend above the plot, and the x ticks and title below
_LEFT = 58
_INK, _MUTED, _GRID = "#31333f", "#6e7781", "#e6e8eb"
_FONT = "font-family=\"sans-serif\""
_POINT = 4.5  # a point's radius
_HIT = 7.0  # the radius of a point's link (a little wider than the point)
_MEAN = "#0969da"
_BAND = "rgba(9, 105, 218, 0.18)"
_SERIES = (*plots.RUN_COLOURS, "#8250df", "#1a7f37")
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
               172800, 604800, 2592000, 7776000, 31536000)


@dataclasses.dataclass(frozen=True)
class Mark:
    """A place on a chart (in the drawing's units) with its hover text, and the link a click follows (None: none)."""

    x: float
    y: float
    width: float
    height: float
    text: str
    href: str | None = None
    episode: str | None = None
    round: bool = False


@dataclasses.dataclass(frozen=True)
class Chart:
    """A drawn chart: its title, the SVG (without the title: :func:`html` writes it as text), its size and marks."""

    title: str
    svg: str
    marks: tuple[Mark, ...] = ()
    width: int = WIDTH
    height: int = HEIGHT


@dataclasses.dataclass(frozen=True)
class _Frame:
    """The plot area and its two axes: data to drawing coordinates."""

    x_range: tuple[float, float]
    y_range: tuple[float, float]
    left: float = _LEFT
    width: int = WIDTH
    height: int = HEIGHT

    def x(self, value: float) -> float:
        low, high = self.x_range
        return self.left + (value - low) / ((high - low) or 1.0) * (self.width - _RIGHT - self.left)

    def y(self, value: float) -> float:
        low, high = self.y_range
        return self.height - _BOTTOM - (value - low) / ((high - low) or 1.0) * (self.height - _BOTTOM - _TOP)


def _text(x: float, y: float, text: str, *, anchor: str = "end", colour: str = _INK, size: int = 12,
          extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" fill="{colour}"{extra}>'
            f"{_html.escape(text)}</text>")


def _svg(width: int, height: int, parts: Iterable[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" {_FONT}>' + "".join(parts) + "</svg>")


def nice_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round values from ``low`` to ``high`` (1, 2 or 5 times a power of ten apart), at most ``most`` + 1."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / max(most, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(s * power for s in (1, 2, 5, 10) if s * power >= raw)
    first = math.ceil(low / step - 1e-9)
    return [round(k * step, 12) for k in range(first, math.floor(high / step + 1e-9) + 1)]


def _time_label(seconds: float, step: float) -> str:
    moment = time.gmtime(seconds)
    if step >= 86400:
        return time.strftime("%b %d", moment)
    return time.strftime("%H:%M:%S" if step < 60 else "%H:%M", moment)


def time_ticks(low: float, high: float, most: int = 5) -> list[tuple[float, str]]:
    """Ticks of a time axis from ``low`` to ``high`` (Unix seconds, UTC), at most ``most`` + 1, with their labels."""
    if high <= low:
        return [(low, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(low)))]
    step = next((s for s in _TIME_STEPS if (high - low) / s <= most), _TIME_STEPS[-1])
    first = math.ceil(low / step) * step
    ticks = [first + k * step for k in range(int((high - first) // step) + 1)]
    return [(t, _time_label(t, step)) for t in ticks]


def _axes(frame: _Frame, x_ticks: Sequence[tuple[float, str]], y_ticks: Sequence[tuple[float, str]],
          x_title: str, y_title: str) -> list[str]:
    """Grid lines, ticks and the axes' titles of ``frame``."""
    top, bottom = _TOP, frame.height - _BOTTOM
    right = frame.width - _RIGHT
    parts = [f'<rect x="{frame.left}" y="{top}" width="{right - frame.left}" height="{bottom - top}" fill="white"/>']
    for value, label in y_ticks:
        y = frame.y(value)
        parts += [f'<line x1="{frame.left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="{_GRID}"/>',
                  _text(frame.left - 6, y + 4, label, colour=_MUTED)]
    for value, label in x_ticks:
        x = frame.x(value)
        parts.append(_text(x, bottom + 16, label, anchor="middle", colour=_MUTED))
    parts += [f'<line x1="{frame.left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="{_MUTED}"/>',
              _text((frame.left + right) / 2, frame.height - 8, x_title, anchor="middle"),
              _text(13, (top + bottom) / 2, y_title, anchor="middle",
                    extra=f' transform="rotate(-90 13 {(top + bottom) / 2:.1f})"')]
    return parts


def _legend(items: Sequence[tuple[str, str, str]], width: int = WIDTH) -> list[str]:
    """The legend in rows above the plot: (name, colour, shape: ``box``, ``dot``, ``ring`` or ``line``)."""
    parts, x, y = [], 0.0, 14.0
    for name, colour, shape in items:
        span = 22 + 6.5 * len(name)
        if x and x + span > width:
            x, y = 0.0, y + 15
        if shape == "box":
            parts.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{colour}"/>')
        elif shape == "line":
            parts.append(f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 12:.1f}" y2="{y - 4:.1f}" stroke="{colour}" '
                         'stroke-width="2.5"/>')
        else:
            parts.append(_point(x + 5, y - 4, colour, hollow=shape == "ring"))
        parts.append(_text(x + 16, y, name, anchor="start"))
        x += span + 10
    return parts


def _point(x: float, y: float, colour: str, *, hollow: bool = False, opacity: float = 1.0) -> str:
    fill = "none" if hollow else colour
    faded = f' opacity="{opacity:g}"' if opacity < 1 else ""
    return (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{_POINT}" fill="{fill}" stroke="{colour}" '
            f'stroke-width="{1.5 if hollow else 0.8}"{faded}/>')


def _polyline(points: Iterable[tuple[float, float]], colour: str, width: float = 2.0) -> str:
    joined = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline points="{joined}" fill="none" stroke="{colour}" stroke-width="{width}"/>'


def _empty(title: str, why: str, width: int = WIDTH, height: int = HEIGHT) -> Chart:
    return Chart(title, _svg(width, height, [_text(width / 2, height / 2, why, anchor="middle", colour=_MUTED)]),
                 width=width, height=height)


def _episode_text(row) -> str:
    """A point's hover text: the task, the outcome, the reward (or none), the actions, the episode's short id."""
    reward = f"reward {row.total_reward:.3g}" if pd.notna(row.total_reward) else "no reward"
    return f"{row.task_name}\n{row.outcome} · {reward} · {row.num_actions} actions\n{row.episode_id}"


def _episode_mark(x: float, y: float, row, link: Link | None) -> Mark:
    episode = str(row.episode_id)
    return Mark(x - _HIT, y - _HIT, 2 * _HIT, 2 * _HIT, _episode_text(row), link(episode) if link else None, episode,
                round=True)


def _reward_ticks(low: float, high: float) -> list[tuple[float, str]]:
    return [(t, f"{t:g}") for t in nice_ticks(low, high, 5)] if high > low else [(low, f"{low:g}")]


@dataclasses.dataclass(frozen=True)
class _Points:
    """An episodes' scatter: which column is x (``x``, read by ``x_of``), the axes' titles and its link."""

    x_of: Callable[[pd.DataFrame], pd.Series]
    x_title: str
    title: str
    link: Link | None
    timed: bool = False


def _scatter(episodes: pd.DataFrame, spec: _Points, rolling: int | None = None) -> Chart:
    """Episodes as points at (``spec.x_of``, reward), one colour per outcome; those without a reward on a band of
    their own below the rewards, hollow (grey when unscored, else their outcome's colour); a rolling mean of the
    rewards over ``rolling`` consecutive points when given."""
    frame = episodes.assign(xpos=spec.x_of(episodes).astype("float64")).dropna(subset=["xpos"])
    if frame.empty:
        return _empty(spec.title, "No episode to draw" + (": none records its start time." if spec.timed else "."))
    missing = frame["total_reward"].isna()
    rewarded, without = frame[~missing], frame[missing]
    rewards = rewarded["total_reward"].astype("float64")
    low, high = (float(rewards.min()), float(rewards.max())) if len(rewards) else (0.0, 1.0)
    band = low - max(high - low, 1.0) * 0.25 if len(without) else None
    pad = max(high - low, 1.0) * 0.08
    x_low, x_high = float(frame["xpos"].min()), float(frame["xpos"].max())
    x_pad = max((x_high - x_low) * 0.04, 60.0 if spec.timed else 0.5)
    area = _Frame((x_low - x_pad, x_high + x_pad), ((band if band is not None else low) - pad, high + pad))
    y_ticks = _reward_ticks(low, high)
    if band is not None:
        unscored = runs.unscored(without)
        y_ticks = [(band, plots.UNSCORED if bool(unscored.all()) else "no reward"), *y_ticks]
    x_ticks = (time_ticks(*area.x_range) if spec.timed
               else [(t, f"{t:g}") for t in nice_ticks(*area.x_range)])
    parts = _axes(area, x_ticks, y_ticks, spec.x_title + (" (UTC)" if spec.timed else ""), "reward")
    legend: list[tuple[str, str, str]] = []
    marks: list[Mark] = []
    if band is not None:
        parts.append(f'<rect x="{area.left}" y="{area.y(band) - 9:.1f}" width="{WIDTH - _RIGHT - area.left}" '
                     f'height="18" fill="#f6f8fa"/>')
        for name, colour, rows in _no_reward_groups(without):
            legend.append((name, colour, "ring"))
            for row in rows.itertuples():
                x, y = area.x(row.xpos), area.y(band)
                parts.append(_point(x, y, colour, hollow=True))
                marks.append(_episode_mark(x, y, row, spec.link))
    ordered = rewarded.sort_values("xpos")
    for outcome, part in plots._by_outcome(ordered):
        colour = colours.outcome_colour(outcome)
        legend.append((outcome, colour, "dot"))
        for row in part.itertuples():
            x, y = area.x(row.xpos), area.y(row.total_reward)
            parts.append(_point(x, y, colour))
            marks.append(_episode_mark(x, y, row, spec.link))
    if rolling and len(ordered):
        mean = ordered["total_reward"].astype("float64").rolling(rolling, min_periods=1).mean()
        parts.append(_polyline(zip(map(area.x, ordered["xpos"]), map(area.y, mean), strict=True), _MEAN))
        legend.append((f"rolling mean ({rolling})", _MEAN, "line"))
    return Chart(spec.title, _svg(WIDTH, HEIGHT, [*parts, *_legend(legend)]), tuple(marks))


def _no_reward_groups(without: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """The episodes without a reward by kind, as ``plots`` names and colours them: the unscored ones, then the
    failures without a reward per outcome."""
    unscored = runs.unscored(without)
    groups = [(f"{plots.UNSCORED} ({int(unscored.sum())})", "#8c959f", without[unscored])]
    groups += [(f"{outcome}, no reward ({len(rows)})", colours.outcome_colour(outcome), rows)
               for outcome, rows in plots._by_outcome(without[~unscored])]
    return [g for g in groups if not g[2].empty]


def reward_over_time(episodes: pd.DataFrame, *, link: Link | None = None, window: int = 5) -> Chart:
    """Each episode's reward at its start time (a colour per outcome), a rolling mean of the rewards over ``window``
    consecutive episodes, the episodes without a reward on their band (``plots.reward_over_time``)."""
    return _scatter(episodes, _Points(lambda f: f["start_time"], "episode start", "Reward over time (rolling mean of "
                                      "the episodes with a reward)", link, timed=True), rolling=window)


def reward_vs_actions(episodes: pd.DataFrame, *, link: Link | None = None) -> Chart:
    """Each episode's reward against its number of actions (``plots.reward_vs_actions``)."""
    return _scatter(episodes, _Points(lambda f: f["num_actions"], "actions", "Reward vs number of actions", link))


def reward_histogram(bins: pd.DataFrame, unscored: int = 0, failed: int = 0) -> Chart:
    """Episodes per reward bin, stacked by outcome (``queries.reward_histogram``); the title counts those left out
    for having no reward (``aggregate_plots.reward_histogram``). Each bar spans its bin; its hover names the bin."""
    title = "Reward distribution" + plots.not_shown(unscored, failed)
    if bins.empty:
        return _empty(title, "No episode has a reward.")
    ticks = aggregate_plots._bin_ticks(bins)
    totals = bins.groupby(["low", "high"])["episodes"].sum()
    most = float(totals.max())
    area = _Frame(tuple(ticks["range"]), (0.0, most * 1.05))
    parts = _axes(area, list(zip(ticks["tickvals"], ticks["ticktext"], strict=True)),
                  [(t, f"{t:g}") for t in nice_ticks(0, most, 5) if t == int(t)], "reward", "episodes")
    present = set(bins["outcome"])
    outcomes = [o for o in colours.OUTCOME_COLOURS if o in present] + sorted(present - set(colours.OUTCOME_COLOURS))
    stacked: dict[tuple[float, float], float] = {}
    marks = []
    for outcome in outcomes:
        colour = colours.outcome_colour(outcome)
        for row in bins[bins["outcome"] == outcome].itertuples():
            under = stacked.get((row.low, row.high), 0.0)
            x0, x1 = area.x(row.low), area.x(row.high)
            y0, y1 = area.y(under + row.episodes), area.y(under)
            stacked[(row.low, row.high)] = under + row.episodes
            parts.append(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" '
                         f'fill="{colour}" stroke="white"/>')
            marks.append(Mark(x0, y0, x1 - x0, y1 - y0,
                              f"{outcome}: {row.episodes} episodes, {aggregate_plots._bin_range(row.low, row.high)}"))
    legend = [(o, colours.outcome_colour(o), "box") for o in outcomes]
    return Chart(title, _svg(WIDTH, HEIGHT, [*parts, *_legend(legend)]), tuple(marks))


def _short(text: str, most: int = 30) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def success_by_task(tasks: pd.DataFrame, total: int) -> Chart:
    """Success rate of the most attempted tasks (``queries.per_task``), highest first, each bar labelled with its
    successes of its scored attempts and its unscored ones (``aggregate_plots.success_by_task``)."""
    frame = tasks.sort_values(["rate", "attempts"], ascending=[False, True], na_position="last")
    title = "Success rate per task" + (f" (the {len(frame)} most attempted of {total:,} tasks)"
                                       if total > len(frame) else "")
    if frame.empty:
        return _empty(title, "No task.")
    names = [str(t) for t in frame["task_name"]]
    left = min(220.0, 12 + 6.6 * max(len(_short(n)) for n in names))
    height = max(200, 40 + _TOP + 22 * len(frame))
    area = _Frame((0.0, 1.0), (0.0, float(len(frame))), left=left, height=height)
    parts = _axes(area, [(t, f"{t:.0%}") for t in (0, 0.25, 0.5, 0.75, 1)], [], "success rate", "")
    marks = []
    for n, (name, row) in enumerate(zip(names, frame.itertuples(), strict=True)):
        top, bottom = area.y(len(frame) - n), area.y(len(frame) - n - 1)
        label = f"{row.successes}/{row.scored}" + (f", {row.attempts - row.scored} unscored"
                                                   if row.attempts > row.scored else "")
        rate = row.rate if pd.notna(row.rate) else None
        end = area.x(rate or 0.0)
        if rate:
            parts.append(f'<rect x="{left:.1f}" y="{top + 3:.1f}" width="{end - left:.1f}" '
                         f'height="{bottom - top - 6:.1f}" fill="{colours.OUTCOME_COLOURS["completed"]}"/>')
        inside = rate is not None and rate > 0.75
        parts += [_text(left - 6, (top + bottom) / 2 + 4, _short(name)),
                  _text(end - 4 if inside else end + 4, (top + bottom) / 2 + 4, label,
                        anchor="end" if inside else "start", colour="white" if inside else _INK)]
        said = f"{rate:.0%} success" if rate is not None else "no scored attempt"
        marks.append(Mark(0, top, WIDTH - _RIGHT, bottom - top, f"{name}: {said} ({label})"))
    return Chart(title, _svg(WIDTH, height, parts), tuple(marks), height=height)


def _band_parts(area: _Frame, x: Sequence[float], low: Sequence[float], high: Sequence[float], fill: str) -> str:
    outline = [*zip(map(area.x, x), map(area.y, high), strict=True),
               *reversed(list(zip(map(area.x, x), map(area.y, low), strict=True)))]
    return f'<polygon points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in outline)}" fill="{fill}" stroke="none"/>'


def _value_range(*columns: pd.Series) -> tuple[float, float]:
    values = pd.concat([c.astype("float64") for c in columns]).dropna()
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    pad = max(high - low, 1e-9) * 0.08 if high > low else 0.5
    return low - pad, high + pad


def reward_bands(bands: pd.DataFrame, *, title: str = "Reward over time (the episodes with a reward)",
                 x_title: str | None = None) -> Chart:
    """Mean reward and its 10-90% band per bin of consecutive episodes with a reward (``queries.reward_bands``;
    ``aggregate_plots.reward_bands``), each bin's mean and count on hover."""
    bands = bands.dropna(subset=["mean"])
    timed = bool(len(bands)) and "timed" in bands.columns and bool(bands["timed"].iloc[0])
    x_title = x_title or ("episode start (UTC)" if timed else "episode (run order)")
    if bands.empty:
        return _empty(title, "No episode has a reward.")
    x = bands["x"].astype("float64")
    area = _Frame((float(x.min()), float(x.max()) if x.max() > x.min() else float(x.min()) + 1),
                  _value_range(bands["p10"], bands["p90"], bands["mean"]))
    x_ticks = time_ticks(*area.x_range) if timed else [(t, f"{t:,.0f}") for t in nice_ticks(*area.x_range)]
    parts = _axes(area, x_ticks, _reward_ticks(*area.y_range), x_title, "reward")
    parts.append(_band_parts(area, list(x), list(bands["p10"]), list(bands["p90"]), _BAND))
    parts.append(_polyline(zip(map(area.x, x), map(area.y, bands["mean"]), strict=True), _MEAN))
    marks = tuple(Mark(area.x(a) - 4, area.y(m) - 4, 8, 8, f"mean reward {m:.3g} over {n:,} episodes", round=True)
                  for a, m, n in zip(x, bands["mean"], bands["episodes"], strict=True))
    legend = [("10–90% of episodes", _BAND, "box"), ("mean reward", _MEAN, "line")]
    return Chart(title, _svg(WIDTH, HEIGHT, [*parts, *_legend(legend)]), marks)


def iteration_bands(frame: pd.DataFrame, *, width: int = WIDTH) -> Chart:
    """Training progress: per split, the mean reward per iteration and its 10-90% band (``queries.per_iteration``;
    ``aggregate_plots.iteration_bands``)."""
    title = "Reward over training iterations"
    frame = frame.dropna(subset=["mean"])
    if frame.empty:
        return _empty(title, "No rollout has a reward.", width)
    area = _Frame(_span(frame["iteration"]), _value_range(frame["p10"], frame["p90"], frame["mean"]), width=width)
    parts = _axes(area, [(t, f"{t:g}") for t in nice_ticks(*area.x_range) if t == int(t)],
                  _reward_ticks(*area.y_range), "iteration", "reward")
    marks, legend = [], []
    for n, (split, part) in enumerate(frame.groupby("split", sort=True)):
        colour = _SERIES[n % len(_SERIES)]
        x = list(part["iteration"].astype("float64"))
        parts.append(_band_parts(area, x, list(part["p10"]), list(part["p90"]), "rgba(110, 119, 129, 0.18)"))
        parts.append(_polyline(zip(map(area.x, x), map(area.y, part["mean"]), strict=True), colour, 2.5))
        legend.append((f"{split} mean (10–90% band)", colour, "line"))
        marks += [Mark(area.x(i) - 4, area.y(m) - 4, 8, 8,
                       f"{split} · iteration {i:.0f}: mean reward {m:.3g} ({e:,} rollouts)", round=True)
                  for i, m, e in zip(x, part["mean"], part["episodes"], strict=True)]
    return Chart(title, _svg(width, HEIGHT, [*parts, *_legend(legend, width)]), tuple(marks), width=width)


def _span(values: pd.Series) -> tuple[float, float]:
    low, high = float(values.min()), float(values.max())
    pad = max((high - low) * 0.03, 0.5)
    return low - pad, high + pad


def _iteration_series(frame: pd.DataFrame) -> pd.Series:
    """Each rollout's series as ``plots.reward_over_iterations`` names it: its split (``all`` when none), after
    its training log's name when the folder holds several."""
    split = frame["split"] if "split" in frame.columns else pd.Series("all", index=frame.index)
    series = split.fillna("all").astype(str)
    if "group" in frame.columns:
        logs = frame["group"].fillna("").astype(str).str.split("/").str[0]
        if logs.nunique() > 1:
            series = logs + " · " + series
    return series


def reward_over_iterations(episodes: pd.DataFrame, *, link: Link | None = None, width: int = WIDTH) -> Chart:
    """Training progress: each series' rollouts (faint points, each a link to its episode) and mean reward per
    iteration (``plots.reward_over_iterations``); rollouts without a reward or an iteration are left out."""
    title = "Reward over training iterations"
    frame = episodes[episodes["total_reward"].notna()] if "iteration" in episodes.columns else episodes.iloc[:0]
    frame = frame.dropna(subset=["iteration"]) if "iteration" in frame.columns else frame
    if frame.empty:
        return _empty(title, "No rollout has a reward and an iteration.", width)
    frame = frame.assign(series=_iteration_series(frame), iteration=frame["iteration"].astype("float64"))
    rewards = frame["total_reward"].astype("float64")
    area = _Frame(_span(frame["iteration"]), _value_range(rewards), width=width)
    parts = _axes(area, [(t, f"{t:g}") for t in nice_ticks(*area.x_range) if t == int(t)],
                  _reward_ticks(*area.y_range), "iteration", "reward")
    marks, legend = [], []
    for n, (name, part) in enumerate(frame.groupby("series", sort=True)):
        colour = _SERIES[n % len(_SERIES)]
        for row in part.itertuples():
            x, y = area.x(row.iteration), area.y(row.total_reward)
            parts.append(_point(x, y, colour, opacity=0.35))
            marks.append(_episode_mark(x, y, row, link))
        means = part.groupby("iteration")["total_reward"].agg(["mean", "size"]).reset_index()
        parts.append(_polyline(zip(map(area.x, means["iteration"]), map(area.y, means["mean"]), strict=True),
                               colour, 2.5))
        legend += [(f"{name} rollouts", colour, "dot"), (f"{name} mean", colour, "line")]
        marks += [Mark(area.x(i) - 4, area.y(m) - 4, 8, 8,
                       f"{name} · iteration {i:.0f}: mean reward {m:.3g} ({s} rollouts)", round=True)
                  for i, m, s in zip(means["iteration"], means["mean"], means["size"], strict=True)]
    return Chart(title, _svg(width, HEIGHT, [*parts, *_legend(legend, width)]), tuple(marks), width=width)


def _style(mark: Mark, chart: Chart) -> str:
    box = (f"left:{100 * mark.x / chart.width:.3f}%;top:{100 * mark.y / chart.height:.3f}%;"
           f"width:{100 * mark.width / chart.width:.3f}%;height:{100 * mark.height / chart.height:.3f}%")
    return f"position:absolute;{box}" + (";border-radius:50%" if mark.round else "")


_SAME_PLACE = 1.0  # drawing units within which two points sit on each other (a point is 9 units wide)
_NAMED_BELOW = 5  # the other episodes a covering point's tooltip names


def _covering(marks: Sequence[Mark]) -> list[Mark]:
    """``marks`` with each episode point that covers others (drawn later at the same place, so the one a click
    reaches) saying in its tooltip how many it covers and naming the first of them."""
    under: dict[tuple[int, int], list[Mark]] = {}
    shown = list(marks)
    for n, mark in enumerate(marks):
        if mark.episode is None:
            continue
        place = (round(mark.x / _SAME_PLACE), round(mark.y / _SAME_PLACE))
        below = under.setdefault(place, [])
        if below:
            ids = ", ".join(str(m.episode)[:8] for m in reversed(below[-_NAMED_BELOW:]))
            more = "…" if len(below) > _NAMED_BELOW else ""
            other = "episode" if len(below) == 1 else "episodes"
            shown[n] = dataclasses.replace(mark, text=f"{mark.text}\nover {len(below)} other {other} at this "
                                                      f"point: {ids}{more}")
        below.append(mark)
    return shown


def html(chart: Chart, name: str = "") -> str:
    """``chart`` as HTML: its title as text, the drawing as an image, and each mark over it: a link (``<a href>``,
    opened in the same tab) where it has one, its hover text as a tooltip (``title``), a point that covers others
    saying so. ``name`` goes into the ``data-chart`` attribute (to find the chart on a page)."""
    drawing = base64.b64encode(chart.svg.encode("utf-8")).decode("ascii")
    title = _html.escape(chart.title)
    parts = [f'<div class="ares-chart" data-chart="{_html.escape(name)}">',
             f'<div class="ares-chart-title" style="font-weight:600;margin:0 0 0.25rem 0">{title}</div>',
             '<div style="position:relative;width:100%">',
             f'<img alt="{title}" src="data:image/svg+xml;base64,{drawing}" style="display:block;width:100%;'
             'height:auto">']
    for mark in _covering(chart.marks):
        text = _html.escape(mark.text)
        if mark.href is not None:
            parts.append(f'<a href="{_html.escape(mark.href)}" title="{text}" '
                         f'data-episode="{_html.escape(mark.episode or "")}" style="{_style(mark, chart)}"></a>')
        else:
            parts.append(f'<span title="{text}" style="{_style(mark, chart)}"></span>')
    return "".join(parts) + "</div></div>"
