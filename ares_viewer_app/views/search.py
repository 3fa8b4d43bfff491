"""Search a run's task and system prompts, thoughts, commands and outputs; hits grouped by episode, each linking
to its step, the match highlighted. The URL keeps the query (``q``)."""

from __future__ import annotations

import html

import streamlit as st

from ares_viewer import search
from ares_viewer_app import escape, pages, state, widgets

_FIELD_NAMES = {"task": "task prompt", "system": "system prompt", "reasoning": "reasoning", "thought": "thought",
                "command": "command", "output": "output"}


def highlighted(hit: search.Hit) -> str:
    """A hit's snippet as HTML: the run's text escaped (shown as typed, never as markup), the match marked."""
    before, match, after = (html.escape(part) for part in hit.pieces())
    return (f"<div style='font-family:ui-monospace,monospace;font-size:0.85rem;white-space:pre-wrap;"
            f"overflow-wrap:anywhere;margin:0 0 0.6rem 1.6rem'>{before}<mark>{match}</mark>{after}</div>")


def _query_changed() -> None:
    query = st.session_state["search.query"].strip()
    state.update(q=query or None)
    st.session_state["search.synced"] = query


run = widgets.current_run()
st.title("Search")
# The box follows the URL when the URL changes (a link, a reload, back); what is typed is never overwritten.
if st.session_state.get("search.synced") != (state.get("q") or ""):
    st.session_state["search.query"] = st.session_state["search.synced"] = state.get("q") or ""
query = st.text_input("Text or regular expression", key="search.query", on_change=_query_changed,
                      placeholder="e.g. Traceback|AssertionError").strip()
cols = st.columns(4)
regex = cols[0].toggle("Regular expression", key="search.regex")
case = cols[1].toggle("Match case", key="search.case")
fields = cols[2].multiselect("In", list(search.FIELDS), default=list(search.FIELDS), key="search.fields",
                             format_func=_FIELD_NAMES.get)
limit = cols[3].number_input("At most", min_value=1, max_value=1000, value=100, step=50, key="search.limit")

if query and fields:
    try:
        with st.spinner("Searching…"):
            found = list(search.hits(run, query, regex=regex, case=case, fields=fields, limit=int(limit)))
    except ValueError as exc:
        st.error(escape.md(exc))
        st.stop()
    grouped = search.group_by_episode(found)
    more = " (the limit: there may be more)" if len(found) >= limit else ""
    st.caption(f"{len(found)} hit(s) in {len(grouped)} episode(s){more}")
    labels = {i: widgets.episode_label(r) for i, r in widgets.episode_rows(run, [i for i, _ in grouped]).items()}
    for episode_id, hits in grouped:
        with st.container(border=True, key=f"search.episode.{episode_id}"):
            st.markdown(f"**{escape.line(labels.get(episode_id, episode_id))}** · {len(hits)} match(es)")
            for hit in hits:
                st.page_link(pages.path("episode"), icon=":material/arrow_forward:",
                             label=escape.line(f"{hit.task_name} · {hit.episode_id[:8]} · step {hit.step} · "
                                               f"{_FIELD_NAMES[hit.field]}"),
                             query_params=state.params(episode=hit.episode_id, step=hit.step, q=None))
                st.html(highlighted(hit))
