"""Rubric search on the Behaviours page: a rubric checked per episode by the configured model endpoint
(``ares_viewer.analysis.rubric``). The panel says where requests go, what one holds and how many calls it will make
before anything is sent; answers stream in with progress, are cached (so a search stopped with Streamlit's Stop
button resumes where it stopped), and each "yes" links to the steps it cites."""

from __future__ import annotations

import streamlit as st

import ares_viewer
from ares_viewer.analysis import rubric
from ares_viewer_app.panels import endpoint
from ares_viewer_app.routing import pages, state
from ares_viewer_app.serving import sandbox_policy
from ares_viewer_app.text import escape

_KEY = "behaviours.rubric"
# Episodes one search may check at the most.
MAX_EPISODES = 500


def _verdict_row(verdict: rubric.Verdict) -> None:
    cached = " (cached)" if verdict.cached else ""
    if verdict.answer == rubric.YES:
        first = verdict.steps[0] if verdict.steps else 1
        st.page_link(
            pages.path("episode"),
            label=f"{escape.line(verdict.episode_id)} · yes · step {first}{cached}",
            icon=":material/open_in_new:",
            query_params=state.params(episode=verdict.episode_id, step=first),
        )
        cited = ", ".join(str(s) for s in verdict.steps) or "none"
        st.caption(f"steps cited: {cited} · {escape.md(verdict.reason)}")
    elif verdict.answer == rubric.ERROR:
        st.warning(
            f"{verdict.episode_id}: not answered ({escape.md(verdict.reason)}); not counted as no",
            icon=":material/error:",
        )


def _how_to_configure() -> None:
    st.info(
        "No model endpoint is configured, so nothing is sent anywhere. Checking a rubric needs "
        f"{endpoint.how_to_set_endpoint()}."
    )


def show(run: ares_viewer.Run, episode_ids: list[str]) -> None:
    """The panel, over ``episode_ids`` (the episodes the page shows). Offered where the Sandbox page is: a search
    spends the operator's endpoint, so an exposed server needs ``ARES_VIEWER_SANDBOX=1`` (``sandbox_policy``)."""
    st.subheader("Rubric search")
    if not sandbox_policy.sandbox_enabled(st.get_option("server.address")):
        st.caption(
            "Rubric searches are off on this server (each one spends calls to the operator's model endpoint); "
            f"set {escape.code(sandbox_policy.SANDBOX_ENV)}=1 in the server's environment to allow them."
        )
        return
    config = endpoint.configured_endpoint(_how_to_configure)
    if config is None:
        return
    text = st.text_area("Rubric", key=f"{_KEY}.text", placeholder="the agent special-cases the test input")
    budget = int(
        st.number_input("At most this many calls", min_value=1, max_value=MAX_EPISODES, value=20, key=f"{_KEY}.budget")
    )
    if not text.strip():
        return
    chosen = [run.episode(i) for i in episode_ids[:MAX_EPISODES]]
    cache = rubric.Cache()
    plan = rubric.plan(chosen, text, config.model, cache, endpoint=config.url)
    st.caption(
        f"{plan.episodes:,} episode(s): {plan.calls:,} need a call to {escape.code(config.shown_url)} "
        f"(model {escape.code(config.model)}), at most {budget:,} now; the others are cached. One request "
        "per episode: the rubric and a digest of the episode (its task, commands, exit codes and output "
        "heads, at most 12,000 characters)."
    )
    with st.expander("What is sent for the first episode"):
        st.code(plan.example, language=None, wrap_lines=True)
    if st.button("Check the rubric", key=f"{_KEY}.go", type="primary"):
        bar = st.progress(0.0, text="Asking…")
        found = []
        for verdict in rubric.search(
            chosen, text, config.client(), config.model, cache, budget=budget, endpoint=config.url
        ):
            found.append(verdict)
            bar.progress(len(found) / len(chosen), text=f"{len(found):,} of {len(chosen):,} episodes")
        st.session_state[f"{_KEY}.found"] = (text, found)
    done = st.session_state.get(f"{_KEY}.found")
    if not done or done[0] != text:
        return
    counts = {
        answer: sum(v.answer == answer for v in done[1])
        for answer in (rubric.YES, rubric.NO, rubric.ERROR, rubric.SKIPPED)
    }
    st.caption(" · ".join(f"{n:,} {answer}" for answer, n in counts.items()))
    for verdict in done[1]:
        _verdict_row(verdict)
    if counts[rubric.YES] > 1 and st.button(
        "Group the matches", key=f"{_KEY}.group", help="One more call: the model names a handful of groups"
    ):
        try:
            groups = rubric.cluster(done[1], text, config.client())
        except Exception as exc:  # the endpoint's failure or an unreadable answer: said, nothing else changes
            st.warning(f"The matches were not grouped: {escape.md(exc)}", icon=":material/error:")
            return
        for group in groups:
            st.markdown(
                f"**{escape.md(group.name)}** · {len(group.members)} episode(s): {escape.md(', '.join(group.members))}"
            )
