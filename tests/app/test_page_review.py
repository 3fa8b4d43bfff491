"""Review notes in AppTest: the step view's panel, labels on the timeline and in the episode table, the Review page."""

from __future__ import annotations

import json
import sqlite3

import page_text
import pytest

from ares_viewer import review
from ares_viewer_app.panels import review_panel


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "review.sqlite"
    monkeypatch.setenv(review.DB_ENV, str(path))
    return path


def run_location(runs, run="run-a") -> str:
    return runs["root"]["path"] + "/" + run


def open_step(app, runs, label="failed", step=3):
    return app("episode", run="run-a", episode=runs["run-a"][label], step=str(step))


def submit(at, prefix: str):
    next(b for b in at.button if b.label.startswith(prefix)).click().run()
    return at


def add(at, *, label="", text="", author="Ada"):
    at.text_input(key="review.author").input(author).run()
    at.text_input(key="review.add_label").input(label)
    at.text_area(key="review.add_text").input(text)
    return submit(at, "Add to step")


def timeline_labels(at) -> list[str]:
    """The review labels the step timeline marks above their steps (its drawing, as the page sends it)."""
    import html
    import re

    [chart] = [e for e in at.get("bidi_component") if e.proto.component_name == "ares_viewer.step_timeline"]
    return [html.unescape(text) for text in re.findall(r">▼ ([^<]*)</text>", json.loads(chart.proto.json)["svg"])]


def test_a_label_added_in_the_step_view_is_stored_shown_and_on_the_timeline(runs, app, db):
    at = open_step(app, runs)
    assert timeline_labels(at) == []
    add(at, label="edits the tests", text="rewrites tests/test_core.py to pass")
    assert not at.exception
    assert any("Added to step 3" in s.value for s in at.success)
    shown = page_text.of(at)
    assert ":orange-badge[edits the tests] rewrites tests/test_core.py to pass" in shown
    assert "Ada · " in shown and "revision 1" in shown
    assert timeline_labels(at) == ["edits the tests"]
    assert at.text_input(key="review.add_label").value == ""  # the form is ready for the next note
    (note,) = review.open_store(db).find(run_location(runs), episode_id=runs["run-a"]["failed"])
    assert (note.step, note.label, note.author) == (3, "edits the tests", "Ada")
    # The labelled step is listed under the panel; from another step its button goes back there.
    at.button(key="episode_next").click().run()
    at.button(key="review.goto.3").click().run()
    assert at.query_params["step"] == "3"


def test_a_note_without_author_is_refused_and_keeps_its_text(runs, app, db):
    at = open_step(app, runs)
    add(at, text="the model misreads the traceback", author="")
    assert any("needs an author" in e.value for e in at.error)
    assert at.text_area(key="review.add_text").value == "the model misreads the traceback"
    assert review.open_store(db).find(run_location(runs)) == []


def test_edit_delete_and_a_conflicting_edit(runs, app, db):
    store = review.open_store(db)
    note = store.add(run_location(runs), runs["run-a"]["failed"], 3, author="Bob", label="misreads the error")
    at = open_step(app, runs)
    at.text_input(key="review.author").input("Ada").run()
    at.text_area(key=f"review.edit.{note.note_id}.text").input("reads rc 1 as success")
    submit(at, "Save")
    assert any("Note saved" in s.value for s in at.success)
    assert store.get(note.note_id).text == "reads rc 1 as success" and store.get(note.note_id).author == "Ada"

    # Someone else saves while Ada's form is open: her next save is refused, nothing is overwritten.
    store.edit(note.note_id, revision=2, author="Bob", label="misreads the error", text="Bob's version")
    at.text_area(key=f"review.edit.{note.note_id}.text").input("Ada's second version")
    submit(at, "Save")
    assert any("Not saved: this note was changed by Bob" in page_text.shown(e.value) for e in at.error)
    assert store.get(note.note_id).text == "Bob's version"
    at.button(key=f"review.edit.{note.note_id}.reload").click().run()
    assert at.text_area(key=f"review.edit.{note.note_id}.text").value == "Bob's version"

    submit(at, "Delete")
    assert any("Note deleted" in s.value for s in at.success)
    assert store.find(run_location(runs)) == []
    assert list(store.history(note.note_id)["deleted"]) == [False, False, False, True]
    assert timeline_labels(at) == []


