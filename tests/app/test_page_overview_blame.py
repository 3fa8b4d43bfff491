"""The overview separates the agent's failures from the infrastructure's: the success rate is over the episodes
the agent can be judged on, and the failure groups say whose failure each is."""

from __future__ import annotations

import page_text
import pytest

from testdata import synthetic


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    (root / "flaky").mkdir(parents=True)
    docs = [synthetic.episode_dict(actions=2, seed=1, reward=1.0)]
    for seed, error in enumerate([{"type": "APITimeoutError", "message": "Request timed out."},
                                  {"type": "SSLError", "message": "EOF occurred in violation of protocol"}], 10):
        doc = synthetic.episode_dict(actions=2, seed=seed, ending="errored")
        doc["error"] = error
        docs.append(doc)
    for doc in docs:
        synthetic.write_episode(root / "flaky", doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    return root


def test_a_run_failed_only_by_its_infrastructure_reads_as_the_agent_solving_what_it_could(runs, app):
    at = app(run="flaky")
    assert not at.exception
    (rate,) = [m for m in at.metric if m.label == "Success rate"]
    assert rate.value == "100%"  # not 33%: the two API failures say nothing of the agent
    shown = page_text.of(at)
    assert "among the 1 scored ones the agent can be judged on" in shown
    assert "2 episodes failed because of the infrastructure, not the agent" in shown
    (groups,) = [d for d in at.dataframe if "blame" in d.value.columns]
    assert set(groups.value["blame"]) == {"infrastructure"}


def test_a_run_with_no_reward_at_all_says_why_its_charts_are_missing(tmp_path, monkeypatch, app):
    from testdata import synthetic

    (tmp_path / "runs" / "down").mkdir(parents=True)
    for seed in (1, 2):
        doc = synthetic.episode_dict(actions=2, seed=seed, ending="errored")
        doc["error"] = {"type": "APITimeoutError", "message": "Request timed out."}
        synthetic.write_episode(tmp_path / "runs" / "down", doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app(run="down")
    assert not at.exception
    (rate,) = [m for m in at.metric if m.label == "Success rate"]
    assert rate.value == "–"  # before: 0%, above empty charts; nothing here judges the agent
    assert any("No reward plots: no episode of this run has a reward (2 failed without a reward (2 of them "
               "failures of the infrastructure))" in i.value for i in at.info)
    assert not at.get("plotly_chart")
