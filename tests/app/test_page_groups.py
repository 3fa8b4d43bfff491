"""The group view in AppTest: the rollouts of one prompt side by side, deep links, runs without groups."""

from __future__ import annotations

import format_runs
import page_text
import pytest


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    format_runs.write(root)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))


def test_deep_link_shows_the_group_of_an_episode(runs, app):
    at = app("groups", run="tinker", episode=f"{format_runs.MATH_GROUP}/t2")
    assert not at.exception
    assert at.selectbox(key="groups.pick").value == format_runs.MATH_GROUP
    shown = page_text.of(at)
    assert "James writes a 3-page letter" in shown  # the shared prompt
    # Four rollouts side by side, each with its outcome and reward, the cut-off one truncated.
    for traj, verdict in ((0, "reward **1**"), (1, "reward **1**"), (2, "reward **0**"), (3, "reward **-0.1**")):
        assert any(m.value.startswith(f"**traj {traj}**") and verdict in m.value for m in at.markdown), traj
    assert ":orange-badge[truncated]" in shown
    assert "\\boxed{312}" in shown and "\\boxed{624}" in shown  # the answers, to compare
    assert len(at.get("plotly_chart")) == 1


def test_choosing_a_group_updates_the_link(runs, app):
    at = app("groups", run="tinker")
    labels = at.selectbox(key="groups.pick").options
    assert len(labels) == 7  # 2 + 2 train groups, 2 eval groups of math-rl, 1 of guess-number
    assert any(label.startswith("math-rl/it0/train/g0 · 4 rollouts · mean reward 1 · spread 0 · Natalia")
               for label in labels)
    chosen = "math-rl/it0/train/g1"
    at.selectbox(key="groups.pick").set_value(chosen).run()
    assert at.query_params["episode"] == chosen + "/t0"
    assert "Weng earns $12 an hour" in page_text.of(at)
    again = app("groups", run="tinker", episode=at.query_params["episode"])
    assert again.selectbox(key="groups.pick").value == chosen


def test_multi_turn_rollouts_show_each_turn(runs, app):
    at = app("groups", run="tinker", episode="guess-number/it0/train/g0/t0")
    shown = page_text.of(at)
    assert "<guess>25</guess>" in shown and "→ Too low. Guess again." in shown
    assert "step 4 · reward 1" in shown


def test_run_without_groups_says_so(runs, app):
    at = app("groups", run="mini")  # one attempt at each task
    assert not at.exception
    assert any("This run has no groups" in i.value for i in at.info)


def test_a_run_that_attempts_a_task_several_times_groups_its_attempts_by_task(runs, app):
    # Ray runner episodes have no group index of their own, but two attempts at sympy__sympy-20590: a group
    at = app("groups", run="ray")
    assert not at.exception
    assert not any("This run has no groups" in i.value for i in at.info)
    assert at.selectbox(key="groups.pick").value == "sympy__sympy-20590"
    assert [label.split(" · ")[:2] for label in at.selectbox(key="groups.pick").options] == [
        ["sympy__sympy-20590", "2 rollouts"]]
    assert "attempts at the same task" in page_text.of(at)


def test_default_group_has_reward_spread(runs, app):
    at = app("groups", run="tinker")
    labels = at.selectbox(key="groups.pick").options
    spreads = [float(label.split(" · spread ")[1].split(" · ")[0]) for label in labels]
    assert spreads == sorted(spreads, reverse=True) and spreads[0] > 0
    first = at.selectbox(key="groups.pick").value
    assert at.query_params["episode"].startswith(first + "/")


def test_a_review_queue_made_from_a_group_holds_exactly_its_rollouts(runs, app, tmp_path, monkeypatch):
    """The form "Make a review queue of these rollouts" queues the group's rollouts, one episode item each, no more."""
    from ares_viewer import review
    from ares_viewer.review import queues

    db = tmp_path / "review.sqlite"
    monkeypatch.setenv(review.DB_ENV, str(db))
    at = app("groups", run="tinker", episode=f"{format_runs.MATH_GROUP}/t2")
    at.text_input(key="review.author").input("ada").run()
    at.text_input(key="groups.queue.name").input("group")
    at.text_input(key="groups.queue.reviewers").input("ada, bo")
    at.number_input(key="groups.queue.overlap").set_value(2)
    next(b for b in at.button if b.label == "Create queue").click().run()
    assert "Created queue group: 4 episodes." in page_text.of(at), [e.value for e in at.error]
    with review.open_store(db) as store:
        queued = [item.episode_id for item in queues.items(store, "group")]
        made = queues.get(store, "group")
    assert queued == [f"{format_runs.MATH_GROUP}/t{i}" for i in range(4)]
    assert made.source == {"group": format_runs.MATH_GROUP} and format_runs.MATH_GROUP in made.description
    link = next(p for p in at.get("page_link") if p.proto.label == "Open the queue group on the Queues page")
    assert "queue=group" in link.proto.query_string and "run=tinker" in link.proto.query_string
