"""The step view's small activations panel: the response's token logprobs and a link to the step's activations;
the cached opening of an episode's capture, which the Activations page shares; whether a call's prompt was
clipped (``activations.clipping``); where a capture was looked for, and attaching one kept elsewhere."""

from __future__ import annotations

import os

import streamlit as st

from ares_viewer import activations, model
from ares_viewer.activations import attached, clipping, figures, tokens
from ares_viewer.base import locations
from ares_viewer_app.data import loaders
from ares_viewer_app.routing import pages, state
from ares_viewer_app.serving import access
from ares_viewer_app.text import escape


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


def clipped_prompt(episode: model.Episode, k: int) -> clipping.Clipping | None:
    """Whether step ``k``'s model call ran on a clipped prompt, and which end, when the episode's capture shows it
    was clipped; else None."""
    capture = capture_of(episode) if k >= 1 else None
    if capture is None:
        return None
    found = clipping.of_step(activations.link(episode, capture), k)
    return found if found.clipped else None


def clipped_note(episode: model.Episode, k: int) -> tuple[str, str | None]:
    """The Episode page's words after "the model saw N message(s) in all" (which end was cut and how it is known),
    and the help saying where that came from."""
    clipped = clipped_prompt(episode, k)
    if clipped is None:
        return "", None
    which = f"its {clipped.end} was cut" if clipped.end else "which end was cut is unknown"
    return (f", but the capture shows the prompt was clipped to {clipped.seen_tokens:,} tokens: {which}, as "
            f"{escape.line(clipped.evidence)}"), "From the episode's activation capture (`activations.clipping`)."


def attach_form(episode: model.Episode) -> None:
    """Attach a capture folder kept elsewhere to the episode (remembered in the cache folder; the run is not
    written). On a server reachable from other machines the folder must lie under the runs folder."""
    with st.form("activations.attach", border=False):
        folder = st.text_input("Attach a capture folder to this episode", key="activations.attach_folder",
                               placeholder="/path/to/activations/episode_001",
                               help="A folder ARES's `TrajectoryActivations.save(path)` wrote (metadata.json and "
                                    "step_NNNN.pt). Remembered in the cache folder; nothing is written to the run. "
                                    "The command line does the same: `ares-viewer activations attach RUN EPISODE "
                                    "FOLDER`.")
        if not st.form_submit_button("Attach") or not folder.strip():
            return
    try:
        chosen = _allowed(folder.strip())
        stored = attached.attach(episode.path, episode.episode_id, chosen)
    except (access.RefusedLocationError, attached.AttachError) as exc:
        st.error(f"Not attached: {exc}", icon=":material/block:")
        return
    linked_capture.clear()
    st.success(f"Attached {stored}.", icon=":material/link:")
    st.rerun()


def _allowed(folder: str) -> str:
    """The folder to attach, checked as the server checks a run: confined to the runs folder when exposed."""
    if not locations.is_local(folder) or any(ch in folder for ch in "*?["):
        raise access.RefusedLocationError(f"{folder}: name a local folder (no URL, no glob)")
    root = loaders.runs_root()
    checked = access.check(os.path.expanduser(folder), root=root, address=st.get_option("server.address"))
    return os.path.join(root, checked) if not os.path.isabs(checked) else checked


def none_found(episode: model.Episode) -> None:
    """Where a capture of the episode was looked for, and the form to attach one."""
    places = "\n".join(f"- {escape.line(p)}" for p in activations.looked_in(episode))
    st.info("No activations were found for this episode. ARES's `TrajectoryActivations.save(path)` writes them; "
            f"looked in:\n{places}\n\nSave them to `<run>/{activations.ACTIVATIONS_DIRNAME}/<episode id>/`, or "
            "attach the folder where they are.")
    attach_form(episode)


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
    elif k >= 1 and _expects_capture(episode):
        places = "; ".join(activations.looked_in(episode))
        st.caption(f"No activation capture found for this episode; looked in: {escape.line(places)}. Attach one on "
                   "the Activations page or with `ares-viewer activations attach`.")


def _expects_capture(episode: model.Episode) -> bool:
    """Whether the episode's recording names a capture, or its run holds an ``activations/`` folder."""
    recording = episode.metadata.get("recording")
    if isinstance(recording, dict) and recording.get("activations"):
        return True
    return locations.is_local(episode.path) and os.path.isdir(
        os.path.join(os.path.dirname(episode.path), activations.ACTIVATIONS_DIRNAME))
