"""Compare runs: this run against another run of the runs folder, or two sides of this run split by a column,
task by task (``ares_viewer.compare_runs``).

The URL names every choice: ``other_run`` (run B), or ``by`` and ``side`` (twice: A's value, then B's) to split
this run; ``show`` the tasks listed (``lost``, ``gained``, ``changed``; all of them when left out) and ``pick`` the
task picked, whose failing attempt on one side opens in Compare against the best attempt of the other.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer.analysis import aggregate_plots, compare_runs
from ares_viewer.review import queue_items
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import choosers, queue_panel, review_panel, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape, readable

_OTHER_RUN, _SPLIT = "Another run", "Two sides of this run"
_LISTS = ("all", "lost", "gained", "changed")
# Columns a run is never split by: one value per episode, or a place in the file.
_NOT_SPLIT = ("episode_id", "path", "start_time", "end_time", "duration_s", "error", "total_cost")
# The per-task table's columns, as the page names them.
_SHOWN = {
    "task_name": "task",
    "status": "status",
    "rate_a": "rate A",
    "rate_b": "rate B",
    "difference": "B − A",
    "q_value": "q",
    "p_value": "p",
    "judged_a": "judged A",
    "judged_b": "judged B",
    "attempts_a": "attempts A",
    "attempts_b": "attempts B",
    "mean_actions_a": "actions A",
    "mean_actions_b": "actions B",
    "changes": "changed in behaviour",
}


def _name(run: ares_viewer.Run) -> str:
    """How the URL names ``run``: its name in the picker, else its location."""
    return state.get("run") or run.location


def other_run(run: ares_viewer.Run) -> tuple[ares_viewer.Run, str] | None:
    """Run B, picked among the other runs of the runs folder and the other runs of this run's folder when it holds
    several (``NAME::RUN_ID``) (``other_run``); None when there is none."""
    names = loaders.other_runs(run, _name(run))
    named = state.get("other_run")
    if named and named not in names:
        names.insert(0, named)  # a location the link names, outside the picker's list
    if not names:
        st.info("Another run under the runs folder would show here, compared with this one task by task.")
        return None
    st.session_state["compare_runs.other"] = named if named in names else names[0]
    chosen = st.selectbox(
        "Run B",
        names,
        key="compare_runs.other",
        on_change=lambda: state.update(other_run=st.session_state["compare_runs.other"], pick=None),
    )
    try:
        return loaders.load_run(loaders.location(chosen)), chosen
    except Exception as exc:  # a refused or missing location: said, and nothing compared
        st.error(f"Cannot open run B {escape.code(chosen)}: {escape.md(exc)}")
        return None


def split(run: ares_viewer.Run) -> tuple[str, list[str]] | None:
    """The column this run is split by (``by``) and its two values (``side``), picked; None when it has none."""
    columns = [c for c in run.queries.columns if c not in _NOT_SPLIT]
    by = state.get("by")
    default = next((c for c in ("run_id", "iteration") if c in columns), columns[0])  # the folder's runs first
    by = by if by in columns else default
    left, middle, right = st.columns(3)
    st.session_state["compare_runs.by"] = by
    left.selectbox(
        "Split by",
        columns,
        key="compare_runs.by",
        on_change=lambda: state.update(by=st.session_state["compare_runs.by"], side=None, pick=None),
    )
    values = [str(v) for v in run.queries.values(by, limit=choosers.CHOICES)]
    if len(values) < 2:
        st.info(f"The column {escape.code(by)} holds {len(values)} value(s) in this run: nothing to split it into.")
        return None
    sides = state.get_list("side")
    if len(sides) != 2 or not set(sides) <= set(values):
        sides = [values[0], values[-1]]
    for column, i, label in ((middle, 0, "Side A"), (right, 1, "Side B")):
        st.session_state[f"compare_runs.side{i}"] = sides[i]
        column.selectbox(
            label,
            values,
            key=f"compare_runs.side{i}",
            on_change=lambda: state.update(
                side=[st.session_state["compare_runs.side0"], st.session_state["compare_runs.side1"]], pick=None
            ),
        )
    state.update(by=by, side=sides)
    return by, sides


_SIMILAR_SHOWN = 5  # groups of colliding task names named in the caption


def headline(found: compare_runs.Comparison) -> None:
    sign = found.sign_test
    a, b = found.overall_a, found.overall_b
    cols = st.columns(4)
    cols[0].metric(
        f"A: {found.a.label}",
        readable.fmt(a["rate"], ".0%"),
        help=f"{a['successes']:,} solved of "
        f"{a['judged']:,} judged episodes ({a['unscored']:,} unscored and {a['infrastructure']:,} failures "
        "of the infrastructure left out)",
    )
    delta = None if a["rate"] is None or b["rate"] is None else f"{b['rate'] - a['rate']:+.1%}"
    cols[1].metric(
        f"B: {found.b.label}",
        readable.fmt(b["rate"], ".0%"),
        delta=delta,
        help=f"{b['successes']:,} solved of {b['judged']:,} judged episodes ({b['unscored']:,} unscored "
        f"and {b['infrastructure']:,} failures of the infrastructure left out)",
    )
    both = sign.better + sign.worse + sign.ties  # the tasks both sides judged
    cols[2].metric("Tasks better / worse on B", f"{sign.better} / {sign.worse}" if both else readable.fmt(None),
                   help=f"{sign.ties} tied" if both else "No task is judged on both sides: none can be better or "
                   "worse.")
    cols[3].metric(
        "Sign test p",
        readable.fmt(sign.p_value),
        help="Exact two-sided sign test over the tasks both "
        "sides judged: is B better on more tasks than chance allows?",
    )
    for side in {id(found.a.run): found.a.run, id(found.b.run): found.b.run}.values():
        for _, message in side.missing_reports:  # why a side's trajectories are unscored
            st.caption(f"{escape.md(message[:1].upper() + message[1:])}.")
    counts = found.counts()
    st.caption(
        f"{counts['tasks']:,} tasks · **{counts['lost']} lost**, **{counts['gained']} gained**, "
        f"{counts['same']} the same, {counts['changed']} changed in behaviour · {counts['only A']} only on A, "
        f"{counts['only B']} only on B. A task is lost when A solved it and B never did, or B's rate is "
        f"significantly lower (Fisher's exact test, Benjamini–Hochberg q < {found.alpha}); gained the other "
        f"way round. Behaviour changed: mean actions, cost or tokens differing by more than "
        f"{found.change:.0%} of the larger, or another most frequent failure."
    )
    words = found.significance(pd.concat([found.lost(), found.gained()]))
    if words:
        st.info(f"Lost and gained: {escape.md(words)}", icon=":material/info:")
    similar = compare_runs.similar_task_names(found.tasks["task_name"])
    if similar:  # one task typed two ways counts as two tasks: say which names collide
        st.caption(
            "Warning: " + escape.md("; ".join(similar[:_SIMILAR_SHOWN]))
            + (f" (and {len(similar) - _SIMILAR_SHOWN} more such groups)" if len(similar) > _SIMILAR_SHOWN else "")
        )


def _listed(found: compare_runs.Comparison) -> pd.DataFrame:
    shown = state.get("show") if state.get("show") in _LISTS else "all"
    counts = {
        "all": len(found.tasks),
        "lost": len(found.lost()),
        "gained": len(found.gained()),
        "changed": len(found.changed()),
    }
    st.session_state["compare_runs.show"] = shown
    st.segmented_control(
        "Tasks",
        _LISTS,
        format_func=lambda k: f"{k} ({counts[k]})",
        key="compare_runs.show",
        required=True,
        on_change=lambda: state.update(
            show=None if st.session_state["compare_runs.show"] == "all" else st.session_state["compare_runs.show"]
        ),
    )
    listed = {"all": found.tasks, "lost": found.lost(), "gained": found.gained(), "changed": found.changed()}[shown]
    if shown in ("lost", "gained"):
        words = found.significance(listed)
        if words:
            st.info(escape.md(words), icon=":material/info:")
    return listed


def task_table(tasks: pd.DataFrame) -> None:
    """The listed tasks (sortable by any column); picking a row picks its task."""
    frame = tasks[list(_SHOWN)].rename(columns=_SHOWN)
    frame["changed in behaviour"] = frame["changed in behaviour"].map("; ".join)

    def picked() -> None:
        rows = ((st.session_state.get("compare_runs.table") or {}).get("selection") or {}).get("rows") or []
        if rows:
            state.update(pick=str(tasks["task_name"].iloc[rows[0]]))

    percent = {c: st.column_config.NumberColumn(c, format="percent") for c in ("rate A", "rate B", "B − A")}
    tables.table(
        frame,
        key="compare_runs.table",
        on_select=picked,
        selection_mode="single-row",
        hide_index=True,
        column_config={
            **percent,
            "q": st.column_config.NumberColumn("q", format="%.3g"),
            "p": st.column_config.NumberColumn("p", format="%.3g"),
        },
    )


def picked_task(found: compare_runs.Comparison, names: tuple[str, str], listed: pd.DataFrame) -> None:
    """The task picked (``pick``; else the first listed): its figures, and links to Compare and to its attempts."""
    tasks = set(found.tasks["task_name"])
    task = state.get("pick")
    if task is not None and task not in tasks:
        choosers.shown_instead(f"Neither side attempted the task {escape.code(task)}.", "pick", "the first listed")
        state.update(pick=None)
        task = None
    if task is None:
        if listed.empty:
            return
        task = str(listed["task_name"].iloc[0])
    row = found.tasks[found.tasks["task_name"] == task].iloc[0]
    st.subheader(f"Task {escape.line(task)}")
    st.markdown(
        f"{row['status']}: {readable.fmt(row['rate_a'], '.0%')} of {row['judged_a']} judged on A → "
        f"{readable.fmt(row['rate_b'], '.0%')} of {row['judged_b']} on B (p = {readable.fmt(row['p_value'])}, "
        f"q = {readable.fmt(row['q_value'])})" + "".join(f"\n- {escape.line(c)}" for c in row["changes"])
    )
    pair = found.pair(task)
    if pair is not None:
        (failing_side, failing), (best_side, best) = pair
        where = {id(found.a): names[0], id(found.b): names[1]}
        params = state.params(
            run=where[id(failing_side)],
            episode=failing,
            other=best,
            step=None,
            row=None,
            other_in=None if failing_side.run is best_side.run else where[id(best_side)],
        )
        st.page_link(
            pages.path("compare"),
            icon=":material/compare_arrows:",
            query_params=params,
            label=escape.line(f"Compare {failing_side.label}'s failing attempt with {best_side.label}'s best"),
        )
    sides = [(names[0], "A")] if found.a.run is found.b.run else [(names[0], "A"), (names[1], "B")]
    for name, side in sides:
        label = "this run" if len(sides) == 1 else f"run {side} ({escape.line(name)})"
        st.page_link(
            pages.path("overview"),
            icon=":material/list:",
            label=f"The task's attempts in {label}",
            query_params={**state.params(run=name, episode=None), "task": task},
        )


def queue_form(found: compare_runs.Comparison, names: tuple[str, str], listed: pd.DataFrame) -> None:
    """The form "Make a review queue of these": the attempts at the listed tasks, on both sides of a split run or on
    the side picked (a queue holds one run's episodes); the queue's source and description say which."""
    opened = review_panel.store()
    if not opened.writable or listed.empty:
        return
    with st.expander("Make a review queue of these", icon=":material/playlist_add:"):
        author = review_panel.author_input()
        same = found.a.run is found.b.run
        sides = {"A": [found.a], "B": [found.b]}
        if same:
            sides = {"both sides": [found.a, found.b], **sides}
        side = st.radio(
            "Episodes of the listed tasks on",
            list(sides),
            horizontal=True,
            key="compare_runs.queue_side",
            format_func=lambda k: k if k == "both sides" else f"{k} ({sides[k][0].label})",
        )
        tasks = [str(t) for t in listed["task_name"]]
        shown = state.get("show") if state.get("show") in _LISTS else "all"

        def choose() -> queue_panel.Chosen:
            chosen = sides[side]
            ids = [i for s in chosen for i in s.episode_ids(tasks)]
            record = {
                "compare_runs": {"list": shown, "a": found.a.label, "b": found.b.label, "side": side, "tasks": tasks}
            }
            on = " and ".join(s.label for s in chosen)
            said = f"Compare runs {found.a.label} → {found.b.label}: attempts on {on} at the {len(tasks)} {shown} tasks"
            return queue_items.episode_items(chosen[0].run, ids), record, said

        queue_panel.create_form(opened, author, "compare_runs.queue", choose, run=names[1] if side == "B" else names[0])


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``: it against another run, or two sides of it, task by task."""
    st.session_state["compare_runs.mode"] = _SPLIT if state.get("by") else _OTHER_RUN
    mode = st.segmented_control(
        "Compare this run with",
        (_OTHER_RUN, _SPLIT),
        key="compare_runs.mode",
        required=True,
        on_change=lambda: state.update(
            by=None if st.session_state["compare_runs.mode"] == _OTHER_RUN else "iteration", side=None, pick=None
        ),
    )
    if mode == _SPLIT:
        chosen = split(run)
        if chosen is None:
            return
        names = (_name(run), _name(run))
        ask = {"by": chosen[0], "sides": tuple(chosen[1])}
        run_b = run
    else:
        picked = other_run(run)
        if picked is None:
            return
        run_b, name_b = picked
        names, ask = (_name(run), name_b), {}
    try:
        found = loaders.comparison(run, run_b, ask.get("by"), ask.get("sides"))
    except compare_runs.CompareError as exc:
        st.error(escape.md(exc))
        return
    headline(found)
    left, right = st.columns([1, 3])
    left.plotly_chart(
        aggregate_plots.side_rates([(found.a.label, found.overall_a), (found.b.label, found.overall_b)]),
        key="compare_runs.rates",
    )
    if found.tasks["difference"].isna().all():  # an empty chart would read as "no difference"
        right.markdown("**Success rate per task**")
        right.info("No task is judged on both sides, so no task's success rate can be compared.",
                   icon=":material/info:")
        event = None
    else:
        event = right.plotly_chart(
            aggregate_plots.task_differences(found.tasks, found.labels),
            key="compare_runs.dots",
            on_select="rerun",
            selection_mode="points",
        )
    for point in (event or {}).get("selection", {}).get("points", []):
        if isinstance(point.get("customdata"), str) and point["customdata"] != state.get("pick"):
            state.update(pick=point["customdata"])
    shift = found.failure_shift()
    if not shift.empty:
        with st.expander(f"Failure causes that grew or shrank ({len(shift)})"):
            st.plotly_chart(aggregate_plots.failure_shift(shift, found.labels), key="compare_runs.failures")
    listed = _listed(found)
    task_table(listed)
    queue_form(found, names, listed)
    picked_task(found, names, listed)


run = choosers.current_run()
st.title("Compare runs")
show(run)
