"""Pages survive hostile files: per-file errors on the overview, never a traceback on the episode page."""

from __future__ import annotations

import hostile_files
import page_text
import pytest

import ares_viewer


@pytest.fixture
def hostile(runs, tmp_path):
    """A run under the runs folder holding a good episode and every hostile file of ``hostile_files``."""
    return hostile_files.write_all(tmp_path / "runs" / "hostile")


def test_overview_lists_each_hostile_file_with_its_reason(hostile, app):
    at = app(run="hostile")
    assert not at.exception
    shown = page_text.figures(at)
    assert shown["Unreadable files"] == "4"
    assert any("4 file(s) could not be read" in e.label for e in at.expander)
    text = page_text.of(at)
    for name in ("ares_deep", "tinker_deep", "mini_wrong", "huge"):
        assert str(hostile[name]) in text, name
    assert "nested too deeply" in text and "over the 512 MB one file may be" in text


def test_episode_page_opens_the_readable_episodes_of_a_hostile_run(hostile, app):
    readable = ares_viewer.open_run(hostile["good"].parent).episode_ids
    assert len(readable) > 1  # the good episode and the tinker file's readable lines
    for episode_id in readable:
        at = app("episode", run="hostile", episode=episode_id)
        assert not at.exception, episode_id
        assert at.selectbox(key="episode.pick").value == episode_id


def test_an_episode_file_turned_hostile_after_indexing_is_a_message(hostile, app):
    at = app(run="hostile")
    assert not at.exception
    good = hostile["good"]
    good.write_bytes(b'{"episode_id": ' + hostile_files.deep_list() + b"}")
    at = app("episode", run="hostile", episode=good.stem)
    assert not at.exception
    assert any("Cannot read this episode" in page_text.shown(e.value) for e in at.error)
