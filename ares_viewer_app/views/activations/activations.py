"""Activations: what the model computed at each step of an episode, from the capture saved beside it, and the
per-token logprobs of its responses where the format records them.

A capture is ARES's ``TrajectoryActivations.save`` folder at ``<run>/activations/<episode_id>/``
(``ares_viewer.activations``). Only the step shown is read, and only the hooks a tab needs; the URL names the
episode and the step.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer import activations, model
from ares_viewer.activations import capture as capture_mod
from ares_viewer.activations import clipping, figures, hooks, prompt, step_file, tokens, views
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import activations_panel, choosers, tables
from ares_viewer_app.routing import state
from ares_viewer_app.views.activations import activations_readable


def open_capture(run: ares_viewer.Run, episode: model.Episode) -> activations.Linked | None:
    try:
        return activations_panel.linked_capture(loaders.location(state.get("run") or ""), episode.episode_id)
    except activations.Error as exc:
        st.error(f"The activations of this episode cannot be read: {exc}")
        return None


def pick_step(linked: activations.Linked) -> int:
    steps = linked.steps()
    wanted = state.get_int("step", steps[0])
    step = wanted if wanted in steps else steps[0]
    st.session_state["activations.step"] = step
    st.select_slider("Step", steps, key="activations.step", format_func=lambda s: f"step {s}",
                     on_change=lambda: state.update(step=st.session_state["activations.step"]),
                     help="Trajectory step k shows model call k - 1: the forward pass that produced action k")
    return step


def step_tab(capture: activations.Capture, step: int) -> None:
    activations_readable.norms(capture, step)
    activations_readable.predictions(capture, step)
    entropy = views.attention_entropy(capture, step)
    if entropy.empty:
        st.caption("This step recorded no attention patterns.")
        return
    st.plotly_chart(figures.heatmap(entropy, f"Step {step}: attention entropy per head (nats; uniform "
                                              f"attention: {entropy.attrs['max_entropy']:.2f})"),
                    key="activations.entropy")


def readable_hooks(capture: activations.Capture, step: int) -> dict[str, step_file.HookInfo]:
    """The hooks of trajectory step ``step``, or of the first step whose file reads when that one cannot."""
    for i in (step - 1, *capture.steps):
        try:
            return capture.hooks(i)
        except activations.Error:
            continue
    return {}


def across_tab(capture: activations.Capture, step: int) -> None:
    suffixes = hooks.suffix_order(views.split_hook(name)[1] for name in readable_hooks(capture, step)
                                  if views.split_hook(name)[0] not in ("embed", "final"))
    if not suffixes:
        st.caption("This capture records no per-layer hooks.")
        return
    default = suffixes.index(views.RESIDUAL) if views.RESIDUAL in suffixes else 0
    hook = st.selectbox("Hook", suffixes, index=default, key="activations.hook")
    frame = views.across_steps(capture, hook)
    file_errors(frame)
    st.plotly_chart(figures.heatmap(frame, f"{hook}: norm at the last position, step x layer"),
                    key="activations.across")


def file_errors(frame) -> None:
    """The step files a view had to leave out, each with its reason (the view shows the others)."""
    for reason in frame.attrs.get("errors", {}).values():
        st.error(f"Left out: {reason}", icon=":material/broken_image:")


def guarded(tab, show, *args) -> None:
    """One tab: a step file that cannot be read is that tab's message; the other tabs and the page still show."""
    with tab:
        try:
            show(*args)
        except activations.Error as exc:
            st.error(f"A step file of this capture cannot be read: {exc}", icon=":material/broken_image:")


def tokens_section(episode: model.Episode, step: int, capture: activations.Capture | None = None) -> None:
    frame = tokens.token_frame(episode.step(step), capture=capture) if 0 <= step < len(episode.steps) else None
    if frame is None:
        st.caption("This step's response records no per-token data.")
        return
    st.markdown(f"**Step {step}: the response's tokens, shaded by how unlikely the model found them**")
    st.html(figures.logprob_html(frame))


