"""The Behaviours page in AppTest on the bundled sample runs: rates among solved and failed, per task, and a
flag's episodes with links to the evidence step."""

from __future__ import annotations

import pathlib

import page_text
import pytest

SAMPLE_RUNS = pathlib.Path(__file__).resolve().parents[2] / "sample_runs"
PAGER_EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"


@pytest.fixture
def samples(monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(SAMPLE_RUNS))


def test_rates_and_a_flags_episodes_link_to_the_evidence_step(samples, app):
    at = app("behaviours", run="demo-run")
    assert not at.exception
    rates = at.dataframe[0].value.set_index("flag")
    assert rates.loc["touched_tests_files", ["solved", "failed"]].tolist() == [0, 1]
    assert rates.loc["ran_tests", "solved_rate"] == 1.0
    at.selectbox(key="behaviours.flag").set_value("touched_tests_files").run()
    links = at.get("page_link")
    assert [link.proto.label for link in links] == [f"{PAGER_EXPLORER} · failed · step 9"]
    assert links[0].proto.query_string == f"run=demo-run&episode={PAGER_EXPLORER}&step=9"
    assert "/testbed/tests/data (added)" in page_text.of(at)


def test_one_tasks_rates(samples, app):
    at = app("behaviours", run="demo-run")
    at.selectbox(key="behaviours.task").set_value("textkit__slugify-accents").run()
    rates = at.dataframe[0].value.set_index("flag")
    assert rates.loc["format_errors", ["solved", "failed"]].tolist() == [1, 0]
    assert rates.loc["no_tests_before_submit", ["solved_rate", "failed_rate"]].tolist() == [0.0, 1.0]


def overview_ids(at) -> list[str]:
    return at.dataframe(key="overview.table").value["episode_id"].tolist()


def test_the_overviews_behaviour_filter_keeps_the_flagged_episodes_and_is_in_the_url(samples, app):
    at = app(None, run="demo-run")
    assert len(overview_ids(at)) == 10
    at.multiselect(key="overview.flags").set_value(["no_tests_before_submit"]).run()
    assert overview_ids(at) == ["aefe890e-4268-4666-90b5-dd09d3259e06"]
    assert at.query_params["flag"] == "no_tests_before_submit"
    linked = app(None, run="demo-run", flag=["touched_tests", "ran_tests"])
    assert overview_ids(linked) == [PAGER_EXPLORER]
