"""Files: what the agent changed on disk between two steps of an episode, read from its snapshots (no Docker).

The change list only compares snapshot manifests. One file's content is read, diffed and sent to the browser
only for the file shown, and only in the form asked for: unified diff, side by side, its content at either side,
or its history across the episode. The URL names the episode, both sides (``old``, ``step``), the file and how
it is shown (``view``).
"""

from __future__ import annotations

import posixpath

import pandas as pd
import streamlit as st

from ares_viewer import fsdiff, model, review, snapshots
from ares_viewer.base import sizes, textdiff
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import choosers, review_panel, snapshot_problems, tables
from ares_viewer_app.routing import state
from ares_viewer_app.text import escape, readable

BASE = "base"  # the ``old`` parameter's value for the base image
# Rows of the change tree sent at most; closing folders or a filter narrows the rest.
MAX_LISTED = 2_000
# Rows a big change tree starts with, about: folders open level by level while they fit.
TREE_ROWS = 80
# Characters of one text shown at most (a diff, or a file's content); the download has it all.
MAX_SHOWN_CHARS = 200_000
_VIEWS = ("Unified diff", "Side by side", "Old side", "New side", "History")
# How each view is named in the URL's ``view`` parameter.
_VIEW_PARAMS = dict(zip(_VIEWS, ("diff", "side", "old", "new", "history"), strict=True))
# ``view`` values of other pages (the Episode page's transcript): kept in the link, ignored here.
OTHER_PAGES_VIEWS = ("transcript",)
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


def pick_sides(episode: model.Episode, steps: list[int], no_base: bool) -> tuple[int | None, int]:
    """The two sides the view names (default: the step before and the current step), with select boxes."""
    new = choosers.recorded_step(episode, steps, steps[-1])
    old_param = state.get("old")
    if old_param == BASE and not no_base:
        old: int | None = None
    elif old_param is not None and old_param.lstrip("-").isdigit() and int(old_param) in steps:
        old = int(old_param)
    else:
        old = fsdiff.previous_step(episode, new)
        if old is None and no_base and len(steps) > 1:
            old = next(s for s in steps if s != new)  # the snapshots record no base image
        if old_param is not None:
            why = ("these snapshots record no base image" if old_param == BASE else
                   f"“{escape.line(old_param)}” is neither a recorded step nor “base”; the recorded steps are "
                   f"{_steps_text(steps)}")
            choosers.shown_instead(f"The old side cannot be {escape.code(old_param)}: {why}.", "old", side_label(old))
    # The URL names both sides as shown, so the link reopens exactly this comparison.
    old_value = BASE if old is None else str(old)
    if (state.get("old"), state.get("step")) != (old_value, str(new)):
        state.update(old=old_value, step=new)
    old_options: list[str] = ([] if no_base else [BASE]) + [str(s) for s in steps]
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


def _steps_text(steps: list[int]) -> str:
    """Recorded steps in a few words: ``0 to 12`` when there is one per step, else the first few."""
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]} to {steps[-1]}"
    return ", ".join(map(str, steps[:8])) + (", …" if len(steps) > 8 else "")


def counts_line(diff: fsdiff.FsDiff) -> None:
    counts = diff.counts()
    badges = " ".join(badge(kind, n) for kind, n in counts.items() if n)
    files = len(diff.file_changes())
    st.markdown(f"**{side_label(diff.old_step)} → step {diff.new_step}**: {len(diff.changes)} changed path(s), "
                f"{files} file(s) · {badges or 'no changes'}")


