"""Every page opens on the bundled sample runs (the app's default) without an exception."""

from __future__ import annotations

import pathlib

import page_text
import pytest

import ares_viewer
from ares_viewer import snapshots

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_runs"


@pytest.fixture
def bundled(monkeypatch):
    monkeypatch.delenv("ARES_VIEWER_RUNS", raising=False)
    runs = sorted(p for p in SAMPLES.iterdir() if p.is_dir() and any(p.glob("*.json"))) if SAMPLES.is_dir() else []
    if not runs:
        pytest.skip("no sample runs bundled yet")
    return ares_viewer.open_run(runs[0])


@pytest.mark.parametrize("page", [None, "episode", "files", "compare", "groups", "search", "review"])
def test_page_opens_on_the_bundled_run(bundled, app, page):
    at = app(page)
    assert not at.exception
    assert not at.error
    assert at.query_params["run"] == pathlib.Path(bundled.location).name


def test_every_step_of_every_bundled_episode_renders(bundled, app):
    """Walk each episode's steps once through deep links: real data, every kind of step."""
    for episode_id in bundled.episode_ids:
        episode = bundled.episode(episode_id)
        for k in sorted({0, 1, len(episode.steps) // 2, len(episode.steps) - 1}):
            at = app("episode", episode=episode_id, step=str(k))
            assert not at.exception, (episode_id, k, at.exception)
            assert any(c.value.startswith(f"step {k} (") for c in at.caption)


def test_a_step_with_a_snapshot_links_to_its_sandbox(bundled, app):
    """The step viewer offers to restore the step it shows, with the same run, episode and step."""
    episode = next(bundled.episode(i) for i in bundled.episode_ids if snapshots.find(bundled.episode(i)))
    k = snapshots.find(episode)[-1].step_index
    at = app("episode", episode=episode.episode_id, step=str(k))
    links = [link for link in at.get("page_link")
             if link.proto.page == "sandbox" and link.proto.label.startswith("Restore step")]
    assert len(links) == 1
    assert links[0].proto.label == f"Restore step {k} into a live container"
    query = dict(part.split("=", 1) for part in links[0].proto.query_string.split("&"))
    assert query["episode"] == episode.episode_id and query["step"] == str(k)


def test_a_step_that_saw_one_message_says_one_message(bundled, app):
    """The first action of an episode saw only the task prompt: "1 message", never "1 messages"."""
    episode = bundled.episode(bundled.episode_ids[0])
    assert episode.steps[1].context_len == 1
    at = app("episode", episode=episode.episode_id, step="1")
    [caption] = [c.value for c in at.caption if c.value.startswith("step 1 (")]
    assert "context 1 message (+1 new)" in caption
    assert "Full context (1 message)" in [t.label for t in at.toggle]


def test_the_first_request_has_no_unknown_duration(bundled, app):
    """Step 0 took no time of its own: its caption leaves the duration out instead of showing "– s"."""
    episode = bundled.episode(bundled.episode_ids[0])
    at = app("episode", episode=episode.episode_id, step="0")
    [caption] = [c.value for c in at.caption if c.value.startswith("step 0 (")]
    assert caption == "step 0 (FIRST)"
    at = app("episode", episode=episode.episode_id, step="1")
    [caption] = [c.value for c in at.caption if c.value.startswith("step 1 (")]
    assert caption.startswith(f"step 1 (MID) · {episode.steps[1].duration:.1f} s · ")


def test_the_step_list_names_a_context_rewrite_as_the_other_views_do(bundled, app):
    """The step list marks a rewritten context with the words of the step chart and of "Worth a look"."""
    episode, k = next((e, s.index) for e in map(bundled.episode, bundled.episode_ids) for s in e.steps
                      if s.context_rewritten)
    at = app("episode", episode=episode.episode_id, step=str(k))
    frame = page_text.step_list(at)
    assert "context rewritten" in frame.loc[k, "rc"]
    assert at.button(key=f"episode.landmark.{k}").label.startswith(f"step {k}: context rewritten")
