"""Exports of what the model ran on, and captures attached where users keep them.

The captures here are written without torch (``tests/hostile_pt.tensor_file`` writes what ``torch.save`` writes);
their ``metadata.json`` records each call's token ids as ARES's client cut them (no tokenizer: the ids alone tell
which end). Real ARES captures are exported in tests/test_activations_ares.py.
"""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import pytest
from hostile_pt import tensor_file

import ares_viewer
from ares_viewer import activations, cli, review
from ares_viewer.activations import attached
from testdata import synthetic

HOOKS = {"blocks.0.hook_resid_post": ((1, 4, 8), (32, 8, 1)), "blocks.0.attn.hook_pattern": ((1, 2, 4, 4),
                                                                                             (32, 16, 4, 1))}
CONTEXT = list(range(100, 160))


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> pathlib.Path:
    """A cache folder of the test's own: the review notes and the attached captures live there."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(folder))
    monkeypatch.delenv("ARES_VIEWER_REVIEW_DB", raising=False)
    return folder


def _capture(folder: pathlib.Path, prompts: list[list[int]], **top) -> pathlib.Path:
    folder.mkdir(parents=True)
    for i in range(len(prompts)):
        tensor_file(folder / f"step_{i:04d}.pt", HOOKS)
    meta = {"model_name": "tiny", "num_steps": len(prompts), "step_metadata": [
        {"step": i + 1, "token_ids": [*ids, 9, 9], "prompt_length": len(ids)} for i, ids in enumerate(prompts)],
        **top}
    (folder / "metadata.json").write_text(json.dumps(meta))
    return folder


def _run(tmp_path: pathlib.Path, prompts: list[list[int]] | None = None, **top) -> pathlib.Path:
    run = tmp_path / "run"
    run.mkdir()
    synthetic.write_episode(run, synthetic.episode_dict(actions=3, seed=3, episode_id="ep"))
    if prompts is not None:
        _capture(run / "activations" / "ep", prompts, **top)
    return run


def _notes(run: pathlib.Path, *steps: int) -> None:
    with review.open_store() as store:
        for step in steps:
            store.add(ares_viewer.open_run(str(run)), "ep", step, author="ada", label="look", text=f"step {step}")


def test_an_exported_step_clipped_at_the_start_holds_its_ids_and_says_so(tmp_path):
    """Each prompt is the last 8 ids of a growing context (window 10, budget 2): the ids say the start was cut."""
    prompts = [CONTEXT[0:8], CONTEXT[6:14], CONTEXT[12:20]]
    run = _run(tmp_path, prompts, n_ctx=10, max_new_tokens=2)
    _notes(run, 2)
    out = tmp_path / "out" / "marked.jsonl"
    out.parent.mkdir()
    assert cli.main(["export", str(run), "--out", str(out)]) == 0
    (record,) = review.read_export(out)
    episode = ares_viewer.open_run(str(run)).episode("ep")
    assert record["prompt_token_ids"] == prompts[1]  # exactly what capture step 1 ran on
    assert record["capture_step"] == 1 and record["capture"] == str(run / "activations" / "ep")
    assert record["clipped"] is True and record["clipped_end"] == "start"
    assert "n_ctx 10 minus max_new_tokens 2" in record["clipping"] and "context only grew" in record["clipping"]
    assert record["tokenizer"] == "unknown" and record["prompt_text"] is None
    # Which messages the model saw cannot be told without text: unknown, and the whole context kept apart.
    assert record["messages"] is None
    assert record["context_messages"] == [m.to_dict() for m in episode.context(2)]
    assert record["response"] == episode.step(2).response and record["labels"] == ["look"]
    assert record["activations"] is None


def test_an_unclipped_step_round_trips_unchanged_in_jsonl_and_parquet(tmp_path):
    run = _run(tmp_path, [CONTEXT[0:4], CONTEXT[0:6], CONTEXT[0:7]], n_ctx=10, max_new_tokens=2)
    _notes(run, 2, 0)
    episode = ares_viewer.open_run(str(run)).episode("ep")
    with review.open_store() as store:
        records = list(review.export_records(ares_viewer.open_run(str(run)), store))
    for suffix in (".jsonl", ".parquet"):
        out = tmp_path / f"marked{suffix}"
        review.write_export(records, out)
        back = {r["step"]: r for r in review.read_export(out)}
        two = back[2]
        assert two["clipped"] is False and "under the recorded limit (8)" in two["clipping"]
        assert two["messages"] == [m.to_dict() for m in episode.context(2)] and two["context_messages"] is None
        assert two["prompt_token_ids"] == CONTEXT[0:6] and two["clipped_end"] is None
        assert back[0]["prompt_token_ids"] is None and back[0]["clipping"] == "step 0 has no model call"
        assert {k: two[k] for k in records[0]} == records[0]  # every field back as written


def test_an_episode_without_a_capture_exports_unknown_not_unclipped(tmp_path):
    run = _run(tmp_path)
    _notes(run, 1)
    with review.open_store() as store:
        (record,) = review.export_records(ares_viewer.open_run(str(run)), store)
    assert record["clipped"] is None and record["prompt_token_ids"] is None
    assert "no activation capture" in record["clipping"]
    assert record["messages"] == [m.to_dict() for m in ares_viewer.open_run(str(run)).episode("ep").context(1)]


def test_with_activations_writes_the_steps_hooks_beside_the_export(tmp_path):
    run = _run(tmp_path, [CONTEXT[0:4], CONTEXT[0:6], CONTEXT[0:7]], n_ctx=10, max_new_tokens=2)
    _notes(run, 3)
    out = tmp_path / "marked.jsonl"
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    assert cli.main(["export", str(run), "--out", str(out), "--with-activations"]) == 0
    (record,) = review.read_export(out)
    hooks = record["activations"]
    assert hooks["capture_step"] == 2 and set(hooks["hooks"]) == set(HOOKS)
    assert pathlib.Path(hooks["folder"]).parent.parent == tmp_path / "marked.activations"
    capture = activations.Capture(run / "activations" / "ep")
    for hook, name in hooks["hooks"].items():
        saved = np.load(os.path.join(hooks["folder"], name), allow_pickle=False)
        assert np.array_equal(saved, capture.array(2, hook)) and saved.shape == HOOKS[hook][0]
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before  # nothing written into the run


def test_a_capture_kept_elsewhere_opens_beside_its_episode_after_one_command(tmp_path, cache, capsys):
    run = _run(tmp_path)
    kept = _capture(tmp_path / "mine" / "activations" / "episode_001", [CONTEXT[0:8]] * 3, n_ctx=10,
                    max_new_tokens=2)
    episode = ares_viewer.open_run(str(run)).episode("ep")
    assert activations.find(episode) is None
    assert cli.main(["activations", "where", str(run), "ep"]) == 1
    said = capsys.readouterr().err
    assert f"{run}/activations/ep/ (not there)" in said and "none for this episode" in said
    before = sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*"))
    assert cli.main(["activations", "attach", str(run), "ep", str(kept)]) == 0
    assert "3 model call(s) of model tiny, beside steps 1..3" in capsys.readouterr().out
    assert sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*")) == before  # run untouched
    assert (cache / attached.FILE).is_file()
    linked = activations.find(ares_viewer.open_run(str(run)).episode("ep"))
    assert linked is not None and linked.capture.folder == str(kept) and linked.steps() == [1, 2, 3]
    assert linked.capture.array(1, "blocks.0.hook_resid_post").shape == (1, 4, 8)
    assert cli.main(["activations", "where", str(run), "ep"]) == 0 and capsys.readouterr().out.strip() == str(kept)
    # ``show`` says each call's clipping: the same ids for a grown context: the end was cut.
    assert cli.main(["show", str(run / "ep.json"), "--step", "2"]) == 0
    assert "step 2 prompt (capture" in (shown := capsys.readouterr().out) and "its end was cut" in shown
    assert cli.main(["activations", "detach", str(run), "ep"]) == 0
    assert activations.find(ares_viewer.open_run(str(run)).episode("ep")) is None


def test_attaching_a_folder_that_is_not_a_capture_is_refused(tmp_path, capsys):
    run = _run(tmp_path)
    (tmp_path / "empty").mkdir()
    assert cli.main(["activations", "attach", str(run), "ep", str(tmp_path / "empty")]) == 2
    assert "no metadata.json; not a saved TrajectoryActivations" in capsys.readouterr().err
    assert cli.main(["activations", "attach", str(run), "ep", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_a_broken_attachment_database_finds_nothing_and_says_why_when_written(tmp_path, cache):
    run = _run(tmp_path)
    cache.mkdir()
    (cache / attached.FILE).write_bytes(b"not a database at all" * 100)
    episode = ares_viewer.open_run(str(run)).episode("ep")
    assert activations.find(episode) is None
    with pytest.raises(attached.AttachError, match=attached.FILE):
        attached.attach(episode.path, "ep", _capture(tmp_path / "c", [CONTEXT[:4]]))


def test_a_start_clipped_step_with_text_says_the_system_prompt_was_not_seen(tmp_path):
    """The capture records the token texts: the export places the cut and says the system prompt was lost."""
    run = _run(tmp_path)
    episode = ares_viewer.open_run(str(run)).episode("ep")
    assert episode.system_prompt
    folder = run / "activations" / "ep"
    folder.mkdir(parents=True)
    entries = []
    for step in (1, 2, 3):
        text = "".join(f"<|{m.role}|>{m.content}<|end|>" for m in episode.context(step)) + "<|assistant|>"
        pieces = [text[j:j + 12] for j in range(0, len(text), 12)][-60:]  # 12 characters a token, its last 60
        ids = [hash(piece) % 10_000 for piece in pieces]
        entries.append({"step": step, "tokens": [*pieces, "x"], "token_ids": [*ids, 1], "prompt_length": 60})
        tensor_file(folder / f"step_{step - 1:04d}.pt", HOOKS)
    (folder / "metadata.json").write_text(json.dumps({"model_name": "tiny", "n_ctx": 64, "max_new_tokens": 4,
                                                      "step_metadata": entries}))
    _notes(run, 3)
    with review.open_store() as store:
        (record,) = review.export_records(ares_viewer.open_run(str(run)), store)
    assert record["clipped"] is True and "start" in record["clipped_end"], record["clipping"]
    assert record["system_prompt_seen"] is False
    seen, whole = record["messages"], record["context_messages"]
    assert seen[0]["cut"] == "start" and whole[-len(seen)]["content"].endswith(seen[0]["content"])
    assert [m["content"] for m in seen[1:]] == [m["content"] for m in whole[len(whole) - len(seen) + 1:]]
    assert all(m["content"] in record["prompt_text"] for m in seen)
