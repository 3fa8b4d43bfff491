"""The Activations page's readable views: hook norms on a scale every hook can be read on, every head's attention
at a named query token, attention by message segment across steps, the logits' top predictions, and Compare with
its own hook, a -1..1 scale and a baseline. Each computation is the library's (``ares_viewer.activations``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer import activations
from ares_viewer.activations import attention, figures, hooks, logits, similarity, views
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import activations_panel, choosers
from ares_viewer_app.routing import state
from ares_viewer_app.text import escape

SCALES = {"hook": "each hook on its own scale", "log": "log scale", "raw": "one linear scale"}
MAX_GRID_LAYERS = 8  # layers drawn at once in the attention grid (each a row of small charts)


def norms(capture: activations.Capture, step: int) -> None:
    """The layers x hooks norms in forward order, coloured per hook (or log, or raw)."""
    scale = st.radio("Colour", list(SCALES), format_func=SCALES.get, horizontal=True, key="activations.scale",
                     help="Each hook on its own scale: a hook's cells coloured by their share of its largest norm "
                          "(the unembedding's large norm no longer sets one colour for all); every cell shows its "
                          "norm")
    frame = views.step_summary(capture, step)
    st.plotly_chart(figures.norms(frame, f"Step {step}: norm of each hook by layer, {SCALES[scale]}", scale),
                    key="activations.summary")


def predictions(capture: activations.Capture, step: int, position: int | None = None) -> None:
    """The top tokens and the chosen token's logprob from ``unembed.hook_out`` at a position (the final one)."""
    try:
        found = logits.predictions(capture, step, position)
    except KeyError:
        found = logits.predictions(capture, step)
    if found is None:
        st.caption(f"This step recorded no `{logits.HOOK}`: no predictions can be read from the logits.")
        return
    where = attention.positions(capture, step).name(found.position) if found.position is not None else \
        "the last position recorded"
    st.markdown(f"**Predictions from the logits at {escape.line(where)}**")
    source = f"decoded with {found.decoder}" if found.decoder else "token ids (no tokenizer loads offline)"
    st.caption(f"`{logits.HOOK}` → log_softmax, before any temperature or sampling; {source}.")
    if found.chosen_id is not None:
        recorded = (f"; the recorder saved {found.recorded_logprob:.4f}" if found.recorded_logprob is not None
                    else "")
        token = escape.line(repr(found.chosen_token)) if found.chosen_token is not None else "(no text)"
        st.markdown(f"Chosen next token {token} (id {found.chosen_id}): logprob **{found.chosen_logprob:.4f}**, "
                    f"rank {found.chosen_rank}{recorded}.")
    else:
        st.caption("The capture records no next token after this position: the chosen token is unknown.")
    top = found.top.assign(token=[repr(t) if t is not None else "" for t in found.top["token"]],
                           logprob=[f"{v:.4f}" for v in found.top["logprob"]],
                           prob=[f"{v:.4f}" for v in found.top["prob"]])
    st.table(top[["rank", "token", "token_id", "logprob", "prob"]].set_index("rank"))


def _pick_query(capture: activations.Capture, step: int, places: attention.Positions) -> int:
    queries = attention.query_positions(capture, step)
    if len(queries) == 1:
        return queries[0]
    key = "activations.query"
    if st.session_state.get(key) not in queries:
        st.session_state[key] = queries[-1]
    return st.select_slider("Query token", queries, key=key, format_func=places.name,
                            help="The position whose attention is shown (this capture holds every position)")


def _layer_window(layers: list[int]) -> list[int]:
    if len(layers) <= MAX_GRID_LAYERS:
        return layers
    first = st.select_slider("First layer shown", layers[: len(layers) - MAX_GRID_LAYERS + 1],
                             key="activations.grid_first")
    return [layer for layer in layers if first <= layer < first + MAX_GRID_LAYERS]


