"""Run overview: headline figures, reward plots and the episode table; a click opens an episode.

The table's filters, sorting, page and the failure reason picked are in the URL while they differ from their
defaults (``task``, ``outcome``, ``label`` repeated; ``reward=LOW..HIGH``, ``contains``, ``sort``, ``desc=1``,
``page``, ``reason``), so a reload or a shared link shows the same table.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer.analysis import behaviours, inspect_metrics, plots
from ares_viewer.model import render
from ares_viewer.runs.index import live, queries, subruns
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import blocks, choosers, flag_panel, review_panel, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape, readable
from ares_viewer_app.views.overview import charts

_TABLE_COLUMNS = ["task_name", "outcome", "total_reward", "num_actions", "duration_s", "total_cost",
                  "prompt_tokens", "generated_tokens", "nonzero_returncodes", "context_rewrites", "why",
                  "labels", "format", "episode_id"]
# Columns of training-log formats (Tinker), shown first when the run has them.
_TRAINING_COLUMNS = ["iteration", "split", "group_idx", "traj_idx"]
# Values a filter offers to pick from (the "Contains" filter finds the others).
_CHOICES = 1000
# The table's headers (and the names "Sort by" offers) of columns not shown by their own name.
_COLUMN_LABELS = {"run_id": "run",
                  "task_name": "task", "total_reward": "reward", "num_actions": "actions", "duration_s": "duration (s)",
                  "total_cost": "cost ($)", "prompt_tokens": "prompt tok.", "generated_tokens": "gen. tok.",
                  "nonzero_returncodes": "rc≠0", "context_rewrites": "ctx rewrites"}
_RUN_ORDER = "run order"
# Rows the table shows at once; the rest are pages away (paged, sorted and filtered in the library).
_PAGE_ROWS = 200
# Seconds between refreshes when following a run that is still being written.
_FOLLOW_EVERY = (2, 5, 10, 30, 60)


_SUCCESS_HELP = ("Share of the episodes the agent can be judged on with a reward above 0: every episode but those "
                 "that finished without anyone scoring them (unscored) and those that failed because of the "
                 "infrastructure (model API, connection, Docker); an episode that errored otherwise, was truncated "
                 "or never finished without a reward is a failure.")
_MEAN_HELP = "Mean over the episodes that have a reward (recorded in the file or given by an evaluation report)."


def headline(run) -> None:
    stats = run.stats()
    unscored = stats["unscored"]
    unknown = stats.get("unknown", {})
    prompt, generated = stats["prompt_tokens"], stats["generated_tokens"]
    tokens = ("unknown" if prompt is None and generated is None
              else f"{readable.compact(prompt)} / {readable.compact(generated)}")
    helps = {"Success rate": _SUCCESS_HELP, "Mean reward": _MEAN_HELP,
             "Cost": _unknown_note(unknown.get("total_cost", 0), "a cost").strip(),
             "Tokens (prompt / gen.)": f"{readable.fmt(prompt, ',')} prompt / {readable.fmt(generated, ',')} "
             "generated tokens" + _unknown_note(max(unknown.get("prompt_tokens", 0),
                                                    unknown.get("generated_tokens", 0)), "token counts"),
             "Unreadable files": "Files that should hold episodes but could not be read: listed below with the reason"}
    # One element, not seven st.metric in seven columns (#46); the tokens' "prompt / generated" pair needs about twice
    # a number's width (eleven characters at most).
    blocks.figures([("Episodes", f"{stats['episodes']}"), ("Success rate", readable.fmt(stats["success_rate"], ".0%")),
                    ("Mean reward", readable.fmt(stats["mean_reward"])),
                    ("Mean actions", readable.fmt(stats["mean_actions"], ".1f")),
                    ("Cost", render.cost_text(stats["total_cost"], 2)), ("Tokens (prompt / gen.)", tokens),
                    ("Unreadable files", f"{stats['errors']}")],
                   helps=helps, grow={"Tokens (prompt / gen.)": 1.8, "Unreadable files": 1.2})
    st.markdown("Outcomes: " + " ".join(f"{readable.outcome_badge(o)} {n}" for o, n in stats["outcomes"].items()))
    st.caption(f"Success rate: episodes with a reward above 0 among the {stats['judged']} scored ones the agent can "
               "be judged on (the failures of the infrastructure are left out; a failure without a reward counts as "
               f"0). Mean reward: the mean over the {stats['rewarded']} episodes that have a reward.")
    infra = stats["infrastructure_failures"]
    if infra:
        st.caption(f"{infra} episode{'s' if infra != 1 else ''} failed because of the infrastructure, not the agent "
                   "(model API errors, dropped connections, TLS errors, the Docker engine or a container that "
                   "stopped; the rule is in docs/app.md): left out of the success rate, listed in the failure "
                   "groups as infrastructure.")
    if unscored:
        st.caption(f"{unscored} finished episode{'s' if unscored != 1 else ''} without a reward: left out of the "
                   "success rate and shown apart as unscored in the plots. mini-swe-agent trajectories get theirs "
                   "from a SWE-bench evaluation report (`resolved_ids`, ... or per-instance `report.json`) naming "
                   "their run.")
        for _, message in run.missing_reports:  # where a run's report was looked for
            st.caption(f"{escape.md(message[:1].upper() + message[1:])}.")


def _unknown_note(episodes: int, what: str) -> str:
    """What a total leaves out: the episodes whose model calls record no ``what`` (their figure is unknown)."""
    if not episodes:
        return ""
    return (f" ({episodes:,} episode{'s' if episodes != 1 else ''} record{'s' if episodes == 1 else ''} none: "
            f"their model calls record no {what}, so the total is over the others, unknown when none records it)")


def producer_metrics(run) -> None:
    """Inspect's own metrics of the run's Inspect logs, beside the figures above, each with its source."""
    metrics = inspect_metrics.of(run)
    if metrics.empty:
        return
    with st.expander(f"Inspect's own metrics ({len(metrics)} from {metrics['log'].nunique()} log(s))", expanded=True,
                     icon=":material/analytics:"):
        st.caption("As Inspect computed them when it wrote each log, from its header's `results`: over the samples "
                   "its scorers scored (errored samples are left out). The figures above are computed here from the "
                   "samples.")
        tables.table(metrics, hide_index=True,
                     column_config={"value": st.column_config.NumberColumn("value", format="%.4g")})


def _reward_range(low: float, high: float, raw: str) -> tuple[float, float]:
    """``LOW..HIGH`` as the slider's range, kept within the run's rewards."""
    a, b = state.number_range(raw, f"{low:g}..{high:g}")
    return min(max(a, low), high), max(min(b, high), low)


def _in(choices: list[str], what: str, raw: str, labels: dict[str, str] | None = None) -> str:
    """``raw`` if it is one of ``choices``, or the choice whose label (as the page shows it) it is."""
    if raw not in choices:
        named = [c for c in choices if (labels or {}).get(c) == raw]
        if not named:
            raise ValueError(f"no {what} of that name")
        return named[0]
    return raw


def filters(run, labels: dict[str, set[str]]) -> queries.Filters:
    """The filters above the table, as a query's filters; each in the URL unless it has its default."""
    cols = st.columns([2, 2, 2, 3])
    task_names = run.queries.values("task_name", _CHOICES)
    choices = run.queries.values("outcome", _CHOICES) + ([plots.UNSCORED] if run.stats()["unscored"] else [])
    names = sorted({n for chosen in labels.values() for n in chosen})
    bounds = run.queries.reward_range()
    low, high = bounds or (0.0, 0.0)
    problems = [state.bind("overview.tasks_filter", "task", [], choices=task_names),
                state.bind("overview.outcomes", "outcome", [], choices=choices),
                state.bind("overview.text", "contains", ""),
                state.bind("overview.labels", "label", [], choices=names)]
    tasks = cols[0].multiselect("Task", task_names, **state.synced("overview.tasks_filter", "task"))
    outcomes = cols[1].multiselect("Outcome", choices, help=f"{plots.UNSCORED}: finished without a reward",
                                   **state.synced("overview.outcomes", "outcome"))
    reward = None
    if low < high:
        within = functools.partial(_reward_range, low, high)
        problems.append(state.bind("overview.reward", "reward", (low, high), within))
        reward = cols[2].slider("Reward", low, high, **state.synced(
            "overview.reward", "reward", lambda r: None if r == (low, high) else f"{r[0]}..{r[1]}"))
        reward = None if reward == (low, high) else reward
    text = cols[3].text_input("Contains", placeholder="id, task or error text",
                              **state.synced("overview.text", "contains", lambda t: t.strip() or None))
    for problem in filter(None, problems):
        st.caption(problem)
    review_panel.problem()
    picked = st.multiselect("Label", names, placeholder="any label (review labels on steps)",
                            **state.synced("overview.labels", "label")) if names else []
    ids = [e for e, chosen in labels.items() if chosen & set(picked)] if picked else None
    ids = flag_filter(run, ids)
    return queries.Filters(tasks=tasks, outcomes=outcomes, reward=reward, text=text, episode_ids=ids)


