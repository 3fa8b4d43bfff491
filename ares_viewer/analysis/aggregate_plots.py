"""Plotly figures of a run's aggregates (``Run.queries``, ``index.queries``): a few hundred marks whatever the
run's size. Episodes without a reward (unscored, or failed without one) are left out of the reward figures, as in
``plots`` and as the mean reward leaves them out.

>>> from ares_viewer import aggregate_plots
>>> aggregate_plots.reward_bands(run.queries.reward_bands()).show()
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ares_viewer.analysis import plots
from ares_viewer.model import colours, render

_BAND = "rgba(9, 105, 218, 0.18)"
_LINE = "#0969da"


def reward_histogram(bins: pd.DataFrame, unscored: int = 0, failed: int = 0) -> go.Figure:
    """Episodes per reward bin, stacked by outcome (``queries.reward_histogram``); the title counts those left out
    for having no reward: ``unscored`` ones and ``failed`` ones (errored, truncated or unfinished without a
    reward). Each bar spans its bin, the axis ticks fall on bin edges and the hover names the bin's range."""
    fig = go.Figure()
    outcomes = [o for o in colours.OUTCOME_COLOURS if o in set(bins["outcome"])]
    outcomes += sorted(set(bins["outcome"]) - set(outcomes))
    for outcome in outcomes:
        part = bins[bins["outcome"] == outcome]
        fig.add_trace(go.Bar(**_bin_bars(part), y=part["episodes"], name=outcome,
                             marker_color=colours.outcome_colour(outcome),
                             hovertemplate=f"{outcome}: %{{y}} episodes, %{{customdata}}<extra></extra>"))
    title = "Reward distribution" + plots.not_shown(unscored, failed)
    plots.layout(fig, title, barmode="stack", xaxis_title="reward", yaxis_title="episodes")
    fig.update_xaxes(**_bin_ticks(bins))
    return fig


def _bin_bars(part: pd.DataFrame) -> dict:
    """A histogram's bars from its bins (``low``, ``high``): each drawn over its whole bin, its range in the hover
    (``customdata``)."""
    return {"x": part["low"], "offset": 0, "width": part["high"] - part["low"],
            "customdata": [_bin_range(low, high) for low, high in zip(part["low"], part["high"], strict=True)],
            "marker_line": {"width": 1, "color": "white"}}


def _bin_range(low: float, high: float) -> str:
    return f"reward {low:.3g} to {high:.3g}"


def _bin_ticks(bins: pd.DataFrame, most: int = 6) -> dict:
    """The x axis of a histogram of ``bins`` (``low``, ``high``, all as wide): at most ``most`` ticks, on bin edges,
    and the whole binned range shown. A single bin (every reward the same) gets one tick, on its value."""
    if bins.empty:
        return {}
    low, high = float(bins["low"].min()), float(bins["high"].max())
    width = float((bins["high"] - bins["low"]).iloc[0])
    count = max(1, round((high - low) / width))
    if count == 1:
        return {"tickmode": "array", "tickvals": [(low + high) / 2], "ticktext": [f"{(low + high) / 2:.3g}"],
                "range": [low, high]}
    every = next(k for k in range(1, count + 1) if count % k == 0 and count // k < most) if count >= most else 1
    edges = [low + i * width for i in range(0, count + 1, every)]
    return {"tickmode": "array", "tickvals": edges, "ticktext": [f"{e:.3g}" for e in edges], "range": [low, high]}


def success_by_task(tasks: pd.DataFrame, total: int) -> go.Figure:
    """Success rate of the most attempted tasks (``queries.per_task``); the title says when some are left out."""
    frame = tasks.sort_values(["rate", "attempts"], ascending=[True, False])
    labels = [f"{s}/{n}" + (f", {a - n} unscored" if a > n else "")
              for s, n, a in zip(frame["successes"], frame["scored"], frame["attempts"], strict=True)]
    fig = go.Figure(go.Bar(x=frame["rate"], y=frame["task_name"], orientation="h",
                           marker_color=colours.OUTCOME_COLOURS["completed"], text=labels, textposition="auto",
                           hovertemplate="%{y}: %{x:.0%} success (%{text})<extra></extra>"))
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    title = "Success rate per task"
    if total > len(frame):
        title += f" (the {len(frame)} most attempted of {total:,} tasks)"
    plots.layout(fig, title, xaxis_title="success rate", height=max(240, 60 + 22 * len(frame)))
    return fig


def reward_bands(bands: pd.DataFrame, *, title: str = "Reward over time (the episodes with a reward)",
                 x_title: str | None = None) -> go.Figure:
    """Mean reward and its 10-90% band per bin of consecutive episodes with a reward (``queries.reward_bands``)."""
    timed = bool(len(bands)) and "timed" in bands.columns and bool(bands["timed"].iloc[0])
    x = pd.to_datetime(bands["x"], unit="s", utc=True) if timed else bands["x"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=bands["p90"], mode="lines", line={"width": 0}, showlegend=False,
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=bands["p10"], mode="lines", line={"width": 0}, fill="tonexty",
                             fillcolor=_BAND, name="10–90% of episodes", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=bands["mean"], mode="lines", name="mean reward", line={"color": _LINE, "width": 2},
                             text=[f"{n:,} episodes" for n in bands["episodes"]],
                             hovertemplate="mean reward %{y:.3g} over %{text}<extra></extra>"))
    plots.layout(fig, title, yaxis_title="reward",
                 xaxis_title=x_title or ("episode start (UTC)" if timed else "episode (run order)"))
    return fig


