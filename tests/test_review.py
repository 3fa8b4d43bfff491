"""Review notes and labels: the SQLite store, its history and conflicts, orphans, damage, locks and exports."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import sqlite3
import sys

import pytest

import ares_viewer
from ares_viewer import cli, review
from ares_viewer.analysis import plots
from testdata import synthetic


@pytest.fixture
def run_dir(tmp_path):
    folder = tmp_path / "runs" / "rl-run-7"
    folder.mkdir(parents=True)
    for seed, reward in ((1, 0.0), (2, 1.0)):
        synthetic.write_episode(folder, synthetic.episode_dict(task_name="calc__calc-1", actions=5, reward=reward,
                                                               seed=seed))
    return folder


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "review" / "notes.sqlite"
    monkeypatch.setenv(review.DB_ENV, str(path))
    return path


def snapshot(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_add_edit_delete_keeps_every_revision(run_dir, db):
    run = ares_viewer.open_run(run_dir)
    episode_id = run.episode_ids[0]
    before = snapshot(run_dir)
    with review.open_store() as store:
        assert store.path == db and store.writable
        note = store.add(run, episode_id, 3, author="ada", label="edits the tests", text="rewrites test_core.py")
        store.add(run, episode_id, 4, author="bob", text="misreads the traceback")
        edited = store.edit(note.note_id, revision=1, author="bob", label="reward hacking",
                            text="deletes the failing assertion")
        assert edited.revision == 2 and edited.author == "bob" and edited.created_by == "ada"
        store.delete(note.note_id, revision=2, author="ada")

        live = store.notes(run)
        assert list(live["text"]) == ["misreads the traceback"]
        assert store.labels(run) == []  # the only label is on a deleted note
        everything = store.notes(run, include_deleted=True)
        assert len(everything) == 2 and everything.loc[everything["deleted"], "revision"].item() == 3
        history = store.history(note.note_id)
        assert list(history["revision"]) == [1, 2, 3]
        assert list(history["label"]) == ["edits the tests", "reward hacking", "reward hacking"]
        assert list(history["author"]) == ["ada", "bob", "ada"] and list(history["deleted"]) == [False, False, True]
        assert str(history["updated_at"].dtype) == "datetime64[ns, UTC]"
    assert snapshot(run_dir) == before  # nothing is written into the run folder
    assert not any(p.suffix.startswith(".sqlite") for p in run_dir.iterdir())


def test_a_stale_edit_is_refused_and_the_other_edit_survives(run_dir, db):
    store = review.open_store()
    note = store.add(str(run_dir), "ep-1", 2, author="ada", text="first look")
    store.edit(note.note_id, revision=1, author="bob", text="bob's reading")
    with pytest.raises(review.ConflictError, match=r"changed by bob .*\(now revision 2\)"):
        store.edit(note.note_id, revision=1, author="cy", text="cy's reading, based on the old text")
    with pytest.raises(review.ConflictError):
        store.delete(note.note_id, revision=1, author="cy")
    assert store.get(note.note_id).text == "bob's reading"
    assert len(store.history(note.note_id)) == 2


def test_an_edit_changes_only_what_it_names_and_removing_a_label_is_explicit(run_dir, db):
    store = review.open_store()
    note = store.add(str(run_dir), "ep-1", 2, author="ada", label="reward hacking", text="first look")
    # As docs/review.md shows it: a new text, the label left out, so kept.
    edited = store.edit(note.note_id, revision=note.revision, author="ada", text="deletes the failing assertion")
    assert (edited.label, edited.text, edited.revision) == ("reward hacking", "deletes the failing assertion", 2)
    relabelled = store.edit(note.note_id, revision=2, author="bob", label="edits the tests")
    assert (relabelled.label, relabelled.text) == ("edits the tests", "deletes the failing assertion")
    unlabelled = store.edit(note.note_id, revision=3, author="bob", label="")
    assert (unlabelled.label, unlabelled.text) == (None, "deletes the failing assertion")
    with pytest.raises(ValueError, match="a label or some text"):
        store.edit(note.note_id, revision=4, author="bob", text="")  # nothing would be left
    assert list(store.history(note.note_id)["label"].fillna("")) == [
        "reward hacking", "reward hacking", "edits the tests", ""]


def test_a_deleted_note_can_be_restored_and_its_history_keeps_both(run_dir, db):
    store = review.open_store()
    note = store.add(str(run_dir), "ep-1", 2, author="ada", label="reward hacking", text="skips the test")
    store.delete(note.note_id, revision=1, author="bob")
    assert store.labels(str(run_dir)) == []
    with pytest.raises(review.ConflictError):  # based on the revision before the deletion
        store.restore(note.note_id, revision=1, author="cy")
    restored = store.restore(note.note_id, revision=2, author="cy")
    assert (restored.deleted, restored.revision, restored.label, restored.text) == (
        False, 3, "reward hacking", "skips the test")
    assert store.labels(str(run_dir)) == ["reward hacking"]
    assert store.step_labels(str(run_dir), "ep-1") == {2: ["reward hacking"]}
    history = store.history(note.note_id)
    assert list(history["deleted"]) == [False, True, False] and list(history["author"]) == ["ada", "bob", "cy"]
    with pytest.raises(ValueError, match="not deleted"):
        store.restore(note.note_id, revision=3, author="cy")
    reader = review.open_store(read_only=True)
    store.delete(note.note_id, revision=3, author="bob")
    with pytest.raises(review.ReviewError, match="read-only"):
        reader.restore(note.note_id, revision=4, author="cy")
    assert store.get(note.note_id).deleted


def test_a_label_typed_in_another_case_takes_the_runs_spelling(run_dir, db):
    store = review.open_store()
    store.add(str(run_dir), "ep-1", 1, author="ada", label="reward hacking")
    second = store.add(str(run_dir), "ep-2", 3, author="bob", label="Reward  Hacking", text="same thing")
    assert second.label == "reward hacking"
    assert store.labels(str(run_dir)) == ["reward hacking"]
    assert len(store.find(str(run_dir), labels=["REWARD HACKING"])) == 2
    other = store.add(str(run_dir) + "-other", "ep-9", 1, author="cy", label="Reward hacking")
    assert other.label == "Reward hacking"  # another run keeps its own spelling
    edited = store.edit(second.note_id, revision=1, author="bob", label="REWARD HACKING", text="again")
    assert edited.label == "reward hacking"


def test_a_non_ascii_label_typed_in_another_case_takes_the_runs_spelling_and_filters(run_dir, db):
    # SQLite's lower() folds ASCII only: it leaves "É" and "é" apart, so these would be two labels.
    store = review.open_store()
    run = ares_viewer.open_run(run_dir)
    a, b = run.episode_ids
    store.add(run_dir, a, 2, author="ada", label="édite les tests")
    second = store.add(run_dir, b, 4, author="bob", label="ÉDITE LES TESTS", text="réécrit l'assertion")
    assert second.label == "édite les tests"
    assert store.labels(run_dir) == ["édite les tests"]
    edited = store.edit(second.note_id, revision=1, author="bob", label="Édite les tests", text="encore")
    assert edited.label == "édite les tests"
    found = store.notes(run_dir, labels=["ÉDITE LES TESTS"])
    assert sorted(zip(found["episode_id"], found["step"], strict=True)) == sorted([(a, 2), (b, 4)])
    # A read-only store (the CLI's) compares the same way; so does an export by label.
    reader = review.open_store(read_only=True)
    assert len(reader.find(run_dir, labels=["Édite Les Tests"])) == 2
    exported = list(review.export_records(run, reader, labels=["ÉDITE les tests"]))
    assert sorted((r["episode_id"], r["step"], tuple(r["labels"])) for r in exported) == sorted(
        [(a, 2, ("édite les tests",)), (b, 4, ("édite les tests",))])


def test_one_label_in_two_unicode_forms_or_stored_in_two_spellings_is_listed_once(run_dir, db):
    store = review.open_store()
    a, b = ares_viewer.open_run(run_dir).episode_ids
    store.add(run_dir, a, 2, author="ada", label="édite les tests")  # é as one character
    decomposed = store.add(run_dir, b, 4, author="bob", label="e\u0301dite les tests")  # e + combining accent
    assert decomposed.label == "édite les tests"
    # A database written before labels were compared this way can hold two spellings of one label.
    with sqlite3.connect(db) as raw:  # (and, written before schema 3, had no trigger keeping its history as it is)
        raw.execute("DROP TRIGGER revisions_append_only_update")
        raw.execute("UPDATE revisions SET label = 'ÉDITE LES TESTS' WHERE note_id = ?", (decomposed.note_id,))
    assert {n.label for n in store.find(run_dir)} == {"édite les tests", "ÉDITE LES TESTS"}
    assert store.labels(run_dir) == ["édite les tests"]  # listed once, in the first spelling
    assert store.step_labels(run_dir, b) == {4: ["édite les tests"]}
    assert store.episode_labels(run_dir) == {a: ["édite les tests"], b: ["édite les tests"]}
    assert len(store.find(run_dir, labels=["édite les tests"])) == 2


def test_labels_filter_and_step_labels(run_dir, db):
    store = review.open_store()
    a, b = ares_viewer.open_run(run_dir).episode_ids
    store.add(run_dir, a, 2, author="ada", label="reward hacking")
    store.add(run_dir, a, 2, author="bob", label="edits the tests", text="also this")
    store.add(run_dir, b, 4, author="ada", label="edits the tests")
    store.add(run_dir, b, 1, author="ada", text="plain note")
    assert store.labels(run_dir) == ["edits the tests", "reward hacking"]
    assert store.step_labels(run_dir, a) == {2: ["reward hacking", "edits the tests"]}
    assert store.episode_labels(run_dir) == {a: ["edits the tests", "reward hacking"], b: ["edits the tests"]}
    hacked = store.notes(run_dir, labels=["edits the tests"])
    assert sorted(zip(hacked["episode_id"], hacked["step"], strict=True)) == sorted([(a, 2), (b, 4)])
    with pytest.raises(ValueError, match="author"):
        store.add(run_dir, a, 1, author="  ", text="anonymous")
    with pytest.raises(ValueError, match="label or some text"):
        store.add(run_dir, a, 1, author="ada", label=" ", text="")


def test_run_key_is_the_resolved_location(run_dir, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    key = review.run_key(run_dir)
    assert key == str(run_dir.resolve())
    assert review.run_key("runs/rl-run-7/") == key
    os.symlink(run_dir, tmp_path / "latest")
    assert review.run_key(tmp_path / "latest") == key
    assert review.run_key("s3://bucket/runs/7/") == "s3://bucket/runs/7"
    assert review.run_key(ares_viewer.open_run(run_dir)) == key


def test_default_database_sits_beside_the_index_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(review.DB_ENV, raising=False)
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    assert review.db_path() == tmp_path / "cache" / "review.sqlite"
    monkeypatch.setenv(review.DB_ENV, str(tmp_path / "team.sqlite"))
    assert review.db_path() == tmp_path / "team.sqlite"
    assert review.db_path(tmp_path / "explicit.sqlite") == tmp_path / "explicit.sqlite"


def _writer(path: str, name: str, count: int, shared: str, results) -> None:
    """One reviewer process: many new notes, and edits of one shared note that retry on conflicts."""
    store = review.open_store(path, timeout=30)
    saved = 0
    for i in range(count):
        label = f"label-{i % 3}" if name == "ada" else f"LABEL-{i % 3}"  # one label each, spelled two ways
        store.add("/runs/shared", f"ep-{i % 7}", i % 11, author=name, label=label, text=f"{name} #{i}")
        if i % 5 == 0:
            while True:
                current = store.get(shared)
                try:
                    store.edit(shared, revision=current.revision, author=name, text=f"{name} edit {i}")
                    saved += 1
                    break
                except review.ConflictError:
                    continue
    store.close()
    results.put((name, saved))


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "notes.sqlite")
    shared = review.open_store(path).add("/runs/shared", "ep-0", 0, author="lead", text="shared note")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    count = 150
    workers = [context.Process(target=_writer, args=(path, name, count, shared.note_id, results))
               for name in ("ada", "bob")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=180)
        assert worker.exitcode == 0
    saved = dict(results.get(timeout=5) for _ in workers)
    store = review.open_store(path)
    notes = store.notes("/runs/shared")
    assert len(notes) == 2 * count + 1
    added = notes[notes["note_id"] != shared.note_id]
    for name in ("ada", "bob"):
        assert set(added.loc[added["author"] == name, "text"]) == {f"{name} #{i}" for i in range(count)}
    # Both started with the same new labels in two spellings: each label still has one name.
    assert added["label"].nunique() == 3 and store.labels("/runs/shared") == sorted(set(added["label"]))
    history = store.history(shared.note_id)
    assert saved == {"ada": count // 5, "bob": count // 5}
    assert list(history["revision"]) == list(range(1, 2 + 2 * (count // 5)))  # no gap, no overwrite
    assert sorted(history["text"][1:]) == sorted(f"{n} edit {i}" for n in ("ada", "bob") for i in range(0, count, 5))


def test_a_new_label_added_in_two_spellings_at_the_same_moment_gets_one_name(tmp_path, monkeypatch):
    """Reviewer B adds "REWARD HACKING" while A's "reward hacking" is being saved: one label, A's spelling."""
    import threading

    path = str(tmp_path / "notes.sqlite")
    first, second = review.open_store(path, timeout=10), review.open_store(path, timeout=10)
    other: list = []
    real = review.store._spelling

    def spelling_while_another_reviewer_adds(db, run, label):
        if not other:  # A is saving: B adds the same new label in another spelling right now
            worker = threading.Thread(target=lambda: other.append(
                second.add("/runs/r", "ep-2", 3, author="bob", label="REWARD HACKING")))
            worker.start()
            worker.join(timeout=1)  # B waits for A's write to finish (or, if it could slip in, finishes now)
            other.append(worker)
        return real(db, run, label)

    monkeypatch.setattr(review.store, "_spelling", spelling_while_another_reviewer_adds)
    mine = first.add("/runs/r", "ep-1", 2, author="ada", label="reward hacking")
    other[-1].join(timeout=10)
    theirs = next(n for n in other if isinstance(n, review.Note))
    assert {mine.label, theirs.label} == {"reward hacking"}
    assert first.labels("/runs/r") == ["reward hacking"]


def test_notes_on_steps_that_no_longer_exist_are_kept_as_orphans(run_dir, db):
    run = ares_viewer.open_run(run_dir)
    episode_id = run.episode_ids[0]
    last = len(run.episode(episode_id).steps) - 1
    store = review.open_store()
    store.add(run, episode_id, 2, author="ada", label="ok step")
    store.add(run, episode_id, last + 5, author="ada", label="beyond", text="the file was rewritten shorter")
    store.add(run, "deleted-episode", 1, author="bob", label="gone", text="its file was removed")
    status = review.with_status(store.notes(run), run).set_index("label")["orphaned"]
    assert status["ok step"] is None
    assert status["beyond"] == f"step beyond the end (the episode has steps 0..{last})"
    assert status["gone"] == "episode not in this run"
    records = {r["labels"][0]: r for r in review.export_records(run, store)}
    assert records["gone"]["orphaned"] and records["gone"]["messages"] is None
    assert records["gone"]["notes"][0]["text"] == "its file was removed"  # exported, not dropped


def test_a_damaged_database_is_read_only_and_left_untouched(run_dir, db):
    db.parent.mkdir(parents=True)
    garbage = b"this is not sqlite\x00" * 300
    db.write_bytes(garbage)
    store = review.open_store()
    assert not store.writable
    assert "damaged or is not an SQLite database" in store.problem and str(db) in store.problem
    assert store.notes(run_dir).empty
    with pytest.raises(review.ReviewError, match="damaged"):
        store.add(run_dir, "ep", 1, author="ada", text="lost?")
    assert db.read_bytes() == garbage


def test_a_locked_database_refuses_writes_clearly_and_still_reads(run_dir, db):
    store = review.open_store(timeout=0.3)
    store.add(run_dir, "ep-1", 1, author="ada", label="before the lock")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(review.ReviewError, match="locked by another program"):
            store.add(run_dir, "ep-1", 2, author="ada", text="during the lock")
        assert list(store.notes(run_dir)["label"]) == ["before the lock"]  # reading still works (WAL)
        second = review.open_store(timeout=0.3)  # a new app session opens too
        assert list(second.notes(run_dir)["label"]) == ["before the lock"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.add(run_dir, "ep-1", 2, author="ada", text="after the lock")
    assert len(store.notes(run_dir)) == 2


def _lock_in_rollback_journal_mode(db, begin: str) -> sqlite3.Connection:
    """Another program's connection that takes the database out of WAL mode and holds a lock on it."""
    holder = sqlite3.connect(db, isolation_level=None)
    assert holder.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    holder.execute(begin)
    return holder


