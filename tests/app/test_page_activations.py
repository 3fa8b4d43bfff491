"""The Activations page in AppTest: a capture beside its episode, a deep link to a step, episodes without one."""

from __future__ import annotations

import json
import pathlib

import page_text
import pytest

from testdata import synthetic
from tests.conftest import _missing


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """interp-run: two episodes with the same commands, each with a capture; a third with tokens and none."""
    from testdata import activations as fixtures

    try:
        import torch  # noqa: F401  (writes the .pt files)
    except ImportError:
        _missing("torch is not installed (pip install torch==2.13.0: the CPU build; tests write .pt files with it)")
    run = tmp_path / "runs" / "interp-run"
    run.mkdir(parents=True)
    ids = {}
    for name, seed in (("a", 1), ("b", 2)):
        doc = synthetic.episode_dict(actions=3, seed=5, episode_id=f"episode-{name}")
        synthetic.write_episode(run, doc)
        fixtures.write_capture(run / "activations" / doc["episode_id"], steps=3, layers=2, heads=3, seed=seed)
        ids[name] = doc["episode_id"]
    plain = synthetic.episode_dict(actions=2, seed=7, episode_id="episode-plain")
    synthetic.write_episode(run, plain)
    (run / "activations" / "episode-broken").mkdir()
    (run / "activations" / "episode-broken" / "metadata.json").write_text("[1, 2]")
    broken = json.loads(json.dumps(plain))
    broken["episode_id"] = "episode-broken"
    synthetic.write_episode(run, broken)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    return ids


def test_a_deep_link_shows_the_steps_activations(runs, app):
    at = app("activations", run="interp-run", episode="episode-a", step="2")
    assert not at.exception
    shown = page_text.of(at)
    assert "Model `random-tiny` · 3 model call(s)" in shown
    assert at.select_slider(key="activations.step").value == 2
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert len(titles) >= 4  # summary, entropy, across steps, attention
    assert any("Step 2: norm of each hook by layer" in t for t in titles)
    assert any("attention entropy per head" in t for t in titles)
    assert any("tok3" in t for t in titles)  # the head's attention over the recorded tokens
    at.select_slider(key="activations.step").set_value(3).run()
    assert at.query_params["step"] == "3" and not at.exception


def test_the_same_hook_is_compared_with_another_episode(runs, app):
    at = app("activations", run="interp-run", episode="episode-a", step="1")
    at.selectbox(key="activations.other").set_value("episode-b").run()
    assert not at.exception
    assert any("cosine of the aligned steps" in c.proto.spec for c in at.get("plotly_chart"))


def test_episodes_without_or_with_a_broken_capture_say_so(runs, app):
    at = app("activations", run="interp-run", episode="episode-plain")
    assert not at.exception
    assert "activations/episode-plain/" in page_text.of(at)
    at = app("activations", run="interp-run", episode="episode-broken")
    assert not at.exception
    assert "metadata.json: holds a list, not an object" in page_text.of(at)


def test_the_step_view_links_to_the_steps_activations(runs, app):
    at = app("episode", run="interp-run", episode="episode-a", step="2")
    assert not at.exception
    links = [link for link in at.get("page_link") if "Activations of step 2" in str(link.proto.label)]
    assert links and links[0].proto.query_string.count("step=2") == 1
    plain = app("episode", run="interp-run", episode="episode-plain", step="1")
    assert not any("Activations of step" in str(link.proto.label) for link in plain.get("page_link"))


