"""The run and Episode pages on harbor 0.25.0's jobs (``tests/fixtures/harbor``, written by harbor's own code)."""

from __future__ import annotations

import pathlib
import shutil

import page_text
import pytest

HARBOR = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "harbor"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    shutil.copytree(HARBOR, root / "harbor")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))


def test_a_trial_without_a_trajectory_opens_with_its_reward_and_an_unknown_cost(runs, app):
    at = app(run="harbor")
    assert not at.exception
    table = at.dataframe(key="overview.table").value
    assert len(table) == 6  # 2 oracle trials, 2 mini-swe-agent trials, the features trajectory and its sub-agent
    trial = next(i for i in table["episode_id"] if "hello-fail" in i)
    at = app("episode", run="harbor", episode=trial)
    assert not at.exception
    figures = page_text.figures(at)
    assert figures["Reward"] == "0" and figures["Cost"] == "unknown" and figures["Prompt tokens"] == "–"


def test_the_episode_page_shows_the_steps_sum_beside_the_files_total(runs, app):
    at = app("episode", run="harbor", episode="features-1", step="1")
    assert not at.exception
    figures = page_text.figures(at)
    # final_metrics and its continuation's: 0.022 USD; the steps of the two files sum 0.017.
    assert figures["Cost"] == "$0.0220 (steps' sum $0.0170)"
    assert "echo one" in page_text.of(at)
