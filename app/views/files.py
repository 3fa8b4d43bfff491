"""Files: what the agent changed on disk between two steps of an episode, read from its snapshots (no Docker).

The change list only compares snapshot manifests. One file's content is read, diffed and sent to the browser
only for the file shown, and only in the form asked for: unified diff, side by side, its content at either side,
or its history across the episode. The URL names the episode, both sides (``old``, ``step``) and the file.
"""

from __future__ import annotations

import posixpath

import loaders
import pandas as pd
import state
import streamlit as st
import widgets

import ares_viewer
from ares_viewer import boundary, fsdiff, model, snapshots, textdiff

BASE = "base"  # the ``old`` parameter's value for the base image
# Rows of the change table sent at most; a filter narrows the rest.
MAX_LISTED = 2_000
# Characters of one text shown at most (a diff, or a file's content); the download has it all.
MAX_SHOWN_CHARS = 200_000
_VIEWS = ("Unified diff", "Side by side", "Old side", "New side", "History")
_BADGES = {fsdiff.ADDED: "green", fsdiff.MODIFIED: "orange", fsdiff.DELETED: "red", fsdiff.TYPE_CHANGED: "violet"}
_MARKS = {fsdiff.ADDED: "A", fsdiff.MODIFIED: "M", fsdiff.DELETED: "D", fsdiff.TYPE_CHANGED: "T"}  # git's letters
_LANGUAGES = {".py": "python", ".md": "markdown", ".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml",
              ".sh": "bash", ".js": "javascript", ".ts": "typescript", ".html": "html", ".css": "css", ".c": "c",
              ".h": "c", ".cpp": "cpp", ".rs": "rust", ".go": "go", ".java": "java", ".rb": "ruby", ".sql": "sql",
              ".ini": "ini", ".cfg": "ini", ".diff": "diff", ".patch": "diff"}


def badge(kind: str, count: int | None = None) -> str:
    """A change kind as a coloured badge, optionally with its count."""
    text = kind.replace("_", " ")
    return f":{_BADGES.get(kind, 'gray')}-badge[{f'{count} ' if count is not None else ''}{text}]"


def side_label(step: int | None) -> str:
    return "base image" if step is None else f"step {step}"


@st.cache_resource(max_entries=8, ttl=300, show_spinner="Comparing the snapshots…")
def changes_between(where: str, episode_id: str, old: int | None, new: int) -> fsdiff.FsDiff:
    """The filesystem diff of two steps of an episode (kept for a few pairs: stepping back and forth is instant)."""
    return fsdiff.compare(loaders.load_run(where).episode(episode_id), old, new)


def pick_episode(run: ares_viewer.Run) -> str:
    """The episode the view names (else the run's first), with a select box to change it."""
    labels = widgets.episode_labels(run)
    episode_id = state.get("episode")
    if episode_id not in labels:
        episode_id = next(iter(labels))
        state.update(episode=episode_id, step=None, old=None, file=None)
    st.session_state["files.episode"] = episode_id

    def changed() -> None:
        state.update(episode=st.session_state["files.episode"], step=None, old=None, file=None)

    st.selectbox("Episode", list(labels), format_func=labels.get, key="files.episode", on_change=changed)
    return episode_id


def pick_sides(episode: model.Episode, steps: list[int], boundary_only: bool) -> tuple[int | None, int]:
    """The two sides the view names (default: the step before and the current step), with select boxes."""
    wanted = state.get_int("step", steps[-1] if len(steps) > 1 else steps[0])
    new = wanted if wanted in steps else max((s for s in steps if s <= wanted), default=steps[0])
    if new != wanted:
        st.caption(f"Step {wanted} has no snapshot: showing step {new}, the closest recorded one before it.")
    old_param = state.get("old")
    if old_param == BASE and not boundary_only:
        old: int | None = None
    elif old_param is not None and old_param.lstrip("-").isdigit() and int(old_param) in steps:
        old = int(old_param)
    else:
        old = fsdiff.previous_step(episode, new)
        if old is None and boundary_only and len(steps) > 1:
            old = next(s for s in steps if s != new)  # boundary snapshots record no base image
    # The URL names both sides as shown, so the link reopens exactly this comparison.
    old_value = BASE if old is None else str(old)
    if (state.get("old"), state.get("step")) != (old_value, str(new)):
        state.update(old=old_value, step=new)
    old_options: list[str] = ([] if boundary_only else [BASE]) + [str(s) for s in steps]
    st.session_state["files.old"] = old_value
    st.session_state["files.new"] = new
    cols = st.columns(2)
    cols[0].selectbox("Old side", old_options, key="files.old",
                      format_func=lambda v: "base image" if v == BASE else f"step {v}",
                      on_change=lambda: state.update(old=st.session_state["files.old"]),
                      help="Compare against this step (or the base image the container started from)")
    # A new "new side" compares with its own previous step again, unless the base image was chosen.
    cols[1].selectbox("New side", steps, key="files.new", format_func=lambda v: f"step {v}",
                      on_change=lambda: state.update(step=st.session_state["files.new"],
                                                     old=BASE if state.get("old") == BASE else None))
    return old, new