def test_token_logprobs_show_in_the_step_view_and_on_the_page(tmp_path, monkeypatch, app):
    """A Tinker rollout whose first action records its tokens and logprobs (no capture beside it)."""
    source = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tinker" / "guess-number" / "iteration_000000"
    record = json.loads((source / "train_rollout_summaries.jsonl").read_text().splitlines()[0])
    record["steps"][0]["ac"] = {"tokens": [7, 8, 9], "maybe_logprobs": [-0.05, -4.0, -0.7]}
    folder = tmp_path / "runs" / "tok" / "iteration_000000"
    folder.mkdir(parents=True)
    (folder / "train_rollout_summaries.jsonl").write_text(json.dumps(record) + "\n")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app("episode", run="tok", step="1")
    assert not at.exception
    assert any(e.label == "Token logprobs (3 tokens)" for e in at.expander)
    assert any("logprob -4.000" in h.proto.body for h in at.get("html"))
    page = app("activations", run="tok", episode=at.query_params["episode"], step="1")
    assert not page.exception and any("logprob -4.000" in h.proto.body for h in page.get("html"))


def test_the_recorders_tokens_show_in_the_step_view_and_on_the_page(runs, app, tmp_path):
    """A capture saved by the recorder holds each call's tokens: the response's show with their logprobs."""
    meta_path = tmp_path / "runs" / "interp-run" / "activations" / runs["a"] / "metadata.json"
    meta = json.loads(meta_path.read_text())
    for i, entry in enumerate(meta["step_metadata"]):
        n = len(entry["tokens"])
        entry.update(step=i + 1, token_ids=list(range(n)), prompt_length=n - 2, logprobs=[-0.25, -3.5])
    meta_path.write_text(json.dumps(meta))
    at = app("episode", run="interp-run", episode=runs["a"], step="2")
    assert not at.exception
    assert any(e.label == "Token logprobs (2 tokens)" for e in at.expander)
    assert any("logprob -3.500" in h.proto.body for h in at.get("html"))
    page = app("activations", run="interp-run", episode=runs["a"], step="2")
    assert not page.exception and any("logprob -3.500" in h.proto.body for h in page.get("html"))


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """hostile-run: an episode of six actions whose capture mixes good step files with hostile ones
    (``hostile_pt.mixed_capture``), and one whose metadata.json is nested 100k deep. No torch is needed."""
    import hostile_files
    import hostile_pt

    run = tmp_path / "runs" / "hostile-run"
    run.mkdir(parents=True)
    doc = synthetic.episode_dict(actions=6, seed=5, episode_id="episode-mixed")
    synthetic.write_episode(run, doc)
    files = hostile_pt.mixed_capture(run / "activations" / "episode-mixed")
    deep = synthetic.episode_dict(actions=3, seed=6, episode_id="episode-deep")
    synthetic.write_episode(run, deep)
    (run / "activations" / "episode-deep").mkdir()
    (run / "activations" / "episode-deep" / "metadata.json").write_bytes(hostile_files.deep_list())
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    return files


def test_a_hostile_step_file_is_shown_as_its_own_error_and_the_rest_still_shows(hostile, app):
    at = app("activations", run="hostile-run", episode="episode-mixed", step="6")  # capture step 5: stride 0
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(str(hostile["stride_zero"]) in e and "stride-0 views" in e for e in errors)
    # Across steps: the readable steps are charted, each file left out is named with its reason.
    assert any("hook_resid_post: norm at the last position" in c.proto.spec for c in at.get("plotly_chart"))
    assert any(str(hostile["huge_dimension"]) in e and e.startswith("Left out") for e in errors)
    at = app("activations", run="hostile-run", episode="episode-mixed", step="5")  # a list containing itself
    assert not at.exception
    assert any("Step 5: norm of each hook by layer" in c.proto.spec for c in at.get("plotly_chart"))
    at = app("activations", run="hostile-run", episode="episode-mixed", step="2")  # a dimension of 2**70
    assert not at.exception
    assert any(str(hostile["huge_dimension"]) in e.value and "below 1,099,511,627,776" in e.value for e in at.error)


def test_a_metadata_file_nested_too_deep_is_a_message_on_both_pages(hostile, app):
    at = app("activations", run="hostile-run", episode="episode-deep")
    assert not at.exception
    assert "metadata.json: cannot be read as JSON (JSON nested too deeply to read)" in page_text.of(at)
    for step in ("1", "2"):
        episode = app("episode", run="hostile-run", episode="episode-deep", step=step)
        assert not episode.exception