def prompt_section(linked: activations.Linked, step: int) -> None:
    """The prompt the call ran on: its tokens (decoded, recorded text or ids), where they were read, whether the
    client clipped it, and where each message of the step's context begins."""
    context = linked.episode.context(step) if 0 <= step < len(linked.episode.steps) else []
    found = prompt.of_capture(linked.capture, step - 1, [m.content or "" for m in context])
    if found is None:
        st.caption("This call's `step_metadata` in metadata.json records no prompt tokens (`prompt_token_ids`, "
                   "`input_ids`, or `token_ids` with `prompt_length`).")
        return
    st.markdown(f"**Step {step}: the prompt the model ran on ({found.seen_tokens:,} tokens)**")
    text = (f"text from {found.text_source}" if found.text_source else
            "no text: the ids are shown (no tokenizer folder loads offline; save one as `tokenizer/` beside "
            "metadata.json, or name it in metadata.json's `tokenizer`)")
    st.caption(f"Tokens from `{found.key}` of `{capture_mod.METADATA}`; {text}.")
    # Which end was cut is read from the ids too (consecutive prompts), not only from the text: ``clipping.of_step``,
    # the rule the Episode page, the export and ``ares-viewer show`` use.
    clip = clipping.of_step(linked, step, found)
    if clip.clipped:
        which = f"its {clip.end} was cut" if clip.end else "which end was cut is unknown"
        st.warning(f"The prompt was clipped: the model saw only {found.kept()} of its context of "
                   f"{len(context)} message(s); {which}: {clip.evidence}.",
                   icon=":material/content_cut:")
    elif clip.clipped is False:
        st.caption(f"Not clipped: {clip.evidence}.")
    else:
        st.caption(f"Whether the client clipped this prompt is unknown: {clip.evidence}.")
    st.caption(found.boundaries())
    frame = found.frame()
    roles = [m.role for m in context]
    frame["message"] = [None if pd.isna(m) else f"message {m + 1} ({roles[m] if m < len(roles) else '?'})"
                        + (", its start cut" if cut else "") for m, cut in zip(frame["message"], frame["partial"],
                                                                                 strict=True)]
    tables.table(frame.drop(columns="partial"), hide_index=True, key="activations.prompt",
                 column_config={"message": st.column_config.TextColumn("message begins")})


def show(run: ares_viewer.Run, episode: model.Episode) -> None:
    """The page for one episode of ``run``: the activations and logprobs saved beside it, step by step."""
    linked = open_capture(run, episode)
    if linked is None or not linked.steps():
        activations_panel.none_found(episode)
        with_tokens = [s.index for s in episode.steps if tokens.has_tokens(s)]
        if with_tokens:
            tokens_section(episode, state.get_int("step", with_tokens[0]))
        return
    st.caption(f"Model `{linked.capture.model_name}` · {len(linked.capture)} model call(s) · `{linked.capture.folder}`"
               f" · read with {linked.capture.reader}")
    for warning in linked.warnings:
        st.caption(f"⚠ {warning}")
    step = pick_step(linked)
    response = episode.step(step).command or episode.step(step).response
    st.caption(f"Action {step}: `{(response or '')[:160]}`")
    summary, across, attention, segments, compare = st.tabs(["This step", "Across steps", "Attention",
                                                             "Segments", "Compare"])
    guarded(summary, step_tab, linked.capture, step)
    guarded(across, across_tab, linked.capture, step)
    guarded(attention, activations_readable.attention_grid, linked.capture, step)
    guarded(segments, activations_readable.segments, linked)
    guarded(compare, activations_readable.compare, run, linked, step)
    prompt_section(linked, step)
    tokens_section(episode, step, linked.capture)


run = choosers.current_run()
st.title("Activations")
episode_id = choosers.episode_picker(run, "activations.episode", reset={"step": 1})
show(run, choosers.read_episode(run, episode_id))
