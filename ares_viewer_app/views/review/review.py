"""Review: every note and label of the run, filters, links to their steps, history, and exports with exact prompts."""

from __future__ import annotations

import pathlib

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer import review
from ares_viewer.model import render
from ares_viewer_app.panels import choosers, review_panel, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape

# Links listed under the table; the table itself holds every note.
_LINKS = 200


def filtered(frame: pd.DataFrame) -> pd.DataFrame:
    """The notes that pass the filters above the table."""
    cols = st.columns([3, 2, 3, 2])
    labels = cols[0].multiselect("Label", sorted(frame["label"].dropna().unique()), key="review.labels")
    authors = cols[1].multiselect("Author", sorted(frame["author"].unique()), key="review.authors")
    text = cols[2].text_input("Contains", key="review.text", placeholder="note text, episode id or task")
    orphaned_only = cols[3].toggle("Orphaned only", key="review.orphaned")
    keep = pd.Series(True, index=frame.index)
    if labels:
        keep &= frame["label"].isin(labels)
    if authors:
        keep &= frame["author"].isin(authors)
    if text:
        haystack = frame["text"] + " " + frame["episode_id"] + " " + frame["task_name"].fillna("")
        keep &= haystack.str.contains(text, case=False, regex=False)
    if orphaned_only:
        keep &= frame["orphaned"].notna()
    return frame[keep]


def link(row: pd.Series) -> str:
    """A deep link to a note's step (relative, so it works under any base URL)."""
    return state.link("episode", episode=row["episode_id"], step=int(row["step"]))


def status(row: pd.Series) -> str:
    """What the table's status column says of a note: deleted, orphaned (and why) or ok."""
    orphaned = row["orphaned"] if isinstance(row["orphaned"], str) else ""
    return ", ".join(filter(None, ["deleted" if row["deleted"] else "", orphaned])) or "ok"


def table(shown: pd.DataFrame) -> None:
    # A note without a label or a file shows blanks there, not the unknown mark: there is none.
    view = shown.assign(open=shown.apply(link, axis=1) if len(shown) else pd.Series(dtype="object"),
                        status=shown.apply(status, axis=1) if len(shown) else pd.Series(dtype="object"),
                        label=shown["label"].fillna(""), path=shown["path"].fillna(""))
    tables.table(
        view[["open", "task_name", "episode_id", "step", "label", "text", "path", "author", "updated_at", "revision",
              "status"]],
        hide_index=True, key="review.table",
        column_config={"open": st.column_config.LinkColumn("link", display_text="open"),
                       "task_name": "task", "episode_id": "episode", "updated_at": "updated (UTC)"},
    )


def links(shown: pd.DataFrame) -> None:
    for _, row in shown.head(_LINKS).iterrows():
        label = f"{row['task_name'] or '?'} · {render.short_id(row['episode_id'])} · step {row['step']}"
        if isinstance(row["orphaned"], str):
            badges = [escape.badge("gray", "deleted")] if row["deleted"] else []
            badges.append(escape.badge("red", f"orphaned: {row['orphaned']}"))
            st.markdown(f"{' '.join(badges)} {escape.line(label)} — {review_panel.note_text(_note(row))}")
            continue
        # A deleted note (shown with "Show deleted notes") says so and links its step with a bin, not an arrow.
        deleted = "deleted · " if row["deleted"] else ""
        st.page_link(pages.path("episode"), icon=":material/delete:" if row["deleted"] else ":material/arrow_forward:",
                     label=escape.line(f"{deleted}{label} — {review_panel.row_label(row) or 'note'}: "
                                       f"{row['text'][:80]}"),
                     query_params=state.params(episode=row["episode_id"], step=int(row["step"])))
    if len(shown) > _LINKS:
        st.caption(f"The first {_LINKS} of {len(shown)} notes are linked here; the table holds them all.")


def _note(row: pd.Series) -> review.Note:
    # The frame holds NaN for a missing label or file: truthy, so it would show as "nan".
    path = row["path"] if isinstance(row["path"], str) else None
    return review.Note(row["note_id"], row["run"], row["episode_id"], int(row["step"]), path,
                       review_panel.row_label(row) or None,
                       row["text"], row["author"], 0.0, int(row["revision"]), bool(row["deleted"]), "", 0.0)


def history(opened: review.ReviewStore, shown: pd.DataFrame) -> None:
    options = list(shown["note_id"])
    if not options:
        return
    names = {r["note_id"]: review_panel.note_name(r) for _, r in shown.iterrows()}
    with st.expander("History of a note", icon=":material/history:"):
        chosen = st.selectbox("Note", options, format_func=names.__getitem__, key="review.history")
        if chosen is not None:
            tables.table(opened.history(chosen)[["revision", "label", "text", "author", "updated_at", "deleted"]],
                         hide_index=True)


def export(run, opened: review.ReviewStore, shown: pd.DataFrame) -> None:
    st.subheader("Export")
    steps = list(dict.fromkeys(zip(shown["episode_id"], shown["step"].astype(int), strict=True)))
    st.caption("One record per step: its labels and notes, the system prompt and the exact messages the model "
               "answered (the file's own dicts), and the response. The steps of the notes shown above.")
    formats = ["JSONL", "Parquet"] if review.parquet_available() else ["JSONL"]
    fmt = st.radio("Format", formats, horizontal=True, key="review.format")
    if not review.parquet_available():
        st.caption("Parquet needs pyarrow: `pip install 'ares-viewer[parquet]'`.")
    kind = fmt.lower()

    def data() -> bytes:
        return review.export_bytes(review.export_records(run, opened, steps=steps), kind)

    name = pathlib.PurePath(run.location.rstrip("/")).name or "run"
    st.download_button(f"Download {len(steps)} step(s) as {fmt}", data=data, file_name=f"review-{name}.{kind}",
                       icon=":material/download:", key="review.download", disabled=not steps, on_click="ignore")


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``: the review notes and labels on its steps."""
    opened = review_panel.store()
    key = review.run_key(run.location)
    st.caption(f"Notes and labels on the steps of {escape.code(key)} · database {escape.code(opened.path)}")
    review_panel.problem()
    review_panel.author_input()
    show_deleted = st.toggle("Show deleted notes", key="review.deleted")
    try:
        notes = opened.notes(key, include_deleted=show_deleted)
    except review.ReviewError as exc:  # e.g. a lock that keeps readers out: say so, not "no notes yet"
        st.warning(escape.md(exc), icon=":material/lock:")
        return
    # The noted episodes' tasks, looked up by id: a run's table is never loaded for its notes.
    tasks = {i: r["task_name"] for i, r in choosers.episode_rows(run, sorted(set(notes["episode_id"]))).items()}
    notes = review.with_status(notes, run).assign(task_name=lambda f: f["episode_id"].map(tasks))
    if not len(notes):
        st.info("No notes on this run yet. Open a step (Episode page) and add a label or a note under it.")
        return
    shown = filtered(notes)
    orphans = int(notes["orphaned"].notna().sum())
    st.caption(f"{len(shown)} of {len(notes)} notes" + (f" · {orphans} orphaned (their step is gone; kept)"
                                                         if orphans else ""))
    table(shown)
    links(shown)
    history(opened, shown)
    if show_deleted:
        review_panel.restore_deleted(opened, shown[shown["deleted"]])
    export(run, opened, shown[shown["orphaned"].isna() & ~shown["deleted"]])


run = choosers.current_run()
st.title("Review")
show(run)
