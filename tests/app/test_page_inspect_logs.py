"""A folder of Inspect AI logs (written by inspect-ai itself) on the overview and the Episode page."""

from __future__ import annotations

import page_text
import pytest

from testdata import inspect_logs


@pytest.fixture(scope="module")
def inspect_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    inspect_logs.write_logs(root / "inspect", "eval")
    return root


@pytest.fixture
def runs(inspect_folder, monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(inspect_folder))


def test_overview_lists_the_samples_of_an_inspect_log(runs, app):
    at = app(run="inspect")
    assert not at.exception
    table = at.dataframe(key="overview.table").value
    assert set(table["format"]) == {"inspect_ai"}
    assert sorted(table["task_name"]) == sorted(f"arith/{name}" for name in inspect_logs.SAMPLES)
    assert not any("could not be read" in e.label for e in at.expander)


def _episode_page(app, sample: str):
    """The Episode page of the log's ``sample``, at its first step, opened from the overview's table."""
    table = app(run="inspect").dataframe(key="overview.table").value
    at = app("episode", run="inspect", episode=table.loc[table["task_name"] == f"arith/{sample}", "episode_id"].iloc[0],
             step="1")
    assert not at.exception
    return at


def test_episode_page_shows_a_samples_steps_reward_and_explanation(runs, app):
    at = _episode_page(app, "solve")
    shown = page_text.of(at)
    assert "ls step0" in shown  # the tool call's command
    assert "answer.txt" in shown  # its result
    assert "the answer contains the target '42'" in shown  # the scorer's explanation, the why of the reward
    assert ":green-badge[solved]" in shown  # reward 1.0 from the score C


def test_overview_shows_inspect_s_own_metrics_with_their_source(runs, app):
    """#43: the log's metrics, as Inspect computed them, beside the run's figures, each naming its file and field."""
    at = app(run="inspect")
    assert not at.exception
    [panel] = [e for e in at.expander if e.label.startswith("Inspect's own metrics")]
    metrics = panel.dataframe[0].value
    [accuracy] = metrics.to_dict("records")
    assert (accuracy["scorer"], accuracy["metric"], accuracy["value"]) == ("contains_target", "accuracy", 0.5)
    assert accuracy["scored"] == len(inspect_logs.SAMPLES) - 1  # the errored sample is not scored
    assert accuracy["source"].endswith(".eval: header.json results.scores[0].metrics.accuracy.value")


def test_episode_page_shows_the_target_beside_the_answer(runs, app):
    at = _episode_page(app, "wrong")
    shown = page_text.of(at)
    assert "**Answer**, as the scorer `contains_target` read it" in shown
    assert "**Target**, the sample's `target`" in shown
    texts = [block.value for block in page_text.blocks(at)]
    assert texts[texts.index("I think it is 41") + 1] == "42"  # the answer, then the target beside it
    assert page_text.figures(at)["Cost"] == "unknown"  # the mock model records no cost (#44)