def actions_heatmap(grid: pd.DataFrame) -> go.Figure:
    """Episodes per (actions, reward) cell (``queries.actions_grid``)."""
    fig = go.Figure(go.Histogram2d(x=grid["actions"], y=grid["reward"], z=grid["episodes"], histfunc="sum",
                                   colorscale="Blues", colorbar={"title": "episodes"}))
    plots.layout(fig, "Reward vs number of actions", xaxis_title="actions", yaxis_title="reward")
    return fig


def iteration_bands(frame: pd.DataFrame) -> go.Figure:
    """Training progress: per split, the mean reward per iteration and its 10-90% band (``queries.per_iteration``)."""
    fig = go.Figure()
    for n, (split, part) in enumerate(frame.groupby("split", sort=True)):
        colour = (*plots.RUN_COLOURS, "#8250df", "#1a7f37")[n % 4]
        fig.add_trace(go.Scatter(x=part["iteration"], y=part["p90"], mode="lines", line={"width": 0},
                                 legendgroup=split, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=part["iteration"], y=part["p10"], mode="lines", line={"width": 0}, fill="tonexty",
                                 fillcolor="rgba(110, 119, 129, 0.18)", legendgroup=split, name=f"{split} 10–90%",
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=part["iteration"], y=part["mean"], mode="lines", name=f"{split} mean",
                                 line={"color": colour, "width": 2.5}, legendgroup=split,
                                 text=[f"{e:,} rollouts" for e in part["episodes"]],
                                 hovertemplate=f"{split} · iteration %{{x:.0f}}: mean reward %{{y:.3g}} (%{{text}})"
                                               "<extra></extra>"))
    plots.layout(fig, "Reward over training iterations", xaxis_title="iteration", yaxis_title="reward")
    return fig


