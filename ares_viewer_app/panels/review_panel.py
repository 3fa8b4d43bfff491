"""Review notes and labels in the app: the step view's panel, labels for the timeline and the episode table.

The store is ``ares_viewer.review``'s SQLite database (``ARES_VIEWER_REVIEW_DB``, else beside the
index cache). When it cannot be written (damaged, locked, newer schema) every part here says so
once and shows what it can read; the pages around it keep working.
"""

from __future__ import annotations

import json
import urllib.parse

import pandas as pd
import streamlit as st

from ares_viewer import model, review
from ares_viewer.base import settings
from ares_viewer.model import render
from ares_viewer.review import records
from ares_viewer_app.routing import state
from ares_viewer_app.serving import access
from ares_viewer_app.text import escape

# Seconds a write waits for other writers before it gives up with a message.
_TIMEOUT = 5.0
# Notes shown at once on a step (or a file at a step); the others are a page away: a step with thousands of notes
# renders as fast as one with twenty.
NOTES_PAGE = 20
AUTHOR = "review.author"
_SAVED_AUTHOR = "review.author_saved"
_FLASH = "review.flash"
_RESET = "review.reset"
# The browser keeps the reviewer's name in this cookie (written by a script on the page, read back through
# ``st.context.cookies`` when a page loads): a reload or a new tab knows who is reviewing, and the server never
# guesses it. Labels picked by key: digits 1-9 choose the run's labels in order.
AUTHOR_COOKIE = "ares_viewer_reviewer"
_COOKIE_DAYS = 365
_LABEL_KEYS_SCRIPT = """
<script>
(() => {
  if (window.__aresViewerLabelKeys) return;
  window.__aresViewerLabelKeys = true;
  document.addEventListener("keydown", (event) => {
    const t = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey || !/^[1-9]$/.test(event.key)) return;
    if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) return;
    const pills = document.querySelector(".st-key-review-add_labels, .st-key-review-file_add_labels");
    // The pills themselves, not the label's help button.
    const button = pills && pills.querySelectorAll('button[data-variant="pills"]')[Number(event.key) - 1];
    if (!button || button.disabled) return;
    event.preventDefault();
    button.click();
  });
})();
</script>
"""


# Databases whose store could not be opened for writing: the next run of the script opens them again.
_RETRY: set[str] = set()


@st.cache_resource(max_entries=4, show_spinner=False)
def _open(path: str) -> review.ReviewStore:
    return review.open_store(path, timeout=_TIMEOUT)


def store() -> review.ReviewStore:
    """The review database; a store that could not be opened for writing is tried again on the next run."""
    path = str(review.db_path())
    opened = _open(path)
    if opened.problem:
        _RETRY.add(path)
    return opened


def retry_failed_open() -> None:
    """At the start of a run (the entrypoint calls it): open again a database that could not be opened for writing,
    as it may be repaired or unlocked by now. Once per run, not once per part of the page: every open of a
    locked file waits for the busy timeout."""
    path = str(review.db_path())
    if path in _RETRY:
        _RETRY.discard(path)
        _open.clear()


def problem() -> None:
    """A warning when notes are read-only, saying why."""
    opened = store()
    if opened.problem:
        st.warning(escape.md(opened.problem), icon=":material/lock:")


def find(run: str, **filters) -> list[review.Note]:
    """Notes of a run; a database that cannot be read gives a warning and no notes, not a traceback."""
    try:
        return store().find(run, **filters)
    except review.ReviewError as exc:
        st.warning(escape.md(exc), icon=":material/lock:")
        return []


def step_labels(where: str, episode_id: str) -> dict[int, list[str]]:
    """Step index -> labels, for the step timeline."""
    found: dict[int, list[str]] = {}
    for note in find(review.run_key(where), episode_id=episode_id):
        if note.label and note.label not in found.setdefault(note.step, []):
            found[note.step].append(note.label)
    return {k: v for k, v in found.items() if v}


def labels_by_episode(run) -> dict[str, set[str]]:
    """Episode id -> the review labels on any of its steps (the overview's labels column and filter)."""
    labels: dict[str, set[str]] = {}
    for note in find(review.run_key(run.location)):
        if note.label:
            labels.setdefault(note.episode_id, set()).add(note.label)
    return labels


def _save_author() -> None:
    st.session_state[_SAVED_AUTHOR] = st.session_state.get(AUTHOR, "").strip()


def _remembered_author() -> str:
    """The name this browser remembers (its cookie), else none."""
    try:
        raw = st.context.cookies.get(AUTHOR_COOKIE)
    except Exception:  # no browser behind this session (a bare script run): nothing remembered
        return ""
    return urllib.parse.unquote(raw).strip()[:200] if isinstance(raw, str) else ""


