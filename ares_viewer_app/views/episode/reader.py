"""The Episode page's reader for long episodes: find in the episode, and the transcript a page of steps at a time.

Find (``find=…`` in the URL, ``hit=N`` the hit shown, from 1) searches the episode's task, reasoning, thoughts,
commands and outputs (``analysis.find``: literal, case-insensitive, bounded); Previous / Next hit move the page
to the hit's step, whose match is shown marked in its text (escaped: a file's text never becomes markup), and
the step list marks every step with a hit. The transcript (``view=transcript``) is the whole conversation in
order, full width, ``PAGE_STEPS`` steps a page (``tpage=N``, from 1), long texts folded to head and tail with
"Show all" per text; each step links to the step view.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import streamlit as st

from ares_viewer import model
from ares_viewer.analysis import ending, find, search
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import blocks
from ares_viewer_app.routing import state
from ares_viewer_app.text import escape
from ares_viewer_app.views.episode import step_view

PAGE_STEPS = 25
# Characters of a hit's field shown either side of the match.
_AROUND = 400
_CURRENT_HIT = "background:#ffbd45;color:inherit;padding:0 1px"


def page_of(step: int) -> int:
    """The transcript page (from 1) that shows ``step``."""
    return step // PAGE_STEPS + 1


def found(episode: model.Episode) -> find.Found | None:
    """The hits of the URL's ``find`` query in ``episode`` (None without a query or with an unusable one), kept
    in the session for the episode and query so stepping between hits does not search again."""
    query = state.get("find")
    if not isinstance(query, str) or not query:
        return None
    kept = st.session_state.get("episode.found")
    if kept is not None and kept[0] == (episode.episode_id, query):
        return kept[1]
    result = find.find(episode, query)
    st.session_state["episode.found"] = ((episode.episode_id, query), result)
    return result


def current_hit(hits: find.Found) -> int:
    """The hit the URL names (from 1), kept inside the hits."""
    return min(max(state.get_int("hit", 1), 1), max(len(hits.hits), 1))


def _go_to_hit(where: str, episode_id: str, n: int) -> None:
    hits = found(loaders.load_run(where).episode(episode_id))
    if hits is None or not hits.hits:
        return
    n = (n - 1) % len(hits.hits) + 1  # past the last hit comes the first again, as in a browser's find
    step = hits.hits[n - 1].step
    state.update(hit=n, step=step, tpage=page_of(step) if page_of(step) > 1 else None)


def _query_changed(where: str, episode_id: str) -> None:
    query = st.session_state["episode.find"].strip()
    state.update(find=query or None, hit=None)
    st.session_state["episode.find.synced"] = query or None
    if query:
        _go_to_hit(where, episode_id, 1)


def find_bar(where: str, episode: model.Episode, lead: Callable[[], object] | None = None) -> find.Found | None:
    """The find box with previous / next hit and the hit count, after ``lead`` (drawn first on the same row, so the
    step view starts higher); below it the current hit, marked in its text."""
    state.bind("episode.find", "find", "")
    first, *cols = st.columns([2, 4, 1, 1, 3], vertical_alignment="bottom")
    if lead is not None:
        with first:
            lead()
    cols[0].text_input(
        "Find in this episode",
        key="episode.find",
        placeholder="text in a thought, command or output",
        on_change=_query_changed,
        args=(where, episode.episode_id),
        help="Literal text, any case: the task, reasoning, thoughts, commands and outputs",
    )
    try:
        hits = found(episode)
    except ValueError as exc:
        cols[3].caption(f"Cannot search: {escape.line(exc)}")
        return None
    if hits is None:
        return None
    n = current_hit(hits)
    args = (where, episode.episode_id)
    cols[1].button(
        "Previous hit",
        key="episode.hit_prev",
        icon=":material/keyboard_arrow_up:",
        on_click=_go_to_hit,
        args=(*args, n - 1),
        disabled=not hits.hits,
    )
    cols[2].button(
        "Next hit",
        key="episode.hit_next",
        icon=":material/keyboard_arrow_down:",
        on_click=_go_to_hit,
        args=(*args, n + 1),
        disabled=not hits.hits,
    )
    if not hits.hits:
        cols[3].caption("No hit in this episode.")
        return hits
    hit = hits.hits[n - 1]
    cols[3].markdown(
        f"**{escape.line(hits.describe(n).capitalize())}** · step {hit.step} · {hit.field} · "
        f"{len(hits.steps()):,} step{'' if len(hits.steps()) == 1 else 's'} with hits"
    )
    st.html(marked(find.text_of(episode, hit), hit.start, hit.end))
    return hits


def marked(text: str, start: int, end: int) -> str:
    """The text around ``text[start:end]`` as HTML: escaped, lines kept, the match marked."""
    left, right = max(0, start - _AROUND), min(len(text), end + _AROUND)
    before = ("…" if left else "") + text[left:start]
    after = text[end:right] + ("…" if right < len(text) else "")
    return (
        "<pre data-ares-hit style='white-space:pre-wrap;overflow-wrap:anywhere;max-height:14rem;overflow:auto;"
        "margin:0;padding:0.5rem;border-left:3px solid #ffbd45;background:rgba(255,189,69,0.08)'>"
        f"{html.escape(before)}<mark style='{_CURRENT_HIT}'>{html.escape(text[start:end])}</mark>"
        f"{html.escape(after)}</pre>"
    )


def _open_step(k: int) -> None:
    state.update(step=k, view=None)


def _to_page(n: int) -> None:
    state.update(tpage=None if n == 1 else n)


def pager(pages: int, page: int, where: str) -> None:
    """Previous / next page of steps and the page picker, at the top or the foot of the transcript."""
    if pages < 2:
        return
    cols = st.columns([1, 1, 4])
    cols[0].button(
        "Previous steps",
        key=f"episode.tpage_prev.{where}",
        icon=":material/chevron_left:",
        on_click=_to_page,
        args=(page - 1,),
        disabled=page == 1,
    )
    cols[1].button(
        "Next steps",
        key=f"episode.tpage_next.{where}",
        icon=":material/chevron_right:",
        on_click=_to_page,
        args=(page + 1,),
        disabled=page == pages,
    )
    cols[2].caption(f"Page {page} of {pages}")


def transcript(episode: model.Episode, hits: find.Found | None) -> None:
    """The conversation in order, ``PAGE_STEPS`` steps a page: each step's reasoning, response and output (long
    texts folded), the task first; the steps with hits marked, the current hit's step named."""
    last = len(episode.steps) - 1
    pages = page_of(last)
    problem = state.number_problem("tpage", 1, pages, noun="page", holder="this transcript")
    if problem:
        st.warning(f"{problem} Showing page 1.", icon=":material/search_off:")
        state.update(tpage=None)
    page = 1 if problem else state.get_int("tpage", 1)
    first, stop = (page - 1) * PAGE_STEPS, min(page * PAGE_STEPS, last + 1)
    st.caption(f"Steps {first} to {stop - 1} of {last + 1:,} ({PAGE_STEPS} a page).")
    pager(pages, page, "top")
    end = ending.of(episode)
    with_hits: dict[int, int] = {}
    for hit in hits.hits if hits else ():
        with_hits[hit.step] = with_hits.get(hit.step, 0) + 1
    current = hits.hits[current_hit(hits) - 1] if hits and hits.hits else None
    for index in range(first, stop):
        step = episode.step(index)
        key = f"{episode.episode_id[:8]}.{index}"
        with st.container(border=True, key=f"episode_read_step_{index}"):
            cols = st.columns([5, 1])
            marks = ""
            if index in with_hits:
                marks = f" :orange-badge[{with_hits[index]} hit{'' if with_hits[index] == 1 else 's'}]"
            if current is not None and hits is not None and current.step == index:
                marks += f" :orange-badge[**{escape.line(hits.describe(current_hit(hits)))}**]"
            cols[0].markdown(f"**Step {index}** ({step.kind.value}){marks}")
            cols[1].button(
                "Open",
                key=f"episode.open.{index}",
                on_click=_open_step,
                args=(index,),
                icon=":material/open_in_new:",
                type="tertiary",
                help=f"Step {index} in the step view",
            )
            if not step.has_action:
                task = search.prompt_text(episode, "task")
                blocks.long_text(task, f"{key}.task", empty="(no task recorded)")
                continue
            step_view.reasoning(step, key)
            step_view.response(step, key)
            step_view.output(step, key)
            if index == end.step:
                step_view.why_this_reward(end, key)
    pager(pages, page, "foot")
