"""Widgets and renderers the pages share: the run picker, episode labels, messages, keyboard keys."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer import model
from ares_viewer.base import settings
from ares_viewer.counterfactual import model_client
from ares_viewer.model import colours, render
from ares_viewer.runs.index import queries, subruns
from ares_viewer_app.data import loaders
from ares_viewer_app.routing import pages, state
from ares_viewer_app.serving import access
from ares_viewer_app.text import escape

# Characters of one message or output shown before "show long texts in full" is asked for:
# the agent elides outputs at 10,000 characters, so this shows a normal one whole.
CLIP = 12_000
OTHER_LOCATION = "Other folder or URL…"
# The sub-run chooser's choice of the whole folder (every run it holds).
ALL_RUNS = "All runs of the folder"
# The most episodes an episode chooser lists: a page of the run, never all of it (typing narrows them).
CHOICES = 200
_LABEL_COLUMNS = ["episode_id", "task_name", "outcome", "total_reward", "num_actions"]
# How a value that is not known is shown: in labels (``fmt``) and in tables' empty cells (``st.dataframe``'s
# ``placeholder``).
UNKNOWN = "–"
# A text block (``text_block``): monospace, wrapped, on a faint background that suits light and dark themes.
_TEXT_STYLE = ("white-space:pre-wrap;overflow-wrap:anywhere;margin:0;padding:0.75rem 2.5rem 0.75rem 1rem;"
               "border-radius:0.5rem;background:rgba(128,128,128,0.1);font-size:0.85rem;line-height:1.5;"
               "font-family:'Source Code Pro',ui-monospace,monospace")
_COPY_STYLE = ("position:absolute;top:0.35rem;right:0.35rem;border:none;background:transparent;cursor:pointer;"
               "opacity:0.6;font-size:0.8rem;color:inherit")
# Lines of a diff coloured by their first character (file headers left plain).
_DIFF_COLOURS = {"+": "#1a7f37", "-": "#cf222e", "@": "#8250df"}

def text_block_html(text: str, language: str | None = None) -> str:
    """The HTML of :func:`text_block`: ``text`` escaped, every character kept."""
    if language == "diff":
        lines = []
        for line in text.split("\n"):
            colour = None if line.startswith(("+++", "---")) else _DIFF_COLOURS.get(line[:1])
            escaped = html.escape(line)
            lines.append(f'<span style="color:{colour}">{escaped}</span>' if colour else escaped)
        body = "\n".join(lines)
    else:
        body = html.escape(text)
    kind = html.escape(language or "text", quote=True)
    return (f'<div class="ares-text" style="position:relative"><button type="button" data-ares-copy title="Copy" '
            f'style="{_COPY_STYLE}">Copy</button><pre data-language="{kind}" style="{_TEXT_STYLE}">{body}</pre></div>')


def figures_html(figures: list[tuple[str, str]]) -> str:
    """The HTML of :func:`figures`: each label and value escaped."""
    cells = "".join(
        f'<div data-ares-figure="{html.escape(label, quote=True)}" style="flex:1 1 0;min-width:7rem">'
        f'<div style="font-size:0.875rem;opacity:0.75">{html.escape(label)}</div>'
        f'<div style="font-size:2.25rem;line-height:1.3">{html.escape(value)}</div></div>'
        for label, value in figures)
    return f'<div class="ares-figures" style="display:flex;flex-wrap:wrap;gap:1rem">{cells}</div>'


def figures(figures: list[tuple[str, str]]) -> None:
    """A row of labelled figures (label above, value large), as ``st.metric`` in columns shows them but as one
    light element: six metrics took the Episode page six columns and their own script to load (#33)."""
    st.html(figures_html(figures))


def text_block(text: str, *, language: str | None = None) -> None:
    """A text exactly as it is (a file's or a model's): monospace, wrapped, escaped, with a copy button (which the
    Episode page's key script works). ``st.code`` shows the same, but its syntax highlighter took a quarter of the
    browser's time on an Episode page (#33); a diff's added and removed lines are coloured here."""
    st.html(text_block_html(text, language))


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
            loaders.load_run.clear()
            loaders.list_runs.clear()
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




def outcome_badge(outcome: str) -> str:
    """An outcome as coloured markdown."""
    return escape.badge(colours.outcome_colour_name(outcome), outcome)


def fmt(value: object, spec: str = ".3g") -> str:
    """A number for a label; a dash when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return UNKNOWN
    return format(value, spec) if isinstance(value, int | float) else str(value)


def measure(value: object, spec: str, unit: str) -> str:
    """A number with its unit (``12 s``); the dash alone when unknown, never a unit dangling after it."""
    shown = fmt(value, spec)
    return shown if shown == UNKNOWN else f"{shown} {unit}"


def compact(n: float) -> str:
    """A count in few characters: 950, 4.5k, 295k, 1.2M."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= limit:
            value = n / limit
            return f"{value:.1f}{suffix}" if value < 10 else f"{value:.0f}{suffix}"
    return f"{n:g}"


def episode_label(row: Mapping[str, Any]) -> str:
    """One line that tells episodes apart in a select box (``row``: the columns ``_LABEL_COLUMNS`` name)."""
    return (f"{row['task_name']} · {row['outcome']} · reward {fmt(row['total_reward'])} · "
            f"{row['num_actions']} actions · {render.short_id(row['episode_id'])}")


def clip(text: str | None, full: bool) -> str:
    """A text as shown: whole when asked for, else its first ``CLIP`` characters and how much is left."""
    text = text or ""
    if full or len(text) <= CLIP:
        return text
    return f"{text[:CLIP]}\n\n[… {len(text) - CLIP:,} more characters: turn on “Show long texts in full”]"


def messages(items: list[model.Message], *, full: bool = False) -> None:
    """Chat messages as the model saw them: role, then the exact text."""
    for message in items:
        extra = f" · tool call id {escape.code(message.tool_call_id)}" if message.tool_call_id else ""
        st.markdown(f"**{escape.line(message.role)}**{extra} · {len(message.content):,} chars")
        st.code(clip(message.content, full), language=None, wrap_lines=True)
        for call in message.tool_calls:
            st.code(f"{call.name}({call.arguments})", language="json", wrap_lines=True)


def how_to_set_endpoint() -> str:
    """What a panel that needs a model endpoint says is missing and how to set it (markdown; the rubric search and
    the decisive-step panel say it alike)."""
    return (
        f"a model endpoint, which the server's operator sets: {escape.code(model_client.URL_ENV)} and "
        f"{escape.code(model_client.MODEL_ENV)} in the server's environment, or "
        f"{escape.code(model_client.config_path())} (docs/settings.md)"
    )


def configured_endpoint(unconfigured: Callable[[], None]) -> model_client.EndpointConfig | None:
    """The model endpoint the user configured; None after showing why not (an unusable configuration's error, or
    ``unconfigured()`` when there is none)."""
    try:
        config = model_client.configured()
    except model_client.ConfigError as exc:
        st.error(f"The model configuration is not usable: {escape.md(exc)}", icon=":material/settings_alert:")
        return None
    if config is None:
        unconfigured()
    return config
