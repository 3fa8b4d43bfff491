"""The Episode page's "Decisive step" panel: V(k) per step from branched rollouts, and where it changes the most.

It shows what is stored for the episode (``counterfactual.branching.load``: the cache folder's branches and the
ones shipped with the run, as the bundled sample has, the latter marked "supplied with the run"), so the curve
comes back with the URL: the value curve with its intervals and the decisive step shaded, beside a table of step,
V, interval, n and failed, the decisive step or "no change found" in words, then a probed step's branches
(reward, outcome, length), each opening as an episode or in Compare against the parent. With the model endpoint
the server's operator configured (a visitor never names one) and a budget it runs a search in a background thread
of the server: a progress bar, and Cancel, which starts no new branch and keeps every finished one; a search whose
branches failed ends in a warning naming why. Running needs the Docker engine, and is offered where the Sandbox
page is (``sandbox_policy``); the panel says what is missing and how to set it.
"""

from __future__ import annotations

import dataclasses
import threading

import streamlit as st

from ares_viewer import model
from ares_viewer.counterfactual import branching, model_client, value_curve
from ares_viewer.runs import run
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import endpoint, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.serving import sandbox_policy
from ares_viewer_app.text import escape, readable

_KEY = "decisive."


@dataclasses.dataclass
class Job:
    """A search running in a thread of the server; the thread writes its progress here (no Streamlit call)."""

    episode_id: str
    path: str = ""  # the episode's file: two runs may hold episodes of one id
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    done: int = 0
    planned: int | None = None
    error: str | None = None
    finished: bool = False
    stopped: str | None = None
    tokens: int | None = None
    note: str | None = None
    failures: str | None = None


def _job() -> Job | None:
    return st.session_state.get(f"{_KEY}job")


def _start(episode: model.Episode, client, steps: str, samples: int, budget: branching.Budget) -> bool:
    """Start the search in a thread (True), or say why it cannot start (False)."""
    try:
        engine = loaders.docker_engine()
    except Exception as exc:  # no engine: said, never a traceback
        st.error(f"The Docker engine cannot be reached: {escape.md(exc)}", icon=":material/error:")
        return False
    job = Job(episode.episode_id, episode.path)

    def progress(p: branching.Progress) -> None:
        job.done, job.planned = p.done, p.planned

    def work() -> None:
        try:
            found = branching.search(
                episode,
                client,
                steps=steps,
                samples=samples,
                budget=budget,
                docker_client=engine,
                progress=progress,
                cancel=job.cancel,
            )
            job.stopped, job.tokens, job.note = found.stopped, found.tokens, found.note
            job.failures = branching.say_failures(found.failures) if found.failures else None
        except Exception as exc:  # shown on the page, never a traceback
            job.error = f"{type(exc).__name__}: {exc}"
        finally:
            job.finished = True

    st.session_state[f"{_KEY}job"] = job
    threading.Thread(target=work, name=f"decisive-{episode.episode_id[:8]}", daemon=True).start()
    return True


def _progress(episode_id: str, path: str) -> None:
    """The running search's progress bar and Cancel; a full rerun when it ends, to draw the new curve."""
    job = _job()
    if job is None or (job.episode_id, job.path) != (episode_id, path):
        return
    if job.finished:
        if not st.session_state.get(f"{_KEY}shown_end"):
            st.session_state[f"{_KEY}shown_end"] = True
            st.rerun()
        if job.error:
            st.error(f"The search failed: {escape.md(job.error)}", icon=":material/error:")
        elif job.failures:
            st.warning(
                f"The search ended ({escape.md(job.stopped)}) with failures: {job.done} new branch(es), "
                f"{_tokens(job.tokens)} model tokens. {escape.md(job.failures)}.",
                icon=":material/warning:",
            )
        else:
            st.success(
                f"The search ended ({escape.md(job.stopped)}): {job.done} new branch(es), "
                f"{_tokens(job.tokens)} model tokens."
            )
            if job.note:
                st.warning(escape.md(job.note.capitalize() + "."), icon=":material/token:")
        return
    of = f" of {job.planned}" if job.planned else ""
    st.progress(job.done / job.planned if job.planned else 0.0, text=f"{job.done}{of} branch(es) done")
    if job.cancel.is_set():
        st.caption("Cancelling: the running branches finish and are kept.")
    elif st.button("Cancel", icon=":material/stop_circle:", key=f"{_KEY}cancel"):
        job.cancel.set()


