"""Plotly figures of runs and episodes, shared by the app and notebooks.

Every function takes the library's tables (``Run.episodes``, ``Episode.steps_frame()``) and returns
a ``plotly.graph_objects.Figure``. Points that stand for an episode carry its id as ``customdata``
and points that stand for a step carry its index, so a click in the app opens what was clicked.

>>> from ares_viewer import plots
>>> plots.reward_over_time(run.episodes).show()
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ares_viewer.model import colours, render
from ares_viewer.runs import run
from ares_viewer.runs.index import queries

# One colour per outcome, the same in every figure, table and badge (``model.colours``).
OUTCOME_COLOURS = colours.OUTCOME_COLOURS
RUN_COLOURS = ("#0969da", "#d4640a")
_NONZERO_RC = "#cf222e"
_ZERO_RC = "#8c959f"
_LABEL = "#bc4c00"
# The current step on an episode's timeline: the step list's highlight colour, and the shape's name.
_CURRENT = "rgba(255, 189, 69, 0.35)"
CURRENT_STEP = "current step"
# The step timeline's colours, in this figure and in the app's light drawing of it
# (``ares_viewer_app.views.episode.timeline``).
TIMELINE_COLOURS = {"model": "#0969da", "ok": _ZERO_RC, "failed": _NONZERO_RC, "reward": "#bf8700",
                    "label": _LABEL, "current": _CURRENT, "prompt": "#0969da", "generated": "#8250df",
                    "rewrite": "#bf8700"}
TIMELINE_TITLE = ("Steps: time taken (red = non-zero return code), tokens; dashed = context rewritten; "
                  "shaded = this step")
# The step timeline's bars of each step's (command) seconds, the selected one outlined.
_SECONDS_BARS = ("command seconds", "seconds")
# Every figure's frame: the title at the top, the legend in one row between it and the plot (below the plot it
# ran into the x axis title), room for both in the top margin.
# The step timeline marks each step's tokens with a point up to this many steps.
_MARKED_STEPS = 40
_LAYOUT = {"margin": {"l": 40, "r": 10, "t": 72, "b": 40},
           "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"}}


def layout(fig: go.Figure, title: str, **kwargs) -> go.Figure:
    """``fig`` with ``title`` and the figures' shared frame (margins, the legend above the plot); ``kwargs`` go to
    ``update_layout``."""
    fig.update_layout(title={"text": title, "yref": "container", "y": 0.98, "yanchor": "top"}, **_LAYOUT, **kwargs)
    return fig


def plain(value: object) -> str:
    """Text from a file or a reviewer as plotly shows it literally: plotly reads ``<a href>``, ``<b>``... in
    labels and hover texts, and ``&lt;`` as ``<``."""
    return html.escape(str(value), quote=False)


def _episode_hover(frame: pd.DataFrame) -> list[str]:
    return [
        f"{plain(row.task_name)}<br>{plain(row.outcome)} · reward {row.total_reward:.3g} · {row.num_actions} "
        f"actions<br>{plain(row.episode_id[:8])}"
        if pd.notna(row.total_reward)
        else f"{plain(row.task_name)}<br>{plain(row.outcome)} · no reward · {row.num_actions} actions<br>"
             f"{plain(row.episode_id[:8])}"
        for row in frame.itertuples()
    ]


def _by_outcome(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    order = [o for o in OUTCOME_COLOURS if o in set(frame["outcome"])]
    order += sorted(set(frame["outcome"]) - set(order))
    return [(outcome, frame[frame["outcome"] == outcome]) for outcome in order]


UNSCORED = queries.UNSCORED_LABEL  # the category of the episodes that finished without a reward
_UNSCORED_COLOUR = "#8c959f"


def _no_reward(episodes: pd.DataFrame) -> pd.Series:
    """Which episodes have no reward (the episode table's "–"): the unscored ones and failures without one."""
    return episodes["total_reward"].isna()


def _rewarded(episodes: pd.DataFrame) -> pd.DataFrame:
    """The episodes with a reward, as the reward axes draw them (``reward_plotted``). Those without one (unscored,
    or an errored or unfinished failure) are left out of the axes, as the mean reward leaves them out."""
    frame = episodes[~_no_reward(episodes)].copy()
    frame["reward_plotted"] = frame["total_reward"]
    return frame


def _no_reward_band(fig: go.Figure, episodes: pd.DataFrame, x: pd.Series, rewarded: pd.DataFrame) -> None:
    """Episodes without a reward as their own category: hollow markers on a band below the rewards, never at a
    reward of 0; unscored ones grey, failures in their outcome's colour. The band is labelled "unscored" when
    every one of them is, else "no reward"."""
    part = episodes[_no_reward(episodes)]
    if part.empty:
        return
    rewards = rewarded["reward_plotted"] if len(rewarded) else pd.Series([0.0, 1.0])
    low, high = float(rewards.min()), float(rewards.max())
    band = low - max(high - low, 1.0) * 0.25
    unscored = run.unscored(part)
    groups = [(f"{UNSCORED} ({int(unscored.sum())})", _UNSCORED_COLOUR, part[unscored])]
    groups += [(f"{outcome}, no reward ({len(rows)})", colours.outcome_colour(outcome), rows)
               for outcome, rows in _by_outcome(part[~unscored])]
    for name, colour, rows in groups:
        if rows.empty:
            continue
        fig.add_trace(go.Scatter(
            x=x.loc[rows.index], y=[band] * len(rows), mode="markers", name=name,
            marker={"color": colour, "size": 9, "symbol": "circle-open"},
            customdata=rows["episode_id"], hovertext=_episode_hover(rows), hoverinfo="text",
        ))
    ticks = sorted({low, high})
    fig.update_yaxes(tickvals=[band, *ticks],
                     ticktext=[UNSCORED if unscored.all() else "no reward", *(f"{t:g}" for t in ticks)])


def not_shown(unscored: int, failed: int) -> str:
    """A reward figure's title note on the episodes without a reward it leaves out ("" when none)."""
    parts = [f"{unscored:,} {UNSCORED}"] * bool(unscored) + [f"{failed:,} failed without a reward"] * bool(failed)
    return f" ({', '.join(parts)}, not shown)" if parts else ""


def _not_shown(episodes: pd.DataFrame) -> str:
    missing = _no_reward(episodes)
    unscored = int(run.unscored(episodes).sum())
    return not_shown(unscored, int(missing.sum()) - unscored)


def reward_distribution(episodes: pd.DataFrame, *, bins: int = 20) -> go.Figure:
    """A histogram of the episodes' rewards, stacked by outcome; episodes without a reward (unscored, or failed
    without one) are left out and counted in the title."""
    frame = _rewarded(episodes)
    fig = go.Figure()
    for outcome, part in _by_outcome(frame):
        fig.add_trace(go.Histogram(x=part["reward_plotted"], name=outcome, nbinsx=bins,
                                   marker_color=colours.outcome_colour(outcome)))
    fig.update_layout(barmode="stack")
    return layout(fig, "Reward distribution" + _not_shown(episodes), xaxis_title="reward",
                   yaxis_title="episodes")


def success_by_task(episodes: pd.DataFrame) -> go.Figure:
    """Per task, the share of scored attempts with a positive reward (bar) and the counts (hover).

    Finished attempts nobody scored (``run.unscored``) are neither successes nor failures: they are left out
    of the rate and counted apart; a task with no scored attempt has no bar.
    """
    frame = episodes.assign(scored=~run.unscored(episodes), won=episodes["total_reward"].fillna(0.0) > 0)
    grouped = frame.groupby("task_name").agg(
        attempts=("episode_id", "size"), scored=("scored", "sum"), successes=("won", "sum")
    )
    grouped["rate"] = grouped["successes"] / grouped["scored"].where(grouped["scored"] > 0)
    grouped = grouped.sort_values(["rate", "attempts"], ascending=[True, False])
    labels = [f"{s}/{n}" + (f", {a - n} unscored" if a > n else "")
              for s, n, a in zip(grouped["successes"], grouped["scored"], grouped["attempts"], strict=True)]
    fig = go.Figure(go.Bar(
        x=grouped["rate"], y=[plain(task) for task in grouped.index], orientation="h",
        marker_color=colours.OUTCOME_COLOURS["completed"], customdata=grouped.index, text=labels,
        textposition="auto", hovertemplate="%{y}: %{x:.0%} success (%{text})<extra></extra>",
    ))
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    return layout(fig, "Success rate per task", xaxis_title="success rate",
                   height=max(240, 60 + 28 * len(grouped)))


def reward_over_time(episodes: pd.DataFrame, *, window: int = 5) -> go.Figure:
    """Each episode's reward at its start time (one trace per outcome) and a rolling mean of the reward.

    Args:
        episodes: a run's episode table.
        window: how many consecutive episodes the rolling mean averages.
    """
    timed = episodes.dropna(subset=["start_time"])
    frame = _rewarded(timed).sort_values("start_time")
    frame["started"] = pd.to_datetime(frame["start_time"], unit="s", utc=True)
    fig = go.Figure()
    _no_reward_band(fig, timed, pd.to_datetime(timed["start_time"], unit="s", utc=True), frame)
    for outcome, part in _by_outcome(frame):
        fig.add_trace(go.Scatter(
            x=part["started"], y=part["reward_plotted"], mode="markers", name=outcome,
            marker={"color": colours.outcome_colour(outcome), "size": 9},
            customdata=part["episode_id"], hovertext=_episode_hover(part), hoverinfo="text",
        ))
    rolling = frame["reward_plotted"].rolling(window, min_periods=1).mean()
    fig.add_trace(go.Scatter(x=frame["started"], y=rolling, mode="lines", name=f"rolling mean ({window})",
                             line={"color": "#0969da", "width": 2}, hoverinfo="skip"))
    return layout(fig, "Reward over time (rolling mean of the episodes with a reward)",
                  xaxis_title="episode start (UTC)", yaxis_title="reward")


def reward_vs_actions(episodes: pd.DataFrame) -> go.Figure:
    """Each episode's reward against its number of actions, one trace per outcome."""
    frame = _rewarded(episodes)
    fig = go.Figure()
    _no_reward_band(fig, episodes, episodes["num_actions"], frame)
    for outcome, part in _by_outcome(frame):
        fig.add_trace(go.Scatter(
            x=part["num_actions"], y=part["reward_plotted"], mode="markers", name=outcome,
            marker={"color": colours.outcome_colour(outcome), "size": 9},
            customdata=part["episode_id"], hovertext=_episode_hover(part), hoverinfo="text",
        ))
    return layout(fig, "Reward vs number of actions", xaxis_title="actions", yaxis_title="reward")


def _rc(returncode: object) -> str:
    """A return code as the timeline's hover says it; ``render.UNKNOWN`` where the file records none."""
    return render.UNKNOWN if returncode is None or pd.isna(returncode) else str(returncode)


def _seconds(value: float | None) -> str:
    """A time as the timeline's hover says it (``1.2 s``); ``render.UNKNOWN`` alone where the file records none."""
    return render.UNKNOWN if value is None or pd.isna(value) else f"{value:.1f} s"


def timeline_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The step timeline's numbers, one row per step after the first request (``steps``:
    ``Episode.steps_frame()``): ``index``; ``model`` and ``seconds``, the two stacked bars (model time and
    command time where the file records either and ``split`` is true, else 0 and the time since the previous
    step; an unknown time is 0); ``top``, their sum; ``failed`` (a non-zero return code or a failure);
    ``summary``, the step in words (its time, return code or failure, then the command's first 80 characters on a
    second line, as the file holds them)."""
    frame = steps[steps["kind"] != "FIRST"]
    failed = (frame["returncode"].fillna(0).astype(int) != 0) | frame["failure"].notna()
    total = pd.to_numeric(frame["duration"], errors="coerce").astype("float64")
    split = frame["model_time"].notna() | frame["command_time"].notna()
    summary = [
        f"step {row.index}{f': {s:.1f} s' if pd.notna(s) else ''}"
        + (f" (model {_seconds(row.model_time)}, command {_seconds(row.command_time)})"
           if pd.notna(row.model_time) or pd.notna(row.command_time) else "")
        + f" · {row.failure if isinstance(row.failure, str) else f'rc {_rc(row.returncode)}'}\n"
        f"{row.command[:80] if isinstance(row.command, str) else '(no command)'}"
        for row, s in zip(frame.itertuples(), total, strict=True)
    ]
    model = pd.to_numeric(frame["model_time"], errors="coerce").where(split).fillna(0).astype("float64")
    seconds = (pd.to_numeric(frame["command_time"], errors="coerce").where(split, total) if split.any() else total
               ).fillna(0).astype("float64")
    return pd.DataFrame({"index": frame["index"].to_numpy(), "model": model.to_numpy(),
                         "seconds": seconds.to_numpy(), "top": (model + seconds).to_numpy(),
                         "failed": failed.to_numpy(), "split": split.to_numpy(), "summary": summary})


def step_timeline(steps: pd.DataFrame, *, selected: int | None = None,
                  labels: Mapping[int, Sequence[str]] | None = None) -> go.Figure:
    """An episode's steps: seconds taken (bars, red for a failed command) over tokens per call.

    A step's seconds are its model time plus its command time where the file records them (two stacked bars),
    else the time since the previous step.

    Context rewrites are marked with a dashed line and rewards with a star; every bar and marker
    carries its step index as ``customdata``. The selected step is shaded across both rows (a shape named
    :data:`CURRENT_STEP`) and its bar outlined.

    Args:
        steps: ``Episode.steps_frame()``.
        selected: the step index to mark as the current one (no mark when it has no bar: step 0 or None).
        labels: step index -> review labels on that step, marked above its bar with their names.
    """
    frame = steps[steps["kind"] != "FIRST"]
    bars = timeline_steps(steps)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.6, 0.4], vertical_spacing=0.06)
    colours = [_NONZERO_RC if bad else _ZERO_RC for bad in bars["failed"]]
    hover = [plain(text).replace("\n", "<br>") for text in bars["summary"]]
    split = bool(bars["split"].any())
    if split:  # model time, then command time on top of it
        fig.add_trace(go.Bar(x=frame["index"], y=bars["model"], name="model seconds",
                             marker_color="#0969da", customdata=frame["index"], hovertext=hover, hoverinfo="text"),
                      row=1, col=1)
    bar_name = _SECONDS_BARS[0 if split else 1]
    fig.add_trace(go.Bar(x=frame["index"].tolist(), y=bars["seconds"], name=bar_name, marker_color=colours,
                         marker_line={"width": 0, "color": "#0969da"}, customdata=frame["index"],
                         hovertext=hover, hoverinfo="text"), row=1, col=1)
    heights = dict(zip(bars["index"], bars["top"], strict=True))
    rewarded = frame[frame["reward"].fillna(0) != 0]
    if len(rewarded):
        fig.add_trace(go.Scatter(x=rewarded["index"], y=[heights.get(k, 0) for k in rewarded["index"]],
                                 mode="markers+text", name="reward",
                                 marker={"symbol": "star", "size": 14, "color": "#bf8700"},
                                 text=[f"{r:g}" for r in rewarded["reward"]], textposition="top center",
                                 customdata=rewarded["index"], cliponaxis=False), row=1, col=1)
    if labels:
        marked = sorted(k for k, names in labels.items() if names)
        fig.add_trace(go.Scatter(x=marked, y=[heights.get(k, 0) for k in marked], mode="markers+text",
                                 name="review label", marker={"symbol": "triangle-down", "size": 12,
                                                              "color": _LABEL},
                                 text=[plain(", ".join(labels[k])) for k in marked], textposition="top center",
                                 textfont={"color": _LABEL}, customdata=marked, cliponaxis=False), row=1, col=1)
    for name, column, colour in (("prompt tokens", "prompt_tokens", "#0969da"),
                                 ("generated tokens", "generated_tokens", "#8250df")):
        values = pd.to_numeric(frame[column], errors="coerce").astype("float64")
        # A marker per step only where steps are few: at 200 steps drawing them took a third of the chart's time
        # on each j/k (#33), and the line reads the same.
        fig.add_trace(go.Scatter(x=frame["index"], y=values.where(values >= 0), name=name,
                                 mode="lines+markers" if len(frame) <= _MARKED_STEPS else "lines",
                                 line={"color": colour, "width": 1.5}, marker={"size": 4},
                                 customdata=frame["index"]), row=2, col=1)
    for index in frame.loc[frame["context_rewritten"].astype(bool), "index"]:
        fig.add_vline(x=index, line={"color": "#bf8700", "dash": "dash", "width": 1.5})
    fig.update_yaxes(title_text="seconds", row=1, col=1)
    fig.update_yaxes(title_text="tokens", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    if len(frame) <= 40:
        fig.update_xaxes(dtick=1)  # whole steps only; plotly would label 1.5 on short episodes
    layout(fig, TIMELINE_TITLE, height=320, showlegend=True, bargap=0.15, barmode="stack")
    # Margins fixed wide enough for the axis titles and ticks: plotly's automatic margins draw the chart twice, and
    # the chart is drawn again on every j/k (#33).
    fig.update_layout(margin={"l": 64})
    fig.update_xaxes(automargin=False)
    fig.update_yaxes(automargin=False)
    if selected is not None and selected in set(frame["index"]):
        fig.update_traces(marker_line_width=_outlines(frame["index"], selected), selector={"name": bar_name})
        for shape in _current_step_shapes(selected):
            fig.add_shape(shape)
    return fig


def _outlines(steps: Iterable[int], selected: int) -> list[float]:
    return [2.5 if i == selected else 0 for i in steps]


def _current_step_shapes(selected: int) -> list[dict]:
    """The shade of step ``selected`` across both rows of the step timeline."""
    return [{"type": "rect", "name": CURRENT_STEP, "xref": axis, "yref": f"{axis.replace('x', 'y')} domain",
             "x0": selected - 0.5, "x1": selected + 0.5, "y0": 0, "y1": 1, "fillcolor": _CURRENT,
             "line": {"width": 0}, "layer": "below"} for axis in ("x", "x2")]


def compare_reward_distributions(runs: Sequence[tuple[str, pd.DataFrame]], *, bins: int = 20) -> go.Figure:
    """Reward histograms of several runs, overlaid and normalized to the share of each run's episodes."""
    fig = go.Figure()
    for (label, episodes), colour in zip(runs, RUN_COLOURS * len(runs), strict=False):
        fig.add_trace(go.Histogram(x=_rewarded(episodes)["reward_plotted"], name=plain(label), nbinsx=bins,
                                   histnorm="percent", opacity=0.6, marker_color=colour))
    fig.update_layout(barmode="overlay")
    return layout(fig, "Reward distribution per run", xaxis_title="reward", yaxis_title="% of episodes")