def flag_filter(run, ids: list[str] | None) -> list[str] | None:
    """The behaviour flags picked (in the URL as ``flag``): ``ids`` narrowed to the episodes showing all of them;
    snapshot flags among the episodes whose snapshot flags were read so far (the Behaviours page reads them)."""
    names = list(behaviours.FLAGS)
    problem = state.bind("overview.flags", "flag", [], choices=names)
    if problem:
        st.caption(problem)
    picked = st.multiselect("Behaviour", names, placeholder="any behaviour (flags read from the episode files)",
                            help="docs/behaviours.md: each flag's rule", **state.synced("overview.flags", "flag"))
    if not picked:
        return ids
    if any(behaviours.FLAGS[n].source == behaviours.EPISODE for n in picked):
        if not flag_panel.ready(run, "overview"):
            st.caption("The Behaviour filter applies once the flags are read.")
            return ids
        if (covered := flag_panel.covered(run.location, flag_panel.table_name(run))) < len(run):
            st.caption(f"Behaviour flags cover {covered:,} of {len(run):,} episodes.")
    if snapshot_flags := tuple(n for n in picked if behaviours.FLAGS[n].source != behaviours.EPISODE):
        _, covered = flag_panel.snapshot_flagged(run, snapshot_flags)
        st.caption(f"Snapshot flags cover {covered:,} of {len(run):,} episodes (the Behaviours page reads the rest).")
    return flag_panel.among(run, picked, ids)


