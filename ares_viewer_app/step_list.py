"""The episode page's step list and step keys: one compact row per step, the current one highlighted.

Rows show the index, kind, return code, badges (and the hits of the episode's find), the command (its first
lines, wrapped: three lines a row) and the step's review labels, as plain text (a table cell never renders
markdown). Steps with a find hit are shaded apart from the current step. A click on a row, a navigation button
or a key moves to a step; every move is computed from the current step when it is handled, and the key script
sends one key at a time and waits for the URL to change before the next, so fast presses are neither merged nor
dropped.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Mapping

import pandas as pd
import streamlit as st

from ares_viewer import model
from ares_viewer_app import state, step_view

# Keys -> the navigation buttons they press (Shift+j / Shift+k, or n / p, move between failed steps).
_KEYS = {"ArrowRight": "episode_next", "j": "episode_next", "l": "episode_next",
         "ArrowLeft": "episode_prev", "k": "episode_prev", "h": "episode_prev",
         "Home": "episode_first", "End": "episode_last",
         "J": "episode_next_failed", "n": "episode_next_failed",
         "K": "episode_prev_failed", "p": "episode_prev_failed"}

# The key script (package data, beside this module): a function of the keys -> buttons map above.
KEYS_SCRIPT = "step_keys.js"

# Rows the list shows before it scrolls; a row is three lines high, so a command wraps (Streamlit wraps text
# only in rows over 64 px): a 60-character command reads whole in the list at 1500 px.
_VISIBLE_ROWS = 10
_ROW_PX = 70
_HEADER_PX = 35
_COMMAND_CHARS = 240
_COMMAND_PX = 120
_CURRENT = "background-color: rgba(255, 189, 69, 0.35)"
_HIT = "background-color: rgba(66, 165, 245, 0.18)"
# A cell's width for its text: pixels per character of the table's font, and the cell's padding.
_CHAR_PX = 8
_PAD_PX = 24


def failed(step: model.Step) -> bool:
    """A step whose command failed: a non-zero return code, a format error, or a command that did not finish."""
    return step.returncode not in (None, 0) or step.format_error or bool(step_view.failure(step))


def badges(step: model.Step) -> str:
    """Short marks for what stands out at a step (plain text)."""
    marks = []
    if step.format_error:
        marks.append("format error")
    failure = step_view.failure(step)
    if failure:
        marks.append(failure)
    if step.context_rewritten:
        marks.append("context rewritten")  # as the step chart and "Worth a look" say
    if step.reward:
        marks.append(f"reward {step.reward:g}")
    return ", ".join(marks)


def command_text(step: model.Step) -> str:
    """The command as the list shows it: its lines joined with " ⏎ ", cut at ``_COMMAND_CHARS``."""
    lines = [line.strip() for line in (step.command or "").strip().splitlines() if line.strip()]
    if not lines:
        return "(first request)" if not step.has_action else "(no command)"
    text = " ⏎ ".join(lines)
    return text if len(text) <= _COMMAND_CHARS else text[: _COMMAND_CHARS - 1] + "…"


def rows(episode: model.Episode, labels: dict[int, list[str]], failed_only: bool,
         hits: dict[int, int] | None = None) -> pd.DataFrame:
    """One row per step (failed steps only with ``failed_only``), indexed by step index; ``hits`` counts the
    find's hits by step."""
    records = []
    for step in episode.steps:
        if failed_only and not failed(step):
            continue
        found = (hits or {}).get(step.index)
        marks = (badges(step), f"{found} found" if found else "")
        rc = " · ".join(part for part in ("" if step.returncode is None else str(step.returncode), *marks) if part)
        records.append((step.index, step.kind.value, rc, command_text(step), ", ".join(labels.get(step.index, ()))))
    frame = pd.DataFrame.from_records(records, columns=["step", "kind", "rc", "command", "labels"])
    return frame.set_index("step", drop=False)


def shades(frame: pd.DataFrame, k: int, hits: Mapping[int, int]) -> pd.DataFrame:
    """The step list's cell styles: step ``k``'s row shaded as the current one, the rows of ``hits`` as hits.
    Whole rows at once: a function called per row took most of the time of drawing the list (#33)."""
    styles = pd.DataFrame("", index=frame.index, columns=frame.columns)
    styles.loc[frame.index.isin(list(hits))] = _HIT
    styles.loc[frame.index == k] = _CURRENT
    return styles


def fitting_width(texts, least: int = 40, most: int = 320) -> int:
    """Pixels a column needs to show the longest of ``texts`` whole (within ``least`` and ``most``)."""
    longest = max((len(str(t)) for t in texts), default=0)
    return min(max(_CHAR_PX * longest + _PAD_PX, least), most)


def current(episode: model.Episode) -> int:
    """The step the view names, kept inside the episode (for moving from it)."""
    last = len(episode.steps) - 1
    return min(max(state.get_int("step", 1 if last else 0), 0), last)


def _move(last: int, delta: int) -> None:
    k = min(max(state.get_int("step", 1 if last else 0), 0), last)
    state.update(step=min(max(k + delta, 0), last))


def _go(k: int) -> None:
    state.update(step=k)


def _jump(last: int, targets: tuple[int, ...], forward: bool) -> None:
    k = min(max(state.get_int("step", 1 if last else 0), 0), last)
    found = [t for t in targets if t > k] if forward else [t for t in targets if t < k][::-1]
    if found:
        state.update(step=found[0])