def downloads(where: str, episode: model.Episode, diff: fsdiff.FsDiff, steps: list[int]) -> None:
    """The comparison shown as one patch, and the whole episode's patch (first recorded step -> last)."""
    short = episode.episode_id[:8]
    cols = st.columns(2)  # each label names its two sides: a quarter of the page cut them short
    cols[0].download_button(
        f"Download the patch ({side_label(diff.old_step)} → step {diff.new_step})",
        data=lambda: loaders.patch_bytes(where, episode.episode_id, diff.old_step, diff.new_step),
        file_name=f"{short}-{'base' if diff.old_step is None else diff.old_step}-{diff.new_step}.patch",
        mime="text/x-diff", icon=":material/download:", key="files.patch", on_click="ignore",
        help="Every changed file as one patch in git's format, for git apply (version-control and cache folders "
             "left out)")
    if len(steps) > 1 and (diff.old_step, diff.new_step) != (steps[0], steps[-1]):
        cols[1].download_button(
            f"Download the whole episode's patch (step {steps[0]} → step {steps[-1]})",
            data=lambda: loaders.patch_bytes(where, episode.episode_id, steps[0], steps[-1]),
            file_name=f"{short}-{steps[0]}-{steps[-1]}.patch", mime="text/x-diff", icon=":material/download:",
            key="files.episode_patch", on_click="ignore",
            help="What the agent changed from what it first saw to its last step: its submission")


def setup_note(where: str, diff: fsdiff.FsDiff, steps: list[int]) -> None:
    """Against the base image, say which changes the task's setup made before the agent's first action."""
    if diff.old_step is not None or not steps or diff.new_step == steps[0]:
        return
    start = loaders.changes_between(where, diff.episode_id, None, steps[0])
    if not start.changes:
        return
    at_start = set(start.paths())
    from_setup = sum(1 for path in diff.paths() if path in at_start)
    if not from_setup:
        return
    st.caption(f"{from_setup} of these paths were already there at step {steps[0]}, before the agent's first action: "
               f"the base image does not hold the project, and the task's setup copied it in. Compare with step "
               f"{steps[0]} to see only what the agent changed.")
    st.button(f"Compare with step {steps[0]}", key="files.from_start", icon=":material/compare_arrows:",
              on_click=state.update, kwargs={"old": str(steps[0]), "file": None})


def _entry_text(entry: snapshots.Entry | None) -> str:
    if entry is None or entry.type in (snapshots.DELETED, snapshots.ABSENT):
        return readable.UNKNOWN
    if entry.type == snapshots.SYMLINK:
        return f"→ {entry.link_target}"
    if entry.type == snapshots.FILE:
        return sizes.text(entry.size) if entry.size is not None else "file"
    return entry.type


def _entry_caption(entry: snapshots.Entry | None) -> str:
    text = _entry_text(entry)
    if entry is not None and entry.mode is not None and text != readable.UNKNOWN:
        text += f", mode {entry.mode:o}"
    return text if text != readable.UNKNOWN else "absent"


def _change_text(node: fsdiff.TreeNode) -> str:
    """A file's change (``M modified``); a folder's counts of changes below it (``3 M · 1 A``)."""
    if not node.folder and node.change is not None:
        return f"{_MARKS[node.change.kind]} {node.change.kind.replace('_', ' ')}"
    return " · ".join(f"{node.counts[kind]} {_MARKS[kind]}" for kind in fsdiff.CHANGE_KINDS if kind in node.counts)


def _tree_clicked() -> None:
    """A row of the tree was picked: a folder opens or closes, a file is shown below."""
    generation = st.session_state.get("files.tree_generation", 0)
    event = st.session_state.get(f"files.tree.{generation}") or {}
    rows = (event.get("selection") or {}).get("rows") or []
    # A fresh table after every pick: the selection tick would otherwise stay on a row that has moved.
    st.session_state["files.tree_generation"] = generation + 1
    if not rows or rows[0] >= len(st.session_state.get("files.tree_rows", ())):
        return
    path, folder = st.session_state["files.tree_rows"][rows[0]]
    if folder:
        st.session_state["files.tree"]["closed"] ^= {path}
    else:
        state.update(file=path)


def _set_all(closed: bool) -> None:
    tree = st.session_state["files.tree"]
    tree["closed"] = {n.path for n in tree["nodes"] if n.folder} if closed else set()


