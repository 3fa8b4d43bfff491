"""The Compare runs page: run B or a split of this run from the URL, the lost task and its link to Compare."""

from __future__ import annotations

import pathlib
import urllib.parse

import page_text

MATH_RL = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tinker" / "math-rl"


def _links(at) -> dict[str, dict[str, list[str]]]:
    return {page_text.shown(str(link.proto.label)): urllib.parse.parse_qs(link.proto.query_string)
            for link in at.get("page_link")}


def test_the_lost_task_links_to_compare_with_its_failure_against_the_other_runs_best(runs, app):
    at = app("compare_runs", run="run-b", other_run="run-a")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["A: run-b"] == "67%" and metrics["B: run-a"] == "40%"
    shown = page_text.of(at)
    assert "3 tasks · **1 lost**, **0 gained**" in shown
    # the most significant task is picked first: calc-3, solved on run-b, never on run-a
    assert "Task calc__calc-3" in shown
    compare = _links(at)["Compare run-a's failing attempt with run-b's best"]
    assert compare["run"] == ["run-a"] and compare["episode"] == [runs["run-a"]["errored"]]
    assert compare["other"] == [runs["run-b"]["solved3"]] and compare["other_in"] == ["run-b"]
    attempts = _links(at)["The task's attempts in run B (run-a)"]
    assert attempts["run"] == ["run-a"] and attempts["task"] == ["calc__calc-3"]


def test_the_url_picks_the_list_and_the_task(runs, app):
    at = app("compare_runs", run="run-b", other_run="run-a", show="changed", pick="calc__calc-2")
    assert not at.exception
    (table,) = at.dataframe
    assert sorted(table.value["task"]) == ["calc__calc-1", "calc__calc-2", "calc__calc-3"]
    assert "Task calc__calc-2" in page_text.of(at)
    lost = app("compare_runs", run="run-b", other_run="run-a", show="lost")
    assert list(lost.dataframe[0].value["task"]) == ["calc__calc-3"]
    # one attempt a side: the lost task is not a significant difference, and the list says so in words
    said = [page_text.shown(i.value) for i in lost.info]
    assert any(s.startswith("No difference here is significant: every q ≥ 0.05") for s in said), said
    assert any(s.startswith("Lost and gained: No difference here is significant") for s in said), said
    unknown = app("compare_runs", run="run-b", other_run="run-a", pick="nope")
    assert "Neither side attempted the task `nope`" in page_text.of(unknown)


def test_two_iterations_of_a_tinker_run_split_by_the_url(runs, app):
    at = app("compare_runs", run=str(MATH_RL), by="iteration", side=["0", "10"])
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "A: iteration=0" in labels and "B: iteration=10" in labels
    # both episodes of the link to Compare come from this run
    (compare,) = [q for label, q in _links(at).items() if label.startswith("Compare iteration=")]
    assert compare["run"] == [str(MATH_RL)] and "other_in" not in compare


def test_a_review_queue_of_the_lost_list_holds_one_sides_attempts_at_those_tasks(runs, app, tmp_path, monkeypatch):
    """The lost list's "Make a review queue of these", side B picked, queues run B's attempts at the lost tasks, no
    more, and links to the queue on the Queues page (opened on run B, the run its episodes belong to)."""
    import ares_viewer
    from ares_viewer import review
    from ares_viewer.review import queues

    db = tmp_path / "review.sqlite"
    monkeypatch.setenv(review.DB_ENV, str(db))
    at = app("compare_runs", run="run-b", other_run="run-a", show="lost")
    at.text_input(key="review.author").input("ada").run()
    at.radio(key="compare_runs.queue_side").set_value("B").run()
    at.text_input(key="compare_runs.queue.name").input("lost")
    next(b for b in at.button if b.label == "Create queue").click().run()
    assert "Created queue lost: " in page_text.of(at), [e.value for e in at.error]
    frame = ares_viewer.open_run(f"{runs['root']['path']}/run-a").episodes
    want = set(frame.loc[frame["task_name"] == "calc__calc-3", "episode_id"])
    assert want and runs["run-a"]["errored"] in want
    with review.open_store(db) as store:
        assert {item.episode_id for item in queues.items(store, "lost")} == want
        made = queues.get(store, "lost")
    assert made.source["compare_runs"]["side"] == "B" and made.source["compare_runs"]["tasks"] == ["calc__calc-3"]
    assert "run-a" in made.description and "lost" in made.description
    link = _links(at)["Open the queue lost on the Queues page"]
    assert link["run"] == ["run-a"] and link["queue"] == ["lost"]
    queue_page = app("queues", run="run-a", queue="lost")
    assert queue_page.selectbox(key="queues.queue").value == "lost"


def test_a_review_queue_of_a_split_run_holds_both_sides_attempts(runs, app, tmp_path, monkeypatch):
    """Two sides of one run: the queue holds the attempts at the listed tasks on both sides."""
    import ares_viewer
    from ares_viewer import review
    from ares_viewer.review import queues

    db = tmp_path / "review.sqlite"
    monkeypatch.setenv(review.DB_ENV, str(db))
    at = app("compare_runs", run="run-b", by="task_name")
    assert at.radio(key="compare_runs.queue_side").value == "both sides"
    listed = set(at.dataframe[0].value["task"])
    at.text_input(key="compare_runs.queue.name").input("split")
    next(b for b in at.button if b.label == "Create queue").click().run()
    assert "Created queue split: " in page_text.of(at), [e.value for e in at.error]
    frame = ares_viewer.open_run(f"{runs['root']['path']}/run-b").episodes
    want = list(frame.loc[frame["task_name"].isin(listed), "episode_id"])
    with review.open_store(db) as store:
        assert sorted(item.episode_id for item in queues.items(store, "split")) == sorted(want)


def test_runs_without_a_shared_task_say_so_instead_of_an_empty_chart(runs, app):
    at = app("compare_runs", run="run-a", other_run=str(MATH_RL))
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    # no task judged on both sides: neither "0 / 0" nor an empty per-task chart, which would read as no difference
    assert metrics["Tasks better / worse on B"] == "–"
    said = [page_text.shown(i.value) for i in at.info]
    assert "No task is judged on both sides, so no task's success rate can be compared." in said
    charts = [chart.proto.spec for chart in at.get("plotly_chart")]
    assert charts and not any("Success rate per task" in spec for spec in charts)
