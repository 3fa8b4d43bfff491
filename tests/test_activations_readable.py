"""The Activations page's computations, on exact tensors: hooks in forward order and on a readable scale, every head
at a named query token, attention summed by message segment, predictions from the logits, and cosines against
the baseline of unpaired steps. The files are written without torch (``numpy_pt``)."""

from __future__ import annotations

import math

import numpy as np
import numpy_pt
import pandas as pd
import pytest

from ares_viewer import activations
from ares_viewer.activations import attention, figures, hooks, logits, prompt, similarity, views
from ares_viewer.analysis import align
from ares_viewer.runs.run import load_episode
from testdata import synthetic

SHUFFLED = ["unembed.hook_out", "blocks.1.hook_resid_post", "blocks.0.attn.hook_pattern", "hook_pos_embed",
            "blocks.0.hook_resid_pre", "ln_final.hook_scale", "blocks.0.hook_mlp_out", "hook_embed",
            "blocks.0.ln1.hook_scale", "blocks.1.hook_resid_pre", "blocks.0.hook_resid_post", "blocks.0.attn.hook_q"]


def test_hooks_come_in_the_order_the_forward_pass_runs_them():
    assert hooks.forward_order(SHUFFLED) == [
        "hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre", "blocks.0.ln1.hook_scale", "blocks.0.attn.hook_q",
        "blocks.0.attn.hook_pattern", "blocks.0.hook_mlp_out", "blocks.0.hook_resid_post", "blocks.1.hook_resid_pre",
        "blocks.1.hook_resid_post", "ln_final.hook_scale", "unembed.hook_out"]
    # A layers x hooks frame's columns: embedding hooks, the blocks' in their order, then the final ones; a hook
    # no table knows comes after the known ones of its section, in the order given.
    assert hooks.suffix_order(["unembed.hook_out", "hook_resid_post", "my.hook_b", "hook_embed", "my.hook_a",
                               "attn.hook_pattern", "hook_resid_pre", "ln_final.hook_scale"]) == [
        "hook_embed", "hook_resid_pre", "attn.hook_pattern", "hook_resid_post", "my.hook_b", "my.hook_a",
        "ln_final.hook_scale", "unembed.hook_out"]


def _norm_frame() -> pd.DataFrame:
    frame = pd.DataFrame({"hook_resid_post": [2.0, 4.0, np.nan], "unembed.hook_out": [np.nan, np.nan, 200.0]},
                         index=pd.Index(["0", "1", "final"], name="layer"))
    frame.columns.name = "hook"
    return frame


def test_a_large_hook_no_longer_sets_the_colour_of_every_other():
    frame = _norm_frame()
    per_hook = hooks.scaled(frame, "hook")
    assert per_hook["hook_resid_post"].tolist()[:2] == [0.5, 1.0]  # each hook's own scale
    assert per_hook.loc["final", "unembed.hook_out"] == 1.0 and math.isnan(per_hook.loc["final", "hook_resid_post"])
    log = hooks.scaled(frame, "log")
    assert log.loc["1", "hook_resid_post"] == pytest.approx(math.log10(4.0))
    assert log.loc["final", "unembed.hook_out"] == pytest.approx(math.log10(200.0))
    assert hooks.scaled(frame, "raw").equals(frame)
    with pytest.raises(ValueError, match="scale must be one of"):
        hooks.scaled(frame, "sqrt")
    fig = figures.norms(frame, "norms", "hook")
    assert fig.data[0].text[2][1] == "200"  # the raw norm is still what a cell says
    assert fig.data[0].z[1][0] == 1.0


def _patterns(rng, layers: int, heads: int, queries: int, keys: int) -> dict[str, np.ndarray]:
    return numpy_pt.softmax_patterns(rng, layers, heads, queries, keys)


def test_every_head_is_shown_at_a_named_query_token(tmp_path):
    rng = np.random.default_rng(0)
    # A KV-cached call: 6 prompt tokens, 3 generated; the last pass fed the 2nd generated token (position 7).
    tokens = ["<|user|>", "fix", " the", " bug", "<|end|>", "<|assistant|>", "ls", " -", "la"]
    arrays = _patterns(rng, layers=2, heads=3, queries=1, keys=8)
    folder = numpy_pt.capture(tmp_path / "cap", [arrays], [{"token_ids": list(range(9)), "tokens": tokens,
                                                            "prompt_length": 6}])
    capture = activations.Capture(folder, reader="numpy")
    assert attention.query_positions(capture, 1) == [7]
    grid = attention.grid(capture, 1)
    assert grid.weights.shape == (2, 3, 8) and grid.layers == [0, 1]
    assert np.allclose(grid.weights[1, 2], arrays["blocks.1.attn.hook_pattern"][0, 2, 0])
    assert grid.query_name() == "position 7: ' -' (response token 2)"
    assert grid.boundary() == 6
    frame = grid.frame()
    assert frame["role"].tolist()[:8] == ["prompt"] * 6 + ["response"] * 2
    assert frame.groupby(["layer", "head"])["weight"].sum().round(5).eq(1.0).all()
    fig = figures.attention_grid(grid, "grid")
    assert len(fig.data) == 6 and fig.layout.annotations[0].text == "L0 H0"
    assert any(shape.x0 == 5.5 and shape.line.dash == "dash" for shape in fig.layout.shapes)
    with pytest.raises(KeyError, match="not 3"):
        attention.grid(capture, 1, query=3)


