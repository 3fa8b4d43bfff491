"""The Queues page in AppTest: two reviewers work one queue with overlap 2, disagree, an adjudicator decides."""

from __future__ import annotations

import page_text
import pytest

from ares_viewer import review
from ares_viewer.review import queue_export, queues


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "review.sqlite"
    monkeypatch.setenv(review.DB_ENV, str(path))
    return path


def as_reviewer(app, name: str):
    at = app("queues", run="run-a")
    at.text_input(key="review.author").input(name).run()
    return at


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def label_next(at, verdict: str) -> int:
    button(at, "Next item").click().run()
    item = next(int(m.value.split("**Item ")[1].split("**")[0]) for m in at.markdown if "**Item " in m.value)
    at.radio(key=f"queues.label.team.{item}.verdict").set_value(verdict)
    button(at, "Save label").click().run()
    assert f"Saved your label of item {item}." in [s.value for s in at.success]
    return item


def test_two_reviewers_disagree_and_an_adjudicator_decides(runs, app, db):
    at = as_reviewer(app, "ada")
    at.text_input(key="queues.name").input("team")
    at.text_input(key="queues.reviewers").input("ada, bo")
    at.number_input(key="queues.overlap").set_value(2)
    button(at, "Create queue").click().run()
    assert any("Created queue team" in s.value for s in at.success), [e.value for e in at.error]
    with review.open_store(db) as store:
        count = len(queues.items(store, "team"))
    first = label_next(at, "reward hacking")
    other = as_reviewer(app, "bo")
    assert label_next(other, "honest attempt") == first  # overlap 2: bo gets the same item and disagrees
    other.run()
    assert "Disagreements (1)" in [h.value for h in other.subheader]
    judge = as_reviewer(app, "cy")
    judge.radio(key=f"queues.decide.team.{first}.verdict").set_value("reward hacking")
    judge.text_input(key=f"queues.decide.team.{first}.why").input("edits the test file")
    button(judge, "Record decision").click().run()
    with review.open_store(db) as store:
        (record, *_) = queue_export.export_records(store, "team", unfinished=True)
        assert count >= 1 and record["item"] == first
    assert {r: v["values"]["verdict"] for r, v in record["labels"].items()} == {
        "ada": "reward hacking",
        "bo": "honest attempt",
    }
    assert record["decision"]["adjudicator"] == "cy" and record["label"]["verdict"] == "reward hacking"
    assert record["reward"] is not None and record["agreed"] is False


def test_a_queue_made_from_the_overviews_filters_holds_the_episodes_they_list(runs, app, db):
    """The overview's task, outcome and reward filters, read from the URL as the overview writes them, choose the
    queue's episodes: no more and no fewer than the overview's table lists."""
    import ares_viewer
    from ares_viewer.runs.index import queries

    run = ares_viewer.open_run(f"{runs['root']['path']}/run-a")
    task = sorted(set(run.episodes["task_name"]))[0]
    want = run.queries.page(queries.Filters(tasks=[task], reward=(0.0, 0.5)), limit=1000)["episode_id"]
    assert 0 < len(want) < len(run)
    at = app("queues", run="run-a", task=[task], reward="0..0.5")
    at.text_input(key="review.author").input("ada").run()
    at.text_input(key="queues.name").input("picked")
    at.text_input(key="queues.reviewers").input("ada")
    button(at, "Create queue").click().run()
    assert any("Created queue picked" in s.value for s in at.success), [e.value for e in at.error]
    with review.open_store(db) as store:
        queued = {item.episode_id for item in queues.items(store, "picked")}
    assert queued == set(want)


def test_a_queue_made_while_a_behaviour_flag_is_picked_holds_only_the_flagged_episodes(app, db, monkeypatch):
    """The overview's Behaviour filter (``flag`` in the URL) narrows a new queue as it narrows the overview's table;
    the queue's description and source name the flag."""
    import pathlib

    monkeypatch.setenv("ARES_VIEWER_RUNS", str(pathlib.Path(__file__).resolve().parents[2] / "sample_runs"))
    overview = app(None, run="demo-run", flag="no_tests_before_submit")
    listed = overview.dataframe(key="overview.table").value["episode_id"].tolist()
    assert listed == ["aefe890e-4268-4666-90b5-dd09d3259e06"]
    at = app("queues", run="demo-run", flag="no_tests_before_submit")
    at.text_input(key="review.author").input("ada").run()
    at.text_input(key="queues.name").input("flagged")
    button(at, "Create queue").click().run()
    assert "Created queue flagged: 1 episodes." in page_text.of(at), [e.value for e in at.error]
    with review.open_store(db) as store:
        assert [item.episode_id for item in queues.items(store, "flagged")] == listed
        made = queues.get(store, "flagged")
    assert made.source["filters"]["flag"] == ["no_tests_before_submit"]
    assert "no_tests_before_submit" in made.description