def _remember_author(name: str) -> None:
    """Have the browser keep ``name`` in its cookie (nothing is stored on the server)."""
    value = json.dumps(name).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    st.html(f"<script>document.cookie = '{AUTHOR_COOKIE}=' + encodeURIComponent({value}) + "
            f"'; path=/; max-age={_COOKIE_DAYS * 86400}; SameSite=Strict';</script>", unsafe_allow_javascript=True)


def signed_in() -> str | None:
    """The visitor's account, where the operator names the header its signing-in proxy sets
    (``ARES_VIEWER_IDENTITY_HEADER``): the header's value as a reviewer's name, "" when this request lacks it (or
    it is not a name); None when no header is named (names are typed)."""
    header = settings.IDENTITY_HEADER.get()
    if not header:
        return None
    try:
        value = st.context.headers.get(header)
    except Exception:  # no browser behind this session (a bare script run): nobody signed in
        value = None
    try:
        return records.clean_author(value) if value else ""
    except ValueError:
        return ""


def typed_names_refused() -> str | None:
    """Why this server saves no typed name, or None when it does: a server reachable from other machines takes
    the reviewer from the signing-in proxy the operator names (``ARES_VIEWER_IDENTITY_HEADER``), since a typed
    name is anyone's; unless the operator vouches for who reaches it (``ARES_VIEWER_TRUST_TYPED_NAMES=1``)."""
    if access.is_local(st.get_option("server.address")) or settings.TRUST_TYPED_NAMES.get():
        return None
    return (f"This server is reachable from other machines and names no signing-in proxy "
            f"({escape.code(settings.IDENTITY_HEADER.name)}), so a typed name could be anyone's: notes, labels and "
            f"decisions are not saved here. Its operator can name the proxy's header, or set "
            f"{escape.code(settings.TRUST_TYPED_NAMES.name + '=1')} to take typed names.")


def author_input() -> str:
    """The reviewer's name: the signed-in account where the operator's proxy names it (``signed_in``), else the
    typed name, remembered by the browser across reloads (every page shows the same value). A name is stored as
    ``review.records.clean_author`` gives it (NFC, no invisible characters, at most 100 characters)."""
    account = signed_in()
    if account is not None:
        st.session_state[AUTHOR] = account
        st.text_input("Your name", key=AUTHOR, disabled=True,
                      help="The account you signed in with, from the header the server's proxy sets.")
        if not account:
            st.warning(f"This server records reviewers under the account its proxy sends in the "
                       f"{escape.code(settings.IDENTITY_HEADER.get() or '')} header, and this request has none: "
                       "nothing can be saved until you sign in through the proxy.", icon=":material/lock:")
        return account
    if refused := typed_names_refused():
        st.warning(refused, icon=":material/lock:")
        return ""
    if _SAVED_AUTHOR not in st.session_state:
        st.session_state[_SAVED_AUTHOR] = _remembered_author()
    st.session_state[AUTHOR] = st.session_state.get(_SAVED_AUTHOR, "")
    st.text_input("Your name", key=AUTHOR, on_change=_save_author, placeholder="shown with your notes",
                  help="Every note and edit records who wrote it. This browser remembers the name (a cookie).")
    name = st.session_state[AUTHOR].strip()
    if name != _remembered_author():
        _remember_author(name)
    try:
        return records.clean_author(name) if name else ""
    except ValueError as exc:
        st.error(escape.md(exc))
        return ""


def _author() -> str:
    """Who a write is recorded under: the signed-in account or the typed name ("" where typed names are refused:
    the store then refuses the write, saying it needs an author)."""
    _save_author()
    return "" if signed_in() is None and typed_names_refused() else st.session_state[_SAVED_AUTHOR]


def _done(message: str, reset: dict[str, str | None]) -> None:
    """After a write: say so on the next run, reset the form's fields, and redraw the whole page (the timeline).

    ``reset`` maps session keys to their next value (None: forget it). A widget's value is assigned, not only
    forgotten, because the browser keeps showing a widget's old text unless the script sets a new one.
    """
    st.session_state[_FLASH] = message
    st.session_state[_RESET] = reset
    st.rerun()


def _start() -> None:
    for key, value in st.session_state.pop(_RESET, {}).items():
        if value is None:
            st.session_state.pop(key, None)
        else:
            st.session_state[key] = value
    if _FLASH in st.session_state:
        st.success(st.session_state.pop(_FLASH), icon=":material/check:")


def note_text(note: review.Note) -> str:
    """A note as markdown that shows it as text: label badge, text, file."""
    parts = [escape.badge("orange", note.label)] if note.label else []
    if note.text:
        parts.append(escape.md(note.text))
    if note.path:
        parts.append(f"(file {escape.code(note.path)})")
    return " ".join(parts)


