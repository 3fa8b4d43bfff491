"""The Lost tasks page in AppTest on the bundled demo run: the wrong-fix episode's shipped branches make its action
2 (an edit) the decisive step; the other failed episodes are not searched and are given no step."""

from __future__ import annotations

import pathlib

import page_text
import pytest

from ares_viewer_app.routing import pages

SAMPLE_RUNS = pathlib.Path(__file__).resolve().parents[2] / "sample_runs"
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"


@pytest.fixture
def samples(monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(SAMPLE_RUNS))


def test_the_page_is_one_row_of_the_page_table():
    [row] = [p for p in pages.PAGES if p.module == "lost"]
    assert (row.title, row.url_path) == ("Lost tasks", "lost") and pathlib.Path(row.script).exists()


def test_failed_episodes_their_decisive_step_and_the_counts(samples, app):
    at = app("lost", run="demo-run")
    assert not at.exception
    metrics = {m.label: m.value for m in at.main.metric}
    assert [metrics[k] for k in ("Failed episodes", "Decisive step", "No change", "Not searched")] == [
        "4", "1", "0", "3"]
    episodes = at.dataframe[-1].value.set_index("episode_id")
    assert episodes.loc[WRONG_FIX, ["state", "decisive_step", "kind", "sure"]].tolist() == ["decisive", 2, "edit",
                                                                                           True]
    assert episodes.loc[WRONG_FIX, "link"] == f"episode?run=demo-run&episode={WRONG_FIX}&step=2"
    others = episodes.drop(WRONG_FIX)
    assert set(others["state"]) == {"not searched"} and others["decisive_step"].isna().all()
    kinds = at.dataframe[0].value.set_index("kind")
    assert kinds.loc["edit", "lost (failed, drop)"] == 1 and kinds["lost (failed, drop)"].sum() == 1
    assert "ares-viewer branch demo-run --episodes failed" in page_text.of(at)


def test_solved_episodes_count_apart(samples, app):
    at = app("lost", run="demo-run")
    at.segmented_control(key="lost.outcome").set_value("solved").run()
    assert not at.exception
    assert {m.label: m.value for m in at.main.metric}["Solved episodes"] == "5"
    assert "No solved episode has a decisive rise" in page_text.of(at)