def test_labels_column_and_label_filter_on_the_overview(runs, app, db):
    store = review.open_store(db)
    store.add(run_location(runs), runs["run-a"]["solved"], 2, author="Ada", label="reward hacking")
    store.add(run_location(runs), runs["run-a"]["solved"], 4, author="Bob", label="edits the tests")
    store.add(run_location(runs), runs["run-a"]["failed"], 1, author="Bob", label="edits the tests")
    at = app()
    table = at.dataframe(key="overview.table").value
    labels = dict(zip(table["episode_id"], table["labels"], strict=True))
    assert labels[runs["run-a"]["solved"]] == "edits the tests, reward hacking"
    assert labels[runs["run-a"]["truncated"]] == ""
    at.multiselect(key="overview.labels").select("reward hacking").run()
    assert "1 of 5 episodes" in page_text.of(at)
    at.multiselect(key="overview.labels").select("edits the tests").run()
    assert "2 of 5 episodes" in page_text.of(at)


def test_review_page_lists_notes_with_links_orphans_and_filters(runs, app, db):
    store = review.open_store(db)
    where = run_location(runs)
    store.add(where, runs["run-a"]["failed"], 3, author="Ada", label="edits the tests", text="rewrites the test")
    store.add(where, runs["run-a"]["solved"], 2, author="Bob", text="a clean fix")
    store.add(where, runs["run-a"]["solved"], 99, author="Bob", label="late", text="step beyond the end")
    store.add(where, "0000dead-0000-4000-8000-000000000000", 1, author="Bob", label="gone", text="file removed")
    store.add(runs["root"]["path"] + "/run-b", runs["run-b"]["solved"], 1, author="Cy", text="other run")
    at = app("review", run="run-a")
    assert not at.exception
    shown = page_text.of(at)
    assert "4 of 4 notes · 2 orphaned" in shown
    assert "other run" not in shown
    assert "orphaned: step beyond the end (the episode has steps 0..5)" in shown
    assert "orphaned: episode not in this run" in shown
    links = list(at.get("page_link"))
    assert len(links) == 2
    failed_link = next(e.proto for e in links if "step 3" in e.proto.label)
    assert f"episode={runs['run-a']['failed']}" in failed_link.query_string and "step=3" in failed_link.query_string
    assert "edits the tests: rewrites the test" in page_text.shown(failed_link.label)
    at.multiselect(key="review.labels").select("edits the tests").run()
    assert "1 of 4 notes" in page_text.of(at)
    at.multiselect(key="review.labels").unselect("edits the tests").run()
    at.toggle(key="review.orphaned").set_value(True).run()
    assert "2 of 4 notes" in page_text.of(at)
    download = at.get("download_button")
    assert download and "Download 0 step(s)" in download[0].proto.label  # orphans have no prompt to export


def test_a_deleted_note_is_restored_from_the_review_page(runs, app, db):
    store = review.open_store(db)
    note = store.add(run_location(runs), runs["run-a"]["failed"], 3, author="Bob", label="reward hacking",
                     text="deletes the failing assertion")
    store.delete(note.note_id, revision=1, author="Bob")
    at = app("review", run="run-a")
    assert "No notes on this run yet" in page_text.of(at)  # a deleted note is hidden unless asked for
    at.toggle(key="review.deleted").set_value(True).run()
    at.text_input(key="review.author").input("Ada").run()
    assert at.selectbox(key="review.restore_pick").value == note.note_id
    at.button(key="review.restore").click().run()
    assert not at.exception
    assert any("Note restored" in s.value for s in at.success)
    restored = store.get(note.note_id)
    assert not restored.deleted and restored.revision == 3 and restored.author == "Ada"
    assert list(store.history(note.note_id)["deleted"]) == [False, True, False]
    # Back on its step: on the timeline and in the step's panel again.
    step = open_step(app, runs)
    assert timeline_labels(step) == ["reward hacking"]
    assert ":orange-badge[reward hacking] deletes the failing assertion" in page_text.of(step)


