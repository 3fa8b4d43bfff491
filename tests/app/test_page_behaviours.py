"""The Behaviours page in AppTest on the bundled sample runs: rates among solved and failed, per task, and a
flag's episodes with links to the evidence step."""

from __future__ import annotations

import json
import pathlib

import chat_server
import page_text
import pytest
import streamlit as st

from ares_viewer_app.data import loaders
from ares_viewer_app.panels import flag_panel
from ares_viewer_app.text import escape

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
    assert [link.proto.label for link in links] == [f"{escape.line(PAGER_EXPLORER)} · failed · step 9"]
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


def test_rubric_search_says_what_it_sends_and_an_endpoint_failure_is_not_a_no(samples, app, monkeypatch):
    yes = json.dumps({"match": True, "steps": [2], "reason": "drops the accents"})
    no = json.dumps({"match": False, "steps": [], "reason": "transliterates"})
    with chat_server.serve([yes, no]) as server:  # a third request is answered HTTP 400
        monkeypatch.setenv("ARES_VIEWER_MODEL_URL", server.base_url)
        monkeypatch.setenv("ARES_VIEWER_MODEL", "judge")
        monkeypatch.setenv("ARES_VIEWER_SANDBOX", "1")  # rubric searches are offered where the sandbox is
        at = app("behaviours", run="demo-run")
        at.selectbox(key="behaviours.task").set_value("textkit__slugify-accents").run()
        at.text_area(key="behaviours.rubric.text").input("the agent throws away the accented letters").run()
        assert "3 episode(s): 3 need a call to" in page_text.of(at)
        assert server.requests == []  # nothing is sent before the button
        at.button(key="behaviours.rubric.go").click().run()
        assert not at.exception
        assert len(server.requests) == 3
        assert "1 yes · 1 no · 1 error · 0 not checked" in page_text.of(at)
        cited = [link for link in at.get("page_link") if " · yes · " in link.proto.label]
        assert len(cited) == 1 and cited[0].proto.query_string.endswith("&step=2")
        assert any("not counted as no" in w.value for w in at.warning)


def test_the_matches_are_grouped_on_request(samples, app, monkeypatch):
    yes = json.dumps({"match": True, "steps": [2], "reason": "edits the slug module"})
    groups = json.dumps(
        {
            "clusters": [
                {
                    "name": "one-line sed fixes",
                    "members": ["aefe890e-4268-4666-90b5-dd09d3259e06", "48d3a704-23f6-46b7-aed6-fa19b678c0a6"],
                }
            ]
        }
    )
    with chat_server.serve([yes, yes, yes, groups]) as server:
        monkeypatch.setenv("ARES_VIEWER_MODEL_URL", server.base_url)
        monkeypatch.setenv("ARES_VIEWER_MODEL", "judge")
        monkeypatch.setenv("ARES_VIEWER_SANDBOX", "1")  # rubric searches are offered where the sandbox is
        at = app("behaviours", run="demo-run")
        at.selectbox(key="behaviours.task").set_value("textkit__slugify-accents").run()
        at.text_area(key="behaviours.rubric.text").input("the agent edits the slug module").run()
        at.button(key="behaviours.rubric.go").click().run()
        at.button(key="behaviours.rubric.group").click().run()
        assert not at.exception
        shown = page_text.of(at)
        assert "**one-line sed fixes** · 2 episode(s)" in shown
        assert "**unassigned** · 1 episode(s)" in shown
        assert len(server.requests) == 4


def test_a_training_logs_rates_come_per_iteration_too(app, monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(SAMPLE_RUNS.parent / "tests" / "fixtures" / "tinker"))
    at = app("behaviours", run="math-rl")
    assert not at.exception
    assert "Per training iteration" in [e.label for e in at.expander]
    per = next(d.value for d in at.dataframe if "iteration" in d.value.columns)
    assert set(per["iteration"]) == {0, 10}


def test_a_large_runs_behaviour_filter_reads_the_flags_of_every_episode_after_the_button(samples, app, monkeypatch):
    st.cache_resource.clear()  # the run as opened by an earlier test had its flags read in that test's cache
    st.cache_data.clear()
    # As a run larger than the page reads at once: the flags of all its episodes, not of its first ones.
    monkeypatch.setattr(flag_panel, "AUTO_EPISODES", 3)
    monkeypatch.setattr(loaders, "BEHAVIOUR_EPISODES", 3)
    at = app(None, run="demo-run", flag="no_tests_before_submit")
    assert len(overview_ids(at)) == 10  # not read yet: the filter waits
    assert "The Behaviour filter applies once the flags are read." in page_text.of(at)
    assert at.button(key="overview.read_flags").label == "Read the flags of all 10 episodes"
    at.button(key="overview.read_flags").click().run()
    assert not at.exception
    assert overview_ids(at) == ["aefe890e-4268-4666-90b5-dd09d3259e06"]  # the run's fifth episode
    behaviours_page = app("behaviours", run="demo-run")
    assert "Flags of all 10 episodes" in page_text.of(behaviours_page)


def test_snapshot_flags_count_every_episode_read_so_far_beyond_the_first_ones(samples, app, monkeypatch):
    st.cache_resource.clear()  # the run as opened by an earlier test keeps its snapshot flags in that test's cache
    st.cache_data.clear()
    # As a run larger than the page reads at once: its first 3 episodes now, the other 7 on the button.
    monkeypatch.setattr(loaders, "BEHAVIOUR_EPISODES", 3)
    at = app("behaviours", run="demo-run")
    assert not at.exception
    assert "Snapshot flags: of 3 of 10 episodes read so far." in page_text.of(at)
    rates = at.dataframe[0].value.set_index("flag")
    assert rates.loc["touched_tests_files", "episodes"] == 0  # the explorer is the run's sixth episode
    assert at.button(key="behaviours.read_snapshots").label == "Read the snapshot flags of the other 7 episodes"
    at.button(key="behaviours.read_snapshots").click().run()
    assert not at.exception
    assert "Snapshot flags: of all 10 episodes read so far." in page_text.of(at)
    rates = at.dataframe[0].value.set_index("flag")
    assert rates.loc["touched_tests_files", ["solved", "failed"]].tolist() == [0, 1]
    at.selectbox(key="behaviours.flag").set_value("touched_tests_files").run()
    assert [link.proto.label for link in at.get("page_link")] == [f"{escape.line(PAGER_EXPLORER)} · failed · step 9"]
    st.cache_data.clear()
    again = app("behaviours", run="demo-run")  # kept in the cache: all 10 without the button
    assert "Snapshot flags: of all 10 episodes read so far." in page_text.of(again)


def test_the_overview_filters_by_a_snapshot_flag_among_the_episodes_read_so_far(samples, app, monkeypatch):
    st.cache_resource.clear()
    st.cache_data.clear()
    monkeypatch.setattr(loaders, "BEHAVIOUR_EPISODES", 3)
    at = app(None, run="demo-run", flag="touched_tests_files")
    assert overview_ids(at) == []
    assert "Snapshot flags cover 0 of 10 episodes (the Behaviours page reads the rest)." in page_text.of(at)
    page = app("behaviours", run="demo-run")
    page.button(key="behaviours.read_snapshots").click().run()
    st.cache_data.clear()
    at = app(None, run="demo-run", flag="touched_tests_files")
    assert overview_ids(at) == [PAGER_EXPLORER]
    assert "Snapshot flags cover 10 of 10 episodes" in page_text.of(at)
