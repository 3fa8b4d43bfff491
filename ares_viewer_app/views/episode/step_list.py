"""The episode page's step list and step keys: one compact row per step, the current one highlighted.

Rows show the index, kind, return code, badges (and the hits of the episode's find), the command (its lines
joined with ⏎, wrapped to at most three lines a row, the whole command on hover) and the step's review labels, as
text. Steps with a find hit are shaded apart from the current step. The list is a table drawn by a few lines of
script (a Streamlit component): Streamlit's data grid took a sixth of the browser's time on a 200-step Episode page
and was mounted again at every step (#33); this table is built once per list and only its highlight moves from
step to step, the current row kept in sight. A click on a row, a navigation button or a key moves to a step; every
move is computed from the current step when it is handled, and the key script sends one key at a time and waits
for the URL to change before the next, so fast presses are neither merged nor dropped.
"""

from __future__ import annotations

import functools
import importlib.resources
import json

import streamlit as st

from ares_viewer import model
from ares_viewer_app.routing import state
from ares_viewer_app.text import readable
from ares_viewer_app.views.episode import step_component, step_view

# Keys -> the navigation buttons they press (Shift+j / Shift+k, or n / p, move between failed steps).
_KEYS = {"ArrowRight": "episode_next", "j": "episode_next", "l": "episode_next",
         "ArrowLeft": "episode_prev", "k": "episode_prev", "h": "episode_prev",
         "Home": "episode_first", "End": "episode_last",
         "J": "episode_next_failed", "n": "episode_next_failed",
         "K": "episode_prev_failed", "p": "episode_prev_failed"}

# The key script (package data, beside this module): a function of the keys -> buttons map above.
KEYS_SCRIPT = "step_keys.js"

_COMMAND_CHARS = 240
# The whole command on hover, up to this many characters.
_TITLE_CHARS = 2_000
COLUMNS = ("step", "kind", "rc", "command", "labels")

# The list's scripts: build the table when its rows change (text only: every cell is set as text); at every step,
# mark the current row and the hit rows and keep the current row in sight (``step_component`` sends a click's step).
_DRAW = """
function draw(root, data) {
  const table = document.createElement("table");
  const head = table.createTHead().insertRow();
  for (const name of data.columns) {
    const cell = document.createElement("th");
    cell.textContent = name === "step" ? "#" : name;
    cell.className = name;
    head.appendChild(cell);
  }
  const body = table.createTBody();
  data.rows.forEach((values, n) => {
    const row = body.insertRow();
    row.setAttribute("data-step", String(values[0]));
    row.title = data.titles[n];
    values.forEach((value, c) => {
      const cell = row.insertCell();
      cell.className = data.columns[c];
      if (data.columns[c] === "command") {
        const text = document.createElement("div");
        text.textContent = value;
        cell.appendChild(text);
      } else {
        cell.textContent = value;
      }
    });
  });
  root.replaceChildren(table);
}
"""
_MARK = """
function mark(root, data) {
  const hits = new Set(data.hits);
  let current = null;
  for (const row of root.querySelectorAll("tr[data-step]")) {
    const step = Number(row.getAttribute("data-step"));
    row.classList.toggle("current", step === data.current);
    row.classList.toggle("hit", hits.has(step));
    if (step === data.current) current = row;
  }
  // Measured at the next frame, where the page is laid out anyway (measuring now would lay it out mid-drawing).
  if (current) requestAnimationFrame(() => {
    const top = current.offsetTop, bottom = top + current.offsetHeight, head = root.querySelector("thead").offsetHeight;
    if (top - head < root.scrollTop || bottom > root.scrollTop + root.clientHeight) {
      root.scrollTop = Math.max(0, top - head - current.offsetHeight);
    }
  });
}
"""
_CSS = """
.ares-steps { max-height: 640px; overflow-y: auto; border: 1px solid rgba(128, 128, 128, 0.25); border-radius: 0.5rem;
  font-size: 0.85rem; }
.ares-steps table { width: 100%; border-collapse: collapse; }
.ares-steps th { position: sticky; top: 0; background: var(--st-background-color, #fff); text-align: left;
  font-weight: 500; padding: 0.3rem 0.5rem; border-bottom: 1px solid rgba(128, 128, 128, 0.25); z-index: 1; }
.ares-steps td { padding: 0.3rem 0.5rem; border-bottom: 1px solid rgba(128, 128, 128, 0.12); vertical-align: top; }
.ares-steps td.step { text-align: right; white-space: nowrap; }
.ares-steps td.kind, .ares-steps td.rc, .ares-steps td.labels { white-space: nowrap; }
.ares-steps td.command { width: 100%; overflow-wrap: anywhere; font-family: 'Source Code Pro', ui-monospace, monospace;
  font-size: 0.8rem; }
.ares-steps td.command div { display: -webkit-box; -webkit-line-clamp: 3; -webkit-box-orient: vertical;
  overflow: hidden; }
.ares-steps tr[data-step] { cursor: pointer; }
.ares-steps tr[data-step]:hover { background: rgba(128, 128, 128, 0.08); }
.ares-steps tr.hit { background: rgba(66, 165, 245, 0.18); }
.ares-steps tr.current { background: rgba(255, 189, 69, 0.35); }
"""
_component = step_component.register("ares_viewer.step_list", "ares-steps", "tr[data-step]", _DRAW, _CSS,
                                     mark=_MARK)


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