def _reason_picked(failures) -> None:
    rows = st.session_state["overview.failures"].selection.rows
    state.update(reason=str(failures.loc[rows[0], "reason"]) if rows else None)


def failure_summary(run) -> str | None:
    """The run's failure reasons with their counts; the reason picked (None: none picked), in the URL too."""
    failures = run.queries.failures()
    picked = state.get("reason")
    if picked is not None and picked not in set(failures["reason"]):
        state.update(reason=None)
        st.caption(f"Left out {escape.code(f'reason={picked}')} of the link: no episode of this run failed so.")
        picked = None
    if failures.empty:
        return None
    st.subheader("Why episodes failed")
    event = tables.table(
        failures[["reason", "blame", "episodes", "tasks"]], key="overview.failures",
        on_select=functools.partial(_reason_picked, failures), selection_mode="single-row", hide_index=True,
        column_config={"reason": st.column_config.TextColumn("reason", width="large"),
                       "blame": st.column_config.TextColumn(
                           "whose failure", help="agent, or infrastructure (model API, connection, Docker): "
                                                 "the rule is in docs/app.md")},
    )
    rows = event.selection.rows if event else []
    if rows and str(failures.loc[rows[0], "reason"]) != picked:
        picked = str(failures.loc[rows[0], "reason"])
        state.update(reason=picked)
    if picked is None:
        st.caption("Select a reason to list only its episodes below.")
    elif not rows:  # named by the link, not selected in this table
        st.caption(f"The link picked the reason {escape.code(picked)}.")
        st.button("List every episode", key="overview.all_reasons", on_click=state.update, kwargs={"reason": None})
    tests = loaders.failing_tests(run.location, len(run), run)
    if not tests.empty:
        st.markdown("**The tests they failed** (from the evaluation reports' `tests_status`)")
        shown = tests[["test", "how", "episodes"]].copy()
        # which episodes failed the test: their ids as the run lists them (the table filters by id)
        shown.insert(3, "episode", tests["episode_ids"].map(", ".join))
        tables.table(shown, key="overview.failing_tests", hide_index=True,
                     column_config={"test": st.column_config.TextColumn("test", width="large"),
                                    "episode": st.column_config.TextColumn("episode", width="large")})
    return picked


