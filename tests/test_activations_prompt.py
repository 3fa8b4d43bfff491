"""A model call's prompt from a capture's metadata.json: its token ids under every key callers use, decoded with
the capture's tokenizer offline, whether the client clipped it, and where each message begins in it."""

from __future__ import annotations

import json
import pathlib

import pytest

from ares_viewer import activations
from ares_viewer.activations import prompt, views
from testdata import activations as fixtures

MESSAGES = [
    ("system", "You are a careful engineer. Fix the bug the user reports, then submit your change."),
    ("user", "Please fix the failing test in src/calc/core.py so that add(2, 3) returns 5."),
    ("assistant", "THOUGHT: I will list the files first.\n```bash\nls -la\n```"),
    ("user", "<returncode>0</returncode><output>src tests README.md</output>"),
]
CONTENTS = [content for _, content in MESSAGES]


def _capture(folder: pathlib.Path, *step_metadata: dict, **top) -> activations.Capture:
    """A capture of metadata.json alone (the prompt is read from it; no step file is opened)."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"model_name": "random-tiny", "num_steps": 0, "step_metadata": list(step_metadata), **top}
    (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    return activations.Capture(folder)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> pathlib.Path:
    pytest.importorskip("tokenizers", reason="the tokenizers package (a dependency of litellm) writes the tokenizer")
    return pathlib.Path(fixtures.write_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer", CONTENTS))


def test_the_prompt_ids_are_read_from_every_key_callers_use(tmp_path):
    capture = _capture(tmp_path / "c", {"prompt_token_ids": [5, 6, 7], "n_ctx": 5, "max_new_tokens": 2},
                       {"input_ids": [1, 2], "n_ctx": 5, "max_new_tokens": 2},
                       {"token_ids": [9, 8, 7, 6], "prompt_length": 3, "tokens": ["a", "b", "c", "d"]})
    first = prompt.of_capture(capture, 0)
    assert first.key == "step_metadata[0].prompt_token_ids" and first.ids == [5, 6, 7]
    assert first.texts is None and first.text_source is None and first.labels() == ["5", "6", "7"]
    # 3 tokens = n_ctx 5 - max_new_tokens 2: the most the client passes on, so the start was cut.
    assert first.clipped is True and first.seen_tokens == 3 and first.limit == 3
    assert "n_ctx 5 minus max_new_tokens 2" in first.evidence
    second = prompt.of_capture(capture, 1)
    assert second.key == "step_metadata[1].input_ids" and second.clipped is False and "under" in second.evidence
    third = prompt.of_capture(capture, 2)
    assert third.key == "step_metadata[2].token_ids[:prompt_length]" and third.ids == [9, 8, 7]
    assert third.texts == ["a", "b", "c"] and third.text_source == "step_metadata[2].tokens"
    # No window recorded and no context to compare with: nothing is claimed.
    assert third.clipped is None and "records no context window" in third.evidence
    assert prompt.of_capture(capture, 3) is None and prompt.of_capture(_capture(tmp_path / "d", {}), 0) is None


def test_a_tokenizer_beside_the_capture_decodes_the_ids_offline(tmp_path, tokenizer_dir):
    ids = fixtures.chat_ids(tokenizer_dir, MESSAGES)
    folder = tmp_path / "c"
    capture = _capture(folder, {"token_ids": [*ids, 11, 12], "prompt_length": len(ids)},
                       tokenizer=str(tokenizer_dir))
    found = prompt.of_capture(capture, 0, CONTENTS)
    assert found.text_source == f"the tokenizer at {tokenizer_dir / 'tokenizer.json'} (tokenizers)"
    assert "".join(found.texts).startswith("<|system|>You are a careful engineer.")
    assert found.texts[-1] == "<|assistant|>"
    # Every message starts where its text does; the whole context is there: not clipped.
    assert [s.message for s in found.message_starts] == [0, 1, 2, 3] and found.unlocated == 0
    for start in found.message_starts:
        assert "".join(found.texts[start.position:]).startswith(CONTENTS[start.message][:20])
    assert found.clipped is False and "holds the beginning" in found.evidence
    # A tokenizer/ folder beside metadata.json is found without being named.
    import shutil

    shutil.copytree(tokenizer_dir, tmp_path / "beside" / "tokenizer")
    beside = _capture(tmp_path / "beside", {"prompt_token_ids": ids})
    assert prompt.of_capture(beside, 0).texts == found.texts


def test_a_prompt_cut_from_the_left_is_clipped_and_its_messages_still_marked(tmp_path, tokenizer_dir):
    ids = fixtures.chat_ids(tokenizer_dir, MESSAGES)
    cut = ids[6:]  # inside the system message, as the client's left truncation leaves it
    capture = _capture(tmp_path / "c", {"token_ids": cut, "prompt_length": len(cut)}, tokenizer=str(tokenizer_dir))
    found = prompt.of_capture(capture, 0, CONTENTS)
    assert found.clipped is True and found.seen_tokens == len(cut) and "start was cut" in found.evidence
    assert found.message_starts[0] == prompt.MessageStart(0, 0, partial=True)
    assert [s.message for s in found.message_starts[1:]] == [1, 2, 3]
    frame = found.frame()
    assert frame.loc[0, "partial"] and frame["message"].dropna().tolist() == [0, 1, 2, 3]
    assert frame["token_id"].tolist() == cut
    # Without the context, the text alone cannot tell, and no window is recorded: unknown, not "not clipped".
    assert prompt.of_capture(capture, 0).clipped is None
    assert prompt.of_capture(capture, 0).boundaries() == "Message boundaries are not marked: the step's context is " \
                                                          "not known."


def test_without_a_tokenizer_the_recorded_text_is_shown_and_a_bad_one_is_passed_over(tmp_path):
    folder = tmp_path / "c"
    (folder / "tokenizer").mkdir(parents=True)
    (folder / "tokenizer" / "tokenizer.json").write_text("{not json", encoding="utf-8")
    capture = _capture(folder, {"token_ids": [1, 2, 3], "tokens": ["x", "y", "z"], "prompt_length": 2})
    found = prompt.of_capture(capture, 0)
    assert found.texts == ["x", "y"] and found.text_source == "step_metadata[0].tokens"
    assert prompt.of_capture(_capture(tmp_path / "d", {"prompt_token_ids": [4]}), 0).labels() == ["4"]


def test_the_attention_view_labels_positions_with_the_decoded_ids(torch, tmp_path, tokenizer_dir):
    folder = tmp_path / "c"
    fixtures.write_capture(folder, steps=1, layers=1, heads=2, positions=12, tokens=False)
    ids = fixtures.chat_ids(tokenizer_dir, MESSAGES)[:12]
    meta = json.loads((folder / "metadata.json").read_text())
    meta["step_metadata"][0].update(token_ids=ids, prompt_length=10)
    (folder / "metadata.json").write_text(json.dumps(meta))
    capture = activations.Capture(folder)
    assert views.head_attention(capture, 1, 0, 0)["token"].tolist() == [str(i) for i in ids]  # no tokenizer: ids
    meta["tokenizer"] = str(tokenizer_dir)
    (folder / "metadata.json").write_text(json.dumps(meta))
    labels = views.head_attention(activations.Capture(folder), 1, 0, 0)["token"].tolist()
    assert labels[0] == "<|system|>" and "".join(labels[1:]).startswith("You are a careful")


def test_a_prompt_cut_at_the_end_says_which_messages_were_never_seen(tmp_path, tokenizer_dir):
    """Right truncation (a tokenizer's default side): the prompt ends inside the second message."""
    ids = fixtures.chat_ids(tokenizer_dir, MESSAGES)
    whole = prompt.of_capture(_capture(tmp_path / "w", {"prompt_token_ids": ids}, tokenizer=str(tokenizer_dir)), 0,
                              CONTENTS)
    second = whole.message_starts[1].position
    cut = ids[: second + 8]
    capture = _capture(tmp_path / "c", {"prompt_token_ids": cut}, tokenizer=str(tokenizer_dir))
    found = prompt.of_capture(capture, 0, CONTENTS)
    assert found.clipped is True and found.cut == "end" and found.kept() == f"its first {len(cut)} tokens"
    assert "ends inside message 2 of the context" in found.evidence and found.unseen == 2
    assert [s.message for s in found.message_starts] == [0, 1]
    assert found.boundaries().endswith("the last 2 message(s) were cut off")
