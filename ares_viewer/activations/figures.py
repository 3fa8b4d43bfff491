"""Figures of the activation views (plotly) and the logprob heat map over a response (HTML), for notebooks and
the app alike. Each takes the frame a ``views``/``tokens`` function returns.

>>> from ares_viewer.activations import figures, views
>>> figures.heatmap(views.across_steps(capture, "hook_resid_post"), "residual norm by step").show()
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly import subplots

from ares_viewer.activations import attention, hooks

_LAYOUT = {"margin": {"l": 60, "r": 10, "t": 40, "b": 40}}


def heatmap(frame: pd.DataFrame, title: str, *, colorscale: str = "Viridis", zmid: float | None = None,
            zrange: tuple[float, float] | None = None) -> go.Figure:
    """A rows x columns heat map of a frame (layers x hooks, steps x layers, layers x heads); ``zrange``: a fixed
    colour scale (``(-1, 1)`` for cosines)."""
    fig = go.Figure(go.Heatmap(
        z=frame.to_numpy(dtype=float), x=[str(c) for c in frame.columns], y=[str(i) for i in frame.index],
        colorscale=colorscale, zmid=zmid, hoverongaps=False,
        zmin=zrange[0] if zrange else None, zmax=zrange[1] if zrange else None,
        hovertemplate=f"{frame.index.name or 'row'} %{{y}}<br>{frame.columns.name or 'column'} %{{x}}"
                      "<br>%{z:.4g}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title=frame.columns.name, yaxis_title=frame.index.name,
                      yaxis={"autorange": "reversed", "type": "category"}, xaxis={"type": "category"}, **_LAYOUT)
    return fig


def head_attention(frame: pd.DataFrame, title: str) -> go.Figure:
    """One head's weights over the key positions (``views.head_attention``), tokens on the axis when known."""
    labels = [f"{p}: {t!r}" if t is not None else str(p) for p, t in zip(frame["position"], frame["token"],
                                                                          strict=True)]
    fig = go.Figure(go.Bar(x=labels, y=frame["weight"], hovertemplate="%{x}<br>weight %{y:.4f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="key position", yaxis_title="attention weight", **_LAYOUT)
    return fig


def compare_cosines(frame: pd.DataFrame, title: str) -> go.Figure:
    """Aligned step pairs x layers: the cosine of the two episodes' step vectors (``views.compare_aligned``)."""
    if frame.empty:
        return heatmap(pd.DataFrame(), title)
    grid = frame.assign(pair=[f"{a} ↔ {b}" for a, b in zip(frame["step_a"], frame["step_b"], strict=True)])
    table = grid.pivot_table(index="pair", columns="layer", values="cosine", sort=False)
    table.index.name, table.columns.name = "steps (a ↔ b)", "layer"
    return heatmap(table, title, colorscale="RdBu", zmid=0.0, zrange=(-1.0, 1.0))


def logprob_html(tokens: pd.DataFrame) -> str:
    """The response as its tokens, each shaded by how likely the model found it (white: certain, red: unlikely;
    hover shows the logprob). Token text is escaped: it renders as text, never as markup."""
    spans = []
    for row in tokens.itertuples(index=False):
        text = row.token if isinstance(row.token, str) else f"⟨{row.token_id}⟩"
        logprob = row.logprob if row.logprob is not None and not _nan(row.logprob) else None
        if logprob is None:
            style, tip = "", "no logprob"
        else:
            unlikely = 1.0 - math.exp(min(logprob, 0.0))
            style = f"background: rgba(207, 34, 46, {0.85 * unlikely:.3f});"
            tip = f"logprob {logprob:.3f} (p {math.exp(min(logprob, 0.0)):.3f})"
            if row.token_id is not None and not _nan(row.token_id):
                tip += f", id {int(row.token_id)}"
        spans.append(f'<span title="{html.escape(tip)}" style="{style}">{html.escape(text)}</span>')
    return ('<div style="font-family: monospace; white-space: pre-wrap; line-height: 1.6">'
            + "".join(spans) + "</div>")


def _nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


# ----- readable views (hooks, attention, logits, similarity) ------------------------------------------------

_SCALE_TITLES = {"hook": "share of the hook's largest norm", "log": "log10 norm", "raw": "norm"}


def norms(frame: pd.DataFrame, title: str, scale: str = "hook") -> go.Figure:
    """Layers x hooks norms (``views.step_summary``) coloured on a ``hooks.scaled`` scale: ``"hook"`` (each hook
    on its own scale), ``"log"`` or ``"raw"``. Every cell shows and hovers its raw norm."""
    colour = hooks.scaled(frame, scale)
    raw = frame.to_numpy(dtype=float)
    text = [[f"{v:.3g}" if not math.isnan(v) else "" for v in row] for row in raw]
    fig = go.Figure(go.Heatmap(
        z=colour.to_numpy(dtype=float), x=[str(c) for c in frame.columns], y=[str(i) for i in frame.index],
        customdata=raw, text=text, texttemplate="%{text}" if raw.size <= 600 else None, colorscale="Viridis",
        zmin=0.0 if scale == "hook" else None, zmax=1.0 if scale == "hook" else None,
        hoverongaps=False, colorbar={"title": {"text": _SCALE_TITLES[scale]}},
        hovertemplate="layer %{y}<br>hook %{x}<br>norm %{customdata:.4g}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="hook (forward order)", yaxis_title="layer",
                      yaxis={"autorange": "reversed", "type": "category"}, xaxis={"type": "category"}, **_LAYOUT)
    return fig


def _key_labels(grid: attention.Grid) -> list[str]:
    labels = []
    for p in range(grid.keys):
        token = grid.positions.token(p)
        role = grid.positions.role(p) or "role unknown"
        labels.append(f"{p} {role}: {token!r}" if token is not None else f"{p} {role}")
    return labels


def attention_grid(grid: attention.Grid, title: str) -> go.Figure:
    """Every head's attention from one query token (``attention.grid``): one small chart per layer (rows) and head
    (columns) over the key positions on one weight axis (up to the grid's largest weight), the prompt/response
    boundary a dashed line, the query a dotted one."""
    layers, heads, keys = grid.weights.shape
    height = 160 * layers + 120
    fig = subplots.make_subplots(rows=layers, cols=heads, shared_xaxes=True, shared_yaxes=True,
                                 horizontal_spacing=0.01, vertical_spacing=min(0.3, 50 / height) if layers > 1 else 0.0,
                                 subplot_titles=[f"L{layer} H{h}" for layer in grid.layers for h in range(heads)])
    labels = _key_labels(grid)
    x = np.arange(keys)
    for row, layer in enumerate(grid.layers):
        for head in range(heads):
            fig.add_trace(go.Bar(x=x, y=grid.weights[row, head], customdata=labels, name=f"L{layer} H{head}",
                                 marker={"color": "#1f77b4", "line": {"width": 0}}, showlegend=False,
                                 hovertemplate=f"L{layer} H{head}<br>%{{customdata}}<br>weight %{{y:.4f}}"
                                               "<extra></extra>"), row=row + 1, col=head + 1)
    boundary = grid.boundary()
    if boundary is not None:
        fig.add_vline(x=boundary - 0.5, line={"dash": "dash", "color": "#cf222e", "width": 1}, row="all", col="all")
    fig.add_vline(x=grid.query, line={"dash": "dot", "color": "#6e7781", "width": 1}, row="all", col="all")
    peak = float(np.nanmax(grid.weights)) if grid.weights.size else 1.0
    fig.update_yaxes(range=[0, min(1.0, peak * 1.05) if peak > 0 else 1.0])  # one scale for every head
    fig.update_layout(title=title, bargap=0, height=height, **_LAYOUT)
    fig.update_layout(margin={"l": 40, "r": 10, "t": 90, "b": 30})
    return fig


_STATUS_TEXT = {attention.CUT: "cut", attention.ABSENT: "absent", attention.NOT_LOCATED: "not located"}


def segment_columns(frame: pd.DataFrame) -> list[str]:
    """``attention.by_segment``'s segments in the order they come in a prompt: the template, the context's
    messages, this response."""
    order = frame.assign(key=frame["message"].fillna(-1).where(frame["segment"] != attention.THIS_RESPONSE, 1e9))
    return list(order.sort_values("key", kind="stable")["segment"].drop_duplicates())


def segments(frame: pd.DataFrame, title: str) -> go.Figure:
    """Steps x segments (``attention.by_segment``): each cell the attention mass on that segment; a cut segment
    says ``cut``, one clipped away ``absent`` (no colour: it is not 0), the step's latest observation is marked."""
    if frame.empty:
        return heatmap(pd.DataFrame(), title)
    columns = segment_columns(frame)
    steps = sorted(frame["step"].unique())
    z = np.full((len(steps), len(columns)), np.nan)
    text = [[""] * len(columns) for _ in steps]
    for row in frame.itertuples(index=False):
        r, c = steps.index(row.step), columns.index(row.segment)
        z[r, c] = row.mass
        shown = _STATUS_TEXT.get(row.status, "")
        value = f"{row.mass:.2f}" if not math.isnan(row.mass) else ""
        text[r][c] = " ".join(p for p in (value, shown, "(latest)" if row.latest else "") if p)
    fig = go.Figure(go.Heatmap(z=z, x=columns, y=[str(s) for s in steps], text=text, texttemplate="%{text}",
                               zmin=0.0, zmax=1.0, colorscale="Blues", hoverongaps=True,
                               colorbar={"title": {"text": "attention mass"}},
                               hovertemplate="step %{y}<br>%{x}<br>%{text}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="segment of the context (in prompt order)", yaxis_title="step",
                      yaxis={"autorange": "reversed", "type": "category"}, xaxis={"type": "category"},
                      plot_bgcolor="#eaeef2", **_LAYOUT)
    return fig


def cosine_baseline(pairs: pd.DataFrame, baseline: pd.DataFrame, title: str) -> go.Figure:
    """The cosine of compared step pairs per layer (``views.compare_aligned`` or ``similarity.compare_steps``),
    over the band of the baseline's ``min``..``max`` and its ``mean`` (``similarity``), on a fixed -1..1 axis."""
    fig = go.Figure()
    if not baseline.empty:
        layers = [str(v) for v in baseline["layer"]]
        fig.add_trace(go.Scatter(x=layers, y=baseline["max"], mode="lines", line={"width": 0}, showlegend=False,
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=layers, y=baseline["min"], mode="lines", line={"width": 0}, fill="tonexty",
                                 fillcolor="rgba(110, 119, 129, 0.25)", name="unpaired steps: range",
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=layers, y=baseline["mean"], mode="lines", line={"dash": "dash", "color": "#6e7781"},
                                 name="unpaired steps: mean", customdata=baseline["pairs"],
                                 hovertemplate="layer %{x}<br>mean %{y:.3f} over %{customdata} pairs<extra></extra>"))
    for (a, b), rows in pairs.groupby(["step_a", "step_b"], sort=False):
        fig.add_trace(go.Scatter(x=[str(v) for v in rows["layer"]], y=rows["cosine"], mode="lines+markers",
                                 name=f"steps {a} ↔ {b}",
                                 hovertemplate=f"steps {a} ↔ {b}<br>layer %{{x}}<br>cosine %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="layer", yaxis_title="cosine", yaxis={"range": [-1, 1]},
                      xaxis={"type": "category"}, **_LAYOUT)
    return fig