def row_label(row: pd.Series) -> str:
    """The label of a row of ``ReviewStore.notes``; "" for none (the frame holds NaN there, which is truthy)."""
    label = row["label"]
    return label if isinstance(label, str) else ""


def note_name(row: pd.Series) -> str:
    """A row of ``ReviewStore.notes`` in a picker: step, episode, label (or "note"), the start of its text."""
    deleted = " · deleted" if row["deleted"] else ""
    return (f"step {row['step']} of {render.short_id(row['episode_id'])} · {row_label(row) or 'note'} · "
            f"{row['text'][:40]}{deleted}")


def _edit_form(opened: review.ReviewStore, note: review.Note) -> None:
    """Edit or delete one note; the edit names the revision the form was filled from, so a concurrent change wins."""
    prefix = f"review.edit.{note.note_id}"
    keys = (f"{prefix}.base", f"{prefix}.label", f"{prefix}.text")
    st.session_state.setdefault(keys[0], note.revision)
    st.session_state.setdefault(keys[1], note.label or "")
    st.session_state.setdefault(keys[2], note.text)
    with st.form(prefix, border=False):
        label = st.text_input("Label", key=keys[1])
        text = st.text_area("Note", key=keys[2], height=80)
        cols = st.columns(2)
        save = cols[0].form_submit_button("Save", icon=":material/save:")
        delete = cols[1].form_submit_button("Delete", icon=":material/delete:")
    if not (save or delete):
        return
    base = st.session_state[keys[0]]
    try:
        if delete:
            opened.delete(note.note_id, revision=base, author=_author())
        else:
            opened.edit(note.note_id, revision=base, author=_author(), label=label, text=text)
    except review.ConflictError as exc:
        st.error(escape.md(exc), icon=":material/sync_problem:")
        st.button("Load the latest version", key=f"{prefix}.reload", on_click=_forget, args=(keys,))
        return
    except (ValueError, KeyError, review.ReviewError) as exc:
        st.error(escape.md(exc))
        return
    _done("Note deleted." if delete else "Note saved.", dict.fromkeys(keys))


def _forget(keys: tuple[str, ...]) -> None:
    for key in keys:
        st.session_state.pop(key, None)


def _add_form(opened: review.ReviewStore, key: str, episode: model.Episode, k: int, labels: list[str], *,
              path: str | None = None, prefix: str = "review.add") -> None:
    """A form adding a note or label to step ``k``; with ``path`` it is about that file (no path field then)."""
    fields = (f"{prefix}_label", f"{prefix}_text", f"{prefix}_path", f"{prefix}_labels")
    hint = ("A new label; leave empty to use the one picked above" if labels
            else "A short tag, e.g. reward hacking")
    # Enter in the label box must not file the label alone before the note is written: only the button submits.
    with st.form(prefix, border=True, enter_to_submit=False):
        picked = None
        if labels:
            keys = " · keys 1–9 pick them" if len(labels) > 1 else " · key 1 picks it"
            # Pills render their options as markdown: a label shows as typed, not bold or typeset.
            picked = st.pills(f"The run's labels{keys}", labels[:30], key=fields[3], format_func=escape.line,
                              help="Pick one of the labels already used in this run (so they do not split by typo)")
        cols = st.columns([2, 3])
        typed_label = cols[0].text_input("Label", key=fields[0], placeholder="e.g. edits the tests", help=hint)
        if path is None:
            typed = cols[0].text_input("File (optional)", key=fields[2], placeholder="a path this note is about")
        text = cols[1].text_area("Note", key=fields[1], height=110, placeholder="what the model does here")
        where = f"{escape.code(path)} at step {k}" if path is not None else f"step {k}"
        submitted = st.form_submit_button(f"Add to {'this file' if path is not None else f'step {k}'}",
                                          icon=":material/add_comment:")
    if labels:
        st.html(_LABEL_KEYS_SCRIPT, unsafe_allow_javascript=True)
    if not submitted:
        return
    label = typed_label.strip() or picked or ""
    try:
        opened.add(key, episode.episode_id, k, author=_author(), label=label, text=text,
                   path=path if path is not None else typed)
    except (ValueError, review.ReviewError) as exc:
        st.error(escape.md(exc))
        return
    _done(f"Added to {where}.", {**dict.fromkeys(fields[:3], ""), fields[3]: None})


