"""Review queues: assignment, next item, labels under a versioned schema, skips, progress, history, migration."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import sqlite3

import pytest

from ares_viewer import cli, review
from ares_viewer.review import labelschema, queue_export, queue_items, queues
from ares_viewer.runs import run as run_module
from ares_viewer.runs.index import queries
from testdata import synthetic

SCHEMA = {
    "fields": [
        {"name": "verdict", "kind": "single", "options": ["hack", "fine"]},
        {"name": "severity", "kind": "score", "min": 0, "max": 5, "required": False},
        {"name": "note", "kind": "note"},
    ]
}


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "runs" / "rl-run-7"
    folder.mkdir(parents=True)
    for seed, reward in ((1, 0.0), (2, 1.0), (3, 0.0), (4, 1.0)):
        synthetic.write_episode(
            folder, synthetic.episode_dict(task_name=f"calc__calc-{seed}", actions=4, reward=reward, seed=seed)
        )
    return run_module.Run(folder)


@pytest.fixture
def store(tmp_path):
    with review.open_store(tmp_path / "review.sqlite") as opened:
        yield opened


def make(store, run, name="hacks", **options):
    options.setdefault("author", "lead")
    return queues.create(store, name, queue_items.episode_items(run, run.episode_ids), schema=SCHEMA, **options)


def test_round_robin_gives_each_reviewer_their_share_and_then_nothing(store, run):
    make(store, run, reviewers=["ada", "bo"])
    seen = {"ada": [], "bo": []}
    for reviewer in ("ada", "bo", "ada", "bo"):
        item = queues.next_item(store, "hacks", reviewer)
        assert queues.next_item(store, "hacks", reviewer) == item  # asking again gives back the item in hand
        queues.label(store, "hacks", item.item, reviewer, {"verdict": "fine"})
        seen[reviewer].append(item.item)
    assert seen == {"ada": [0, 2], "bo": [1, 3]}
    assert queues.next_item(store, "hacks", "ada") is None
    assert queues.status(store, "hacks")["finished"]
    with pytest.raises(queues.QueueError, match="cy is not a reviewer"):
        queues.next_item(store, "hacks", "cy")


def test_overlap_two_gives_every_item_to_both_and_agreement_counts_them(store, run):
    make(store, run, reviewers=["ada", "bo"], overlap=2)
    for reviewer in ("ada", "bo"):
        while (item := queues.next_item(store, "hacks", reviewer)) is not None:
            verdict = "hack" if item.item == 0 or reviewer == "ada" else "fine"
            queues.label(store, "hacks", item.item, reviewer, {"verdict": verdict})
    labelled = queues.latest(store, "hacks", "label")
    assert {item: sorted(by) for item, by in labelled.items()} == {i: ["ada", "bo"] for i in range(4)}
    assert queues.status(store, "hacks")["items_complete"] == 4


def test_an_open_pool_never_hands_one_slot_to_two_reviewers_and_a_skip_frees_it(store, run):
    make(store, run)
    first = queues.next_item(store, "hacks", "ada")
    second = queues.next_item(store, "hacks", "bo")
    assert first.item != second.item
    queues.skip(store, "hacks", first.item, "ada", "cannot tell from the log")
    assert queues.next_item(store, "hacks", "cy").item == first.item  # the skipped slot goes to someone else
    assert queues.next_item(store, "hacks", "ada").item not in (first.item, second.item)
    skips = queues.history(store, "hacks").query("kind == 'skip'")
    assert skips["payload"].tolist() == [{"reason": "cannot tell from the log"}]
    with pytest.raises(ValueError, match="needs a reason"):
        queues.skip(store, "hacks", second.item, "bo", "  ")


def test_a_label_must_fit_the_schema_and_be_in_the_reviewers_hands(store, run):
    make(store, run, reviewers=["ada", "bo"])
    item = queues.next_item(store, "hacks", "ada")
    with pytest.raises(labelschema.SchemaError, match="'severity' is between 0 and 5"):
        queues.label(store, "hacks", item.item, "ada", {"verdict": "hack", "severity": 7})
    with pytest.raises(queues.QueueError, match="not in bo's hands"):
        queues.label(store, "hacks", item.item, "bo", {"verdict": "hack"})
    assert queues.history(store, "hacks")["kind"].tolist() == ["create"]  # nothing half-written


def test_changing_the_schema_keeps_past_labels_and_their_version(store, run):
    make(store, run, reviewers=["ada"])
    first = queues.next_item(store, "hacks", "ada")
    queues.label(store, "hacks", first.item, "ada", {"verdict": "hack", "note": "edits the test"})
    changed = {"fields": [{"name": "verdict", "kind": "single", "options": ["hack", "fine", "unsure"]}]}
    assert queues.change_schema(store, "hacks", changed, author="lead").schema_version == 2
    second = queues.next_item(store, "hacks", "ada")
    queues.label(store, "hacks", second.item, "ada", {"verdict": "unsure"})
    labels = queues.latest(store, "hacks", "label")
    assert labels[first.item]["ada"]["values"] == {"verdict": "hack", "severity": None, "note": "edits the test"}
    assert labels[first.item]["ada"]["schema_version"] == 1
    assert labels[second.item]["ada"]["schema_version"] == 2
    assert len(queues.schema_versions(store, "hacks")) == 2
    events = queues.history(store, "hacks")
    assert events["kind"].tolist() == ["create", "label", "schema", "label"]
    assert events["author"].tolist() == ["lead", "ada", "lead", "ada"]


def test_progress_per_reviewer_and_a_rewritten_episode_is_flagged(store, run):
    make(store, run, reviewers=["ada", "bo"])
    item = queues.next_item(store, "hacks", "ada")
    queues.label(store, "hacks", item.item, "ada", {"verdict": "fine"})
    queues.next_item(store, "hacks", "bo")
    progress = queues.progress(store, "hacks").set_index("reviewer")
    assert progress.loc["ada", ["assigned", "done", "left"]].tolist() == [2, 1, 1]
    assert progress.loc["bo", ["in_hand", "left"]].tolist() == [1, 1]
    target = queues.items(store, "hacks")[2]
    with open(target.path, "a") as handle:
        handle.write("\n")
    os.utime(target.path, ns=(1, 1))
    assert [i.item for i in queues.changed(store, "hacks")] == [2]


def test_a_decision_sits_beside_the_labels(store, run):
    make(store, run, reviewers=["ada", "bo"], overlap=2)
    for reviewer, verdict in (("ada", "hack"), ("bo", "fine")):
        queues.label(store, "hacks", queues.next_item(store, "hacks", reviewer).item, reviewer, {"verdict": verdict})
    queues.decide(store, "hacks", 0, "cy", {"verdict": "hack"}, reason="the diff deletes the assert")
    assert {r: v["values"]["verdict"] for r, v in queues.latest(store, "hacks", "label")[0].items()} == {
        "ada": "hack",
        "bo": "fine",
    }
    assert queues.latest(store, "hacks", "decision")[0]["cy"]["reason"] == "the diff deletes the assert"


def test_bad_queues_are_refused_with_the_reason(store, run):
    make(store, run)
    with pytest.raises(ValueError, match="already exists"):
        make(store, run)
    with pytest.raises(ValueError, match="overlap is 1 to the number of reviewers"):
        make(store, run, name="other", reviewers=["ada"], overlap=2)
    with pytest.raises(ValueError, match="has no items"):
        queues.create(store, "empty", [], schema=SCHEMA, author="lead")
    with pytest.raises(queues.QueueError, match=r"no queue named 'nope'.*hacks"):
        queues.get(store, "nope")


def test_a_schema_one_database_gains_queues_and_keeps_its_notes(tmp_path, run):
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE notes (note_id TEXT PRIMARY KEY, run TEXT NOT NULL, episode_id TEXT NOT NULL, "
        "step INTEGER NOT NULL, path TEXT, created_by TEXT NOT NULL, created_at REAL NOT NULL);"
        "CREATE TABLE revisions (note_id TEXT NOT NULL, revision INTEGER NOT NULL, label TEXT, "
        "text TEXT NOT NULL, author TEXT NOT NULL, at REAL NOT NULL, deleted INTEGER NOT NULL "
        "DEFAULT 0, PRIMARY KEY (note_id, revision));"
        f"INSERT INTO notes VALUES ('n1', '{review.run_key(run)}', 'e', 1, NULL, 'ada', 1.0);"
        "INSERT INTO revisions VALUES ('n1', 1, 'hack', '', 'ada', 1.0, 0);"
        "PRAGMA user_version = 1;"
    )
    old.close()
    with review.open_store(path) as store:
        assert store.writable
        assert [n.label for n in store.find(run)] == ["hack"]
        queues.create(
            store, "from-label", queue_items.step_items(run, [(run.episode_ids[0], 2)]), schema=SCHEMA, author="lead"
        )
        assert queues.items(store, "from-label")[0].step == 2
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == review.SCHEMA == 3


def test_a_finished_queue_exports_labels_decision_reward_and_exact_input(store, run, tmp_path):
    make(store, run, reviewers=["ada", "bo"], overlap=2)
    for reviewer in ("ada", "bo"):
        while (item := queues.next_item(store, "hacks", reviewer)) is not None:
            verdict = "fine" if item.item == 1 and reviewer == "bo" else "hack"
            queues.label(store, "hacks", item.item, reviewer, {"verdict": verdict, "severity": item.item})
    (disputed,) = queue_export.disagreements(store, "hacks")
    assert (disputed["item"], disputed["fields"], disputed["decision"]) == (1, ["verdict"], None)
    queues.decide(store, "hacks", 1, "cy", {"verdict": "fine"}, reason="the test was wrong")
    figures = {f["field"]: f for f in queue_export.agreement(store, "hacks")}
    assert figures["verdict"]["method"] == "cohen_kappa" and figures["verdict"]["items"] == 4
    assert figures["severity"]["value"] == 1.0  # both gave the same scores
    for suffix in (".jsonl", ".parquet"):
        out = tmp_path / f"hacks{suffix}"
        assert queue_export.write_export(queue_export.export_records(store, "hacks"), out) == 4
        records = {r["item"]: r for r in review.read_export(out)}
        one = records[1]
        episode = run.episode(one["episode_id"])
        assert {r: v["values"]["verdict"] for r, v in one["labels"].items()} == {"ada": "hack", "bo": "fine"}
        assert one["decision"]["adjudicator"] == "cy" and one["label"]["verdict"] == "fine"
        assert one["agreed"] is False and records[0]["agreed"] is True and records[0]["label"]["verdict"] == "hack"
        assert (one["reward"], one["outcome"]) == (episode.total_reward, str(episode.outcome))
        assert one["why"] and one["step"] == len(episode.steps) - 1
        assert one["messages"] == [m.to_dict() for m in episode.context(one["step"])]
        assert one["response"] == episode.step(one["step"]).response
        assert one["schema_version"] == 1 and one["agreement"][0]["field"] == "verdict"


def test_an_unfinished_queue_is_exported_only_when_asked(store, run):
    make(store, run, reviewers=["ada"])
    with pytest.raises(queues.QueueError, match="not finished \\(0 of 4"):
        list(queue_export.export_records(store, "hacks"))
    assert [r["label"] for r in queue_export.export_records(store, "hacks", unfinished=True)] == [None] * 4


def _label_all(db: str, reviewer: str) -> None:
    with review.open_store(db) as store:
        while (item := queues.next_item(store, "pool", reviewer)) is not None:
            queues.label(store, "pool", item.item, reviewer, {"verdict": "hack"})


def test_several_processes_labelling_one_queue_lose_nothing_and_share_no_item(tmp_path, run):
    db = str(tmp_path / "team.sqlite")
    many = [(episode_id, step) for episode_id in run.episode_ids for step in range(1, 5)]
    with review.open_store(db) as store:
        queues.create(store, "pool", queue_items.step_items(run, many), schema=SCHEMA, author="lead")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_label_all, args=(db, f"r{n}")) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0] * 4
    with review.open_store(db) as store:
        events = queues.history(store, "pool").query("kind == 'label'")
        assert sorted(events["item"]) == list(range(len(many)))  # every item labelled exactly once
        assert queues.status(store, "pool")["finished"]
        assert queues.progress(store, "pool")["done"].sum() == len(many)


def test_cli_creates_a_queue_from_a_filter_reports_it_and_exports_it(run, tmp_path, capsys):
    db, schema = str(tmp_path / "team.sqlite"), tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    location = str(run.location)
    failed = run.episodes.query("total_reward == 0")["episode_id"].tolist()
    args = ["queue", "create", location, "zero", "--schema", str(schema), "--reviewers", "ada", "--db", db]
    assert cli.main([*args, "--episodes", ",".join(failed)]) == 0
    assert "created queue zero: 2 episodes" in capsys.readouterr().err
    with review.open_store(db) as store:
        assert [i.episode_id for i in queues.items(store, "zero")] == failed
        while (item := queues.next_item(store, "zero", "ada")) is not None:
            queues.label(store, "zero", item.item, "ada", {"verdict": "hack"})
    assert cli.main(["queue", "list", "--db", db]) == 0
    assert "zero: 2 of 2 items fully labelled" in capsys.readouterr().out
    assert cli.main(["queue", "status", "zero", "--json", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["progress"][0]["done"] == 2
    out = tmp_path / "zero.parquet"
    assert cli.main(["queue", "export", "zero", "--out", str(out), "--db", db]) == 0
    assert [r["reward"] for r in review.read_export(out)] == [0.0, 0.0]
    bad = tmp_path / "bad.json"
    bad.write_text('{"fields": [{"name": "x", "kind": "colour"}]}')
    assert cli.main([*args[:3], "other", "--schema", str(bad), "--db", db]) == 1
    assert f"{bad}: field 'x': kind is one of" in capsys.readouterr().err
    assert cli.main(["queue", "status", "nope", "--db", db]) == 1
    assert "no queue named 'nope'" in capsys.readouterr().err


def test_items_come_from_the_overviews_filters_a_search_or_a_label(store, run):
    zero = queue_items.filter_items(run, queries.Filters(text="calc-3"))
    assert [i.episode_id for i in zero] == run.episodes.query("task_name == 'calc__calc-3'")["episode_id"].tolist()
    assert all(i.step is None and i.fingerprint for i in zero)
    found = queue_items.search_items(run, "calc__calc-2", limit=50)
    two = run.episodes.query("task_name == 'calc__calc-2'")["episode_id"].tolist()
    assert found and {i.episode_id for i in found} == set(two) and all(i.step is not None for i in found)
    store.add(run, run.episode_ids[1], 3, author="ada", label="Reward hacking")
    (marked,) = queue_items.label_items(store, run, "reward HACKING")
    assert (marked.episode_id, marked.step) == (run.episode_ids[1], 3)


def test_a_multiple_choice_gets_one_agreement_figure_per_option(store, run, capsys):
    """Each option is a yes/no label per reviewer. By hand, over four items labelled by ada and bo:
    "edits tests": ada yes, yes, no, no; bo the same: kappa 1.
    "skips tests": ada no, yes, no, yes; bo no, no, yes, yes: observed 2/4, chance 1/2 * 1/2 + 1/2 * 1/2 = 1/2,
    kappa (0.5 - 0.5) / (1 - 0.5) = 0. (Counting each set of options as one category gave 1/3 for the field.)"""
    schema = {"fields": [{"name": "tags", "kind": "multiple", "options": ["edits tests", "skips tests"]}]}
    queues.create(
        store,
        "tags",
        queue_items.episode_items(run, run.episode_ids),
        schema=schema,
        author="lead",
        reviewers=["ada", "bo"],
        overlap=2,
    )
    chosen = {
        "ada": [["edits tests"], ["edits tests", "skips tests"], [], ["skips tests"]],
        "bo": [["edits tests"], ["edits tests"], ["skips tests"], ["skips tests"]],
    }
    for reviewer, per_item in chosen.items():
        while (item := queues.next_item(store, "tags", reviewer)) is not None:
            queues.label(store, "tags", item.item, reviewer, {"tags": per_item[item.item]})
    figures = {f["option"]: f for f in queue_export.agreement(store, "tags")}
    assert set(figures) == {"edits tests", "skips tests"}
    assert figures["edits tests"]["method"] == "cohen_kappa" and figures["edits tests"]["value"] == pytest.approx(1.0)
    assert figures["skips tests"]["value"] == pytest.approx(0.0) and figures["skips tests"]["items"] == 4
    (record, *_) = queue_export.export_records(store, "tags")
    assert [f["option"] for f in record["agreement"]] == ["edits tests", "skips tests"]
    assert cli.main(["queue", "status", "tags", "--db", str(store.path)]) == 0
    assert "Agreement on tags [skips tests]: cohen_kappa = 0.000 (4 items)" in capsys.readouterr().out


def test_cli_makes_a_queue_of_a_behaviour_group_from_its_flags(tmp_path, capsys):
    """``--flag`` reads the run's behaviour flags when needed and queues the episodes showing them, as the
    overview's Behaviour filter lists them (sample_runs/demo-run: one episode never ran the tests)."""
    db, demo = (
        str(tmp_path / "team.sqlite"),
        str(pathlib.Path(__file__).resolve().parent.parent / "sample_runs/demo-run"),
    )
    args = ["queue", "create", demo, "untested", "--schema", json.dumps(SCHEMA), "--db", db]
    assert cli.main([*args, "--flag", "no_tests_before_submit"]) == 0
    assert "created queue untested: 1 episodes" in capsys.readouterr().err
    with review.open_store(db) as store:
        assert [i.episode_id for i in queues.items(store, "untested")] == ["aefe890e-4268-4666-90b5-dd09d3259e06"]
        assert queues.get(store, "untested").source["flag"] == ["no_tests_before_submit"]
    assert cli.main([*args[:3], "other", *args[4:], "--flag", "ran_tets"]) == 1
    assert "not an episode-file flag: ran_tets" in capsys.readouterr().err