def counts_line(diff: fsdiff.FsDiff) -> None:
    counts = diff.counts()
    badges = " ".join(badge(kind, n) for kind, n in counts.items() if n)
    files = len(diff.file_changes())
    st.markdown(f"**{side_label(diff.old_step)} → step {diff.new_step}**: {len(diff.changes)} changed path(s), "
                f"{files} file(s) · {badges or 'no changes'}")


def _entry_text(entry: snapshots.Entry | None) -> str:
    if entry is None or entry.type in (snapshots.DELETED, snapshots.ABSENT):
        return "–"
    if entry.type == snapshots.SYMLINK:
        return f"→ {entry.link_target}"
    if entry.type == snapshots.FILE:
        return f"{entry.size:,} B" if entry.size is not None else "file"
    return entry.type


def _entry_caption(entry: snapshots.Entry | None) -> str:
    text = _entry_text(entry)
    if entry is not None and entry.mode is not None and text != "–":
        text += f", mode {entry.mode:o}"
    return text if text != "–" else "absent"


def change_table(diff: fsdiff.FsDiff) -> None:
    """The changed paths grouped by folder, with a filter; selecting a row shows that file."""
    query = st.text_input("Filter paths", key="files.filter", placeholder="part of a path, e.g. .py or tests/")
    changes = [c for c in diff.changes if query.lower() in c.path.lower()] if query else list(diff.changes)
    if len(changes) > MAX_LISTED:
        st.caption(f"Showing the first {MAX_LISTED:,} of {len(changes):,} changed paths: narrow them with the filter.")
        changes = changes[:MAX_LISTED]
    if not changes:
        st.caption("No changed path matches the filter." if query else "Nothing differs between these two sides.")
        return
    frame = pd.DataFrame({
        "change": [f"{_MARKS[c.kind]} {c.kind.replace('_', ' ')}" for c in changes],
        "folder": [posixpath.dirname(c.path) for c in changes],
        "name": [posixpath.basename(c.path) + ("/" if snapshots.DIR in (c.old_type, c.new_type) else "")
                 for c in changes],
        "old": [_entry_text(c.old) for c in changes],
        "new": [_entry_text(c.new) for c in changes],
    })
    event = st.dataframe(frame, hide_index=True, on_select="rerun", selection_mode="single-row",
                         key="files.table", height=min(38 + 35 * len(changes), 320))
    rows = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    # A selection outlives its click: act on each new one only (the select box below may have changed since).
    picked = (diff.old_step, diff.new_step, query, tuple(rows))
    if rows and picked != st.session_state.get("files.table_picked"):
        st.session_state["files.table_picked"] = picked
        state.update(file=changes[rows[0]].path)


def pick_file(diff: fsdiff.FsDiff) -> str | None:
    """The file the view names (else the first changed file), with a select box listing the changed paths."""
    paths = diff.paths()
    current = state.get("file")
    if current not in paths and not (current and (_exists(diff.stat_old(current)) or _exists(diff.stat_new(current)))):
        first = diff.first_file() or (diff.changes[0] if diff.changes else None)
        current = first.path if first is not None else None
        state.update(file=current)
    if current is None:
        return None
    options = paths[:MAX_LISTED]
    if current not in options:
        options = [current, *options]
    st.session_state["files.file"] = current
    st.selectbox("File", options, key="files.file", on_change=lambda: state.update(file=st.session_state["files.file"]))
    return current


def _exists(entry: snapshots.Entry | None) -> bool:
    return entry is not None and entry.type not in (snapshots.DELETED, snapshots.ABSENT)


def _clip(text: str) -> tuple[str, str | None]:
    if len(text) <= MAX_SHOWN_CHARS:
        return text, None
    return text[:MAX_SHOWN_CHARS], f"Showing the first {MAX_SHOWN_CHARS:,} of {len(text):,} characters."


def unified(file_diff: fsdiff.FileDiff) -> None:
    if file_diff.unified:
        text, note = _clip(file_diff.unified)
        st.code(text, language="diff", wrap_lines=True)
        if note:
            st.caption(note)
    elif not file_diff.note:
        st.caption("Same content on both sides." if file_diff.old_text == file_diff.new_text
                   else "No text on one side to compare.")


def side_by_side(file_diff: fsdiff.FileDiff, old_label: str, new_label: str) -> None:
    if file_diff.binary or (file_diff.old_text is None and file_diff.new_text is None):
        st.caption("No text to show side by side.")
        return
    st.html(textdiff.side_by_side_html(file_diff.old_text, file_diff.new_text, a_name=old_label, b_name=new_label,
                                       limit=MAX_SHOWN_CHARS))


