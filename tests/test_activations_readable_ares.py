"""The Activations page's computations on captures recorded through real ARES (``interp_run``: ARES's
HookedTransformerLLMClient and ActivationCapture around a random-weight TransformerLens model, episodes run in
containers): the forward order is the order TransformerLens ran the hooks, the logits' logprob of each chosen token
is the one the recorder computed from its own forward pass, every head is read at a named token, and the segment
masses add up. Fails in CI when the interp venv or the engine is missing."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ares_viewer
from ares_viewer import activations
from ares_viewer.activations import attention, hooks, logits, views

pytestmark = [pytest.mark.interp, pytest.mark.docker]


def _linked(interp_run, episode_id: str) -> activations.Linked:
    found = activations.find(ares_viewer.open_run(str(interp_run.run)).episode(episode_id))
    assert found is not None
    return found


def test_the_forward_order_is_the_order_transformer_lens_ran_the_hooks(interp_run):
    """ARES's capture stores each hook as it fires: the file's order is the forward pass's."""
    capture = _linked(interp_run, "kv-episode").capture
    fired = list(capture.hooks(0))
    assert hooks.forward_order(reversed(fired)) == fired
    assert fired[-1] == "unembed.hook_out"
    summary = views.step_summary(capture, 1)
    assert list(summary.columns) == hooks.suffix_order(summary.columns)
    assert summary.columns[-1] == "unembed.hook_out" and summary.columns[0] == "hook_pos_embed" == fired[0]


@pytest.mark.parametrize("episode_id", ["kv-episode", "full-episode"])
def test_the_chosen_tokens_logprob_from_the_logits_is_the_recorders(interp_run, episode_id):
    linked = _linked(interp_run, episode_id)
    for step in linked.steps():
        meta = linked.capture.meta(step - 1)
        found = logits.predictions(linked.capture, step)
        assert found.position == len(meta["token_ids"]) - 2
        assert found.chosen_id == meta["token_ids"][-1] and found.chosen_token == meta["tokens"][-1]
        assert found.chosen_logprob == pytest.approx(meta["logprobs"][-1], abs=1e-4)
        assert found.recorded_logprob == meta["logprobs"][-1]
        assert found.decoder is not None and found.top["token"].notna().all()
        assert found.top["logprob"].is_monotonic_decreasing and len(found.top) == 10
    # Without a KV cache every position is held: the end of the prompt chose the response's first token.
    if episode_id == "full-episode":
        meta = linked.capture.meta(0)
        first = logits.predictions(linked.capture, 1, position=meta["prompt_length"] - 1)
        assert first.chosen_id == meta["token_ids"][meta["prompt_length"]]
        assert first.chosen_logprob == pytest.approx(meta["logprobs"][0], abs=1e-4)


def test_every_head_is_read_at_a_named_token(interp_run):
    linked = _linked(interp_run, "kv-episode")
    meta = linked.capture.meta(1)
    grid = attention.grid(linked.capture, 2)
    query = len(meta["tokens"]) - 2
    assert grid.query == query and grid.weights.shape == (2, 4, query + 1)
    assert grid.query_name() == (f"position {query}: {meta['tokens'][query]!r} "
                                 f"(response token {query - meta['prompt_length'] + 1})")
    assert grid.boundary() == meta["prompt_length"]
    assert np.allclose(grid.weights.sum(axis=-1), 1.0, atol=1e-4)
    full = _linked(interp_run, "full-episode")
    assert attention.query_positions(full.capture, 1) == list(range(len(full.capture.meta(0)["tokens"]) - 1))


@pytest.mark.parametrize("query", [attention.LAST, attention.PROMPT_END])
def test_the_segments_of_real_clipped_prompts_add_up_and_mark_the_unseen(interp_run, query):
    """The real prompts lost their end (TransformerLens truncates on the right): the first message is cut, every
    later one absent."""
    linked = _linked(interp_run, "full-episode")
    frame = attention.by_segment(linked, query)
    assert not frame.attrs["notes"] and sorted(frame["step"].unique()) == linked.steps()
    for step, rows in frame.groupby("step"):
        assert math.isclose(rows["mass"].sum(skipna=True), 1.0, abs_tol=1e-4)
        messages = rows[rows["message"].notna()].sort_values("message")
        assert messages["status"].iloc[0] == attention.CUT
        assert (messages["status"].iloc[1:] == attention.ABSENT).all()
        assert messages["mass"].iloc[1:].isna().all()
        assert len(messages) == len(linked.episode.context(step))
    kv = attention.by_segment(_linked(interp_run, "kv-episode"), attention.PROMPT_END)
    assert kv.empty and all("KV cache" in why for why in kv.attrs["notes"].values())