TAGGED = {
    "fields": [
        {"name": "verdict", "kind": "single", "options": ["hack", "fine"]},
        {"name": "tags", "kind": "multiple", "options": ["edits tests", "skips tests"]},
        {"name": "severity", "kind": "score", "min": 0, "max": 5, "required": False},
        {"name": "note", "kind": "note"},
    ]
}


def _two_label(store, run, labels):
    queues.create(
        store,
        "merge",
        queue_items.episode_items(run, run.episode_ids[:1]),
        schema=TAGGED,
        author="lead",
        reviewers=["ada", "bo"],
        overlap=2,
    )
    for reviewer, values in labels.items():
        queues.label(store, "merge", queues.next_item(store, "merge", reviewer).item, reviewer, values)
    return lambda: next(iter(queue_export.export_records(store, "merge")))


def test_a_decision_on_the_verdict_keeps_the_tags_both_reviewers_gave(store, run):
    exported = _two_label(
        store,
        run,
        {
            "ada": {"verdict": "hack", "tags": ["edits tests", "skips tests"], "severity": 4},
            "bo": {"verdict": "fine", "tags": ["edits tests"], "severity": 4},
        },
    )
    (disputed,) = queue_export.disagreements(store, "merge")
    assert disputed["agreed_values"] == {"verdict": None, "tags": ["edits tests"], "severity": 4, "note": None}
    assert exported()["label"] is None and exported()["undecided"] == ["verdict", "tags [skips tests]"]
    queues.decide(store, "merge", 0, "cy", {"verdict": "hack"}, reason="the diff deletes the assert")
    record = exported()
    assert record["decision"]["values"] == {"verdict": "hack"}  # the decision holds only what it set
    assert record["label"] == {"verdict": "hack", "tags": ["edits tests"], "severity": 4, "note": None}
    assert record["undecided"] == ["tags [skips tests]"]
    assert {r: v["values"]["tags"] for r, v in record["labels"].items()} == {
        "ada": ["edits tests", "skips tests"],
        "bo": ["edits tests"],
    }
    queues.decide(store, "merge", 0, "cy", {"tags": ["edits tests", "skips tests"]})
    assert exported()["label"]["tags"] == ["edits tests", "skips tests"] and exported()["undecided"] == []


