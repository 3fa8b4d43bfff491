"""The step view's small activations panel: the response's token logprobs and a link to the step's activations;
and the cached opening of an episode's capture, which the Activations page shares."""

from __future__ import annotations

import streamlit as st

from ares_viewer import activations, model
from ares_viewer.activations import figures, prompt, tokens
from ares_viewer_app.data import loaders
from ares_viewer_app.routing import pages, state


@st.cache_resource(max_entries=8, ttl=600, show_spinner=False)
def linked_capture(where: str, episode_id: str) -> activations.Linked | None:
    """The episode's capture (lazy: opening it reads its metadata.json only), kept for a few episodes."""
    return activations.find(loaders.load_run(where).episode(episode_id))


def capture_of(episode: model.Episode) -> activations.Capture | None:
    """The current run's capture of an episode for the token view, or None (none saved, or unreadable)."""
    if activations.folder_for(episode) is None:
        return None
    try:
        linked = linked_capture(loaders.location(state.get("run") or ""), episode.episode_id)
    except activations.Error:
        return None  # the Activations page says why
    return linked.capture if linked is not None else None


def clipped_prompt(episode: model.Episode, k: int) -> prompt.PromptTokens | None:
    """The prompt of step ``k``'s model call when the episode's capture shows the client clipped it, else None."""
    capture = capture_of(episode) if k >= 1 else None
    if capture is None:
        return None
    found = prompt.of_capture(capture, k - 1, [m.content or "" for m in episode.context(k)])
    return found if found is not None and found.clipped else None


def step_panel(episode: model.Episode, k: int) -> None:
    """Shown under a step's response; renders nothing when the step has neither tokens nor activations."""
    capture = capture_of(episode) if k >= 1 else None
    frame = tokens.token_frame(episode.step(k), capture=capture)
    if frame is not None:
        with st.expander(f"Token logprobs ({len(frame)} tokens)", icon=":material/bar_chart:"):
            st.html(figures.logprob_html(frame))
    if k >= 1 and activations.folder_for(episode) is not None:
        st.page_link(pages.path("activations"), label=f"Activations of step {k}", icon=":material/neurology:",
                     query_params=state.params(step=k))