@pytest.fixture
def clipped_run(runs, tmp_path):
    """episode-a's capture records, per call, the ids of its step's context in a chat template, cut from the left
    as the client cuts a prompt to its window, and the tokenizer that encoded them beside metadata.json."""
    pytest.importorskip("tokenizers", reason="the tokenizers package (a dependency of litellm) writes the tokenizer")
    import ares_viewer
    from testdata import activations as fixtures

    folder = tmp_path / "runs" / "interp-run" / "activations" / runs["a"]
    episode = ares_viewer.open_run(str(tmp_path / "runs" / "interp-run")).episode(runs["a"])
    contexts = [[(m.role, m.content) for m in episode.context(k)] for k in (1, 2, 3)]
    tokenizer = fixtures.write_tokenizer(folder / "tokenizer", [c for ctx in contexts for _, c in ctx])
    meta = json.loads((folder / "metadata.json").read_text())
    cut = {}
    for i, (entry, context) in enumerate(zip(meta["step_metadata"], contexts, strict=True)):
        ids = fixtures.chat_ids(tokenizer, context)[5:]
        del entry["tokens"]
        entry.update(step=i + 1, token_ids=[*ids, 3, 4], prompt_length=len(ids), logprobs=[-0.5, -1.0])
        cut[i + 1] = len(ids)
    (folder / "metadata.json").write_text(json.dumps(meta))
    return runs, cut, tokenizer


def test_the_page_shows_the_decoded_prompt_and_says_it_was_clipped(clipped_run, app):
    runs, cut, tokenizer = clipped_run
    at = app("activations", run="interp-run", episode=runs["a"], step="2")
    assert not at.exception
    shown = page_text.of(at)
    assert f"Step 2: the prompt the model ran on ({cut[2]:,} tokens)" in shown
    assert "Tokens from `step_metadata[1].token_ids[:prompt_length]` of `metadata.json`; text from the tokenizer " \
           f"at {tokenizer}/tokenizer.json (tokenizers)" in shown
    assert f"The prompt was clipped: the model saw only its last {cut[2]:,} tokens of its context of 3 message(s)" \
        in shown
    assert "its start was cut" in shown and "message start(s) found in the prompt's text" in shown
    frame = at.dataframe[0].value
    assert len(frame) == cut[2] and frame["token"].str.contains("<|assistant|>", regex=False).iloc[-1]
    assert frame["message"].iloc[0].endswith(", its start cut")
    assert "This call's `step_metadata` in metadata.json records no tokens" not in shown


def test_the_step_view_says_the_prompt_was_clipped_when_the_capture_shows_it(clipped_run, app):
    runs, cut, _ = clipped_run
    at = app("episode", run="interp-run", episode=runs["a"], step="2")
    assert not at.exception
    assert f"in all, but the capture shows the prompt was clipped to {cut[2]:,} tokens: its start was cut, as the " \
           "prompt's text lacks the beginning of the context's first message" in page_text.of(at)
    # episode-b's capture records no prompt tokens: nothing is claimed.
    other = app("episode", run="interp-run", episode=runs["b"], step="2")
    assert not other.exception and "the prompt was clipped" not in page_text.of(other)
    assert "message(s) in all" in page_text.of(other)


def test_without_a_tokenizer_or_a_recorded_window_clipping_stays_unknown(clipped_run, app):
    """With the tokenizer gone the prompt's text is unknown, and this capture records no context window: the
    Activations page claims neither "clipped" nor "not clipped" (``clipping.of_step`` cannot tell from these ids,
    which grow from call to call and never reach a recorded limit), and says why."""
    import shutil

    runs, _, tokenizer = clipped_run
    shutil.rmtree(tokenizer)
    at = app("activations", run="interp-run", episode=runs["a"], step="3")
    assert not at.exception
    shown = page_text.of(at)
    assert "no text: the ids are shown" in shown
    assert "Whether the client clipped this prompt is unknown: the capture records no context window" in shown
    assert "The prompt was clipped" not in shown and "Not clipped" not in shown