def _missing() -> model_client.EndpointConfig | None:
    """The configured endpoint when a search may run here; else None, after saying what is missing and how to set
    it (the server's operator does: a visitor never names an endpoint)."""
    allowed = sandbox_policy.sandbox_enabled(st.get_option("server.address"))
    config = endpoint.configured_endpoint(lambda: None)
    missing = []
    if not allowed:
        missing.append(
            f"permission to run branches on this server (they run commands on this machine's Docker engine): set "
            f"{sandbox_policy.SANDBOX_ENV}=1 in the server's environment"
        )
    if config is None:
        missing.append(endpoint.how_to_set_endpoint())
    if missing:
        st.info(
            "A search cannot run from this page. It needs " + "; and ".join(missing) + ". "
            "The curve above shows what is already stored.",
            icon=":material/model_training:",
        )
        return None
    return config


def _controls(episode: model.Episode) -> None:
    config = _missing()
    if config is None:
        return
    st.markdown(
        f"Searches ask model {escape.code(config.model)} at {escape.code(config.shown_url)} "
        f"(configured by {escape.code(config.source)})."
    )
    temperature = st.number_input("Temperature", 0.0, 2.0, 1.0, 0.1, key=f"{_KEY}temperature")
    budget = st.columns(5)
    steps = budget[0].text_input(
        "Steps", value="bisect", key=f"{_KEY}steps", help="all, every:N, bisect (adaptive) or a list like 1,2,3"
    )
    samples = int(budget[1].number_input("Samples per step", 1, 50, 4, key=f"{_KEY}samples"))
    parallel = int(budget[2].number_input("Containers at once", 1, 16, 2, key=f"{_KEY}parallel"))
    most = int(budget[3].number_input("At most, new branches", 1, 1000, 40, key=f"{_KEY}max_rollouts"))
    tokens = int(
        budget[4].number_input(
            "At most, model tokens",
            0,
            10**10,
            0,
            1000,
            key=f"{_KEY}token_budget",
            help="0: no limit. Needs an endpoint that reports token usage.",
        )
    )
    running = (job := _job()) is not None and not job.finished
    if st.button(
        "Branch and estimate V", type="primary", icon=":material/call_split:", key=f"{_KEY}go", disabled=running
    ):
        try:
            branching.parse_steps(steps, episode)
        except ValueError as exc:
            st.error(escape.md(exc), icon=":material/error:")
            return
        client = dataclasses.replace(config, request={**config.request, "temperature": temperature}).client()
        st.session_state[f"{_KEY}shown_end"] = False
        limits = branching.Budget(max_rollouts=most, parallel=parallel, token_budget=tokens or None)
        if _start(episode, client, steps, samples, limits):
            st.rerun()


def _branches(found: branching.Search, episode: model.Episode) -> None:
    probed = sorted({b.step for b in found.branches})
    if not probed:
        return
    default = found.decisive.step if found.decisive is not None and found.decisive.step in probed else probed[0]
    step = st.selectbox("Branches from step", probed, index=probed.index(default), key=f"{_KEY}probe")
    for i, b in enumerate(found.of_step(step), start=1):
        folder = str(found.folder_of(b))
        cols = st.columns([2, 2, 1, 2, 2])
        outcome = b.status if b.failure is None else f"failed ({b.failure})"
        origin = " · supplied with the run" if b.supplied else ""
        cols[0].markdown(f"Branch {i}: reward **{escape.md(readable.fmt(b.reward))}**{origin}")
        cols[1].markdown(escape.md(outcome) + (f" · {escape.md(b.error)}" if b.error else ""))
        if b.episode_id is None or b.path is None:
            continue
        try:
            actions = run.load_episode(b.path).num_actions
        except Exception:  # a branch file gone or unreadable: listed, without its length
            actions = None
        cols[2].markdown(f"{readable.fmt(actions)} action(s) · {_tokens(b.tokens)} tokens")
        if cols[3].button("Open as episode", icon=":material/open_in_new:", key=f"{_KEY}open.{step}.{i}"):
            # This very page with another run and episode: a page link to the current page would not navigate.
            state.update(run=folder, episode=b.episode_id, step=1, url=False)
            st.switch_page(pages.path("episode"), query_params=state.params())
        cols[4].page_link(
            pages.path("compare"),
            label="Compare vs parent",
            icon=":material/compare_arrows:",
            query_params=state.params(
                episode=episode.episode_id, other=b.episode_id, other_in=folder, row=None, step=None
            ),
        )


