"""What a page shows, picked: the sidebar's run picker and the run it opens, and the one episode chooser
every page uses (with the episode it opens and the step a link names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st

import ares_viewer
from ares_viewer import model
from ares_viewer.base import settings
from ares_viewer.model import render
from ares_viewer.runs.index import queries, subruns
from ares_viewer_app.data import loaders
from ares_viewer_app.routing import pages, state
from ares_viewer_app.serving import access
from ares_viewer_app.text import escape, readable

OTHER_LOCATION = "Other folder or URL…"
# The sub-run chooser's choice of the whole folder (every run it holds).
ALL_RUNS = "All runs of the folder"
# The most episodes an episode chooser lists: a page of the run, never all of it (typing narrows them).
CHOICES = 200
_LABEL_COLUMNS = ["episode_id", "task_name", "outcome", "total_reward", "num_actions"]


def _pick_run() -> None:
    choice = st.session_state["app.run_choice"]
    # Choosing "other" only opens the text box; the run changes when a location is typed.
    st.session_state["app.run_other"] = choice == OTHER_LOCATION
    if choice != OTHER_LOCATION:
        state.update(run=choice, episode=None, step=None, other=None)


def _type_run() -> None:
    typed = st.session_state.get("app.run_typed", "").strip()
    if typed:
        state.update(run=typed, episode=None, step=None, other=None)


def run_picker() -> None:
    """The sidebar's run chooser: the runs under the runs folder, or any folder, file, glob or URL."""
    root = loaders.runs_root()
    names = loaders.list_runs(root)
    current = state.get("run")
    # `ares-viewer app LOCATION` names the run to open first; else the first run under the root.
    default = settings.RUN.get() or (names[0] if names else None)
    if current is None and default:
        state.update(run=default)
        current = default
    options = [*names, OTHER_LOCATION]
    folder = subruns.split(current)[0] if current else None  # ``NAME::RUN_ID``: one run of the folder NAME
    if not st.session_state.get("app.run_other"):
        st.session_state["app.run_choice"] = folder if folder in names else OTHER_LOCATION
    with st.sidebar:
        st.selectbox("Run", options, key="app.run_choice", on_change=_pick_run,
                     help=f"Runs found under {escape.code(root)}")
        if st.session_state["app.run_choice"] == OTHER_LOCATION:
            if current and current not in names:
                st.session_state.setdefault("app.run_typed", current)
            st.text_input("Folder, file, glob or URL", key="app.run_typed", on_change=_type_run,
                          placeholder="/path/to/run or s3://bucket/run")
        if folder and current:
            sub_run_picker(folder, current)
        if st.button("Reload run", help="Read the files again (new or changed episodes)", key="app.reload"):
            loaders.forget_opened()
            loaders.forget_runs()
        st.caption("Keys on the episode page: j / → next step, k / ← previous, J / n next failed step, "
                   "K / p previous failed step, Home / End.")


def sub_run_picker(folder: str, current: str) -> None:
    """Under the run chooser, for a folder holding several runs (its ``run_id`` column): all of them, or one alone
    (``NAME::RUN_ID`` in the URL: every page then sees only that run's episodes)."""
    try:
        runs = loaders.load_run(loaders.location(folder)).run_ids
    except Exception:  # the page itself says why the run cannot be opened
        return
    if not runs:
        return
    chosen = subruns.split(current)[1]
    st.session_state["app.sub_run"] = chosen if chosen in runs else ALL_RUNS

    def picked() -> None:
        choice = st.session_state["app.sub_run"]
        run = folder if choice == ALL_RUNS else f"{folder}{subruns.SEPARATOR}{choice}"
        state.update(run=run, episode=None, step=None, other=None)

    st.selectbox(f"Runs in this folder ({len(runs)})", [ALL_RUNS, *runs], key="app.sub_run", on_change=picked,
                 help="The folder holds several runs (its run_id column): open one of them alone")


