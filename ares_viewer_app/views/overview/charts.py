"""The Overview's reward charts: SVG drawn on the server (``svg_plots``), each kept per state of the run's index.

The page's script (``overview.py``) runs anew on every script run, so a cache defined there would start empty each
time: the charts' cache lives here, in a module imported once per server.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

import streamlit as st

import ares_viewer
from ares_viewer.analysis import svg_plots
from ares_viewer.base.cache import BoundedCache
from ares_viewer_app.routing import state

# Episodes the clickable plots draw: all of a small run, an even sample of a large one.
_POINTS = 1000
# Columns the per-episode plots need (the sample they draw).
_SAMPLED = ("episode_id", "task_name", "outcome", "total_reward", "num_actions", "start_time", "iteration", "split",
            "group")


# The charts' HTML, per state of a run's index and view parameters (their points link to the episodes with them),
# kept across sessions: building them was a third of the page's warm script run (40 of 110 ms in a cProfile of
# small-a), paid again by every page load while this cache was defined in the page's script.
_FIGURES: BoundedCache[Any] = BoundedCache(maxsize=64)


def figure(run: ares_viewer.Run, name: str, make: Callable[[], Any]) -> Any:
    """What ``make`` builds for chart ``name`` of ``run``, built once per state of its index and view parameters (a
    chart's links carry them)."""
    return _FIGURES.get_or_compute((run.location, run.table.key, name, urllib.parse.urlencode(state.params())), make)


def _open_link(episode_id: str) -> str:
    """The Episode page at the first action of ``episode_id``, as ``choosers.go_to_episode`` opens it."""
    return state.link("episode", episode=episode_id, step=1)


def _chart(where: list[str], run: ares_viewer.Run, name: str, make: Callable[[], svg_plots.Chart]) -> None:
    """Chart ``name`` (``overview.<name>`` on the page), drawn as SVG on the server as HTML (an image under links
    and tooltips, no chart library in the browser: #46), added to ``where``."""
    where.append(figure(run, name, lambda: svg_plots.html(make(), f"overview.{name}")))


def grid(drawn: list[str]) -> str:
    """The charts as one element: a grid of two columns (one when the page is narrower than two charts of 22rem), a
    fifth chart (the training iterations', drawn wider) across both. One element, not four in two columns: every
    element costs the browser its own React and layout work (#46)."""
    cells = "".join(f'<div style="min-width:0{";grid-column:1/-1" if n == 4 else ""}">{chart}</div>'
                    for n, chart in enumerate(drawn))
    return ('<div class="ares-charts" style="display:grid;gap:1rem;grid-template-columns:'
            f'repeat(auto-fill,minmax(max(22rem,calc(50% - 0.5rem)),1fr))">{cells}</div>')


def charts(run) -> None:
    """The reward charts, from aggregate queries: a chart never gets more than a few thousand marks; a point that
    is an episode links to it."""
    asked = run.queries
    stats = run.stats()
    unscored, rewarded = stats["unscored"], stats["rewarded"]
    failed = stats["episodes"] - rewarded - unscored  # failures without a reward: "–" in the table
    if not rewarded:  # every reward figure would be empty: say why instead of drawing empty axes
        infra = stats["infrastructure_failures"]
        why = [f"{unscored:,} finished without anyone scoring them"] if unscored else []
        if failed:
            why.append(f"{failed:,} failed without a reward" + (
                f" ({infra:,} of them failures of the infrastructure)" if infra else ""))
        st.info("No reward plots: no episode of this run has a reward (" + "; ".join(why or ["none yet"]) + "). "
                "The failure groups below say why they failed.", icon=":material/bar_chart_off:")
        return
    drawn: list[str] = []  # in reading order: two a row, one a row on a narrow page
    _chart(drawn, run, "dist", lambda: svg_plots.reward_histogram(asked.reward_histogram(), unscored, failed))
    _chart(drawn, run, "tasks", lambda: svg_plots.success_by_task(*asked.per_task()))
    episodes = asked.sample(_POINTS, columns=_SAMPLED)  # every episode of a small run, an even sample of a large one
    sampled = len(episodes) < len(run)
    _chart(drawn, run, "time", lambda: svg_plots.reward_bands(asked.reward_bands()) if sampled
           else svg_plots.reward_over_time(episodes, link=_open_link))
    _chart(drawn, run, "actions", lambda: svg_plots.reward_vs_actions(episodes, link=_open_link))
    if "iteration" in asked.columns and episodes["iteration"].notna().any():
        _chart(drawn, run, "iterations", lambda: svg_plots.iteration_bands(asked.per_iteration(), width=1000)
               if sampled else svg_plots.reward_over_iterations(episodes, link=_open_link, width=1000))
    st.html(grid(drawn))
    if unscored or failed:
        without = unscored + failed
        st.caption(f"The reward plots show the {rewarded:,} episodes with a reward; the {without:,} without one (“–” "
                   f"in the table, left out of the mean reward) {'is' if without == 1 else 'are'} left out of the "
                   "reward axes: counted in the distribution's title, on their own “no reward” band in the "
                   "per-episode plots.")
    if sampled:
        st.caption(f"{len(run):,} episodes: curves show the mean and 10–90% band per bin, and the reward-vs-actions "
                   f"plot shows {len(episodes):,} episodes picked evenly over the run. Click a point to open it; "
                   "hover over a mark for its figures.")
    else:
        st.caption("Click a point to open its episode; hover over a mark for its figures.")