def compare_reward_histograms(runs: list[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Reward histograms of several runs (``queries.reward_histogram`` each), overlaid as the share of each run's
    scored episodes per bin (``plots.compare_reward_distributions`` from the aggregates)."""
    fig = go.Figure()
    for (label, bins), colour in zip(runs, plots.RUN_COLOURS * len(runs), strict=False):
        per_bin = bins.groupby(["low", "high"], as_index=False)["episodes"].sum()
        if per_bin.empty:  # a run none of whose episodes is scored: no bars (an empty width fails plotly)
            continue
        share = 100 * per_bin["episodes"] / max(int(per_bin["episodes"].sum()), 1)
        fig.add_trace(go.Bar(**_bin_bars(per_bin), y=share, name=plots.plain(label), opacity=0.6, marker_color=colour,
                             hovertemplate="%{y:.1f}% of episodes, %{customdata}<extra></extra>"))
    plots.layout(fig, "Reward distribution per run", barmode="overlay", xaxis_title="reward",
                 yaxis_title="% of episodes")
    return fig


def compare_task_rates(runs: list[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Per task, each run's success rate as grouped bars (``queries.per_task`` of each run: its most attempted
    tasks)."""
    fig = go.Figure()
    for (label, tasks), colour in zip(runs, plots.RUN_COLOURS * len(runs), strict=False):
        frame = tasks.sort_values("task_name")
        fig.add_trace(go.Bar(x=[plots.plain(t) for t in frame["task_name"]], y=frame["rate"],
                             name=plots.plain(label), marker_color=colour))
    fig.update_yaxes(range=[0, 1], tickformat=".0%")
    plots.layout(fig, "Success rate per task, per run (the most attempted tasks)", barmode="group",
                 yaxis_title="success rate")
    return fig


# The colour of a task's dot by its place in a run comparison (``compare_runs``'s statuses); others are grey.
_STATUS_COLOURS = {"lost": "#cf222e", "gained": "#1a7f37", "same": "#6e7781"}


def task_differences(tasks: pd.DataFrame, labels: tuple[str, str], *, limit: int = 60) -> go.Figure:
    """Per task, B's success rate minus A's with its 95% interval (Newcombe's), as a dot plot: a ``Comparison``'s
    ``tasks`` (the first ``limit``: the most significant); each dot's ``customdata`` is its task, to pick it."""
    shown = tasks.dropna(subset=["difference"]).head(limit).iloc[::-1]
    fig = go.Figure()
    for status, part in shown.groupby("status", sort=False):
        fig.add_trace(go.Scatter(
            x=part["difference"], y=[plots.plain(t) for t in part["task_name"]], mode="markers", name=str(status),
            marker={"color": _STATUS_COLOURS.get(str(status), "#8c959f"), "size": 9},
            error_x={"type": "data", "symmetric": False, "array": part["high"] - part["difference"],
                     "arrayminus": part["difference"] - part["low"], "thickness": 1.2},
            customdata=part["task_name"],
            hovertext=[f"{plots.plain(r.task_name)}<br>{r.rate_a:.0%} of {r.judged_a} → {r.rate_b:.0%} of "
                       f"{r.judged_b}<br>p = {r.p_value:.3g}, q = {r.q_value:.3g}" for r in part.itertuples()],
            hoverinfo="text"))
    fig.add_vline(x=0, line_width=1, line_color="#8c959f")
    fig.update_xaxes(range=[-1.05, 1.05], tickformat="+.0%")
    plots.layout(fig, f"Success rate per task: {plots.plain(labels[1])} − {plots.plain(labels[0])} (95% intervals)",
                 height=max(300, 22 * len(shown) + 120), xaxis_title="difference in success rate",
                 yaxis={"type": "category"})
    return fig


def side_rates(sides: list[tuple[str, dict]]) -> go.Figure:
    """Each side's success rate over its judged episodes with its 95% Wilson interval (``Comparison.overall_a`` and
    ``overall_b``, with their labels). A side with no judged episode has no rate: no bar (never one at 0%), and the
    unknown mark with why in its place."""
    fig = go.Figure()
    for (label, overall), colour in zip(sides, plots.RUN_COLOURS, strict=False):
        rate = overall["rate"]
        if rate is None:
            fig.add_trace(go.Bar(x=[plots.plain(label)], y=[None], name=plots.plain(label), marker_color=colour))
            fig.add_annotation(x=plots.plain(label), y=0, yshift=12, showarrow=False,
                               text=f"{render.UNKNOWN} (no judged episode)")
            continue
        low, high = (rate, rate) if overall["low"] is None else (overall["low"], overall["high"])
        fig.add_trace(go.Bar(x=[plots.plain(label)], y=[rate], name=plots.plain(label), marker_color=colour,
                             error_y={"type": "data", "symmetric": False, "array": [high - rate],
                                      "arrayminus": [rate - low]},
                             hovertext=f"{overall['successes']:,} of {overall['judged']:,} judged", hoverinfo="text"))
    fig.update_yaxes(range=[0, 1], tickformat=".0%")
    plots.layout(fig, "Success rate by side", showlegend=False,
                 yaxis_title="success rate of the judged episodes (95% interval)")
    return fig



def failure_shift(shift: pd.DataFrame, labels: tuple[str, str], *, limit: int = 12) -> go.Figure:
    """The failure reasons that grew or shrank from A to B (``Comparison.failure_shift``: the ``limit`` largest
    changes), as horizontal bars of B's share of episodes less A's."""
    shown = shift.head(limit).iloc[::-1]
    fig = go.Figure(go.Bar(
        x=shown["change"], y=[plots.plain(r)[:80] for r in shown["reason"]], orientation="h",
        marker_color=["#cf222e" if c > 0 else "#1a7f37" for c in shown["change"]],
        hovertext=[f"{plots.plain(r.reason)}<br>{r.episodes_a:,} ({r.share_a:.1%}) → {r.episodes_b:,} ({r.share_b:.1%})"
                   for r in shown.itertuples()], hoverinfo="text"))
    fig.update_xaxes(tickformat="+.0%")
    plots.layout(fig, f"Failure causes that grew or shrank: {plots.plain(labels[1])} − {plots.plain(labels[0])}",
                 height=max(260, 26 * len(shown) + 120), xaxis_title="change in the share of episodes",
                 yaxis={"type": "category"})
    return fig