def test_author_is_remembered_across_pages(runs, app, db):
    at = open_step(app, runs)
    at.text_input(key="review.author").input("Ada Lovelace").run()
    at.switch_page("views/review/review.py").run()
    assert at.text_input(key="review.author").value == "Ada Lovelace"
    at.switch_page("views/episode/episode.py").run()
    assert at.text_input(key="review.author").value == "Ada Lovelace"


def test_a_damaged_database_warns_and_every_page_still_renders(runs, app, db):
    db.write_bytes(b"not a database at all\x00" * 200)
    for page in ("overview", "episode", "review"):
        at = app(page, run="run-a", episode=runs["run-a"]["failed"], step="3")
        assert not at.exception, page
        assert any("damaged or is not an SQLite database" in w.value for w in at.warning), page
    assert "Prompt: new since the previous call" in page_text.of(app("episode", run="run-a", step="3"))
    assert "5 of 5 episodes" in page_text.of(app("overview", run="run-a"))
    at = app("episode", run="run-a", episode=runs["run-a"]["failed"], step="3")
    assert not [b for b in at.button if b.label.startswith("Add to step")]  # read-only: no form to lose text in


def test_a_locked_database_refuses_the_write_with_a_message(runs, app, db):
    review.open_store(db).add(run_location(runs), runs["run-a"]["failed"], 3, author="Bob", label="seen before")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        at = open_step(app, runs)
        assert ":orange-badge[seen before]" in page_text.of(at)  # reading still works
        add(at, label="during the lock")
        assert not at.exception
        assert any("locked by another program" in e.value for e in at.error)
        assert at.text_input(key="review.add_label").value == "during the lock"
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_database_locked_even_for_readers_says_so_and_shows_the_notes_once_released(runs, app, db, monkeypatch):
    # The app waits 5 s for a lock at each try; a short wait keeps the test quick and changes nothing else.
    monkeypatch.setattr(review_panel, "_TIMEOUT", 0.3)
    with review.open_store(db) as store:
        store.add(run_location(runs), runs["run-a"]["failed"], 3, author="Bob", label="seen before")
    # Another program's EXCLUSIVE lock in rollback-journal mode keeps readers out as well as writers.
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        step = open_step(app, runs)
        assert not step.exception
        assert "Prompt: new since the previous call" in page_text.of(step)  # the step view still works
        assert any("locked by another program" in w.value for w in step.warning)
        assert not [b for b in step.button if b.label.startswith("Add to step")]
        at = app("review", run="run-a")
        assert not at.exception
        assert any("locked by another program" in w.value and "notes cannot be shown" in w.value for w in at.warning)
        assert "No notes on this run yet" not in page_text.of(at)  # it does not know: it says so instead
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    at.run()  # the next run opens the database again
    assert not at.warning
    assert "1 of 1 notes" in page_text.of(at)


def test_the_label_picker_offers_the_runs_labels(runs, app, db):
    store = review.open_store(db)
    store.add(run_location(runs), runs["run-a"]["solved"], 2, author="Bob", label="reward hacking")
    store.add(run_location(runs), runs["run-a"]["solved"], 4, author="Bob", label="edits the tests")
    at = open_step(app, runs)
    pills = at.button_group(key="review.add_labels")
    assert [getattr(o, "content", o) for o in pills.options] == ["edits the tests", "reward hacking"]
    assert "keys 1–9 pick them" in pills.label
    at.text_input(key="review.author").input("Ada").run()
    at.button_group(key="review.add_labels").set_value("reward hacking")
    submit(at, "Add to step")
    [note] = store.find(run_location(runs), episode_id=runs["run-a"]["failed"])
    assert (note.step, note.label, note.author) == (3, "reward hacking", "Ada")
    assert at.button_group(key="review.add_labels").value is None  # ready for the next note