def navigation(episode: model.Episode, k: int) -> None:
    """First / previous / next / last step and the step slider, with the keys that press them."""
    last = len(episode.steps) - 1
    cols = st.columns(4)
    cols[0].button("First", icon=":material/first_page:", key="episode_first", on_click=_go, args=(0,),
                   disabled=k == 0, help="Home")
    cols[1].button("Prev", icon=":material/chevron_left:", key="episode_prev", on_click=_move, args=(last, -1),
                   disabled=k == 0, help="k or ←")
    cols[2].button("Next", icon=":material/chevron_right:", key="episode_next", on_click=_move, args=(last, 1),
                   disabled=k >= last, help="j or →")
    cols[3].button("Last", icon=":material/last_page:", key="episode_last", on_click=_go, args=(last,),
                   disabled=k >= last, help="End")
    if last > 0:
        st.session_state["episode.slider"] = k
        st.slider("Step", 0, last, key="episode.slider", label_visibility="collapsed",
                  on_change=lambda: _go(st.session_state["episode.slider"]))


def failed_navigation(episode: model.Episode, k: int) -> None:
    """Previous / next failed step, with their keys."""
    last = len(episode.steps) - 1
    failures = tuple(s.index for s in episode.steps if failed(s))
    cols = st.columns(2)
    cols[0].button(":material/keyboard_double_arrow_left:", key="episode_prev_failed",
                   on_click=_jump, args=(last, failures, False), disabled=not any(t < k for t in failures),
                   help="Previous failed step: K (Shift+k) or p")
    cols[1].button(":material/keyboard_double_arrow_right:", key="episode_next_failed",
                   on_click=_jump, args=(last, failures, True), disabled=not any(t > k for t in failures),
                   help="Next failed step: J (Shift+j) or n")


def _picked(key: str, steps: tuple[int, ...]) -> None:
    picked = st.session_state[key].selection.rows
    if picked:
        state.update(step=steps[picked[0]])


def show(episode: model.Episode, k: int, labels: dict[int, list[str]], hits: tuple[int, ...] | list[int] = ()
         ) -> None:
    """The step list with its "failed only" filter; a click on a row opens that step. ``hits``: the step of
    each of the find's hits (its rows are shaded and count their hits)."""
    failed_only = state.get("failed") == "1"
    st.session_state["episode.failed_only"] = failed_only
    top = st.columns([3, 2], vertical_alignment="center")
    top[0].toggle("Failed steps only", key="episode.failed_only",
                  on_change=lambda: state.update(failed="1" if st.session_state["episode.failed_only"] else None))
    with top[1]:
        failed_navigation(episode, k)
    counts: dict[int, int] = {}
    for step in hits:
        counts[step] = counts.get(step, 0) + 1
    frame = rows(episode, labels, failed_only, counts)
    if frame.empty:
        st.caption("No step failed in this episode.")
        return
    steps = tuple(int(i) for i in frame.index)
    position = steps.index(k) if k in steps else None
    styled = frame.style.apply(lambda table: shades(table, k, counts), axis=None)
    # The key names the current step, so a row picked earlier does not stay selected once the step changes.
    key = f"episode.list.{k}.{int(failed_only)}"
    with st.container(key="episode_steplist"):
        st.dataframe(styled, key=key, hide_index=True, on_select=lambda: _picked(key, steps),
                     selection_mode="single-row", row_height=_ROW_PX,
                     height=_ROW_PX * min(len(frame), _VISIBLE_ROWS) + _HEADER_PX + 3,
                     column_config={"step": st.column_config.NumberColumn("#", width=36),
                                    "kind": st.column_config.TextColumn("kind", width=48),
                                    # As wide as its longest text: "0 · reward 1" was cut to "0 · re".
                                    "rc": st.column_config.TextColumn("rc", width=fitting_width(frame["rc"]),
                                                                      help="Return code and marks"),
                                    # Narrow here, it stretches to the width the list has left, so no column is
                                    # pushed out of sight (at "large", 400 px, a 60-character command was cut at
                                    # 30), and wraps in its three-line rows.
                                    "command": st.column_config.TextColumn(
                                        "command", width=_COMMAND_PX,
                                        help="The command, its lines joined with ⏎ (whole in the step view)"),
                                    "labels": st.column_config.TextColumn("labels", width="small")},
                     column_order=[c for c in frame.columns if c != "labels" or frame["labels"].any()])
    st.session_state["episode.list_position"] = position
    st.session_state["episode.list_hits"] = [n for n, step in enumerate(steps) if step in counts]
    if position is None and failed_only:
        st.caption(f"Step {k} did not fail: it is not in this list.")


def drawn(k: int) -> None:
    """Mark the step panes as drawn for step ``k`` (last in them: the key script waits for it between keys),
    with the list row to keep in sight."""
    position = st.session_state.get("episode.list_position")
    row = "" if position is None else f' data-ares-current-row="{position}"'
    hit_rows = ",".join(map(str, st.session_state.get("episode.list_hits") or ()))
    st.html(f'<div data-ares-step="{k}"{row} data-ares-row-px="{_ROW_PX}" data-ares-hit-rows="{hit_rows}"></div>')


def keys() -> None:
    """The step keys (Streamlit has none): each presses its navigation button, one at a time."""
    st.html(keys_html(), unsafe_allow_javascript=True)


@functools.cache
def keys_html() -> str:
    """The key script as the page sends it: ``step_keys.js`` called with the keys -> buttons map."""
    script = importlib.resources.files("ares_viewer_app").joinpath(KEYS_SCRIPT).read_text(encoding="utf-8")
    return f"<script>\n({script})({json.dumps(_KEYS)});\n</script>"