def attention_grid(capture: activations.Capture, step: int) -> None:
    """Every head at a chosen query token, the token named with its position and role, the boundary marked."""
    if not attention.query_positions(capture, step):
        st.caption("This step recorded no attention patterns.")
        return
    places = attention.positions(capture, step)
    query = _pick_query(capture, step, places)
    grid = attention.grid(capture, step, query)
    st.markdown(f"**Attention of {escape.line(grid.query_name())}**, every head")
    boundary = grid.boundary()
    marks = (f"the dashed line is the prompt/response boundary (response from position {boundary})"
             if boundary is not None else "every key is prompt" if places.prompt_length is not None else
             "the prompt's length is not recorded: prompt and response cannot be told apart")
    st.caption(f"{grid.keys} key positions; {marks}; the dotted line is the query. With a KV cache the capture "
               "holds the last forward pass only: its query is the last token fed.")
    if places.labels is None:
        st.caption("The capture records no tokens for this call: positions are shown by number.")
    shown = _layer_window(grid.layers)
    rows = [grid.layers.index(layer) for layer in shown]
    window = attention.Grid(grid.weights[rows], shown, grid.query, grid.positions)
    st.plotly_chart(figures.attention_grid(window, f"Step {step}: layers × heads at position {grid.query}"),
                    key="activations.grid")
    predictions(capture, step, query)


@st.cache_data(max_entries=16, ttl=600, show_spinner=False)
def segment_frame(where: str, episode_id: str, folder: str, query: str, layer: int | None
                  ) -> tuple[pd.DataFrame, dict[int, str], dict[str, str]]:
    """``attention.by_segment`` of an episode's capture (every step's patterns are read: kept for a few views);
    its frame, notes and errors. ``folder`` (the capture's) keys the cache with the episode."""
    linked = activations_panel.linked_capture(where, episode_id)
    if linked is None or linked.capture.folder != folder:
        return pd.DataFrame(), {}, {}
    frame = attention.by_segment(linked, query, None if layer is None else [layer])
    return frame, dict(frame.attrs["notes"]), dict(frame.attrs["errors"])


def segments(linked: activations.Linked) -> None:
    """Steps x segments: the attention mass the query put on each message of the context, every step."""
    cols = st.columns(2)
    query = cols[0].radio("Query", [attention.LAST, attention.PROMPT_END], horizontal=True, key="activations.seg_q",
                          format_func={attention.LAST: "last recorded position",
                                       attention.PROMPT_END: "end of the prompt"}.get,
                          help="The end of the prompt chose the response's first token; a KV-cached capture holds "
                               "only the last position")
    layers = sorted({int(views.split_hook(n)[0]) for step in linked.steps()[:1]
                     for n, info in linked.capture.hooks(step - 1).items() if views.is_pattern(n, info.shape)})
    layer = cols[1].selectbox("Layers", [None, *layers], key="activations.seg_layer",
                              format_func=lambda v: "all (mean of every head)" if v is None else f"layer {v}")
    frame, notes, errors = segment_frame(loaders.location(state.get("run") or ""), linked.episode.episode_id,
                                         linked.capture.folder, query, layer)
    for reason in errors.values():
        st.error(f"Left out: {reason}", icon=":material/broken_image:")
    for step, why in notes.items():
        st.caption(f"Step {step}: no segments ({why}).")
    if frame.empty:
        return
    st.caption("Each cell: the attention mass on that message, averaged over the heads; `cut`: clipped, the mass "
               "is on the part the model saw; `absent`: clipped away, never seen (no value, not 0); the step's latest "
               "observation is marked. Messages are located in the decoded prompt.")
    st.plotly_chart(figures.segments(frame, "Attention by message segment, step × segment"),
                    key="activations.segments")
    table = attention.by_kind(frame)
    st.caption("By kind, each the sum of its messages' mass; — where the step's context has none, or none was seen.")
    st.table(table.map(lambda v: "—" if pd.isna(v) else f"{v:.3f}"))


def activations_errors(frame: pd.DataFrame) -> None:
    for reason in frame.attrs.get("errors", {}).values():
        st.error(f"Left out: {reason}", icon=":material/broken_image:")