def test_response_positions_are_named_as_such_when_their_tokens_were_not_recorded(tmp_path):
    rng = np.random.default_rng(1)
    arrays = _patterns(rng, layers=1, heads=2, queries=1, keys=7)
    folder = numpy_pt.capture(tmp_path / "cap", [arrays], [{"prompt_token_ids": [5, 6, 7, 8]}])
    grid = attention.grid(activations.Capture(folder, reader="numpy"), 1)
    assert grid.query_name() == "position 6 (response token 3)"
    assert grid.positions.name(2) == "position 2: '7' (prompt)"  # no tokenizer: the id
    assert [grid.positions.role(p) for p in (3, 4)] == ["prompt", "response"]


@pytest.fixture
def segmented(tmp_path):
    """A 3-action episode and a KV-cached capture whose prompts are the step's context in a chat template, cut from
    the left at step 3 (the task and half of the first response gone); each call generated 2 tokens so far."""
    episode = load_episode(synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=3, seed=4,
                                                                                    output_chars=200)))
    folder = numpy_pt.chat_capture(tmp_path / "activations" / episode.episode_id, episode)
    return activations.link(episode, activations.Capture(folder, reader="numpy"))


def test_attention_by_segment_adds_up_to_the_attended_mass_and_marks_what_was_cut(segmented):
    frame = attention.by_segment(segmented)
    assert sorted(frame["step"].unique()) == [1, 2, 3] and not frame.attrs["notes"]
    for step, rows in frame.groupby("step"):
        mean = np.mean([segmented.capture.array(step - 1, f"blocks.{layer}.attn.hook_pattern")[0, :, -1]
                        for layer in (0, 1)], axis=(0, 1))
        # Every key is in exactly one seen segment: the masses add up to the query's whole attended mass (1).
        assert rows["mass"].sum(skipna=True) == pytest.approx(mean.sum()) == pytest.approx(1.0, abs=1e-5)
        spans = attention.segments(prompt.of_capture(segmented.capture, step - 1,
                                                     [m.content for m in segmented.episode.context(step)]),
                                   [m.role for m in segmented.episode.context(step)], mean.shape[0])
        for part in spans:
            if part.start is not None:
                got = rows.loc[rows["segment"] == part.name, "mass"].item()
                assert got == pytest.approx(mean[part.start:part.end].sum())
    step3 = frame[frame["step"] == 3].set_index("segment")
    assert step3.loc["task", "status"] == "absent" and math.isnan(step3.loc["task", "mass"])  # never 0
    assert step3.loc["response 1", "status"] == "cut" and step3.loc["response 1", "mass"] > 0
    assert step3.loc["observation 2", "latest"] and step3.loc["this response", "tokens"] == 2
    step1 = frame[frame["step"] == 1].set_index("segment")
    assert step1.loc["task", "status"] == "seen" and list(step1.index) == ["template", "task", "this response"]
    kinds = attention.by_kind(frame)
    assert list(kinds.columns) == ["task", "latest observation", "earlier observations", "earlier responses",
                                   "this response", "template"]
    assert math.isnan(kinds.loc[3, "task"]) and kinds.loc[1, "task"] > 0
    assert kinds.sum(axis=1, skipna=True).round(5).eq(1.0).all()
    fig = figures.segments(frame, "segments")
    row3 = list(fig.data[0].y).index("3")
    assert fig.data[0].text[row3][list(fig.data[0].x).index("task")] == "absent"
    assert fig.data[0].text[row3][list(fig.data[0].x).index("response 1")].endswith("cut")


def test_the_end_of_the_prompt_is_asked_for_only_where_the_capture_holds_it(segmented):
    frame = attention.by_segment(segmented, attention.PROMPT_END)
    assert frame.empty and set(frame.attrs["notes"]) == {1, 2, 3}
    assert "KV cache" in frame.attrs["notes"][1]