def change_tree(diff: fsdiff.FsDiff) -> None:
    """The changed paths as a folder tree with change badges and counts, and a filter. Picking a folder row opens
    or closes it; picking a file row shows that file below. Big trees start with folders open level by level while
    about ``TREE_ROWS`` rows fit."""
    query = st.text_input("Filter paths", key="files.filter", placeholder="part of a path, e.g. .py or tests/")
    changes = [c for c in diff.changes if query.lower() in c.path.lower()] if query else list(diff.changes)
    if not changes:
        st.caption("No changed path matches the filter." if query else "Nothing differs between these two sides.")
        return
    shown_for = (state.get("run"), diff.episode_id, diff.old_step, diff.new_step, query)
    tree = st.session_state.get("files.tree")
    if tree is None or tree["for"] != shown_for:
        nodes = fsdiff.change_tree(changes)
        tree = {"for": shown_for, "nodes": nodes,
                "closed": fsdiff.initial_collapsed(nodes, TREE_ROWS, keep_open=state.get("file"))}
        st.session_state["files.tree"] = tree
    rows = fsdiff.visible_nodes(tree["nodes"], tree["closed"])
    if len(rows) > MAX_LISTED:
        st.caption(f"Showing the first {MAX_LISTED:,} of {len(rows):,} rows: close folders or narrow the filter.")
        rows = rows[:MAX_LISTED]
    indent = "\u2003"
    frame = pd.DataFrame({
        "path": [indent * n.depth + ("▸ " if n.path in tree["closed"] else "▾ ") + n.name + "/" if n.folder
                 else indent * n.depth + "\u2002 " + n.name for n in rows],
        "change": [_change_text(n) for n in rows],
        "old": [_entry_text(n.change.old) if n.change is not None and not n.folder else "" for n in rows],
        "new": [_entry_text(n.change.new) if n.change is not None and not n.folder else "" for n in rows],
    })
    st.session_state["files.tree_rows"] = [(n.path, n.folder) for n in rows]
    generation = st.session_state.get("files.tree_generation", 0)
    shown_file = state.get("file")
    table = frame.style.apply(lambda _: ["background-color: #ddf4ff" if n.path == shown_file and not n.folder
                                         else "" for n in rows], axis=0, subset=["path"])
    tables.table(table, hide_index=True, on_select=_tree_clicked, selection_mode="single-row",
                 key=f"files.tree.{generation}", height=min(38 + 35 * len(rows), 420),
                 column_config={"path": st.column_config.TextColumn("path", width="large"),
                                "change": st.column_config.TextColumn("change", help="A added · M modified · "
                                                                      "D deleted · T type changed")})
    folders = sum(1 for n in tree["nodes"] if n.folder)
    if folders:
        cols = st.columns([1, 1, 4])
        cols[0].button("Open all folders", key="files.open_all", on_click=_set_all, args=(False,),
                       disabled=not tree["closed"])
        cols[1].button("Close all folders", key="files.close_all", on_click=_set_all, args=(True,),
                       disabled=len(tree["closed"]) == folders)


def shown_file(diff: fsdiff.FsDiff) -> str | None:
    """The file the view names (a changed path, or any path on either side), else the first changed file."""
    named = state.get("file")
    if named in diff.paths() or (named and (_exists(diff.stat_old(named)) or _exists(diff.stat_new(named)))):
        return named
    internals = fsdiff.version_control_only(diff)
    first = None if internals else fsdiff.main_file(diff) or (diff.changes[0] if diff.changes else None)
    current = first.path if first is not None else None
    if named:
        choosers.shown_instead(f"{escape.code(named)} is not a file at {side_label(diff.old_step)} or at step "
                              f"{diff.new_step} in the recorded snapshots.", "file",
                              escape.code(current) if current else "no file")
    state.update(file=current)
    return current


