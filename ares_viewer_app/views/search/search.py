"""Search a run's task and system prompts, thoughts, commands and outputs; hits grouped by episode, each linking
to its step, the match highlighted. The URL keeps the query (``q``) and the options that are not their defaults
(``regex=1``, ``case=1``, ``in`` per field searched, ``limit``), so a reload or a shared link searches again.

Hits show as they are found, under a line saying how far the search got. A page run searches for at most
``ARES_VIEWER_SEARCH_SECONDS`` (10 by default) and stops at the hit limit; "Continue" goes on from there, "Stop"
stops it. A regular expression's match that would outlast the budget is stopped with it (``linear_regex``) and
named in a warning. The search and its hits are kept in the session, so a rerun shows them without searching again.
"""

from __future__ import annotations

import functools
import html
import time

import streamlit as st

import ares_viewer
from ares_viewer.analysis import search
from ares_viewer.base import settings
from ares_viewer.model import render
from ares_viewer_app.panels import choosers
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape

_FIELD_NAMES = {"task": "task prompt", "system": "system prompt", "reasoning": "reasoning", "thought": "thought",
                "command": "command", "output": "output"}
SECONDS_ENV = settings.SEARCH_SECONDS.name
LIMIT = 100  # hits a search shows at most unless told (the "At most" box, ``limit``)
_MOST = 1000  # the largest "At most"
_SLICE = 0.25  # seconds between two updates of the progress line


def highlighted(hit: search.Hit) -> str:
    """A hit's snippet as HTML: the run's text escaped (shown as typed, never as markup), the match marked."""
    before, match, after = (html.escape(part) for part in hit.pieces())
    return (f"<div style='font-family:ui-monospace,monospace;font-size:0.85rem;white-space:pre-wrap;"
            f"overflow-wrap:anywhere;margin:0 0 0.6rem 1.6rem'>{before}<mark>{match}</mark>{after}</div>")


def budget() -> float:
    """Seconds one page run searches for (``ARES_VIEWER_SEARCH_SECONDS``)."""
    return settings.SEARCH_SECONDS.get()


def progress_line(found: search.Search, hits: list[search.Hit]) -> str:
    """How many hits in how many episodes (those on the page), and how far the search got."""
    return found.progress.describe(len(hits), len({h.episode_id for h in hits}))


class _Shown:
    """Hits on the page, one bordered box per episode (added to as more of its hits come)."""

    def __init__(self, run) -> None:
        self._run = run
        self._boxes: dict[str, tuple] = {}

    def add(self, hit: search.Hit) -> None:
        if hit.episode_id not in self._boxes:
            rows = choosers.episode_rows(self._run, [hit.episode_id])
            label = choosers.episode_label(rows[hit.episode_id]) if hit.episode_id in rows else hit.episode_id
            box = st.container(border=True, key=f"search.episode.{hit.episode_id}")
            self._boxes[hit.episode_id] = (box, box.empty(), label, [0])
        box, header, label, count = self._boxes[hit.episode_id]
        count[0] += 1
        header.markdown(f"**{escape.line(label)}** · {count[0]} hit(s)")
        with box:
            st.page_link(pages.path("episode"), icon=":material/arrow_forward:",
                         label=escape.line(f"{hit.task_name} · {render.short_id(hit.episode_id)} · step {hit.step} · "
                                           f"{_FIELD_NAMES[hit.field]}"),
                         query_params=state.params(episode=hit.episode_id, step=hit.step))
            st.html(highlighted(hit))


def _some_fields(fields: list[str]) -> list[str] | None:
    """The fields picked as the URL keeps them: None for all (the default) or none (nothing to search)."""
    return None if set(fields) in (set(), set(search.FIELDS)) else fields


def _set_running(running: bool) -> None:
    st.session_state["search.saved"]["running"] = running


def _search(run, query: str, regex: bool, case: bool, fields: list[str], limit: int) -> None:
    key = (run.location, query, regex, case, tuple(fields), limit)
    saved = st.session_state.get("search.saved")
    if saved is None or saved["key"] != key:
        try:
            found = search.Search(run, query, regex=regex, case=case, fields=fields)
        except ValueError as exc:
            st.error(escape.md(exc))
            st.stop()
        saved = st.session_state["search.saved"] = {"key": key, "search": found, "hits": [], "running": True}
    found = saved["search"]
    status, controls = st.empty(), st.empty()
    shown = _Shown(run)
    # The hits this run draws, and counts. A page run that Stop (or any rerun) replaced may still be searching for
    # a moment in its own thread and add a hit after this one read them: it shows on the next run, never as a
    # count without its link.
    drawn = list(saved["hits"])
    for _, hits in search.group_by_episode(drawn):
        for hit in hits:
            shown.add(hit)
    if saved["running"]:
        controls.button("Stop", key="search.stop", icon=":material/stop:", on_click=_set_running, args=(False,))
        deadline, given = time.monotonic() + budget(), 0
        while given < limit:
            status.caption("Searching… " + progress_line(found, drawn))
            seconds = min(_SLICE, max(0.0, deadline - time.monotonic()))
            for hit in found.hits(limit=limit - given, seconds=seconds, until=deadline):
                saved["hits"].append(hit)
                drawn.append(hit)
                given += 1
                shown.add(hit)
            if found.progress.stopped != "time" or time.monotonic() >= deadline:
                break
        saved["running"] = False
    status.caption(progress_line(found, drawn))
    controls.empty()
    if not found.progress.done:
        controls.button("Continue", key="search.continue", icon=":material/play_arrow:", on_click=_set_running,
                        args=(True,), help="Search on from where the search stopped")
    for error in found.progress.errors + found.progress.unfinished:
        st.warning(escape.md(error))


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``: the search boxes (synced to the URL) and the hits."""
    # Each box follows the URL when the URL changes (a link, a reload, back) and comes back with the page after
    # another one showed; what is typed is never overwritten.
    problems = [state.bind("search.query", "q", ""), state.bind("search.regex", "regex", False, state.on_off),
                state.bind("search.case", "case", False, state.on_off),
                state.bind("search.fields", "in", list(search.FIELDS),
                           lambda raw: [f for f in search.FIELDS if f in raw], choices=search.FIELDS,
                           unknown=f"the fields are {', '.join(search.FIELDS)}"),
                state.bind("search.limit", "limit", LIMIT,
                           functools.partial(state.whole, _MOST, f"it is a whole number from 1 to {_MOST:,}"))]
    query = st.text_input("Text or regular expression", placeholder="e.g. Traceback|AssertionError",
                          **state.synced("search.query", "q", lambda v: v.strip() or None)).strip()
    cols = st.columns(4)
    regex = cols[0].toggle("Regular expression", **state.synced("search.regex", "regex", state.flag))
    case = cols[1].toggle("Match case", **state.synced("search.case", "case", state.flag))
    fields = cols[2].multiselect("In", list(search.FIELDS), format_func=_FIELD_NAMES.__getitem__,
                                 **state.synced("search.fields", "in", _some_fields))
    limit = cols[3].number_input("At most", min_value=1, max_value=_MOST, step=50,
                                 **state.synced("search.limit", "limit", lambda n: None if n == LIMIT else n))
    for problem in filter(None, problems):
        st.caption(problem)

    if query and fields:
        _search(run, query, regex, case, fields, int(limit))


run = choosers.current_run()
st.title("Search")
show(run)