def _curve(found: branching.Search) -> None:
    if found.problems:
        shown = "; ".join(found.problems[:5]) + (f"; and {len(found.problems) - 5} more" if len(found.problems) > 5
                                                 else "")
        st.warning(f"Left out, could not be read: {escape.md(shown)}", icon=":material/warning:")
    if not found.branches:
        st.caption("No branch stored for this episode yet.")
        return
    left, right = st.columns([3, 2])
    with left:
        if any(e.value is not None for e in found.curve if not e.recorded):
            st.plotly_chart(value_curve.figure(found), key=f"{_KEY}chart")
        else:
            st.caption(f"No branch with a reward yet: all {len(found.branches)} stored branch(es) failed.")
    with right:
        tables.table(_table(found), hide_index=True, key=f"{_KEY}table")
    st.markdown(f"**{found.describe()}**")
    failed = [b for b in found.branches if b.failure is not None]
    if failed:
        st.warning(escape.md(branching.say_failures(failed) + "."), icon=":material/warning:")
    supplied = [b for b in found.branches if b.supplied]
    here = len(found.branches) - len(supplied)
    if supplied:
        st.caption(
            f"{len(supplied)} branch(es) supplied with the run in {escape.code(found.supplied_folder)}: results this "
            "installation did not compute, counted in the curve as the run states them."
        )
    if here:
        st.caption(
            f"{here} branch(es) computed here, stored in {escape.code(found.folder)}; "
            f"{_tokens(found.total_tokens)} model tokens spent."
        )


def _table(found: branching.Search) -> list[dict[str, object]]:
    """The curve as the table beside it: step, V, the 95% interval, n, failed (and how many came with the run)."""
    rows = []
    for e in found.curve:
        row: dict[str, object] = {
            "step": e.step,
            "V": None if e.value is None else round(e.value, 2),
            "interval": "recorded reward" if e.recorded else (
                readable.UNKNOWN if e.value is None else f"[{e.low:.2f}, {e.high:.2f}]"),
            "n": None if e.recorded else e.n,
            "failed": None if e.recorded else e.failed,
        }
        if found.supplied_folder is not None:
            row["supplied with the run"] = sum(1 for b in found.of_step(e.step) if b.supplied)
        rows.append(row)
    return rows


def _tokens(count: int | None) -> str:
    """A token count as the page says it: ``unknown`` when the endpoint reported no usage (never 0)."""
    return "unknown" if count is None else f"{count:,}"


def show(episode: model.Episode) -> None:
    """The panel for ``episode`` (on the Episode page, under the step timeline)."""
    # Drawn only when open (a rerun on opening): closed, its inputs and chart cost the page nothing (#33). Its
    # arguments never change, so it stays as the reader left it while a search runs and ends.
    with st.expander("Decisive step: the value of each step from branched rollouts", icon=":material/call_split:",
                     key="episode.decisive", on_change="rerun") as panel:
        if not panel.open:
            return
        body(episode)


def body(episode: model.Episode) -> None:
    """The panel's contents: a running search's progress, what is stored (curve, table, branches), then the
    search's controls."""
    job = _job()
    running = job is not None and (job.episode_id, job.path) == (episode.episode_id, episode.path) and not job.finished
    st.caption(
        "Branch from the episode's steps: restore each step's snapshot, let a model carry on several times, "
        "score each branch with the task's verifier. V(k) is the share of branches that solve the task."
    )
    st.fragment(_progress, run_every=1.0 if running else None)(episode.episode_id, episode.path)
    found = branching.load(episode)
    _curve(found)
    _branches(found, episode)
    _controls(episode)
