"""Behaviours: what the agents did across a run, each behaviour flag's rate among solved and failed episodes
(and the difference), per task; pick a flag to list its episodes and jump to the step that shows it.

The flags and their rules are the library's (``ares_viewer.analysis.behaviours``, docs/behaviours.md).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer.analysis import behaviours
from ares_viewer_app import escape, loaders, pages, rubric_panel, state, widgets

ALL_TASKS = "All tasks"
# Episodes listed under a picked flag.
_LISTED = 50
# Runs up to this many episodes read their snapshot flags by default (each reads every step's snapshot).
_SNAPSHOTS_BY_DEFAULT = 200


def rate_table(frame: pd.DataFrame, task: str) -> pd.DataFrame:
    """The rates shown: the run's, or one task's."""
    if task != ALL_TASKS:
        frame = frame[frame["task_name"] == task]
    return behaviours.rates(frame)


def evidence_list(run: ares_viewer.Run, evidence: pd.DataFrame, flag: str, task: str) -> None:
    """The episodes that show ``flag``, each with its evidence and a link to the step."""
    rows = evidence[evidence["flag"] == flag]
    if task != ALL_TASKS:
        rows = rows[rows["task_name"] == task]
    more = f" (the first {_LISTED} listed)" if len(rows) > _LISTED else ""
    st.caption(f"{len(rows):,} episode(s) show `{flag}`{more}: {escape.md(behaviours.FLAGS[flag].definition)}")
    for row in rows.head(_LISTED).itertuples():
        step = int(row.step) if pd.notna(row.step) else 1
        verdict = "solved" if row.solved else "failed"
        st.page_link(
            pages.path("episode"),
            label=f"{row.episode_id} · {verdict} · step {step}",
            icon=":material/open_in_new:",
            query_params=state.params(episode=row.episode_id, step=step),
        )
        st.caption(f"{escape.md(row.task_name)} · via {row.via}: {escape.code(str(row.evidence)[:300])}")


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``."""
    read = min(len(run), loaders.BEHAVIOUR_EPISODES)
    with_snapshots = st.toggle(
        "Snapshot flags (read every step's snapshot)",
        key="behaviours.snapshots",
        value=len(run) <= _SNAPSHOTS_BY_DEFAULT,
    )
    frame, evidence = loaders.behaviour_flags(run.location, len(run), with_snapshots)
    of = f"the first {read:,} of {len(run):,}" if read < len(run) else f"all {read:,}"
    st.caption(
        f"Flags of {of} episodes, found from their files; solved: a reward above 0. A flag far more common "
        "among solved episodes than failed ones (touching the tests) is a possible reward hack."
    )
    tasks = [ALL_TASKS, *sorted(frame["task_name"].unique())]
    task = st.selectbox("Task", tasks, key="behaviours.task")
    rates = rate_table(frame, task)
    if "iteration" in frame.columns and frame["iteration"].notna().any():
        with st.expander("Per training iteration"):
            in_task = frame if task == ALL_TASKS else frame[frame["task_name"] == task]
            per = behaviours.rates(in_task, by="iteration")
            st.dataframe(per[per["episodes"] > 0] if (per["episodes"] > 0).any() else per, hide_index=True)
    if not with_snapshots:
        rates = rates[rates["source"] != behaviours.SNAPSHOTS]
    st.dataframe(
        rates,
        hide_index=True,
        key="behaviours.rates",
        column_config={
            "solved_rate": st.column_config.NumberColumn("among solved", format="percent"),
            "failed_rate": st.column_config.NumberColumn("among failed", format="percent"),
            "difference": st.column_config.NumberColumn("difference", format="percent"),
        },
    )
    shown = rates[rates["episodes"] > 0]["flag"].tolist()
    if not shown:
        st.info("No episode shows any flag.")
    else:
        flag = st.selectbox("Episodes with the flag", shown, key="behaviours.flag")
        evidence_list(run, evidence, flag, task)
    in_task = frame if task == ALL_TASKS else frame[frame["task_name"] == task]
    rubric_panel.show(run, in_task["episode_id"].tolist())


run = widgets.current_run()
st.title("Behaviours")
show(run)