def compare_success_by_task(runs: Sequence[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Per task, each run's success rate as grouped bars."""
    fig = go.Figure()
    for (label, episodes), colour in zip(runs, RUN_COLOURS * len(runs), strict=False):
        # A failure without a reward counts as a failure here; only unscored attempts are left out.
        scored = episodes[~run.unscored(episodes)]
        rates = (scored["total_reward"].fillna(0.0) > 0).groupby(scored["task_name"]).mean().sort_index()
        fig.add_trace(go.Bar(x=[plain(task) for task in rates.index], y=rates.values, name=plain(label),
                             marker_color=colour))
    fig.update_yaxes(range=[0, 1], tickformat=".0%")
    fig.update_layout(barmode="group")
    return layout(fig, "Success rate per task, per run", yaxis_title="success rate")


def reward_over_iterations(episodes: pd.DataFrame) -> go.Figure:
    """Training progress: each split's mean reward per iteration (line) over its rollouts' rewards (points).

    Needs the ``iteration`` column that training-log formats add; rollouts without one are left out.
    Rollout points carry their episode ids as ``customdata`` (a click opens one).
    """
    frame = _rewarded(episodes)
    if "iteration" not in frame.columns:
        frame = frame.assign(iteration=pd.NA)
    frame = frame.dropna(subset=["iteration"])
    split = frame["split"] if "split" in frame.columns else pd.Series("all", index=frame.index)
    series = split.fillna("all").astype(str)
    if "group" in frame.columns:  # a folder may hold several training logs: one series per log and split
        logs = frame["group"].fillna("").astype(str).str.split("/").str[0]
        if logs.nunique() > 1:
            series = logs + " · " + series
    frame = frame.assign(series=series, iteration=frame["iteration"].astype(float))
    fig = go.Figure()
    for n, (name, part) in enumerate(frame.groupby("series", sort=True)):
        colour = (*RUN_COLOURS, "#8250df", "#1a7f37")[n % 4]
        fig.add_trace(go.Scatter(
            x=part["iteration"], y=part["reward_plotted"], mode="markers", name=f"{name} rollouts",
            marker={"color": colour, "size": 6, "opacity": 0.35}, customdata=part["episode_id"],
            hovertext=_episode_hover(part), hoverinfo="text", legendgroup=name,
        ))
        means = part.groupby("iteration")["reward_plotted"].agg(["mean", "size"]).reset_index()
        fig.add_trace(go.Scatter(
            x=means["iteration"], y=means["mean"], mode="lines+markers", name=f"{name} mean",
            line={"color": colour, "width": 2.5}, legendgroup=name,
            text=[f"{s} rollouts" for s in means["size"]],
            hovertemplate=f"{name} · iteration %{{x:.0f}}: mean reward %{{y:.3g}} (%{{text}})<extra></extra>",
        ))
    return layout(fig, "Reward over training iterations", xaxis_title="iteration", yaxis_title="reward")


def group_rewards(rollouts: pd.DataFrame) -> go.Figure:
    """The rewards of one group's rollouts, one bar each coloured by outcome; bars carry episode ids. An unscored
    rollout keeps its place, with no bar and the word "unscored", and stays out of the mean; a failure without a
    reward (errored, cut off) has no bar either, is marked "no reward" as the episode table's dash, and counts as
    0 in the mean, as in the success rate."""
    frame = rollouts.copy()
    unscored = run.unscored(frame)
    rewardless = _no_reward(frame) & ~unscored
    frame["reward_plotted"] = frame["total_reward"].fillna(0.0).where(~unscored)
    labels = [f"traj {int(t)}" if pd.notna(t) else e[:8] for t, e in zip(
        frame["traj_idx"] if "traj_idx" in frame.columns else [None] * len(frame), frame["episode_id"], strict=True)]
    fig = go.Figure(go.Bar(
        x=labels, y=frame["reward_plotted"], customdata=frame["episode_id"],
        marker_color=[OUTCOME_COLOURS.get(o, "#57606a") for o in frame["outcome"]],
        text=[UNSCORED if pd.isna(r) else "no reward" if none else f"{r:.3g}"
              for r, none in zip(frame["reward_plotted"], rewardless, strict=True)], textposition="auto",
        hovertext=_episode_hover(frame), hoverinfo="text",
    ))
    mean = frame["reward_plotted"].mean() if frame["reward_plotted"].notna().any() else 0.0
    fig.add_hline(y=mean, line={"color": "#0969da", "dash": "dash", "width": 1.5},
                  annotation_text=f"group mean {mean:.3g}", annotation_position="top left")
    return layout(fig, "Rewards of the group's rollouts (bar colour = outcome)", yaxis_title="reward", height=280)
