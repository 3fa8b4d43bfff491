"""The value curve as a plotly figure: V(k) per step with its interval, the decisive step marked (app and notebook).

>>> from ares_viewer.counterfactual import branching, value_curve
>>> value_curve.figure(branching.load(episode)).show()
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ares_viewer.analysis import plots
from ares_viewer.counterfactual import branching

DECISIVE = "decisive step"
_VALUE = "#0969da"
_DROP = "#cf222e"
_RISE = "#1a7f37"


def figure(search: branching.Search) -> go.Figure:
    """V(k) with error bars to the Wilson interval; the recorded terminal value as a hollow diamond; the decisive
    step shaded (red for a drop, green for a rise), none when V does not change; ticks on whole steps. Each point
    carries its step as ``customdata``."""
    known = [e for e in search.curve if e.value is not None]
    estimated = [e for e in known if not e.recorded]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[e.step for e in estimated],
            y=[e.value for e in estimated],
            mode="lines+markers",
            name="V(k)",
            line={"color": _VALUE},
            customdata=[e.step for e in estimated],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [e.high - (e.value or 0.0) for e in estimated],  # known: every value is set
                "arrayminus": [(e.value or 0.0) - e.low for e in estimated],
            },
            text=[f"n = {e.n}" + (f", {e.failed} failed" if e.failed else "") for e in estimated],
            hovertemplate="step %{x}: V = %{y:.2f}<br>%{text}<extra></extra>",
        )
    )
    recorded = [e for e in known if e.recorded]
    if recorded:
        fig.add_trace(
            go.Scatter(
                x=[e.step for e in recorded],
                y=[e.value for e in recorded],
                mode="markers",
                name="recorded reward",
                marker={"symbol": "diamond-open", "size": 11, "color": _VALUE},
                customdata=[e.step for e in recorded],
                hovertemplate="step %{x}: the episode's own reward %{y}<extra></extra>",
            )
        )
    found = search.decisive
    if found is not None:
        fig.add_vrect(
            x0=found.before,
            x1=found.step,
            fillcolor=_DROP if found.change < 0 else _RISE,
            opacity=0.15,
            line_width=0,
            name=DECISIVE,
            annotation_text=f"decisive step {found.step} ({found.change:+.2f})",
            annotation_position="top",
        )
    steps = [e.step for e in known] or [0]
    every = max(1, math.ceil((max(steps) - min(steps)) / 12))  # whole steps, at most about 12 ticks
    return plots.layout(
        fig,
        "Value of each step's state: P(solved) when the policy carries on from it",
        xaxis={"title": "step", "tickmode": "linear", "tick0": min(steps), "dtick": every, "tickformat": "d"},
        yaxis={"title": "V(k)", "range": [-0.05, 1.1]},
    )
