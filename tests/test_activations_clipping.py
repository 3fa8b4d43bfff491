"""Whether a call's prompt was clipped and which end, from the ids alone (no tokenizer): pure rules on ids, then a
capture's metadata.json linked to an episode whose context grows, then the messages an export says were seen."""

from __future__ import annotations

import json
import pathlib

import ares_viewer
from ares_viewer import activations
from ares_viewer.activations import clipping, model_input, prompt
from testdata import synthetic

CONTEXT = list(range(100, 140))  # a context's ids: it only grows


def test_the_same_ids_for_a_grown_context_mean_the_end_was_cut():
    end, why = clipping.pair_end(CONTEXT[:8], CONTEXT[:8], 8, ("capture step 0", "capture step 1"))
    assert end == "end" and "the same 8 token ids although the context grew" in why


def test_a_later_prompt_at_the_limit_that_begins_elsewhere_lost_its_start():
    earlier, later = CONTEXT[4:12], CONTEXT[7:15]  # the last 8 ids of a context of 12, then of 15
    end, why = clipping.pair_end(earlier, later, 8, ("capture step 0", "capture step 1"))
    assert end == "start" and "does not begin with the 4 ids capture step 0 begins with" in why
    assert "it begins 3 tokens into capture step 0's" in why


def test_a_later_prompt_at_the_limit_that_begins_as_an_unclipped_one_kept_its_start():
    end, why = clipping.pair_end(CONTEXT[:5], CONTEXT[:8], 8, ("a", "b"))
    assert end == "end" and "the start was kept" in why


def test_pairs_that_cannot_tell_say_nothing():
    assert clipping.pair_end(CONTEXT[:8], [*CONTEXT[:7], 1], 8, ("a", "b")) is None  # same start, both at limit
    assert clipping.pair_end(CONTEXT[:5], CONTEXT[3:9], None, ("a", "b")) is None  # no limit: only "the same"
    assert clipping.pair_end([], CONTEXT[:8], 8, ("a", "b")) is None


def test_only_pairs_whose_context_grew_are_read_nearest_first():
    ids = [CONTEXT[0:8], CONTEXT[5:13], CONTEXT[5:13]]
    # Pair (1, 2) is nearest to step 2 and says "end"; pair (0, 1) says "start".
    assert clipping.sides(ids, [True, True], 8, 2)[0] == "end"
    assert clipping.sides(ids, [True, False], 8, 2)[0] == "start"  # the context of step 2 was rewritten
    assert clipping.sides(ids, [False, False], 8, 2) is None
    assert clipping.sides([None, CONTEXT[:8]], [True], 8, 1) is None


def _found(**kw) -> prompt.PromptTokens:
    base = {"ids": CONTEXT[:8], "texts": None, "key": "k", "text_source": None, "clipped": True,
            "evidence": "its 8 tokens are the recorded limit", "seen_tokens": 8, "limit": 8}
    return prompt.PromptTokens(**{**base, **kw})


def test_the_verdict_prefers_the_text_then_the_neighbours_and_says_when_the_end_is_unknown():
    assert clipping.decide(_found(cut="end", evidence="text"), ("start", "ids")).end == "end"
    both = clipping.decide(_found(), ("start", "pair says start"))
    assert both.clipped and both.end == "start" and both.evidence.endswith("pair says start")
    unknown = clipping.decide(_found(), None)
    assert unknown.clipped is True and unknown.end is None and "which end is unknown" in unknown.evidence
    assert "which end was cut is unknown" in unknown.sentence()
    no_limit = clipping.decide(_found(clipped=None, limit=None, evidence="no window"),
                               ("end", "capture step 0 and capture step 1 ran on the same 8 token ids"))
    assert no_limit.clipped is True and no_limit.end == "end"
    assert clipping.decide(_found(clipped=False, evidence="under"), None).clipped is False
    missing = clipping.decide(None, None)
    assert missing.clipped is None and "records no prompt tokens" in missing.sentence()


def _linked(tmp_path: pathlib.Path, prompts: list[list[int]], **top) -> activations.Linked:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    doc = synthetic.episode_dict(actions=len(prompts), seed=3, episode_id="ep")
    synthetic.write_episode(run, doc)
    folder = run / "activations" / "ep"
    folder.mkdir(parents=True)
    for i in range(len(prompts)):
        (folder / f"step_{i:04d}.pt").write_bytes(b"")  # listed as steps; never read here
    meta = {"model_name": "m", "num_steps": len(prompts), "step_metadata": [
        {"step": i + 1, "token_ids": [*ids, 7], "prompt_length": len(ids)} for i, ids in enumerate(prompts)], **top}
    (folder / "metadata.json").write_text(json.dumps(meta))
    linked = activations.find(ares_viewer.open_run(str(run)).episode("ep"))
    assert linked is not None
    return linked