def test_predictions_are_the_log_softmax_of_the_logits(tmp_path):
    rng = np.random.default_rng(3)
    vocab = 50
    out = rng.normal(scale=3.0, size=(1, 2, vocab)).astype(np.float32)
    arrays = {**_patterns(rng, layers=1, heads=1, queries=2, keys=2), "unembed.hook_out": out}
    reference = out[0, 1].astype(np.float64) - np.log(np.exp(out[0, 1].astype(np.float64)).sum())
    chosen = int(np.argsort(reference)[-3])  # the third most likely token was sampled
    meta = {"token_ids": [4, 9, chosen], "tokens": ["a", "b", "c"], "prompt_length": 1,
            "logprobs": [-1.0, float(reference[chosen])]}
    folder = numpy_pt.capture(tmp_path / "cap", [arrays], [meta])
    found = logits.predictions(activations.Capture(folder, reader="numpy"), 1, k=5)
    assert found.position == 1 and found.chosen_id == chosen and found.chosen_token == "c"
    assert found.chosen_logprob == pytest.approx(reference[chosen]) == pytest.approx(found.recorded_logprob)
    assert found.chosen_rank == 3
    assert found.top["token_id"].tolist() == [int(i) for i in np.argsort(-reference)[:5]]
    assert np.allclose(found.top["logprob"], np.sort(reference)[::-1][:5])
    assert found.top["prob"].sum() <= 1.0 and found.decoder is None
    earlier = logits.predictions(activations.Capture(folder, reader="numpy"), 1, position=0)
    assert earlier.chosen_id == 9 and earlier.chosen_logprob == pytest.approx(
        float(out[0, 0, 9] - np.log(np.exp(out[0, 0].astype(np.float64)).sum())), abs=1e-6)
    assert np.allclose(np.exp(logits.log_softmax(out[0])).sum(axis=-1), 1.0)


def test_a_step_without_logits_has_no_predictions(tmp_path):
    folder = numpy_pt.capture(tmp_path / "cap", [{"blocks.0.hook_resid_post": np.ones((1, 1, 4))}])
    assert logits.predictions(activations.Capture(folder, reader="numpy"), 1) is None


def _resid_capture(folder, vectors: list[np.ndarray]):
    return numpy_pt.capture(folder, [{"blocks.0.hook_resid_post": v.reshape(1, 1, -1)} for v in vectors])


def test_two_steps_of_one_episode_compare_against_the_episodes_other_pairs(tmp_path):
    path = synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=3, seed=4))
    episode = load_episode(path)
    vectors = [np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([0.0, 1.0])]
    folder = _resid_capture(tmp_path / "activations" / episode.episode_id, vectors)
    linked = activations.link(episode, activations.Capture(folder, reader="numpy"))
    frame, baseline = similarity.compare_steps(linked, 1, 3)
    assert frame["cosine"].item() == pytest.approx(0.0)
    # the other pairs: (1, 2) and (2, 3), both at 45 degrees
    assert baseline.loc[0, ["mean", "min", "max", "pairs"]].tolist() == pytest.approx(
        [math.sqrt(0.5), math.sqrt(0.5), math.sqrt(0.5), 2])
    fig = figures.cosine_baseline(frame, baseline, "cosines")
    assert list(fig.layout.yaxis.range) == [-1, 1]


def test_the_baseline_of_two_episodes_is_the_cosine_of_the_pairs_not_aligned(tmp_path):
    doc = synthetic.episode_dict(actions=3, seed=4)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = load_episode(synthetic.write_episode(tmp_path / "a", doc))
    b = load_episode(synthetic.write_episode(tmp_path / "b", {**doc, "episode_id": "other"}))
    ours = activations.link(a, activations.Capture(_resid_capture(tmp_path / "ca", [
        np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])]), reader="numpy"))
    theirs = activations.link(b, activations.Capture(_resid_capture(tmp_path / "cb", [
        np.array([1.0, 0.1, 0.0]), np.array([0.0, 1.0, 0.1]), np.array([0.1, 0.0, 1.0])]), reader="numpy"))
    pairs = [align.Pair(1, 1, 1.0), align.Pair(2, 2, 1.0), align.Pair(3, 3, 1.0)]
    aligned = views.compare_aligned(ours, theirs, pairs=pairs)
    assert (aligned["cosine"] > 0.99).all()
    base = similarity.baseline(ours, theirs, pairs=pairs)
    table = similarity.cosines(*(similarity.vectors(x, views.RESIDUAL)[0] for x in (ours, theirs)), "0")
    unaligned = [table.loc[i, j] for i in (1, 2, 3) for j in (1, 2, 3) if i != j]
    assert base.loc[0, "pairs"] == 6 and base.loc[0, "mean"] == pytest.approx(np.mean(unaligned))
    assert base.loc[0, "max"] < 0.11  # aligned pairs at 0.99 stand far above what unpaired steps share
    fig = figures.compare_cosines(aligned, "c")
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1.0, 1.0)
