"""Two episodes side by side, steps aligned by what they did; two runs' rewards side by side.

The URL names both episodes (``episode``, ``other``) and the picked row of the alignment (``row``). Episode B
comes from another run when ``other_in`` names one: a counterfactual's folder, compared with its parent.
Rows are numbered from 1 wherever the page (or its URL) names one: in the table's first column, the sentence
above it and the picked row's heading.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer.analysis import aggregate_plots, align, ending
from ares_viewer.base import textdiff
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import blocks, choosers, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.serving import access
from ares_viewer_app.text import escape, readable


def run_of_b(run: ares_viewer.Run) -> ares_viewer.Run:
    """The run episode B comes from: the one ``other_in`` names when it holds ``other`` (a counterfactual's
    folder), else ``run``. A name that does not open, or lacks the episode, is dropped with a message."""
    where = state.get("other_in")
    if not where:
        return run
    try:
        other = loaders.load_run(loaders.location(where))
    except (access.RefusedLocationError, ares_viewer.LocationError) as exc:
        st.warning(f"Cannot open episode B's run {escape.code(where)} (`other_in` in the link): {escape.md(exc)}. "
                   "Comparing within this run.", icon=":material/help:")
        state.update(other_in=None)
        return run
    if other.location == run.location:
        return run
    if state.get("other") not in other:
        state.update(other_in=None)  # another episode was picked since (or the run changed): back to one run
        return run
    return other


def default_pair(run: ares_viewer.Run, run_b: ares_viewer.Run | None = None) -> tuple[str, str | None]:
    """A failed attempt and the shortest solved attempt at the same task (the view's episodes when it names them).
    With ``run_b`` (another run), B is the episode of that run the view names. B is None when no other attempt at
    A's task exists and the view names none: the page says so rather than compare two different tasks.

    Each is one query of the index: the run is never listed."""
    a = state.get("episode")
    elsewhere = run_b is not None and run_b is not run
    for name, wanted in (("episode", a), ("other", None if elsewhere else state.get("other"))):
        if wanted and wanted not in run:
            st.warning(f"This run has no episode {escape.code(wanted)} (`{name}` in the link): comparing "
                       "others instead.", icon=":material/help:")
    if a is None or a not in run:
        # Prefer a failure whose task was also solved: that pair says the most.
        a = run.queries.unsolved_of_solved_task() or choosers.first_episode(run)
    if elsewhere:
        b = state.get("other")  # run_of_b checked that it holds it
    else:
        b = state.get("other")
        if b is not None and b == a:
            st.warning(f"Episode B (`other` in the link) is episode A, {escape.code(a)}: comparing it with another "
                       "attempt instead.", icon=":material/help:")
        if b is None or b == a or b not in run:
            # The best other attempt at this task; never, silently, an attempt at another task.
            b = run.queries.best_other(a, same_task=True)
    # The link names the two episodes shown, whatever it named before: shared, it reopens this comparison.
    if (state.get("episode"), state.get("other")) != (a, b):
        state.update(episode=a, other=b)
    return a, b


def pickers(run: ares_viewer.Run, run_b: ares_viewer.Run) -> tuple[str, str | None]:
    a, b = default_pair(run, run_b)
    left, right = st.columns(2)
    with left:
        choosers.episode_choice(run, "Episode A", "compare.a", a, narrow=True,
                               on_change=lambda: state.update(episode=st.session_state["compare.a"], step=1, row=None))
    with right:
        choosers.episode_choice(run_b, "Episode B" if run_b is run else "Episode B (another run)", "compare.b", b,
                               partners_of=a if run_b is run and b is not None else None, narrow=True,
                               on_change=lambda: state.update(other=st.session_state["compare.b"], row=None))
    if run_b is not run:
        parent = run_b.episode(b).metadata.get("counterfactual") or {}
        link = (f" It is a counterfactual of episode {escape.code(parent.get('episode_id'))} from step "
                f"{escape.line(parent.get('step'))}." if parent else "")
        right.caption(f"From {escape.code(run_b.location)}.{link}")
        if right.button("Compare within this run", key="compare.same_run", icon=":material/undo:"):
            state.update(other_in=None, other=None, row=None)
            st.rerun()
    return a, b


def _row_picked() -> None:
    event = st.session_state.get("compare.pairs") or {}
    rows = (event.get("selection") or {}).get("rows") or []
    state.update(row=rows[0] + 1 if rows else None)


def row_number(i: int) -> int:
    """How the page names the row at position ``i`` of the alignment (from 1)."""
    return i + 1


def picked_row(pairs: list[align.Pair], shown_first: int | None) -> int | None:
    """The position of the row the view names (``row`` in the URL, from 1), else of the row shown first (where
    the two part ways). A ``row`` the alignment lacks is a warning, and leaves the link."""
    problem = state.number_problem("row", row_number(0), row_number(len(pairs) - 1), noun="row",
                                   holder="the alignment")
    if problem:
        choosers.shown_instead(problem, "row", "no row" if shown_first is None else f"row {row_number(shown_first)}")
        state.update(row=None)
    wanted = state.get_int("row", 0) - 1
    return wanted if 0 <= wanted < len(pairs) else shown_first


def pairs_table(runs: tuple[ares_viewer.Run, ares_viewer.Run], a: str, b: str, pairs: list[align.Pair],
                diverged: int | None, picked: int | None) -> None:
    """The aligned steps as a table; picking a row shows it below (and names it in the URL)."""
    ep_a, ep_b = runs[0].episode(a), runs[1].episode(b)

    def command(episode, index):
        return "" if index is None else (episode.step(index).command or "(no command)").splitlines()[0][:120]

    def mark(i: int, pair: align.Pair) -> str:
        marks = ["◀ diverged"] if i == diverged else []
        if i == picked and i != diverged:
            marks.append("◀ shown")
        if pair.files:
            marks.append("same files")
        elif pair.is_gap:
            marks.append("gap")
        return " · ".join(marks)

    def number(index: int | None) -> str:
        return "" if index is None else str(index)  # a gap is blank, as its command is: no step, not an unknown one

    rows = pd.DataFrame({
        "row": [row_number(i) for i in range(len(pairs))],
        "A step": [number(p.a) for p in pairs], "A command": [command(ep_a, p.a) for p in pairs],
        "similarity": [p.similarity for p in pairs],
        "B step": [number(p.b) for p in pairs], "B command": [command(ep_b, p.b) for p in pairs],
        "": [mark(i, p) for i, p in enumerate(pairs)],
    })
    step_column = st.column_config.TextColumn(alignment="right")
    tables.table(rows, key="compare.pairs", on_select=_row_picked, selection_mode="single-row", hide_index=True,
                 column_config={"similarity": st.column_config.ProgressColumn("similarity", min_value=0.0,
                                                                              max_value=1.0, format="%.2f"),
                                "row": st.column_config.NumberColumn("row", width=48),
                                "A step": step_column, "B step": step_column})


def pair_detail(runs: tuple[ares_viewer.Run, ares_viewer.Run], a: str, b: str, pair: align.Pair) -> None:
    ep_a, ep_b = runs[0].episode(a), runs[1].episode(b)
    step_a = None if pair.a is None else ep_a.step(pair.a)
    step_b = None if pair.b is None else ep_b.step(pair.b)
    if pair.files:
        st.caption("Paired by the files both steps changed: " + ", ".join(f"`{f}`" for f in pair.files))
    left, right = st.columns(2)
    for column, label, episode, step, where in ((left, "A", ep_a, step_a, None),
                                                (right, "B", ep_b, step_b, state.get("other_in"))):
        with column:
            if step is None:
                st.info(f"{label} has no step here (a gap).")
                continue
            # The Episode page's ``other`` is the episode this one is compared with (its "diff against" choice):
            # B's link names A, unless B lives in another run, where A is not.
            if where and runs[1] is not runs[0]:
                partner = {"run": where, "other_in": None, "other": None}
            else:
                partner = {"other": a if label == "B" else b}
            st.page_link(pages.path("episode"), label=f"Open {label} step {step.index}", icon=":material/open_in_new:",
                         query_params=state.params(episode=episode.episode_id, step=step.index, row=None, **partner))
            blocks.long_text(step.command or step.response, f"{label}.{episode.episode_id}.{step.index}",
                             language="bash", page="compare")
            st.caption(f"return code {escape.line(readable.fmt(step.returncode))}")
    name_a = f"A step {pair.a}" if pair.a is not None else "A (gap)"
    name_b = f"B step {pair.b}" if pair.b is not None else "B (gap)"
    st.markdown("**Command diff**")
    st.html(textdiff.to_html(step_a and step_a.command, step_b and step_b.command, a_name=name_a, b_name=name_b))
    st.markdown("**Output diff**")
    st.html(textdiff.to_html(step_a and step_a.output, step_b and step_b.output, a_name=name_a, b_name=name_b))


_CONTRAST_SHOWN = 6  # what only one attempt did, named above the table before "and N more"


def contrast_summary(runs: tuple[ares_viewer.Run, ares_viewer.Run], a: str, b: str) -> None:
    """What one attempt did that the other never did."""
    run_a, run_b = runs
    files_a, files_b = loaders.step_files(run_a.location, a), loaders.step_files(run_b.location, b)
    patch_a, patch_b = loaders.submission(run_a.location, a)[0], loaders.submission(run_b.location, b)[0]
    only_a, only_b = loaders.contrast(run_a.location, a, run_b.location, b)
    st.caption(align.files_source(files_a, files_b, patches=bool(patch_a or patch_b)).capitalize() + ".")
    sides = [(side, other, found) for side, other, found in (("A", "B", only_a), ("B", "A", only_b)) if found]
    if not sides:
        st.caption("Both attempts did the same kinds of things (tests, searches, edits of the same files).")
        return
    # the first few of each side above the aligned table; every one of them in the expander under it
    st.markdown("\n".join(
        f"- **Only {side}:** " + "; ".join(escape.line(x) for x in found[:_CONTRAST_SHOWN])
        + (f"; and {len(found) - _CONTRAST_SHOWN:,} more" if len(found) > _CONTRAST_SHOWN else "")
        + f" — {other} never did." for side, other, found in sides))
    if any(len(found) > _CONTRAST_SHOWN for _, _, found in sides):
        with st.expander(f"All that only one attempt did ({' and '.join(f'{len(f):,} of {s}' for s, _, f in sides)})",
                         icon=":material/list:"):
            st.markdown("\n".join(f"- **Only {side}:** " + "; ".join(escape.line(x) for x in found)
                                   + f" — {other} never did." for side, other, found in sides))


def submissions(runs: tuple[ares_viewer.Run, ares_viewer.Run], a: str, b: str) -> None:
    """The two final submissions side by side."""
    with st.expander("Final submissions, side by side", icon=":material/difference:", expanded=True):
        columns = st.columns(2)
        for column, label, episode_id, run in ((columns[0], "A", a, runs[0]), (columns[1], "B", b, runs[1])):
            patch, source = loaders.submission(run.location, episode_id)
            episode = run.episode(episode_id)
            with column:
                st.markdown(f"**{label}** · reward {readable.fmt(episode.total_reward)}")
                st.caption(f"Why: {escape.md(ending.of(episode).explanation)}")  # with its sources (docs/endings.md)
                st.caption(f"From {source}.")
                # an empty answer means none was found where the caption says, not that nothing was submitted; a
                # light text block (st.code's highlighter drew thousands of elements for a real diff), its head and
                # tail until "Show all"
                blocks.long_text(patch, f"submission.{label}.{episode_id}", language="diff", page="compare",
                                 empty="(no diff found there)")


def episodes_section(run: ares_viewer.Run) -> None:
    run_b = run_of_b(run)
    if len(run) < 2 and run_b is run:
        st.info("The run has a single episode: nothing to compare it with.")
        return
    a, b = pickers(run, run_b)
    if b is None:
        task = choosers.episode_rows(run, [a]).get(a, {}).get("task_name")
        st.info(f"Episode A is the only attempt at task {escape.code(task or '(no task recorded)')} in this run: no "
                "other attempt at the same task to compare it with. Choose episode B above to compare it with an "
                "episode of another task.", icon=":material/info:")
        return
    runs = (run, run_b)
    pairs = loaders.alignment(run.location, a, b, None if run_b is run else run_b.location)
    diverged = align.divergence(pairs)
    gaps = sum(p.is_gap for p in pairs)
    if diverged is None:
        st.success(f"The two episodes do the same things: {len(pairs)} aligned steps, no divergence.")
    else:
        # Episode A is the one under study (a failed attempt, by default): its own first departure is the
        # row shown first, rather than extra exploration by B.
        own = align.divergence(pairs, side="a")
        diverged = own if own is not None else diverged
        # One row, stated once: where A first does something of its own, else where B does.
        side, other = ("a", "B") if own is not None else ("b", "A")
        step = getattr(pairs[diverged], side)
        st.markdown(f"**{len(pairs)} aligned rows, {gaps} gap(s).** They diverge at row {row_number(diverged)}, "
                    f"where {side.upper()} first does what {other} does not ({side.upper()} step {step}).")
    contrast_summary(runs, a, b)
    picked = picked_row(pairs, diverged)
    pairs_table(runs, a, b, pairs, diverged, picked)
    if picked is not None:
        st.subheader(f"Row {row_number(picked)}")
        pair_detail(runs, a, b, pairs[picked])
    submissions(runs, a, b)


def runs_section(run: ares_viewer.Run) -> None:
    names = loaders.other_runs(run, state.get("run") or run.location)
    if not names:
        st.caption("Another run under the runs folder would show here, side by side with this one.")
        return
    other = state.get("other_run")
    st.session_state["compare.other_run"] = other if other in names else names[0]
    other = st.selectbox("Compare this run with", names, key="compare.other_run",
                         on_change=lambda: state.update(other_run=st.session_state["compare.other_run"]))
    try:
        other_run = loaders.load_run(loaders.location(other))
    except ares_viewer.LocationError as exc:
        st.error(escape.md(exc))
        return
    # Aggregates of each run's index: a few hundred numbers whatever the runs' sizes.
    both = [(state.get("run") or "this run", run), (other, other_run)]
    left, right = st.columns(2)
    left.plotly_chart(aggregate_plots.compare_reward_histograms([(n, r.queries.reward_histogram()) for n, r in both]),
                      key="compare.dist")
    right.plotly_chart(aggregate_plots.compare_task_rates([(n, r.queries.per_task()[0]) for n, r in both]),
                       key="compare.tasks")


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``: two episodes, or two runs, side by side."""
    blocks.copy_buttons()  # the text blocks' copy buttons
    # Only the open tab runs: the hidden one's charts (and run B's index) cost a second of every visit.
    tab_episodes, tab_runs = st.tabs(["Two episodes", "Two runs"], key="compare.tab", on_change="rerun")
    with tab_episodes:
        if tab_episodes.open is not False:
            episodes_section(run)
    with tab_runs:
        if tab_runs.open is not False:
            runs_section(run)


run = choosers.current_run()
st.title("Compare")
show(run)