def pick_file(diff: fsdiff.FsDiff, current: str) -> None:
    """A select box listing the changed paths (type to search them), on the file shown."""
    options = diff.paths()[:MAX_LISTED]
    if current not in options:
        options = [current, *options]
    st.session_state["files.file"] = current
    st.selectbox("File", options, key="files.file", on_change=lambda: state.update(file=st.session_state["files.file"]))


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
            why = f"it is a symlink to {escape.code(entry.link_target)}"
        elif entry.type != snapshots.FILE:
            why = f"it is a {escape.line(entry.type)}"
        else:
            why = escape.md(entry.note) if entry.note else "its content was not recorded"
        st.caption(f"No content at {label}: {why}.")
        return
    name = posixpath.basename(path) or "file"
    st.download_button(f"Download {escape.line(name)} at {label}", data=data, file_name=name,
                       key=f"files.download.{key}", icon=":material/download:", on_click="ignore",
                       mime="application/octet-stream")
    if fsdiff.is_binary(data):
        digest = entry.sha256 if entry is not None and entry.sha256 else None
        st.caption(f"Binary file: {sizes.text(len(data))}"
                   + (f", sha256 {escape.code(digest)}" if digest else "") + ".")
        return
    text, note = _clip(fsdiff.as_text(data))
    language = _LANGUAGES.get(posixpath.splitext(path)[1].lower())
    st.code(text, language=language, line_numbers=True, wrap_lines=True)
    st.caption(sizes.text(len(data)) + (f" · {note}" if note else "")
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
        st.error(f"Cannot read the snapshots: {escape.md(exc)}")
        return
    if not points:
        st.caption("This path never changed in the recorded snapshots.")
        return
    st.markdown(f"Changed at {len(points)} step(s):")
    for point in points[:200]:
        cols = st.columns([1, 3, 4])
        previous = fsdiff.previous_step(episode, point.step)
        old = BASE if previous is None else str(previous)
        cols[0].button(f"step {point.step}", key=f"files.history.{point.step}",
                       on_click=lambda s=point.step, o=old: state.update(step=s, old=o))
        size = point.diff.new_size
        cols[1].markdown(f"{badge(point.kind)} {side_label(previous)} → step {point.step}"
                         + (f" · {sizes.text(size)}" if size is not None else ""))
        with cols[2]:
            command = episode.step(point.step).command if point.step < len(episode.steps) else None
            if point.step == 0:
                st.caption("the task's setup, before the agent's first action")
            elif command:
                st.code(_first_line(command), language="bash", wrap_lines=True)
            else:
                st.caption("no command recorded at this step")


def _first_line(command: str, limit: int = 160) -> str:
    lines = command.strip().splitlines() or [""]
    first = lines[0][:limit]
    return first + (" …" if len(lines) > 1 or len(lines[0]) > limit else "")


def _view_changed() -> None:
    state.update(view=_VIEW_PARAMS[st.session_state["files.view"]])


def file_panel(episode: model.Episode, diff: fsdiff.FsDiff, path: str) -> None:
    old_label, new_label = side_label(diff.old_step), side_label(diff.new_step)
    try:
        change = diff.change(path)
    except KeyError:
        change = None
    kind = badge(change.kind) if change is not None else ":gray-badge[unchanged]"
    st.markdown(f"#### {escape.code(path)} {kind}")
    if change is not None:
        st.caption(" · ".join(f"{side}: {escape.line(_entry_caption(entry))}" for side, entry in (("old", change.old),
                                                                                ("new", change.new))))
    else:
        st.caption(f"Unchanged between {old_label} and {new_label}.")
    asked = state.get("view")
    named = {v: k for k, v in _VIEW_PARAMS.items()}.get(asked or "", _VIEWS[0])
    if asked and asked not in _VIEW_PARAMS.values() and asked not in OTHER_PAGES_VIEWS:
        known = ", ".join(f"`{v}`" for v in _VIEW_PARAMS.values())
        choosers.shown_instead(f"“{escape.line(asked)}” is not a way to show a file; they are {known}.", "view",
                              f"the {named.lower()}")
        state.update(view=None)
    st.session_state["files.view"] = named
    view = st.radio("Show", _VIEWS, horizontal=True, key="files.view", label_visibility="collapsed",
                    on_change=_view_changed)
    try:
        if view == "History":
            history(episode, path)
            return
        file_diff = diff.file_diff(path)
        if file_diff.note:
            st.caption(f"⚠ {escape.md(file_diff.note)}")
        if view == "Unified diff":
            unified(file_diff)
        elif view == "Side by side":
            side_by_side(file_diff, old_label, new_label)
        elif view == "Old side":
            content(path, diff.read_old(path), diff.stat_old(path), old_label, "old")
        else:
            content(path, diff.read_new(path), diff.stat_new(path), new_label, "new")
    except snapshots.SnapshotError as exc:
        st.error(f"Cannot read {escape.code(path)}: {escape.md(exc)}")


def notes_panel(where: str, episode: model.Episode, step: int, path: str) -> None:
    """Review notes about this file at the new side's step (open when there are some), and a form to add one."""
    notes = review_panel.find(review.run_key(where), episode_id=episode.episode_id)
    count = sum(1 for n in notes if n.path == path and n.step == step)
    with st.expander(f"Review notes on this file at step {step}" + (f" ({count})" if count else ""),
                     icon=":material/rate_review:", expanded=bool(count)):
        review_panel.file_panel(where, episode, step, path)


def show(where: str, episode: model.Episode) -> None:
    """The page for one episode of the run at ``where``: pick two sides, see what changed, one file at a time."""
    snapshot_problems.show(episode)
    refs = snapshots.find(episode)
    if not refs:
        st.info("This episode has no recorded snapshots, so there are no files to compare. Snapshots are looked for "
                "in the run's `snapshots/` folder (per-step snapshots, or upstream episode-boundary snapshots) and "
                "beside the episode file; see docs/snapshots.md.")
        return
    no_base = not any(ref.records_base for ref in refs)  # whole-filesystem copies: no base image side
    if no_base and len(refs) == 1:
        st.info(f"This episode has one snapshot (step {refs[0].step_index}, an episode-boundary snapshot), and that "
                "kind records no base image: there is nothing to compare it with.")
        return
    steps = sorted(ref.step_index for ref in refs)
    old_step, new_step = pick_sides(episode, steps, no_base)
    try:
        diff = loaders.changes_between(where, episode.episode_id, old_step, new_step)
    except snapshots.SnapshotError as exc:
        st.error(f"Cannot read the snapshot {escape.code(exc.path)}: {escape.md(exc.reason)}. Other steps can still be "
                 "compared.")
        return
    except LookupError as exc:
        st.info(f"{escape.md(exc)}. Choose other sides above.")
        return
    counts_line(diff)
    setup_note(where, diff, steps)
    if diff.changes:
        downloads(where, episode, diff, steps)
    if no_base:
        st.caption("Episode-boundary snapshots (whole filesystem copies): the base image is not recorded.")
    path = shown_file(diff)
    if diff.changes:  # else the sentence below says it once, without an empty tree and its filter
        change_tree(diff)
    if path is None:
        internals = fsdiff.version_control_only(diff)
        if internals:  # nothing of the work tree to open: said, and the tree above still opens each file
            st.info(f"Between {side_label(old_step)} and step {new_step} only version control's own files changed "
                    f"({escape.md(fsdiff.internals_words(internals))}"
                    "): no file of the work tree. Pick one in the tree above to see it.", icon=":material/info:")
            return
        st.success(f"No files differ between {side_label(old_step)} and step {new_step}.")
        return
    pick_file(diff, path)
    file_panel(episode, diff, path)
    notes_panel(where, episode, new_step, path)


run = choosers.current_run()
where = loaders.location(state.get("run"))
episode_id = choosers.episode_picker(run, "files.episode", reset={"step": None, "old": None, "file": None})
show(where, choosers.read_episode(run, episode_id))