def _hook_choice(capture: activations.Capture, step: int, key: str) -> str | None:
    names = list(capture.hooks(step - 1))
    suffixes = hooks.suffix_order(views.split_hook(n)[1] for n in names if views.split_hook(n)[0] not in
                                  ("embed", "final"))
    if not suffixes:
        st.caption("This capture records no per-layer hooks.")
        return None
    if st.session_state.get(key) not in suffixes:
        st.session_state[key] = views.RESIDUAL if views.RESIDUAL in suffixes else suffixes[0]
    return st.selectbox("Hook compared", suffixes, key=key)


def _baseline_line(baseline: pd.DataFrame, what: str) -> None:
    kept = baseline[baseline["pairs"] > 0]
    if kept.empty:
        st.caption(f"No baseline: there are no {what} to compare with.")
        return
    spans = "; ".join(f"layer {r.layer}: mean {r.mean:.3f} ({r.min:.3f} to {r.max:.3f}, {r.pairs} pairs)"
                      for r in kept.itertuples(index=False))
    st.caption(f"Baseline, the cosine of {what}: {spans}.")


def compare(run: ares_viewer.Run, linked: activations.Linked, step: int) -> None:
    """Two steps of this episode, or this episode against another (paired by Compare's alignment)."""
    mode = st.radio("Compare", ["episode", "steps"], horizontal=True, key="activations.compare_mode",
                    format_func={"episode": "with another episode", "steps": "two steps of this episode"}.get)
    hook = _hook_choice(linked.capture, step, "activations.compare_hook")
    if hook is None:
        return
    if mode == "steps":
        _compare_steps(linked, step, hook)
    else:
        _compare_episodes(run, linked, hook)


def _compare_steps(linked: activations.Linked, step: int, hook: str) -> None:
    steps = linked.steps()
    if len(steps) < 2:
        st.info("This episode has one step with activations: there is no other step to compare.")
        return
    cols = st.columns(2)
    first = cols[0].selectbox("Step A", steps, index=steps.index(step), key="activations.step_a")
    second = cols[1].selectbox("Step B", [s for s in steps if s != first], key="activations.step_b")
    frame, baseline = similarity.compare_steps(linked, first, second, hook)
    activations_errors(frame)
    if frame.empty:
        st.info(f"Steps {first} and {second} do not both record {hook}.")
        return
    st.plotly_chart(figures.cosine_baseline(frame, baseline, f"{hook}: cosine of steps {first} and {second}, "
                                                             "against the episode's other step pairs"),
                    key="activations.compare_steps")
    _baseline_line(baseline, "every other pair of this episode's steps")


def _compare_episodes(run: ares_viewer.Run, linked: activations.Linked, hook: str) -> None:
    st.caption("Compare with another episode: its steps are paired by Compare's alignment of their commands.")
    other = choosers.episode_choice(run, "Compare with", "activations.other", st.session_state.get("activations.other"),
                                   partners_of=linked.episode.episode_id, exclude=linked.episode.episode_id,
                                   on_change=lambda: None)
    if other is None:
        return
    try:
        theirs = activations_panel.linked_capture(loaders.location(state.get("run") or ""), other)
    except activations.Error as exc:
        st.error(f"The other episode's activations cannot be read: {exc}")
        return
    if theirs is None:
        st.info("That episode has no activations saved beside it.")
        return
    frame = views.compare_aligned(linked, theirs, hook)
    activations_errors(frame)
    if frame.empty:
        st.info(f"No aligned pair of steps recorded {hook} in both episodes.")
        return
    baseline = similarity.baseline(linked, theirs, hook)
    st.plotly_chart(figures.compare_cosines(frame, f"{hook}: cosine of the aligned steps' last-position vectors"),
                    key="activations.compare")
    st.plotly_chart(figures.cosine_baseline(frame, baseline, f"{hook}: aligned pairs against unaligned ones"),
                    key="activations.compare_baseline")
    _baseline_line(baseline, "the step pairs the alignment did not pair")
