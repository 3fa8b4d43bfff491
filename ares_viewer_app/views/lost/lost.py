"""Lost tasks: where a run's episodes were lost (and, for solved ones, made), from their stored branches.

Every figure is the library's (``counterfactual.lost``: each episode's decisive step from ``branching.load``, its
action's kind, files and flags; docs/decisive.md, "Where tasks are lost"): an episode whose V does not change is
counted as "no change" and never given a step; one without two values is "not searched". The page runs no branch:
the search is ``ares-viewer branch RUN --episodes failed`` (or the Episode page's panel, one episode at a time).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer.counterfactual import lost
from ares_viewer_app.panels import choosers, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape

# Decisive steps listed as links under the table.
_LINKED = 20
# Episodes read for the page (each file and its stored branches); a larger run is cut, and the page says so.
_MOST = 500
_OUTCOMES = ("failed", "solved", "all")


def _frame(run: ares_viewer.Run, outcome: str) -> tuple[pd.DataFrame, int]:
    table = run.episodes
    ids = list(table["episode_id"])
    if outcome != "all":
        solved = [None if r != r or r is None else r >= 0.5 for r in table["total_reward"]]
        ids = [i for i, s in zip(ids, solved, strict=True) if s is not None and s == (outcome == "solved")]
    chosen = ids[:_MOST]
    return lost.of_run(run, (run.episode(i) for i in chosen)), len(ids)


def _links(frame: pd.DataFrame) -> pd.DataFrame:
    """The link column as the app's URL: the run and the step."""
    run = state.get("run")
    return frame.assign(link=[lost.link(run, e, None if s != s or s is None else int(s))
                              for e, s in zip(frame["episode_id"], frame["decisive_step"], strict=True)])


def _counts(parts: dict[str, pd.DataFrame]) -> None:
    left, right = st.columns(2)
    with left:
        st.subheader("By kind of action")
        st.caption("How often each kind of action is the decisive step: a drop of V in a failed episode (where it "
                   "was lost), a rise in a solved one (the step that made it). Kinds: `counterfactual.lost."
                   "action_kind`.")
        tables.table(parts["kinds"], hide_index=True, key="lost.kinds")
    with right:
        st.subheader("By position")
        st.caption("Where the decisive step falls in its episode: the third of its actions (step / actions).")
        tables.table(parts["positions"], hide_index=True, key="lost.positions")
    st.subheader("Per task")
    tables.table(parts["tasks"], hide_index=True, key="lost.tasks",
                 column_config={"position": st.column_config.NumberColumn("mean position", format="%.2f")})
    if not parts["iterations"].empty:
        st.subheader("Per iteration")
        tables.table(parts["iterations"], hide_index=True, key="lost.iterations")
    st.subheader("Solved: the step that made them")
    if parts["made"].empty:
        st.caption("No solved episode has a decisive rise of V among those searched.")
    else:
        tables.table(_links(parts["made"]), hide_index=True, key="lost.made",
                     column_config={"link": st.column_config.LinkColumn("open", display_text="step")})


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``."""
    outcome = st.segmented_control("Episodes", _OUTCOMES, default="failed", key="lost.outcome") or "failed"
    frame, total = _frame(run, outcome)
    if total > _MOST:
        st.warning(f"The first {_MOST:,} of {total:,} {outcome} episodes are read.", icon=":material/content_cut:")
    states = frame["state"].value_counts()
    shown = ((f"{outcome.capitalize()} episodes", len(frame)), ("Decisive step", states.get(lost.DECISIVE, 0)),
             ("No change", states.get(lost.NO_CHANGE, 0)), ("Not searched", states.get(lost.NOT_SEARCHED, 0)))
    for cell, (label, value) in zip(st.columns(4), shown, strict=True):
        cell.metric(label, f"{int(value):,}")
    st.caption("From the branches stored for each episode (the cache folder's and those the run ships). "
               "**No change**: V is the same at every step valued, so no step is decisive (never given one). "
               "**Not searched**: fewer than two steps have a value. Search them with "
               + escape.code(f"ares-viewer branch {state.get('run') or 'RUN'} --episodes {outcome}") + ".")
    if frame.empty:
        st.info(f"The run has no {outcome} episode.")
        return
    _counts(lost.summary(frame))
    st.subheader("Episodes")
    shown = _links(frame)[["episode_id", "task_name", "outcome", "state", "decisive_step", "change", "sure", "kind",
                           "where", "files", "flags", "command", "link"]]
    tables.table(shown, hide_index=True, key="lost.episodes", column_config={
        "change": st.column_config.NumberColumn("change of V", format="%+.2f"),
        "link": st.column_config.LinkColumn("open", display_text="open"),
    })
    decided = frame[frame["state"] == lost.DECISIVE]
    if not decided.empty:
        st.caption(f"The decisive steps{f' (the first {_LINKED})' if len(decided) > _LINKED else ''}, each opening "
                   "the Episode page at the step:")
    for r in decided.head(_LINKED).itertuples():
        st.page_link(pages.path("episode"), icon=":material/open_in_new:",
                     label=f"{escape.line(r.episode_id)} · {r.direction} of {abs(r.change):.2f} at step "
                           f"{int(r.decisive_step)} ({r.kind}{'' if r.sure else ', not sure'})",
                     query_params=state.params(episode=r.episode_id, step=int(r.decisive_step)))


run = choosers.current_run()
st.title("Lost tasks")
show(run)