def test_a_rollback_journal_write_lock_refuses_writes_clearly_and_still_reads(run_dir, db):
    # A writer in rollback-journal mode holds a RESERVED lock: others still read, nobody else writes.
    with review.open_store() as store:
        store.add(run_dir, "ep-1", 1, author="ada", label="before the lock")
    holder = _lock_in_rollback_journal_mode(db, "BEGIN IMMEDIATE")
    try:
        store = review.open_store(timeout=0.3)
        assert not store.writable and "locked by another program" in store.problem
        with pytest.raises(review.ReviewError, match="locked by another program"):
            store.add(run_dir, "ep-1", 2, author="ada", text="during the lock")
        assert list(store.notes(run_dir)["label"]) == ["before the lock"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store = review.open_store(timeout=0.3)  # the app opens the store again on its next run
    store.add(run_dir, "ep-1", 2, author="ada", text="after the lock")
    assert len(store.notes(run_dir)) == 2


def test_an_exclusive_rollback_journal_lock_says_notes_cannot_be_read_until_released(run_dir, db):
    # An EXCLUSIVE lock in rollback-journal mode keeps readers out too: reads must say so, not show no notes.
    with review.open_store() as store:
        store.add(run_dir, "ep-1", 1, author="ada", label="before the lock")
    holder = _lock_in_rollback_journal_mode(db, "BEGIN EXCLUSIVE")
    try:
        store = review.open_store(timeout=0.3)
        assert not store.writable
        assert "locked by another program" in store.problem and "cannot be read either" in store.problem
        with pytest.raises(review.ReviewError, match="locked by another program"):
            store.add(run_dir, "ep-1", 2, author="ada", text="during the lock")
        with pytest.raises(review.ReviewError, match=r"locked by another program.*notes cannot be shown"):
            store.notes(run_dir)
        reader = review.open_store(read_only=True, timeout=0.3)  # the CLI's store
        assert "locked by another program" in reader.problem
        with pytest.raises(review.ReviewError, match="locked by another program"):
            reader.labels(run_dir)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # Released: the same stores read again; a store opened now writes.
    assert list(store.notes(run_dir)["label"]) == ["before the lock"]
    assert reader.labels(run_dir) == ["before the lock"]
    review.open_store(timeout=0.3).add(run_dir, "ep-1", 2, author="ada", text="after the lock")
    assert len(store.notes(run_dir)) == 2


def test_export_rebuilds_the_exact_model_input(run_dir, db, tmp_path):
    run = ares_viewer.open_run(run_dir)
    episode_id = run.episode_ids[0]
    episode = run.episode(episode_id)
    store = review.open_store()
    store.add(run, episode_id, 3, author="ada", label="reward hacking", text="edits the test")
    store.add(run, episode_id, 0, author="ada", label="reward hacking", text="the task invites it")
    store.add(run, episode_id, 4, author="bob", label="misreads the error")
    for suffix in (".jsonl", ".parquet"):
        out = tmp_path / f"marked{suffix}"
        assert review.write_export(review.export_records(run, store, labels=["reward hacking"]), out) == 2
        records = {r["step"]: r for r in review.read_export(out)}
        assert set(records) == {0, 3}
        three = records[3]
        assert three["messages"] == [m.to_dict() for m in episode.context(3)]
        assert three["system_prompt"] == episode.system_prompt
        assert three["response"] == episode.step(3).response
        assert (three["reward"], three["outcome"]) == (episode.total_reward, str(episode.outcome))
        assert three["labels"] == ["reward hacking"] and three["notes"][0]["text"] == "edits the test"
        assert records[0]["messages"] == [m.to_dict() for m in episode.context(1)] and records[0]["response"] is None
    # Byte for byte: the exported messages serialize exactly as the file's observation did.
    raw = json.loads(pathlib.Path(episode.path).read_text(encoding="utf-8"))
    assert json.dumps(records[3]["messages"]) == json.dumps(raw["steps"][2]["observation"]["messages"])


def test_parquet_without_pyarrow_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(review.ExportError, match=r"pip install 'ares-viewer\[parquet\]'"):
        review.export_bytes([{"run": "r"}], "parquet")
    with pytest.raises(review.ExportError, match=r"\*\.jsonl or \*\.parquet"):
        review.export_format("marked.csv")


def test_cli_export_by_label(run_dir, tmp_path, capsys):
    db = tmp_path / "team.sqlite"
    run = ares_viewer.open_run(run_dir)
    episode_id = run.episode_ids[1]
    store = review.open_store(db)
    store.add(run, episode_id, 2, author="ada", label="edits the tests")
    store.add(run, episode_id, 5, author="ada", label="other")
    out = tmp_path / "out.jsonl"
    assert cli.main(["export", str(run_dir), "--label", "edits the tests", "--out", str(out), "--db", str(db)]) == 0
    assert "wrote 1 step(s) labelled edits the tests" in capsys.readouterr().err
    (record,) = review.read_export(out)
    assert (record["episode_id"], record["step"]) == (episode_id, 2)
    assert record["messages"] == [m.to_dict() for m in run.episode(episode_id).context(2)]
    assert cli.main(["export", str(run_dir), "--out", str(tmp_path / "out.csv"), "--db", str(db)]) == 1
    assert "*.jsonl or *.parquet" in capsys.readouterr().err


def test_cli_lists_notes_and_refiles_a_moved_run(run_dir, tmp_path, capsys):
    db = tmp_path / "team.sqlite"
    run = ares_viewer.open_run(run_dir)
    episode_id = run.episode_ids[0]
    store = review.open_store(db)
    store.add(run, episode_id, 2, author="ada", label="edits the tests", text="rewrites test_core.py")
    store.add(run, episode_id, 4, author="bob", text="misreads the traceback", path="/testbed/core.py")
    store.close()
    assert cli.main(["notes", "list", str(run_dir), "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{episode_id} step 2  [edits the tests] rewrites test_core.py  (ada, ")
    assert lines[1].startswith(f"{episode_id} step 4 /testbed/core.py  misreads the traceback  (bob, ")
    assert cli.main(["notes", "list", str(run_dir), "--label", "Edits the tests", "--json", "--db", str(db)]) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (record["step"], record["label"], record["author"]) == (2, "edits the tests", "ada")

    # The run moves: its notes are filed under the old location until they are moved with it.
    moved = run_dir.rename(tmp_path / "archive")
    assert cli.main(["notes", "list", str(moved), "--db", str(db)]) == 0
    assert capsys.readouterr().out == ""
    assert cli.main(["notes", "move", str(run_dir), str(moved), "--db", str(db)]) == 0
    assert "moved 2 note(s)" in capsys.readouterr().err
    assert len(review.open_store(db).find(ares_viewer.open_run(moved))) == 2
    assert review.open_store(db).find(str(run_dir)) == []
    # Nothing is filed under the old place any more; merging onto a run that has notes is refused.
    assert cli.main(["notes", "move", str(run_dir), str(moved), "--db", str(db)]) == 1
    other = review.open_store(db)
    other.add(str(run_dir), episode_id, 1, author="cy", text="a note on the old place")
    assert cli.main(["notes", "move", str(run_dir), str(moved), "--db", str(db)]) == 1
    assert "already has notes" in capsys.readouterr().err
    assert len(other.find(str(moved))) == 2


def test_timeline_marks_labelled_steps():
    steps = synthetic_steps()
    figure = plots.step_timeline(steps, labels={3: ["reward hacking"], 5: ["edits the tests", "misreads"]})
    (trace,) = [t for t in figure.data if t.name == "review label"]
    assert list(trace.x) == [3, 5] and list(trace.customdata) == [3, 5]
    assert list(trace.text) == ["reward hacking", "edits the tests, misreads"]
    assert not [t for t in plots.step_timeline(steps).data if t.name == "review label"]


def synthetic_steps():
    from ares_viewer.formats.adapters import ares

    return ares.parse_episode(synthetic.episode_dict(actions=6, seed=3), "x.json").steps_frame()