def _show_notes(opened: review.ReviewStore, notes: list[review.Note], key: str) -> None:
    """Notes as read now (oldest first), each with its author, time and revision, and a form to edit or delete it;
    ``NOTES_PAGE`` at a time, every page reachable from a picker (``key`` names it)."""
    pages = max(1, -(-len(notes) // NOTES_PAGE))
    page = 0
    if pages > 1:
        last = len(notes)
        page = st.selectbox(f"Notes ({last:,} in all)", range(pages), key=key,
                            format_func=lambda p: f"notes {p * NOTES_PAGE + 1:,}–{min((p + 1) * NOTES_PAGE, last):,}")
        page = min(page, pages - 1)
        start, stop = page * NOTES_PAGE, min((page + 1) * NOTES_PAGE, len(notes))
        st.caption(f"Notes {start + 1:,} to {stop:,} of {len(notes):,}; pick another page above for the rest.")
    for note in notes[page * NOTES_PAGE:(page + 1) * NOTES_PAGE]:
        st.markdown(note_text(note))
        st.caption(f"{escape.line(note.author)} · {review.format_time(note.updated_at)} · revision {note.revision}")
        if opened.writable:
            with st.expander("Edit or delete", icon=":material/edit:"):
                _edit_form(opened, note)


def file_panel(where: str, episode: model.Episode, step: int, path: str) -> None:
    """The notes on one file at one step, a form to add one about it, and the steps where it has other notes."""
    _start()
    problem()
    opened = store()
    key = review.run_key(where)
    notes = [n for n in find(key, episode_id=episode.episode_id) if n.path == path]
    _show_notes(opened, [n for n in notes if n.step == step], f"review.file_notes_page.{step}")
    elsewhere = sorted({n.step for n in notes if n.step != step})
    if elsewhere:
        st.caption(f"Notes on this file at {len(elsewhere)} other step(s):")
        cols = st.columns(6)
        for i, other in enumerate(elsewhere):
            cols[i % 6].button(f"step {other}", key=f"review.file.goto.{other}", on_click=state.update,
                               kwargs={"step": other, "old": None})
    if opened.writable:
        author_input()
        _add_form(opened, key, episode, step, sorted({n.label for n in find(key) if n.label}), path=path,
                  prefix="review.file_add")


def restore_deleted(opened: review.ReviewStore, deleted: pd.DataFrame) -> None:
    """Pick a deleted note (``deleted``: rows of ``ReviewStore.notes``) and bring it back."""
    _start()
    if not len(deleted) or not opened.writable:
        return
    names = {r["note_id"]: note_name(r) for _, r in deleted.iterrows()}
    with st.expander(f"Restore a deleted note ({len(deleted)} deleted)", icon=":material/restore_from_trash:"):
        chosen = st.selectbox("Deleted note", list(names), format_func=names.__getitem__, key="review.restore_pick")
        if not st.button("Restore", key="review.restore", icon=":material/restore:") or chosen is None:
            return
        revision = int(deleted.loc[deleted["note_id"] == chosen, "revision"].iloc[0])
        try:
            opened.restore(chosen, revision=revision, author=_author())
        except (review.ConflictError, ValueError, KeyError, review.ReviewError) as exc:
            st.error(escape.md(exc))
            return
        _done("Note restored: it shows on its step again.", {"review.restore_pick": None})


def step_panel(where: str, episode: model.Episode, k: int) -> None:
    """The notes and labels on step ``k``, forms to add, edit and delete them, and the episode's labelled steps."""
    st.markdown("#### Review notes")
    _start()
    problem()
    opened = store()
    key = review.run_key(where)
    notes = find(key, episode_id=episode.episode_id)
    last = len(episode.steps) - 1
    _show_notes(opened, [n for n in notes if n.step == k], f"review.notes_page.{k}")
    if opened.writable:
        author_input()
        _add_form(opened, key, episode, k, sorted({n.label for n in find(key) if n.label}))
    by_step: dict[int, list[str]] = {}
    for note in notes:
        by_step.setdefault(note.step, [])
        if note.label and note.label not in by_step[note.step]:
            by_step[note.step].append(note.label)
    orphans = sorted(s for s in by_step if s > last)
    if orphans:
        st.warning(f"Notes on step(s) {', '.join(map(str, orphans))}, which this episode does not have (it has "
                   f"steps 0..{last}): they are kept and listed on the Review page as orphaned.")
    marked = {s: names for s, names in by_step.items() if names and s <= last}
    if marked:
        names = sorted({n for v in marked.values() for n in v})
        chosen = st.multiselect("Labelled steps of this episode", names, key="review.step_filter",
                                placeholder="any label")
        cols = st.columns(6)
        shown = [s for s in sorted(marked) if not chosen or set(chosen) & set(marked[s])]
        for i, s in enumerate(shown):
            cols[i % 6].button(f"step {s}: {escape.line(', '.join(marked[s]))}", key=f"review.goto.{s}",
                               disabled=s == k,
                               on_click=state.update, kwargs={"step": s})
