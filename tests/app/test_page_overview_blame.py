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
    assert page_text.figures(at)["Success rate"] == "100%"  # not 33%: the two API failures say nothing of the agent
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
    assert page_text.figures(at)["Success rate"] == "–"  # before: 0%, above empty charts; nothing here judges the agent
    assert any("No reward plots: no episode of this run has a reward (2 failed without a reward (2 of them "
               "failures of the infrastructure))" in i.value for i in at.info)
    assert not at.get("plotly_chart") and not page_text.charts(at)


def test_the_overview_lists_the_tests_the_failures_failed(tmp_path, monkeypatch, app):
    import json

    import formats_fixtures as fx

    run = tmp_path / "runs" / "swe"
    trajectory = run / "trajs" / "astropy__astropy-12907" / "astropy__astropy-12907.traj.json"
    trajectory.parent.mkdir(parents=True)
    trajectory.write_text(fx.MINI_V1.read_text())
    report = run / "logs" / "astropy__astropy-12907" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"astropy__astropy-12907": {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
        "tests_status": {"FAIL_TO_PASS": {"success": ["test_separable"], "failure": []},
                         "PASS_TO_PASS": {"success": [], "failure": ["test_compound_model"]}}}}))
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app(run="swe")
    assert not at.exception
    (tests,) = [d for d in at.dataframe if "how" in d.value.columns]
    assert tests.value.to_dict("records") == [
        {"test": "test_compound_model", "how": "passed before, broken by the patch", "episodes": 1,
         "episode": "trajs/astropy__astropy-12907"}]


def test_the_episode_table_says_why_each_episode_is_not_a_success(runs, app):
    synthetic.write_episode(runs / "flaky", synthetic.episode_dict(actions=2, seed=30, reward=0.0))
    at = app(run="flaky")
    (table,) = [d for d in at.dataframe if "why" in d.value.columns]
    why = dict(zip(table.value["episode_id"], table.value["why"], strict=True))
    by_reward = dict(zip(table.value["episode_id"], table.value["total_reward"], strict=True))
    assert sorted(why.values()) == ["", "completed, not solved (reward ≤ 0)",
                                    "errored: APITimeoutError: Request timed out.",
                                    "errored: SSLError: EOF occurred in violation of protocol"]
    assert [e for e, w in why.items() if w == ""] == [e for e, r in by_reward.items() if r == 1.0]