def test_review_table_has_one_step_column_and_blanks_for_what_a_note_lacks(runs, app, db):
    """The link to a note's step is not headed "step" beside the step number; a note without a label or a file
    shows blanks there, not "None"."""
    store = review.open_store(db)
    store.add(run_location(runs), runs["run-a"]["solved"], 2, author="Bob", text="a clean fix")
    at = app("review", run="run-a")
    element = at.dataframe[0]  # the notes table (the history of a note is folded away)
    config = json.loads(element.proto.columns)
    headers = [config.get(name, {}).get("label", name) for name in element.value.columns]
    assert headers.count("step") == 1
    [row] = element.value.to_dict("records")
    assert (row["step"], row["label"], row["path"], row["text"]) == (2, "", "", "a clean fix")


def test_a_note_without_a_label_reads_note_not_nan_and_deleted_notes_say_so(runs, app, db):
    store = review.open_store(db)
    where = run_location(runs)
    store.add(where, runs["run-a"]["solved"], 2, author="Bob", text="plain note, no label")
    gone = store.add(where, runs["run-a"]["failed"], 3, author="Bob", label="reward hacking", text="was wrong")
    store.delete(gone.note_id, revision=1, author="Bob")
    store.add(where, runs["run-a"]["solved"], 99, author="Bob", text="beyond the end")
    at = app("review", run="run-a")
    labels = [page_text.shown(e.proto.label) for e in at.get("page_link")]
    assert [x for x in labels if "step 2" in x] == [f"calc__calc-1 · {runs['run-a']['solved'][:8]} · step 2 — "
                                                     "note: plain note, no label"]
    assert "nan" not in page_text.of(at) and not any("nan" in x for x in labels)
    assert at.selectbox(key="review.history").format_func(at.selectbox(key="review.history").value) != ""
    assert not any("nan" in o for o in at.selectbox(key="review.history").options)
    # Deleted notes, once asked for, are marked as deleted: in the links, the status column and the pickers.
    at.toggle(key="review.deleted").set_value(True).run()
    labels = [page_text.shown(e.proto.label) for e in at.get("page_link")]
    assert [x for x in labels if "step 3" in x] == [f"deleted · calc__calc-1 · {runs['run-a']['failed'][:8]} · "
                                                     "step 3 — reward hacking: was wrong"]
    statuses = dict(zip(at.dataframe[0].value["text"], at.dataframe[0].value["status"], strict=True))
    assert statuses["was wrong"] == "deleted" and statuses["plain note, no label"] == "ok"
    assert statuses["beyond the end"] == "step beyond the end (the episode has steps 0..5)"
    at.text_input(key="review.author").input("Ada").run()
    assert at.selectbox(key="review.restore_pick").options == [
        f"step 3 of {runs['run-a']['failed'][:8]} · reward hacking · was wrong · deleted"]


def test_labels_in_the_picker_show_as_typed_not_as_markdown(runs, app, db):
    store = review.open_store(db)
    store.add(run_location(runs), runs["run-a"]["solved"], 2, author="Bob", label="**reward hacking** $x^2$")
    at = open_step(app, runs)
    pills = at.button_group(key="review.add_labels")
    [option] = [getattr(o, "content", o) for o in pills.options]
    assert page_text.shown(option) == "**reward hacking** $x^2$"
    assert option != "**reward hacking** $x^2$"  # escaped, so neither bold nor maths
    at.text_input(key="review.author").input("Ada").run()
    at.button_group(key="review.add_labels").set_value("**reward hacking** $x^2$")
    submit(at, "Add to step")
    [note] = store.find(run_location(runs), episode_id=runs["run-a"]["failed"])
    assert note.label == "**reward hacking** $x^2$"  # stored as typed