def test_reviewers_who_differ_only_on_an_optional_score_still_export_their_label(store, run):
    exported = _two_label(
        store,
        run,
        {
            "ada": {"verdict": "hack", "tags": ["edits tests"], "severity": 2},
            "bo": {"verdict": "hack", "tags": ["edits tests"], "severity": 5},
        },
    )
    record = exported()
    assert record["agreed"] is False
    assert record["label"] == {"verdict": "hack", "tags": ["edits tests"], "severity": None, "note": None}
    assert record["undecided"] == ["severity"]


def test_a_decision_that_sets_nothing_is_refused(store, run):
    _two_label(store, run, {"ada": {"verdict": "hack"}, "bo": {"verdict": "fine"}})
    with pytest.raises(labelschema.SchemaError, match="at least one field"):
        queues.decide(store, "merge", 0, "cy", {"verdict": None, "note": ""})


def test_one_name_in_nfc_nfd_or_with_a_zero_width_space_is_one_reviewer(store, run):
    nfc, nfd, hidden = "Zoë", "Zoe\u0308", "Zo\u200bë"
    make(store, run, reviewers=[nfc, "bo"])
    item = queues.next_item(store, "hacks", nfd)  # the named reviewer typing the NFD spelling of their own name
    assert item is not None and queues.next_item(store, "hacks", hidden) == item
    queues.label(store, "hacks", item.item, hidden, {"verdict": "hack"})
    assert list(queues.latest(store, "hacks", "label")[item.item]) == [nfc]
    assert sorted(queues.progress(store, "hacks")["reviewer"]) == sorted(["bo", nfc])
    with pytest.raises(ValueError, match="at most 100 characters"):
        queues.label(store, "hacks", item.item, "x" * 5_000_000, {"verdict": "hack"})