def current_run() -> ares_viewer.Run:
    """The run the view names, opened; shows a clear message and stops the page when it cannot be opened."""
    run = state.get("run")
    if not run:
        st.info(f"No runs found under {escape.code(loaders.runs_root())}. Choose a folder or URL in the sidebar.")
        st.stop()
    try:
        where = loaders.location(run)
    except access.RefusedLocationError as exc:
        st.error(f"Cannot open the run: {escape.md(exc)}", icon=":material/block:")
        st.stop()
    try:
        opened = loaders.load_run(where)
    except ares_viewer.LocationError as exc:
        st.error(f"Cannot open the run: {escape.md(exc)}")
        st.stop()
    except Exception as exc:  # an unexpected failure must read as a message, not a traceback
        st.error(f"Cannot open the run {escape.code(where)}: {type(exc).__name__}: {escape.md(exc)}")
        st.stop()
    if opened.listing_cut:
        st.warning(escape.md(opened.listing_cut), icon=":material/content_cut:")
    if not len(opened):
        st.warning(f"No episodes found at {escape.code(where)} ({escape.md(opened.files_found())}).")
        load_errors(opened)
        st.stop()
    return opened


def episode_picker(run: ares_viewer.Run, key: str, *, reset: dict[str, str | int | None],
                   first_failed: bool = False, say_unknown: bool = False) -> str:
    """The episode the view names (``episode`` in the URL), with the episode chooser to change it; returns its id.

    When the view names none (or one the run lacks) it starts on the run's first episode, or on its first
    unsolved one with ``first_failed``. With ``say_unknown``, a named episode the run lacks is an error
    message and a chooser instead (the page stops there). Each change of episode also sets the view parameters
    in ``reset`` (where the page starts in the new episode, and what belonged to the old one). The run's
    episodes are never listed: the named one is looked up by id, the chooser asks for one page of matches.
    """
    episode_id = state.get("episode")

    def changed() -> None:
        state.update({"episode": st.session_state[key], **reset})

    if say_unknown and episode_id is not None and episode_id not in run:
        shown = "".join(c if c.isalnum() or c in "-_." else "?" for c in episode_id[:80])  # as text, not markdown
        st.error(f"The run has no episode “{shown}”. Pick one of its {len(run):,} episodes.",
                 icon=":material/search_off:")
        episode_choice(run, "Episode", key, None, on_change=changed)
        st.stop()
    if episode_id is None or episode_id not in run:
        if episode_id:  # a link to an episode this run lacks: say so, never silently show another one
            st.warning(f"This run has no episode {escape.code(episode_id)}: showing another one instead.",
                       icon=":material/help:")
        episode_id = first_episode(run, unsolved=first_failed)
        state.update({"episode": episode_id, **reset})
    episode_choice(run, "Episode", key, episode_id, on_change=changed)
    return episode_id


def shown_instead(problem: str, key: str, shown: str) -> None:
    """Say why the link's ``key`` is not what the page shows (``problem``, markdown) and what it shows instead."""
    st.warning(f"{problem} Showing {shown} instead (`{key}` in the link).", icon=":material/help:")


def recorded_step(episode: model.Episode, steps: list[int], default: int) -> int:
    """The recorded step (one of ``steps``, which have snapshots) the link's ``step`` names: ``default`` with a
    warning when the episode has no such step; the closest recorded one before it, with a caption, when that step
    has no snapshot."""
    problem = state.number_problem("step", 0, max(len(episode.steps) - 1, steps[-1]))
    wanted = default if problem else state.get_int("step", default)
    step = wanted if wanted in steps else max((s for s in steps if s <= wanted), default=steps[0])
    if problem:
        shown_instead(problem, "step", f"step {step}")
    elif step != wanted:
        st.caption(f"Step {wanted} has no snapshot: showing step {step}, the closest recorded one before it.")
    return step


def first_episode(run: ares_viewer.Run, *, unsolved: bool = False) -> str:
    """The run's first episode (run order), or its first unsolved one when asked and there is one."""
    for filters in ([queries.Filters(solved=False)] if unsolved else []) + [queries.Filters()]:
        found = run.queries.page(filters, limit=1, columns=["episode_id"])
        if len(found):
            return str(found["episode_id"].iloc[0])
    raise LookupError(f"{run.location} has no episodes")