def return_code(step: model.Step) -> str:
    """The list's return code: the code; ``readable.UNKNOWN`` for a command whose file records none (never blank, as
    if it had passed); blank for a step that ran no command."""
    if step.returncode is not None:
        return str(step.returncode)
    return readable.UNKNOWN if (step.command or "").strip() else ""


def command_text(step: model.Step) -> str:
    """The command as the list shows it: its lines joined with " ⏎ ", cut at ``_COMMAND_CHARS``."""
    lines = [line.strip() for line in (step.command or "").strip().splitlines() if line.strip()]
    if not lines:
        return "(first request)" if not step.has_action else "(no command)"
    text = " ⏎ ".join(lines)
    return text if len(text) <= _COMMAND_CHARS else text[: _COMMAND_CHARS - 1] + "…"


def rows(episode: model.Episode, labels: dict[int, list[str]], failed_only: bool,
         hits: dict[int, int] | None = None) -> list[tuple[int, str, str, str, str]]:
    """One row per step (failed steps only with ``failed_only``), in :data:`COLUMNS` order; ``hits`` counts the
    find's hits by step."""
    records = []
    for step in episode.steps:
        if failed_only and not failed(step):
            continue
        found = (hits or {}).get(step.index)
        marks = (badges(step), f"{found} found" if found else "")
        rc = " · ".join(part for part in (return_code(step), *marks) if part)
        records.append((step.index, step.kind.value, rc, command_text(step), ", ".join(labels.get(step.index, ()))))
    return records


def _title(step: model.Step) -> str:
    command = (step.command or "").strip()
    return command if len(command) <= _TITLE_CHARS else command[: _TITLE_CHARS - 1] + "…"


def current(episode: model.Episode) -> int:
    """The step the view names, kept inside the episode (for moving from it)."""
    last = len(episode.steps) - 1
    return min(max(state.get_int("step", 1 if last else 0), 0), last)


def _move(last: int, delta: int) -> None:
    k = min(max(state.get_int("step", 1 if last else 0), 0), last)
    state.update(step=min(max(k + delta, 0), last))


def _go(k: int) -> None:
    state.update(step=k)


# What else moves the step: the navigation buttons (the ones the keys press) and the step pickers (a click on the
# step list or the timeline). A press of any of them carries the slider's value too.
LIST_KEY, TIMELINE_KEY = "episode.list", "episode.timeline"
_BUTTONS = tuple(sorted(set(_KEYS.values())))
_PICKERS = (LIST_KEY, TIMELINE_KEY)


def _slid() -> None:
    """The slider moved. A move by another control in the same run wins: the slider sends the value it shows,
    which, until it has drawn the step the last move named, is that move's step before (a second fast "Next"
    would otherwise take the view back)."""
    if any(st.session_state.get(key) for key in _BUTTONS):
        return
    if any((st.session_state.get(key) or {}).get("step") is not None for key in _PICKERS):
        return
    _go(st.session_state["episode.slider"])


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
                  on_change=_slid)


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
    listed = rows(episode, labels, failed_only, counts)
    if not listed:
        st.caption("No step failed in this episode.")
        return
    steps = [row[0] for row in listed]
    columns = [n for n, name in enumerate(COLUMNS) if name != "labels" or any(row[4] for row in listed)]
    shown = [[row[n] for n in columns] for row in listed]
    titles = [_title(episode.step(step)) for step in steps]
    # "drawing" names the rows, so the script builds the table only when they change, not at every step.
    drawing = str(hash((episode.episode_id, tuple(map(tuple, shown)))))
    with st.container(key="episode_steplist"):
        step_component.show(_component, LIST_KEY,
                            {"columns": [COLUMNS[n] for n in columns], "rows": shown, "titles": titles, "current": k,
                             "hits": [step for step in steps if step in counts], "drawing": drawing}, _go)
    if k not in steps and failed_only:
        st.caption(f"Step {k} did not fail: it is not in this list.")


def drawn(k: int) -> None:
    """Mark the step panes as drawn for step ``k`` (last in them: the key script waits for it between keys)."""
    st.html(f'<div data-ares-step="{k}"></div>')


def keys() -> None:
    """The step keys (Streamlit has none): each presses its navigation button, one at a time."""
    st.html(keys_html(), unsafe_allow_javascript=True)


@functools.cache
def keys_html() -> str:
    """The key script as the page sends it: ``step_keys.js`` called with the keys -> buttons map."""
    script = importlib.resources.files(__package__ or "").joinpath(KEYS_SCRIPT).read_text(encoding="utf-8")
    return f"<script>\n({script})({json.dumps(_KEYS)});\n</script>"