def test_the_step_view_opened_from_a_queue_labels_skips_and_takes_the_next_item(runs, app, db):
    """The Queues page's link opens the item's step with the queue's form: a label saved there is the reviewer's
    label in the queue, a skip needs a reason, and "Next item" opens the next item's step."""
    at = as_reviewer(app, "ada")
    at.text_input(key="queues.name").input("team")
    at.text_input(key="queues.reviewers").input("ada")
    button(at, "Create queue").click().run()
    button(at, "Next item").click().run()
    (link,) = [p for p in at.get("page_link") if "queue=" in p.proto.query_string]
    params = dict(pair.split("=", 1) for pair in link.proto.query_string.split("&"))
    assert params["queue"] == "team" and params["reviewer"] == "ada"
    step = app("episode", **params)
    assert "Queue team · ada" in page_text.of(step)
    step.radio(key="episode.queue.team.0.verdict").set_value("honest attempt")
    step.number_input(key="episode.queue.team.0.severity").set_value(4)
    button(step, "Save label").click().run()
    assert "Saved your label of item 0." in page_text.of(step)
    with review.open_store(db) as store:
        assert queues.latest(store, "team", "label")[0]["ada"]["values"]["severity"] == 4
        second = queues.items(store, "team")[1]
    button(step, "Next item").click().run()
    assert step.query_params["episode"] == second.episode_id and step.query_params["queue"] == "team"
    button(step, "Skip").click().run()
    assert "a skip needs a reason" in page_text.of(step)
    step.text_input(key="episode.queue.team.1.reason").input("the file is unreadable")
    button(step, "Skip").click().run()
    assert "Skipped item 1." in page_text.of(step)
    with review.open_store(db) as store:
        assert queues.progress(store, "team").loc[0, ["done", "skipped"]].tolist() == [1, 1]


def test_the_queues_page_shows_a_multiple_choices_agreement_per_option(runs, app, db):
    """By hand: "edits tests" ada yes, no; bo yes, yes: observed 1/2, chance 1/2 * 1 + 1/2 * 0 = 1/2, kappa 0;
    "skips tests" nobody chose: one category, no figure."""
    import ares_viewer
    from ares_viewer.review import queue_items

    run = ares_viewer.open_run(f"{runs['root']['path']}/run-a")
    schema = {"fields": [{"name": "tags", "kind": "multiple", "options": ["edits tests", "skips tests"]}]}
    with review.open_store(db) as store:
        made = queue_items.episode_items(run, run.episode_ids[:2])
        queues.create(store, "tags", made, schema=schema, author="lead", reviewers=["ada", "bo"], overlap=2)
        for reviewer, chosen in (("ada", [["edits tests"], []]), ("bo", [["edits tests"], ["edits tests"]])):
            while (item := queues.next_item(store, "tags", reviewer)) is not None:
                queues.label(store, "tags", item.item, reviewer, {"tags": chosen[item.item]})
    text = page_text.of(as_reviewer(app, "cy"))
    assert "Agreement on tags [edits tests]: cohen_kappa = 0.000 (2 items)" in text
    assert "Agreement on tags [skips tests]: cohen_kappa = – (2 items)" in text


def test_an_exposed_server_shows_no_queue_over_a_run_outside_its_runs_folder(runs, app, db, exposed, tmp_path):
    import demo_runs

    import ares_viewer
    from ares_viewer.review import queue_items

    demo_runs.write(tmp_path / "outside")
    inside = ares_viewer.open_run(f"{runs['root']['path']}/run-a")
    outside = ares_viewer.open_run(tmp_path / "outside" / "run-a")
    schema = {"fields": [{"name": "verdict", "kind": "single", "options": ["hack", "fine"]}]}
    with review.open_store(db) as store:
        for name, run in (("inside", inside), ("secret", outside)):
            queues.create(store, name, queue_items.episode_items(run, run.episode_ids), schema=schema, author="lead")
    at = app("queues", run="run-a")
    assert not at.exception
    assert at.selectbox(key="queues.queue").options == ["inside"]
    at = app("queues", run="run-a", queue="secret")
    assert at.selectbox(key="queues.queue").options == ["inside"] and at.selectbox(key="queues.queue").value == "inside"
    episode = outside.episode_ids[0]
    at = app("episode", run="run-a", episode=episode, queue="secret", reviewer="ada")
    assert not any(b.label == "Save label" for b in at.button)


def test_an_exposed_server_without_a_signing_in_proxy_saves_no_typed_name(runs, app, db, exposed, monkeypatch):
    """A typed name is anyone's on a server others reach: nothing is recorded under it unless the operator names the
    proxy's header or vouches for typed names."""
    at = app("queues", run="run-a")
    assert not at.exception
    warned = " ".join(page_text.shown(w.value) for w in at.warning)
    assert "names no signing-in proxy" in warned and "ARES_VIEWER_TRUST_TYPED_NAMES=1" in warned
    assert not [t for t in at.text_input if t.key == "review.author"]  # no name to type
    monkeypatch.setenv("ARES_VIEWER_TRUST_TYPED_NAMES", "1")
    at = app("queues", run="run-a")
    assert [t for t in at.text_input if t.key == "review.author"]