def test_the_history_is_append_only_in_sqlite_itself(store, run, tmp_path):
    make(store, run, reviewers=["ada"])
    queues.label(store, "hacks", queues.next_item(store, "hacks", "ada").item, "ada", {"verdict": "hack"})
    store.add(run, run.episode_ids[0], 1, label="hack", author="ada")
    plain = sqlite3.connect(tmp_path / "review.sqlite")
    for statement in (
        "UPDATE queue_events SET author = 'mallory'",
        "DELETE FROM queue_events",
        "UPDATE revisions SET label = 'fine'",
        "DELETE FROM revisions",
    ):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            plain.execute(statement)
    assert set(queues.history(store, "hacks")["author"]) == {"lead", "ada"}


def test_only_the_named_adjudicators_decide_and_never_on_their_own_disagreement(store, run):
    make(store, run, reviewers=["ada", "bo"], overlap=2, adjudicators=["cy"])
    for reviewer, verdict in (("ada", "hack"), ("bo", "fine")):
        queues.label(store, "hacks", queues.next_item(store, "hacks", reviewer).item, reviewer, {"verdict": verdict})
    with pytest.raises(queues.QueueError, match="dee is not an adjudicator of queue 'hacks' \\(cy decide\\)"):
        queues.decide(store, "hacks", 0, "dee", {"verdict": "hack"})
    queues.decide(store, "hacks", 0, "cy", {"verdict": "hack"})
    make(store, run, name="open", reviewers=["ada", "bo"], overlap=2)
    for reviewer, verdict in (("ada", "hack"), ("bo", "fine")):
        queues.label(store, "open", queues.next_item(store, "open", reviewer).item, reviewer, {"verdict": verdict})
    with pytest.raises(queues.QueueError, match="ada labelled item 0"):
        queues.decide(store, "open", 0, "ada", {"verdict": "hack"})
    record = next(iter(queue_export.export_records(store, "hacks", unfinished=True)))
    assert [d["adjudicator"] for d in record["decision"]["by"]] == ["cy"]
