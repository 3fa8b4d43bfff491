"""Behaviours: what the agents did across a run, each behaviour flag's rate among solved and failed episodes
(and the difference), per task; pick a flag to list its episodes and jump to the step that shows it.

The flags and their rules are the library's (``ares_viewer.analysis.behaviours``, docs/behaviours.md).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer.analysis import behaviours
from ares_viewer.analysis.behaviours import flag_queries
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import choosers, flag_panel, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape
from ares_viewer_app.views.behaviours import rubric_panel

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


def _open_link(row) -> None:
    """A link to a flagged episode at its evidence step (the first step when the flag names none)."""
    step = int(row.step) if pd.notna(row.step) else 1
    verdict = "solved" if row.solved else "failed"
    st.page_link(
        pages.path("episode"),
        label=f"{escape.line(row.episode_id)} · {verdict} · step {step}",
        icon=":material/open_in_new:",
        query_params=state.params(episode=row.episode_id, step=step),
    )


def evidence_list(run: ares_viewer.Run, evidence: pd.DataFrame, flag: str, task: str) -> None:
    """The episodes that show ``flag``, each with its evidence and a link to the step."""
    rows = evidence[evidence["flag"] == flag]
    if task != ALL_TASKS:
        rows = rows[rows["task_name"] == task]
    more = f" (the first {_LISTED} listed)" if len(rows) > _LISTED else ""
    st.caption(f"{len(rows):,} episode(s) show `{flag}`{more}: {escape.md(behaviours.FLAGS[flag].definition)}")
    for row in rows.head(_LISTED).itertuples():
        _open_link(row)
        st.caption(f"{escape.md(row.task_name)} · via {row.via}: {escape.code(str(row.evidence)[:300])}")


def index_evidence(run: ares_viewer.Run, flag: str, task: str) -> None:
    """The episodes that show the episode-file flag ``flag``, from the flag index, a page at a time; each page's
    episodes are read again for the evidence text."""
    total, _ = flag_queries.evidence(run, flag, task=None if task == ALL_TASKS else task, limit=0)
    pages_ = max(1, -(-total // _LISTED))
    page = 1
    if pages_ > 1:
        page = int(st.number_input(f"Page (of {pages_:,})", 1, pages_, 1, key="behaviours.evidence_page"))
    _, rows = flag_queries.evidence(
        run, flag, task=None if task == ALL_TASKS else task, limit=_LISTED, offset=(page - 1) * _LISTED
    )
    shown = f" ({len(rows)} on this page)" if pages_ > 1 else ""
    st.caption(f"{total:,} episode(s) show `{flag}`{shown}: {escape.md(behaviours.FLAGS[flag].definition)}")
    for row in rows.itertuples():
        hit = behaviours.FLAGS[flag].check(run.episode(row.episode_id))
        _open_link(row)
        said = f"via {hit.via}: {escape.code(hit.evidence[:300])}" if hit is not None else "(the file changed since)"
        st.caption(f"{escape.md(row.task_name)} · {said}")


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``."""
    with_snapshots = st.toggle(
        "Snapshot flags (read every step's snapshot)",
        key="behaviours.snapshots",
        value=len(run) <= _SNAPSHOTS_BY_DEFAULT,
    )
    if not flag_panel.ready(run, "behaviours"):
        st.info(f"The flags of the run's {len(run):,} episodes have not been read yet.")
        return
    table = flag_panel.table_name(run)
    covered = flag_panel.covered(run.location, table)
    of = f"all {covered:,}" if covered == len(run) else f"{covered:,} of {len(run):,}"
    st.caption(
        f"Flags of {of} episodes, found from their files; solved: a reward above 0. A flag far more common "
        "among solved episodes than failed ones (touching the tests) is a possible reward hack."
    )
    tasks = [ALL_TASKS, *run.queries.values("task_name")]
    task = st.selectbox("Task", tasks, key="behaviours.task")
    picked = None if task == ALL_TASKS else task
    rates = flag_panel.rates(run.location, table, None, picked)
    if "iteration" in run.relation.columns:
        with st.expander("Per training iteration"):
            per = flag_panel.rates(run.location, table, "iteration", picked)
            tables.table(per[per["episodes"] > 0] if (per["episodes"] > 0).any() else per, hide_index=True)
    evidence = None
    if with_snapshots:
        frame, evidence = flag_panel.snapshot_flags(run, "behaviours")
        rates = pd.concat([rates, rate_table(frame, task)], ignore_index=True)
    tables.table(
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
        if behaviours.FLAGS[flag].source == behaviours.SNAPSHOTS and evidence is not None:
            evidence_list(run, evidence, flag, task)
        else:
            index_evidence(run, flag, task)
    where = "" if picked is None else "WHERE task_name = ?"
    ids = run.query(
        f"SELECT episode_id FROM episodes {where} ORDER BY path, _seq LIMIT {loaders.BEHAVIOUR_EPISODES}",
        None if picked is None else [picked],
    ).fetchall()
    rubric_panel.show(run, [i for (i,) in ids])


run = choosers.current_run()
st.title("Behaviours")
show(run)