def episode_choice(run: ares_viewer.Run, label: str, key: str, current: str | None, *,
                   on_change: Callable[[], None], partners_of: str | None = None,
                   exclude: str | None = None, narrow: bool = False) -> str | None:
    """The one episode chooser of every page: a select box of at most ``CHOICES`` episodes, narrowed on the
    server by a search box (part of an id, task or error) and an "unsolved only" switch; ``current`` is always
    among the choices. ``partners_of`` (an episode id) lists that episode's task's attempts first, best first.

    The select box's value is ``st.session_state[key]`` (``on_change`` reads it there); returns it. ``narrow``
    (half a page or less): the select box above, the search box and the switch under it, so none is cut short.
    """
    if narrow:
        pick = st.container()
        find, only = st.columns([3, 2], vertical_alignment="bottom")
    else:
        pick, find, only = st.columns([6, 3, 1.6], vertical_alignment="bottom")
    text = find.text_input("Find episodes", key=f"{key}.find", placeholder="id, task or error",
                           help="Part of an episode id, a task name or an error: the choices are the episodes "
                                "that match")
    unsolved = only.toggle("Unsolved", key=f"{key}.unsolved", help="List unsolved episodes only")
    filters = queries.Filters(text=(text or "").strip(), solved=False if unsolved else None)
    if partners_of is not None:
        task = episode_rows(run, [partners_of]).get(partners_of, {}).get("task_name")
        found = run.queries.attempts(task, filters, limit=CHOICES + 1, columns=_LABEL_COLUMNS)
    else:
        found = run.queries.page(filters, limit=CHOICES + 1, columns=_LABEL_COLUMNS)
    labels = {row["episode_id"]: episode_label(row) for row in found.head(CHOICES).to_dict("records")
              if row["episode_id"] != exclude}
    if current is not None and current not in labels:
        labels = {**{i: episode_label(r) for i, r in episode_rows(run, [current]).items()}, **labels}
    st.session_state[key] = current if current in labels else None
    pick.selectbox(label, list(labels), format_func=labels.get, key=key, on_change=on_change,
                   index=None if current not in labels else 0, placeholder="Choose an episode")
    if len(found) > CHOICES:
        pick.caption(f"The first {CHOICES} matching episodes: type in Find to narrow them.")
    elif not len(found):
        pick.caption("No episode matches: change Find or Unsolved.")
    return st.session_state.get(key)


def episode_rows(run: ares_viewer.Run, episode_ids: list[str]) -> dict[str, dict]:
    """The label columns of the named episodes, by id (looked up by id; ids the run lacks are left out)."""
    if not episode_ids:
        return {}
    found = run.queries.page(queries.Filters(episode_ids=episode_ids), limit=len(episode_ids),
                             columns=_LABEL_COLUMNS)
    return {row["episode_id"]: row for row in found.to_dict("records")}


def go_to_episode(episode_id: str) -> None:
    """Go to the episode page at the episode's first action. The page's URL is left as it is (each change of it would
    be a step in the browser's history), so Back returns to the page with its settings."""
    state.update(episode=episode_id, step=1, url=False)
    st.switch_page(pages.path("episode"), query_params=state.params())


def read_episode(run: ares_viewer.Run, episode_id: str) -> model.Episode:
    """The parsed episode; shows a clear message and stops the page when its file no longer reads."""
    try:
        return run.episode(episode_id)
    # The file changed or vanished since the run was indexed, or holds what no reader expected: a message.
    except Exception as exc:
        st.error(f"Cannot read this episode: {escape.md(exc)}. Reload the run (sidebar).")
        st.stop()


def load_errors(run: ares_viewer.Run) -> None:
    """The files that could not be read and the files read with repairs, in an expander."""
    if run.errors:
        with st.expander(f":red[{len(run.errors)} file(s) could not be read]", icon=":material/error:"):
            for error in run.errors:
                st.markdown(f"- {escape.code(error.path)}  \n  {escape.md(error.reason)}")
    # A file read in part (``model.read_in_part``) is said apart: its episode lacks what the reader skipped.
    partial = [(path, w) for path, w in run.warnings if w.startswith(model.READ_IN_PART)]
    others = [(path, w) for path, w in run.warnings if not w.startswith(model.READ_IN_PART)]
    if partial:
        st.warning(f"{len(partial)} episode file(s) read in part: the reader skipped what it could not read.")
        with st.expander(f"{len(partial)} file(s) read in part", icon=":material/warning:"):
            for path, warning in partial:
                st.markdown(f"- {escape.code(path)}: {escape.md(warning)}")
    if others:
        with st.expander(f"{len(others)} warning(s) while reading", icon=":material/warning:"):
            for path, warning in others:
                st.markdown(f"- {escape.code(path)}: {escape.md(warning)}")


def episode_label(row: Mapping[str, Any]) -> str:
    """One line that tells episodes apart in a select box (``row``: the columns ``_LABEL_COLUMNS`` name)."""
    return (f"{row['task_name']} · {row['outcome']} · reward {readable.fmt(row['total_reward'])} · "
            f"{row['num_actions']} actions · {render.short_id(row['episode_id'])}")
