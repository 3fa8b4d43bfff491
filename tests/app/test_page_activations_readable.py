"""The Activations page's readable views in AppTest, on a capture written without torch (``numpy_pt.chat_capture``):
norms on a switchable scale, every head at a named query token, attention by segment, predictions from the logits,
and Compare of two steps of one episode against its baseline."""

from __future__ import annotations

import json

import numpy_pt
import page_text
import pytest

from ares_viewer.runs.run import load_episode
from testdata import synthetic


@pytest.fixture
def chat_run(tmp_path, monkeypatch):
    """chat-run: one 3-action episode whose capture's prompts are its contexts, the third cut from the left."""
    run = tmp_path / "runs" / "chat-run"
    run.mkdir(parents=True)
    doc = synthetic.episode_dict(actions=3, seed=4, output_chars=200, episode_id="episode-chat")
    synthetic.write_episode(run, doc)
    episode = load_episode(str(run / "episode-chat.json"))
    folder = numpy_pt.chat_capture(run / "activations" / "episode-chat", episode)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    return json.loads((folder / "metadata.json").read_text())


def _charts(at) -> dict[str, dict]:
    return {json.loads(c.proto.spec)["layout"]["title"]["text"]: json.loads(c.proto.spec)
            for c in at.get("plotly_chart")}


def test_the_page_draws_each_readable_view_of_a_step(chat_run, app):
    at = app("activations", run="chat-run", episode="episode-chat", step="3")
    assert not at.exception, at.exception
    charts = _charts(at)
    norms = next(spec for title, spec in charts.items() if title.startswith("Step 3: norm of each hook by layer"))
    assert norms["data"][0]["x"] == ["attn.hook_pattern", "hook_resid_post", "unembed.hook_out"]
    grid = next(spec for title, spec in charts.items() if "layers × heads" in title)
    assert len(grid["data"]) == 4
    meta = chat_run["step_metadata"][2]
    query = len(meta["tokens"]) - 2
    shown = page_text.of(at)
    assert f"Attention of position {query}: {meta['tokens'][query]!r} (response token 2)" in shown
    assert f"response from position {meta['prompt_length']}" in shown
    segments = next(spec for title, spec in charts.items() if title.startswith("Attention by message segment"))
    row = segments["data"][0]["y"].index("3")
    assert segments["data"][0]["text"][row][segments["data"][0]["x"].index("task")] == "absent"
    assert f"the recorder saved {meta['logprobs'][-1]:.4f}" in shown
    assert at.table, "the top predictions are a table"


def test_the_colour_scale_switches_to_log(chat_run, app):
    at = app("activations", run="chat-run", episode="episode-chat", step="2")
    at.radio(key="activations.scale").set_value("log").run()
    assert not at.exception
    assert any("norm of each hook by layer, log scale" in t for t in _charts(at))


def test_two_steps_of_one_episode_compare_against_its_other_pairs(chat_run, app):
    at = app("activations", run="chat-run", episode="episode-chat", step="1")
    at.radio(key="activations.compare_mode").set_value("steps").run()
    assert not at.exception
    assert at.selectbox(key="activations.compare_hook").value == "hook_resid_post"
    assert any("cosine of steps 1 and 2" in t for t in _charts(at))
    assert "Baseline, the cosine of every other pair of this episode's steps: layer 0: mean" in page_text.of(at)