def test_a_capture_without_a_tokenizer_says_its_start_was_cut_from_the_ids(tmp_path):
    linked = _linked(tmp_path, [CONTEXT[0:8], CONTEXT[6:14], CONTEXT[12:20]], n_ctx=10, max_new_tokens=2)
    assert all(linked.episode.context_change(k).extends for k in (2, 3))
    for step in (1, 2, 3):
        found = clipping.of_step(linked, step)
        assert found.clipped is True and found.end == "start", found
        assert "n_ctx 10 minus max_new_tokens 2" in found.evidence and "context only grew" in found.evidence
        assert found.sentence().startswith("clipped to 8 tokens: its start was cut")


def test_a_capture_without_a_tokenizer_says_its_end_was_cut_from_the_ids(tmp_path):
    linked = _linked(tmp_path, [CONTEXT[0:8]] * 3, n_ctx=10, max_new_tokens=2)
    assert {clipping.of_step(linked, s).end for s in (1, 2, 3)} == {"end"}
    unclipped = _linked(tmp_path / "b", [CONTEXT[0:5], CONTEXT[0:7]], n_ctx=10, max_new_tokens=2)
    assert clipping.of_step(unclipped, 2).clipped is False
    nothing = _linked(tmp_path / "c", [CONTEXT[0:5], CONTEXT[2:7]])
    assert clipping.of_step(nothing, 2).clipped is None  # no limit, no text, different ids: unknown


MESSAGES = [{"role": "user", "content": "Fix the failing test in src/calc/core.py please."},
            {"role": "assistant", "content": "THOUGHT: list the files first, then read core.py."},
            {"role": "user", "content": "<output>src tests README.md</output>"}]


def _chat(messages) -> list[str]:
    """The messages in a chat template, as one token a word (a tokenizer's pieces)."""
    text = "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages)
    return [piece for word in text.split(" ") for piece in (word, " ")][:-1]


def test_the_messages_a_start_clipped_prompt_holds_are_its_seen_part_marked_cut():
    texts = _chat(MESSAGES)[6:]  # the first words of the first message cut
    found = prompt.prompt_tokens({"prompt_tokens": texts, "prompt_token_ids": list(range(len(texts)))}, 0,
                                 messages=[m["content"] for m in MESSAGES])
    assert found.clipped and found.cut == "start"
    seen = model_input.seen_messages(MESSAGES, found, "start")
    assert seen[0]["cut"] == "start" and seen[0]["chars"] == len(MESSAGES[0]["content"])
    assert MESSAGES[0]["content"].endswith(seen[0]["content"]) and seen[0]["content"] in "".join(texts)
    assert seen[0]["content"] == "test in src/calc/core.py please."
    assert seen[1:] == MESSAGES[1:]


def test_the_messages_an_end_clipped_prompt_holds_leave_out_the_unseen_ones():
    texts = _chat(MESSAGES)[:14]  # cut inside the assistant's message
    found = prompt.prompt_tokens({"prompt_tokens": texts, "prompt_token_ids": list(range(len(texts)))}, 0,
                                 messages=[m["content"] for m in MESSAGES])
    assert found.clipped and found.cut == "end"
    seen = model_input.seen_messages(MESSAGES, found, "end")
    assert seen[0] == MESSAGES[0] and len(seen) == 2
    assert seen[1]["cut"] == "end" and MESSAGES[1]["content"].startswith(seen[1]["content"])
    assert "".join(texts).endswith(seen[1]["content"])
    assert model_input.seen_messages(MESSAGES, _found(), "start") is None  # no text: unknown


def test_a_character_split_across_tokens_does_not_hide_where_the_cut_message_is():
    """A byte-level token holding part of ``é`` reads U+FFFD alone: the seen part is still placed."""
    messages = [{"role": "user", "content": "Make slugify turn the café menu into cafe-menu, keeping digits."},
                {"role": "assistant", "content": "THOUGHT: read slugify first.\n```bash\ncat src/slug.py\n```"}]
    texts = ["caf", "\ufffd", "\ufffd", " menu", " into", " cafe", "-menu,", " keeping", " digits.", "<|end|>",
             "<|assistant|>", "THOUGHT:", " read", " slugify", " first."]
    found = prompt.prompt_tokens({"prompt_tokens": texts, "prompt_token_ids": list(range(len(texts)))}, 0,
                                 messages=[m["content"] for m in messages])
    seen = model_input.seen_messages(messages, found, "start and end")
    assert seen is not None and [m["cut"] for m in seen] == ["start", "end"]
    assert seen[0]["content"] == "café menu into cafe-menu, keeping digits."
    assert seen[1]["content"] == "THOUGHT: read slugify first."
