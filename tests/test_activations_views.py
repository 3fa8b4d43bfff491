"""Activations beside an episode's steps: found in the documented place, linked step to step, summarized."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ares_viewer import activations, model
from ares_viewer.activations import figures, tokens, views
from ares_viewer.analysis import align
from ares_viewer.runs.run import load_episode
from testdata import synthetic


@pytest.fixture(scope="module")
def run_with_capture(torch, tmp_path_factory):
    """A run folder holding one 3-action episode and, beside it, its activations (3 model calls)."""
    from testdata import activations as fixtures

    run = tmp_path_factory.mktemp("run")
    doc = synthetic.episode_dict(actions=3, seed=5)
    path = synthetic.write_episode(run, doc)
    fixtures.write_capture(run / "activations" / doc["episode_id"], steps=3, layers=2, heads=4, d_model=16,
                           positions=5)
    return run, load_episode(path)


def test_a_capture_is_found_beside_its_episode_and_its_steps_line_up(run_with_capture):
    run, episode = run_with_capture
    linked = activations.find(episode)
    assert linked is not None and not linked.warnings
    assert linked.capture.folder == str(run / "activations" / episode.episode_id)
    # Model call i produced the action of trajectory step i + 1; step 0 (the first request) has none.
    assert linked.steps() == [1, 2, 3]
    assert linked.capture_step(1) == 0 and linked.capture_step(3) == 2
    assert linked.capture_step(0) is None and linked.capture_step(4) is None
    assert linked.capture.model_name == "random-tiny"


def test_an_episode_without_a_capture_has_none(tmp_path):
    path = synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=2, seed=1))
    assert activations.find(load_episode(path)) is None
    (tmp_path / "activations" / "someone-else").mkdir(parents=True)
    assert activations.find(load_episode(path)) is None


def test_an_episode_id_cannot_lead_out_of_the_activations_folder(tmp_path, run_with_capture):
    _, episode = run_with_capture
    (tmp_path / "activations").mkdir()
    (tmp_path / "metadata.json").write_text("{}")  # a capture-looking folder one level up
    odd = model.Episode(**{**{f: getattr(episode, f) for f in episode.__dataclass_fields__},
                           "episode_id": "..", "path": str(tmp_path / "activations" / "x.json")})
    assert activations.folder_for(odd) is None


def test_step_counts_that_disagree_are_reported(run_with_capture, tmp_path):
    run, episode = run_with_capture
    source = run / "activations" / episode.episode_id
    copy = tmp_path / "cap"
    shutil.copytree(source, copy)
    (copy / "step_0002.pt").unlink()
    linked = activations.link(episode, activations.Capture(copy))
    assert any("says 3 steps; the folder holds 2" in w for w in linked.warnings)
    assert any("2 model calls; the episode has 3 actions" in w for w in linked.warnings)
    assert linked.steps() == [1, 2]


def test_a_bad_metadata_file_is_an_error_naming_it(tmp_path):
    (tmp_path / "metadata.json").write_text("{not json")
    with pytest.raises(activations.CaptureError, match=r"metadata\.json: cannot be read as JSON"):
        activations.Capture(tmp_path)


def test_nothing_is_read_before_a_view_asks(run_with_capture, monkeypatch):
    _, episode = run_with_capture
    opened = []
    original = activations.ptfile.PtFile.__init__

    def spy(self, path):
        opened.append(path)
        original(self, path)

    monkeypatch.setattr(activations.ptfile.PtFile, "__init__", spy)
    linked = activations.find(episode)
    assert len(linked.capture) == 3 and not opened
    linked.capture.hooks(1)
    assert [p.rsplit("/", 1)[-1] for p in opened] == ["step_0001.pt"]


def test_the_step_summary_is_layers_by_hooks(run_with_capture):
    _, episode = run_with_capture
    capture = activations.find(episode).capture
    summary = views.step_summary(capture, 2)
    assert list(summary.index) == ["embed", "0", "1", "final"]
    assert {"hook_resid_post", "attn.hook_pattern", "attn.hook_q"} <= set(summary.columns)
    resid = capture.array(1, "blocks.1.hook_resid_post")
    assert summary.loc["1", "hook_resid_post"] == pytest.approx(np.linalg.norm(resid[0], axis=-1).mean())
    assert np.isnan(summary.loc["embed", "hook_resid_post"])  # not a hook of that layer
    with pytest.raises(IndexError, match="no activations for step 0"):
        views.step_summary(capture, 0)


def test_attention_entropy_per_head_is_bounded_by_uniform_attention(run_with_capture):
    _, episode = run_with_capture
    capture = activations.find(episode).capture
    frame = views.attention_entropy(capture, 3)
    assert frame.shape == (2, 4)  # layers x heads
    keys = capture.hooks(2)["blocks.0.attn.hook_pattern"].shape[-1]
    assert frame.attrs["max_entropy"] == pytest.approx(np.log(keys))
    assert (frame.to_numpy() > 0).all() and (frame.to_numpy() <= np.log(keys) + 1e-6).all()
    pattern = capture.array(2, "blocks.1.attn.hook_pattern")[0, 2, -1]
    assert frame.loc[1, 2] == pytest.approx(-(pattern * np.log(pattern)).sum(), rel=1e-5)


def test_a_heads_attention_is_shown_over_the_prompts_tokens(run_with_capture):
    _, episode = run_with_capture
    capture = activations.find(episode).capture
    frame = views.head_attention(capture, 2, layer=0, head=1)
    assert len(frame) == 10  # step 2's prompt: 2 x 5 positions
    assert frame["token"].tolist() == [f"tok{j}" for j in range(10)]
    assert frame["weight"].sum() == pytest.approx(1.0, abs=1e-5)
    # The first query position attends to itself only (causal).
    first = views.head_attention(capture, 2, layer=0, head=1, query=0)
    assert first["weight"].iloc[0] == pytest.approx(1.0) and first["weight"].iloc[1:].sum() == 0
    assert figures.head_attention(frame, "L0 H1").data[0].x[3] == "3: 'tok3'"


def test_one_hook_across_the_trajectory_is_steps_by_layers(run_with_capture):
    _, episode = run_with_capture
    capture = activations.find(episode).capture
    frame = views.across_steps(capture, "hook_resid_post")
    assert list(frame.index) == [1, 2, 3] and list(frame.columns) == ["0", "1"]
    last = capture.array(2, "blocks.0.hook_resid_post")[0, -1]
    assert frame.loc[3, "0"] == pytest.approx(np.linalg.norm(last))
    fig = figures.heatmap(frame, "residual norm")
    assert fig.data[0].z.shape == (3, 2)


def test_the_same_hook_compares_between_aligned_episodes(torch, tmp_path):
    from testdata import activations as fixtures

    doc_a = synthetic.episode_dict(actions=3, seed=5)
    doc_b = json.loads(json.dumps(doc_a))
    doc_b["episode_id"] = "b-episode"
    for folder, doc, seed in ((tmp_path / "a", doc_a, 1), (tmp_path / "b", doc_b, 1)):
        folder.mkdir()
        synthetic.write_episode(folder, doc)
        fixtures.write_capture(folder / "activations" / doc["episode_id"], steps=3, seed=seed)
    a = activations.find(load_episode(str(tmp_path / "a" / f"{doc_a['episode_id']}.json")))
    b = activations.find(load_episode(str(tmp_path / "b" / "b-episode.json")))
    frame = views.compare_aligned(a, b)
    assert list(zip(frame["step_a"], frame["step_b"], strict=True))[:2] == [(1, 1), (1, 1)]
    assert set(frame["layer"]) == {"0", "1"} and len(frame) == 6
    assert np.allclose(frame["cosine"], 1.0)  # the same seed: the same activations
    # A hand-made alignment pairs step 1 with step 2: different activations, a lower cosine.
    moved = views.compare_aligned(a, b, pairs=[align.Pair(1, 2, 0.5)])
    assert len(moved) == 2 and (moved["cosine"] < 0.99).all()
    assert figures.compare_cosines(frame, "a vs b").data[0].z.shape == (3, 2)


def _step(extra: dict) -> model.Step:
    return model.Step(index=1, kind=model.StepKind.MID, response="ls -la", extra=extra)


def test_atif_logprobs_become_a_token_frame_and_a_heat_map():
    step = _step({"completion_token_ids": [5, 6, 7], "logprobs": [-0.01, -2.5, -0.3]})
    assert tokens.has_tokens(step)
    frame = tokens.token_frame(step, decode={5: "ls", 6: " -", 7: "la"}.get)
    assert frame["token"].tolist() == ["ls", " -", "la"]
    assert frame["prob"].iloc[1] == pytest.approx(np.exp(-2.5))
    html = figures.logprob_html(frame)
    assert html.count("<span") == 3 and "logprob -2.500" in html


def test_openai_style_logprobs_carry_their_token_text_and_are_escaped():
    step = _step({"logprobs": {"content": [{"token": "<b>", "logprob": -1.0}, {"token": "ok", "logprob": 0.0}]}})
    frame = tokens.token_frame(step)
    assert frame["token"].tolist() == ["<b>", "ok"] and frame["token_id"].isna().all()
    html = figures.logprob_html(frame)
    assert "&lt;b&gt;" in html and "<b>" not in html


def test_tinker_token_data_and_steps_without_tokens():
    frame = tokens.token_frame(_step({"tokens": [11, 12], "maybe_logprobs": [-0.5, None]}))
    assert frame["token_id"].tolist() == [11, 12] and np.isnan(frame["logprob"].iloc[1])
    assert "⟨12⟩" in figures.logprob_html(frame) and "no logprob" in figures.logprob_html(frame)
    assert tokens.token_frame(_step({})) is None and not tokens.has_tokens(_step({"tokens": "text"}))


def test_the_recorders_tokens_saved_with_a_capture_show_when_the_step_has_none(tmp_path):
    """step_metadata as the recorder writes it: the response is what follows the prompt; a step's own data wins."""
    meta = [{"step": 1, "token_ids": [1, 2, 3, 4], "tokens": ["<|user|>", "hi", "<b>", "ok"], "prompt_length": 2,
             "logprobs": [-0.5, -3.0]},
            {"step": 2, "token_ids": [1, 2], "tokens": ["<|user|>", "hi"], "prompt_length": 9}]  # inconsistent
    (tmp_path / "metadata.json").write_text(json.dumps({"model_name": "m", "num_steps": 2, "step_metadata": meta}))
    capture = activations.Capture(tmp_path)
    frame = tokens.token_frame(_step({}), capture=capture)
    assert frame["token"].tolist() == ["<b>", "ok"] and frame["token_id"].tolist() == [3, 4]
    assert frame["logprob"].tolist() == [-0.5, -3.0] and "&lt;b&gt;" in figures.logprob_html(frame)
    assert capture.tokens(0) == ["<|user|>", "hi", "<b>", "ok"]
    assert tokens.capture_frame(capture, 2) is None and tokens.capture_frame(capture, 0) is None
    own = tokens.token_frame(_step({"completion_token_ids": [7], "logprobs": [-1.0]}), capture=capture)
    assert own["token_id"].tolist() == [7]
