"""The episode pages on a run of 200,000 rollouts: the episode chooser lists a page of the run, finds an episode
by typed text and opens one named in the URL, and no page loads the run's whole table (``Run.episodes``)."""

from __future__ import annotations

import conftest
import pytest
from streamlit.testing.v1 import AppTest

from ares_viewer_app.panels import choosers

ROLLOUTS = 200_000
# An episode of the last file (iteration 99, the last group's last rollout) and one in the middle.
LAST = "big/it99/train/g249/t7"
MIDDLE = "big/it57/train/g131/t3"


@pytest.fixture
def big(big_run, no_whole_table, monkeypatch):
    """The runs folder holding ``big`` (``ROLLOUTS`` rollouts), its index shared by the tests; loading the whole
    episode table fails the test."""
    root, cache = big_run
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(cache))
    return root


def _header_id(at) -> str:
    """The episode id the Episode page's header names."""
    return next(c.value for c in at.caption if " · " in c.value and c.value.startswith("`")).split("`")[1]


def _bounded(picker) -> None:
    assert 0 < len(picker.options) <= choosers.CHOICES + 1  # a page of matches (and the chosen one)


def test_episode_page_starts_on_an_unsolved_episode_with_a_page_of_choices(big, app):
    at = app("episode", run="big")
    assert not at.exception
    picker = at.selectbox(key="episode.pick")
    _bounded(picker)
    assert at.query_params["episode"] == picker.value == _header_id(at)
    assert any(c.value.startswith("step 1") for c in at.caption)  # its first action is shown
    assert f"The first {choosers.CHOICES} matching episodes" in " ".join(c.value for c in at.caption)


def test_an_episode_named_in_the_url_opens_directly(big, app):
    at = app("episode", run="big", episode=LAST, step="1")
    assert not at.exception
    assert _header_id(at) == LAST
    assert at.selectbox(key="episode.pick").value == LAST
    _bounded(at.selectbox(key="episode.pick"))


def test_typed_text_finds_an_episode_and_picking_it_opens_it(big, app):
    at = app("episode", run="big")
    at.text_input(key="episode.pick.find").input(MIDDLE).run()
    picker = at.selectbox(key="episode.pick")
    found = [o for o in picker.options if o.endswith(MIDDLE)]
    assert len(found) == 1 and len(picker.options) == 2  # the match, and the episode still shown
    picker.select(MIDDLE).run()
    assert not at.exception
    assert at.query_params["episode"] == MIDDLE
    assert _header_id(at) == MIDDLE


def test_unsolved_only_lists_unsolved_episodes(big, app):
    at = app("episode", run="big", episode=LAST, step="1")
    at.toggle(key="episode.pick.unsolved").set_value(True).run()
    picker = at.selectbox(key="episode.pick")
    _bounded(picker)
    assert all("reward 0 " in o for o in picker.options[1:])


def test_an_unknown_episode_in_the_url_says_so(big, app):
    at = app("episode", run="big", episode="big/it999/train/g0/t0")
    assert any("no episode" in e.value for e in at.error)
    assert f"{ROLLOUTS:,} episodes" in at.error[0].value
    _bounded(at.selectbox(key="episode.pick"))


def test_compare_defaults_to_a_failure_and_a_solved_attempt_at_its_task(big, app):
    at = app("compare", run="big")
    assert not at.exception
    a, b = at.selectbox(key="compare.a"), at.selectbox(key="compare.b")
    _bounded(a)
    _bounded(b)
    label_a, label_b = a.format_func(a.value), b.format_func(b.value)
    assert "reward 0 " in label_a and "reward 1 " in label_b
    assert label_a.split(" · ")[0] == label_b.split(" · ")[0]  # the same task
    assert at.dataframe(key="compare.pairs").value is not None


def test_compare_of_named_episodes_and_the_two_runs_tab(big, app):
    at = app("compare", run="big", episode=LAST, other=MIDDLE)
    assert not at.exception
    assert at.selectbox(key="compare.a").value == LAST
    assert at.selectbox(key="compare.b").value == MIDDLE


def test_files_page_names_the_episode_without_listing_the_run(big, app):
    at = app("files", run="big", episode=MIDDLE)
    assert not at.exception
    assert at.selectbox(key="files.episode").value == MIDDLE
    _bounded(at.selectbox(key="files.episode"))


def test_sandbox_and_activations_pages_open_the_named_episode(big, app):
    for page, key, says in (("sandbox", "sandbox.episode_pick", "no recorded snapshots"),
                            ("activations", "activations.episode", "No activations were found")):
        at = app(page, run="big", episode=LAST)
        assert not at.exception, page
        assert at.selectbox(key=key).value == LAST
        _bounded(at.selectbox(key=key))
        assert says in " ".join(i.value for i in at.info), page


def test_groups_page_lists_a_page_of_groups_and_opens_the_named_episodes_group(big, app):
    at = app("groups", run="big", episode=MIDDLE)
    assert not at.exception
    picker = at.selectbox(key="groups.pick")
    assert picker.value == MIDDLE.rsplit("/", 1)[0]
    assert len(picker.options) <= choosers.CHOICES + 1
    assert f"{ROLLOUTS // 8:,} groups · {ROLLOUTS:,} rollouts" in " ".join(c.value for c in at.caption)
    assert any(m.value.startswith("**traj 7**") for m in at.markdown)  # the group's 8 rollouts side by side


def test_the_overview_opens_on_the_table_page_the_url_names(big):
    at = AppTest.from_file(conftest.MAIN, default_timeout=120)
    at.query_params.update(run="big", page="3", sort="num_actions", desc="1")
    at.run()
    assert not at.exception
    assert at.number_input(key="overview.page").value == 3
    assert f"{ROLLOUTS} of {ROLLOUTS} episodes · rows 401–600" in " ".join(c.value for c in at.caption)
    at.number_input(key="overview.page").set_value(1).run()
    assert "page" not in at.query_params and at.query_params["sort"] == "num_actions"