def content(path: str, data: bytes | None, entry: snapshots.Entry | None, label: str, key: str) -> None:
    """A file's content at one side, with a download button; binary content by size and hash."""
    if data is None:
        if entry is None:
            why = "its content was not recorded (the episode never touched it)"
        elif entry.type in (snapshots.DELETED, snapshots.ABSENT):
            why = "it does not exist there"
        elif entry.type == snapshots.SYMLINK:
            why = f"it is a symlink to `{entry.link_target}`"
        elif entry.type != snapshots.FILE:
            why = f"it is a {entry.type}"
        else:
            why = entry.note or "its content was not recorded"
        st.caption(f"No content at {label}: {why}.")
        return
    name = posixpath.basename(path) or "file"
    st.download_button(f"Download {name} at {label}", data=data, file_name=name, key=f"files.download.{key}",
                       icon=":material/download:", on_click="ignore", mime="application/octet-stream")
    if fsdiff.is_binary(data):
        digest = entry.sha256 if entry is not None and entry.sha256 else None
        st.caption(f"Binary file: {len(data):,} bytes" + (f", sha256 `{digest}`" if digest else "") + ".")
        return
    text, note = _clip(fsdiff.as_text(data))
    language = _LANGUAGES.get(posixpath.splitext(path)[1].lower())
    st.code(text, language=language, line_numbers=True, wrap_lines=True)
    st.caption(f"{len(data):,} bytes" + (f" · {note}" if note else "")
               + (" · invalid UTF-8 bytes shown as \\xNN" if "\\x" in text and not _is_utf8(data) else ""))


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def history(episode: model.Episode, path: str) -> None:
    """The steps at which the file changed, each opening that step's change in this view."""
    try:
        points = fsdiff.file_history(episode, path)
    except snapshots.SnapshotError as exc:
        st.error(f"Cannot read the snapshots: {exc}")
        return
    if not points:
        st.caption("This path never changed in the recorded snapshots.")
        return
    st.markdown(f"Changed at {len(points)} step(s):")
    for point in points[:200]:
        cols = st.columns([1, 5])
        previous = fsdiff.previous_step(episode, point.step)
        old = BASE if previous is None else str(previous)
        cols[0].button(f"step {point.step}", key=f"files.history.{point.step}",
                       on_click=lambda s=point.step, o=old: state.update(step=s, old=o))
        size = point.diff.new_size
        cols[1].markdown(f"{badge(point.kind)} {side_label(previous)} → step {point.step}"
                         + (f" · {size:,} bytes" if size is not None else ""))


def file_panel(episode: model.Episode, diff: fsdiff.FsDiff, path: str) -> None:
    old_label, new_label = side_label(diff.old_step), side_label(diff.new_step)
    try:
        change = diff.change(path)
    except KeyError:
        change = None
    kind = badge(change.kind) if change is not None else ":gray-badge[unchanged]"
    st.markdown(f"#### `{path}` {kind}")
    if change is not None:
        st.caption(" · ".join(f"{side}: {_entry_caption(entry)}" for side, entry in (("old", change.old),
                                                                                ("new", change.new))))
    else:
        st.caption(f"Unchanged between {old_label} and {new_label}.")
    view = st.radio("Show", _VIEWS, horizontal=True, key="files.view", label_visibility="collapsed")
    try:
        if view == "History":
            history(episode, path)
            return
        file_diff = diff.file_diff(path)
        if file_diff.note:
            st.caption(f"⚠ {file_diff.note}")
        if view == "Unified diff":
            unified(file_diff)
        elif view == "Side by side":
            side_by_side(file_diff, old_label, new_label)
        elif view == "Old side":
            content(path, diff.read_old(path), diff.stat_old(path), old_label, "old")
        else:
            content(path, diff.read_new(path), diff.stat_new(path), new_label, "new")
    except snapshots.SnapshotError as exc:
        st.error(f"Cannot read `{path}`: {exc}")


run = widgets.current_run()
where = loaders.location(state.get("run"))
episode_id = pick_episode(run)
episode = widgets.read_episode(run, episode_id)
refs = episode.snapshots()
if not refs:
    st.info("This episode has no recorded snapshots, so there are no files to compare. Snapshots are looked for "
            "in the run's `snapshots/` folder (per-step snapshots, or upstream episode-boundary snapshots) and "
            "beside the episode file; see docs/snapshots.md.")
    st.stop()
boundary_only = all(isinstance(ref, boundary.BoundaryRef) for ref in refs)
if boundary_only and len(refs) == 1:
    st.info(f"This episode has one snapshot (step {refs[0].step_index}, an episode-boundary snapshot), and that "
            "kind records no base image: there is nothing to compare it with.")
    st.stop()
old_step, new_step = pick_sides(episode, [ref.step_index for ref in refs], boundary_only)
try:
    diff = changes_between(where, episode_id, old_step, new_step)
except snapshots.SnapshotError as exc:
    st.error(f"Cannot read the snapshot `{exc.path}`: {exc.reason}. Other steps can still be compared.")
    st.stop()
except LookupError as exc:
    st.info(f"{exc}. Choose other sides above.")
    st.stop()
counts_line(diff)
if boundary_only:
    st.caption("Episode-boundary snapshots (whole filesystem copies): the base image is not recorded.")
change_table(diff)
path = pick_file(diff)
if path is None:
    st.success(f"No files differ between {side_label(old_step)} and step {new_step}.")
    st.stop()
file_panel(episode, diff, path)