def table(run, reason: str | None = None) -> None:
    """One page of the filtered, sorted episode table; paging, sorting and filtering run in the library."""
    labels = review_panel.labels_by_episode(run)
    chosen = dataclasses.replace(filters(run, labels), reason=reason)
    total = run.queries.count(chosen)
    if reason is not None:
        st.caption(f"Only the {total} episode{'' if total == 1 else 's'} of the failure reason selected above.")
    columns = [c for c in _TRAINING_COLUMNS if c in run.queries.columns] + [c for c in _TABLE_COLUMNS if c != "labels"]
    if "run_id" in run.queries.columns and run.run_id is None:  # a folder of several runs: each episode's run first
        columns.insert(0, "run_id")
    if "verdict" in run.queries.columns:  # rewards an evaluation report gave: the verdict beside the reward
        columns.insert(columns.index("total_reward") + 1, "verdict")
    cols = st.columns([3, 2, 2])
    options = [_RUN_ORDER, *columns]
    pages = max(1, -(-total // _PAGE_ROWS))
    if st.session_state.get("overview.page", 1) > pages:  # fewer rows since the page was picked: the first page
        del st.session_state["overview.page"]
        state.update(page=None)
    problems = [state.bind("overview.sort", "sort", _RUN_ORDER,
                           functools.partial(_in, options, "column", labels=_COLUMN_LABELS)),
                state.bind("overview.descending", "desc", False, state.on_off),
                state.bind("overview.page", "page", 1,
                           functools.partial(state.whole, pages, f"the table has {pages:,} page(s)"))]
    sort = cols[0].selectbox("Sort by", options, format_func=lambda c: _COLUMN_LABELS.get(c, c),
                             **state.synced("overview.sort", "sort", lambda c: None if c == _RUN_ORDER else c))
    descending = cols[1].toggle("Descending", **state.synced("overview.descending", "desc", state.flag))
    page = 1
    if pages > 1:
        page = int(cols[2].number_input(f"Page (of {pages:,})", 1, pages,
                                        **state.synced("overview.page", "page", lambda n: None if n == 1 else n)))
    for problem in filter(None, problems):
        st.caption(problem)
    shown = run.queries.page(chosen, sort=None if sort == _RUN_ORDER else sort,
                             direction="desc" if descending else "asc", offset=(page - 1) * _PAGE_ROWS,
                             limit=_PAGE_ROWS, columns=columns)
    shown.insert(len(shown.columns) - 2, "labels", [", ".join(sorted(labels.get(e, ()))) for e in shown["episode_id"]])
    shown["why"] = shown["why"].fillna("")  # blank for solved episodes
    where = f" · rows {(page - 1) * _PAGE_ROWS + 1:,}–{(page - 1) * _PAGE_ROWS + len(shown):,}" if pages > 1 else ""
    st.caption(f"{total} of {len(run)} episodes{where} · select a row to open it")
    event = tables.table(
        shown, key="overview.table", on_select="rerun", selection_mode="single-row", hide_index=True,
        column_config={**_COLUMN_LABELS,
                       "total_reward": st.column_config.NumberColumn(_COLUMN_LABELS["total_reward"], format="%.3g"),
                       "duration_s": st.column_config.NumberColumn(_COLUMN_LABELS["duration_s"], format="%.0f"),
                       "total_cost": st.column_config.NumberColumn(_COLUMN_LABELS["total_cost"], format="%.4f"),
                       "why": st.column_config.TextColumn(
                           "why", width="medium", help="Why the episode is not a success: its outcome and reward, or "
                           "its error's first line with the root cause (docs/app.md); blank when solved")},
    )
    rows = event.selection.rows if event else []
    if rows:
        choosers.go_to_episode(shown.loc[rows[0], "episode_id"])


def body(run, following: bool) -> None:
    """Everything that changes as the run grows (a fragment that reruns on its own when following)."""
    if following:
        change = live.refresh(run)
        st.caption(f"Following · refreshed at {time.strftime('%H:%M:%S', time.localtime(change.at))} · "
                   f"{change.parsed_files} file(s) read again · {change.new_episodes:+,} episodes")
    headline(run)
    producer_metrics(run)
    choosers.load_errors(run)
    if run.pending:
        st.caption(f"{len(run.pending)} file(s) still being written (cut off at their end): read again when they "
                   "change, reported if they stop changing like this. " +
                   ", ".join(escape.code(e.path) for e in run.pending[:5]))
    charts.charts(run)
    picked_reason = failure_summary(run)
    st.subheader("Episodes")
    table(run, picked_reason)


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``: its figures and episode table, followed while it is written."""
    top = st.columns([6, 2, 2])
    top[0].caption(escape.code(run.location))
    following = top[1].toggle("Follow this run", key="overview.follow",
                              help="Refresh on a timer while the run is still being written: only new or changed "
                                   "files are read, and rows already shown keep their place.")
    every = top[2].selectbox("Refresh every", _FOLLOW_EVERY, index=1, key="overview.follow_every",
                             format_func=lambda s: f"{s} s", disabled=not following)
    sub_runs(run)
    st.fragment(body, run_every=f"{every}s" if following else None)(run, following)


# Runs of a folder linked at once from its overview (the sidebar's chooser lists them all).
_RUN_LINKS = 20


def sub_runs(run: ares_viewer.Run) -> None:
    """For a folder holding several runs, a link to each run alone; for one of them, a link back to them all."""
    if not run.run_ids:
        return
    name = state.get("run") or run.location
    folder = subruns.split(name)[0]
    if run.run_id is not None:
        st.caption(f"One of the {len(run.run_ids)} runs of this folder: {escape.code(run.run_id)}.")
        st.page_link(pages.path("overview"), label="All runs of the folder", icon=":material/folder_open:",
                     query_params=state.params(run=folder, episode=None, step=None, other=None))
        return
    st.caption(f"This folder holds {len(run.run_ids)} runs (the table's run column), each with its own success rate "
               "(over its judged episodes, as the headline counts them); open one alone:")
    tables.table(pd.DataFrame(run.per_run()).rename(columns={"run_id": "run", "success_rate": "success rate"}),
                 hide_index=True,
                 column_config={"success rate": st.column_config.NumberColumn("success rate", format="percent")})
    for run_id in run.run_ids[:_RUN_LINKS]:
        st.page_link(pages.path("overview"), label=run_id, icon=":material/subdirectory_arrow_right:",
                     query_params=state.params(run=f"{folder}{subruns.SEPARATOR}{run_id}", episode=None, step=None,
                                               other=None))


run = choosers.current_run()
st.title("Run overview")
show(run)
