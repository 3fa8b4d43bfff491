"""Real ARES episodes recorded with their activations: ARES's CodeEnvironment, DockerContainer and mini-swe-agent,
ARES's own HookedTransformerLLMClient and ActivationCapture on a random-weight HookedTransformer, through
``ares_viewer.recorder.record(env, out, activations=capture)``; read back with ``ares_viewer.open_run``.

ARES and TransformerLens need Python >= 3.12, so they run in their own venv (``.ci/interp-venv.sh``, about 6.7 GB,
built once under ~/.cache/ares-viewer) as a subprocess running ``testdata/ares_capture.py``; the episodes run on
the real engine in containers of the sample base image. The capture files are ``TrajectoryActivations.save``'s
own; the library reads them here, in the project's environment, and is checked tensor for tensor against
``torch.load(weights_only=True)``. The random model answers nonsense, so every step is a format error and the
episodes end at the step limit. Fails in CI when the venv, the engine or the image is missing.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import uuid

import numpy as np
import pytest

import ares_viewer
from ares_viewer import activations, review
from ares_viewer.activations import clipping, figures, prompt, tokens, views
from ares_viewer.runs.run import load_episode

REPO = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = REPO / "testdata" / "ares_capture.py"

pytestmark = [pytest.mark.interp, pytest.mark.docker]


STEPS = 3
N_CTX, MAX_NEW_TOKENS = 512, 6  # testdata/ares_capture.build_client: prompts are cut to N_CTX - MAX_NEW_TOKENS


@pytest.fixture(scope="module")
def recorded(interp_run):
    """One recorded run of three real ARES episodes, one capture and one client: KV cache on (ARES's default: the
    last forward pass per call) and off (full sequences), and one whose tokenizer cuts a long prompt's start
    (``left-episode``). The run folder and each episode's driver output (``interp_run``, shared with the browser
    tests)."""
    assert sorted(interp_run.results) == ["full-episode", "kv-episode", "left-episode"]
    return interp_run.run, interp_run.results


def _linked(recorded, episode_id: str) -> activations.Linked:
    out, _ = recorded
    episode = ares_viewer.open_run(str(out)).episode(episode_id)
    linked = activations.find(episode)
    assert linked is not None, f"no activations linked to {episode_id}"
    return linked


def test_the_torch_free_reader_gives_torchs_tensors_for_real_captures(recorded, torch):
    _, results = recorded
    for result in results.values():
        capture = activations.Capture(result["folder"], reader="numpy")
        for step in capture.steps:
            path = os.path.join(result["folder"], f"step_{step:04d}.pt")
            reference = torch.load(path, weights_only=True)
            assert set(capture.hooks(step)) == set(reference)
            for name, tensor in reference.items():
                got = capture.array(step, name)
                assert got.shape == tuple(tensor.shape) and got.dtype == tensor.numpy().dtype, name
                assert np.array_equal(got, tensor.numpy(), equal_nan=True), name


def test_a_recorded_episode_opens_with_its_activations_linked_to_its_steps(recorded):
    out, results = recorded
    for episode_id in results:
        linked = _linked(recorded, episode_id)
        episode = linked.episode
        assert episode.outcome is ares_viewer.Outcome.TRUNCATED and episode.num_actions == STEPS
        assert linked.steps() == [1, 2, 3] and not linked.warnings
        assert linked.capture.model_name == "random-tiny"
        doc = json.loads(pathlib.Path(results[episode_id]["path"]).read_text(encoding="utf-8"))
        assert doc["recording"]["activations"] == {"folder": f"activations/{episode_id}", "model_name": "random-tiny",
                                                   "steps": STEPS, "model_calls": STEPS}
    # One capture served both episodes, each saved whole under its own name (no staging folder left).
    assert sorted(p.name for p in (out / "activations").iterdir()) == ["full-episode", "kv-episode", "left-episode"]
    # The captures (and the verifier's recipe the recorder saves) are part of the run: no "other files", no errors,
    # and the run says it has them.
    opened = ares_viewer.open_run(str(out))
    assert len(opened) == 3 and not opened.errors and opened.skipped == 0
    assert opened.files_found() == "0 unreadable file(s), 0 other file(s); beside them: per-step snapshots, " \
                                   "activation captures, verifier recipes"


def test_capture_step_i_is_the_model_call_whose_response_is_action_i_plus_1(recorded):
    """The recorder's tokens for capture step i decode to the action of trajectory step i + 1."""
    _, results = recorded
    for episode_id, result in results.items():
        linked = _linked(recorded, episode_id)
        doc = json.loads(pathlib.Path(result["path"]).read_text(encoding="utf-8"))
        for step in linked.steps():
            i = linked.capture_step(step)
            assert i == step - 1 and linked.trajectory_step(i) == step
            meta = linked.capture.meta(i)
            assert meta["step"] == step
            start = meta["prompt_length"]
            assert start == result["prompt_tokens"][i] <= N_CTX - MAX_NEW_TOKENS
            assert len(meta["token_ids"]) == len(meta["tokens"]) == start + len(meta["logprobs"])
            action = doc["steps"][step]["action"]
            assert "".join(meta["tokens"][start:]) == action["data"][0]["content"] == result["responses"][i]
            assert len(meta["logprobs"]) == action["usage"]["generated_tokens"]
        assert result["logprob_error"] < 1e-4  # the saved logprobs are the model's own (one forward pass again)


def test_the_token_view_shows_the_recorded_response_tokens(recorded):
    linked = _linked(recorded, "kv-episode")
    step = linked.episode.step(2)
    assert tokens.token_frame(step) is None  # ARES's own records hold no tokens
    frame = tokens.token_frame(step, capture=linked.capture)
    meta = linked.capture.meta(1)
    response = meta["tokens"][meta["prompt_length"]:]
    assert frame["token"].tolist() == response
    assert frame["token_id"].tolist() == meta["token_ids"][meta["prompt_length"]:]
    assert frame["logprob"].tolist() == meta["logprobs"] and (frame["logprob"] < 0).all()
    assert frame["prob"].between(0, 1).all()
    html = figures.logprob_html(frame)
    assert html.count("<span") == len(response) and "logprob " in html


def test_every_real_call_ran_on_a_clipped_prompt_and_the_viewer_says_so(recorded):
    """ARES's client truncates each prompt to n_ctx - max_new_tokens tokens; the recorder notes both and the
    tokenizer's folder, so the prompt decodes offline and its clipping shows. TransformerLens reloads the tokenizer
    (its truncation side back to the default, the right): the end is cut, and the model never saw the messages
    after the task's, its own earlier answers and their outputs included."""
    for episode_id in ("kv-episode", "full-episode"):
        linked = _linked(recorded, episode_id)
        for step in linked.steps():
            i = linked.capture_step(step)
            meta = linked.capture.meta(i)
            assert (meta["n_ctx"], meta["max_new_tokens"]) == (N_CTX, MAX_NEW_TOKENS)
            contents = [m.content for m in linked.episode.context(step)]
            found = prompt.of_capture(linked.capture, i, contents)
            assert found.key == f"step_metadata[{i}].token_ids[:prompt_length]"
            assert found.text_source.startswith(f"the tokenizer at {meta['tokenizer']}")
            assert found.texts == meta["tokens"][: meta["prompt_length"]]
            assert found.seen_tokens == meta["prompt_length"] == N_CTX - MAX_NEW_TOKENS
            assert found.clipped is True and found.cut == "end" and "its end was cut" in found.evidence
            assert found.kept() == f"its first {N_CTX - MAX_NEW_TOKENS} tokens"
            assert [s.message for s in found.message_starts] == [0] and found.unseen == len(contents) - 1


def test_views_of_a_real_capture_linked_to_its_episode(recorded):
    linked = _linked(recorded, "kv-episode")
    summary = views.step_summary(linked.capture, 2)
    assert list(summary.index) == ["embed", "0", "1", "final"] and summary.notna().any().all()
    entropy = views.attention_entropy(linked.capture, 2)
    assert entropy.shape == (2, 4) and (entropy.to_numpy() <= entropy.attrs["max_entropy"] + 1e-6).all()
    attention = views.head_attention(linked.capture, 1, layer=0, head=0)
    recorded_tokens = linked.capture.tokens(0)
    # The last forward pass attends to every position but the last token it produced: all are labelled.
    assert attention["token"].tolist() == recorded_tokens[:-1]
    assert attention["weight"].sum() == pytest.approx(1.0, abs=1e-4)
    assert list(views.across_steps(linked.capture).index) == [1, 2, 3]


def test_a_kv_cached_capture_holds_the_last_forward_pass(recorded):
    capture = _linked(recorded, "kv-episode").capture
    assert capture.steps == [0, 1, 2] and not capture.warnings
    for i in capture.steps:
        hooks = capture.hooks(i)
        assert hooks["blocks.1.hook_resid_post"].shape == (1, 1, 64)
        assert hooks["blocks.0.attn.hook_pattern"].shape == (1, 4, 1, len(capture.tokens(i)) - 1)
        assert all(h.dtype == "float32" for h in hooks.values())


def test_a_full_sequence_capture_covers_every_prompt_position(recorded):
    capture = _linked(recorded, "full-episode").capture
    prompt = capture.meta(0)["prompt_length"]
    resid = capture.hooks(0)["blocks.0.hook_resid_post"].shape
    pattern = capture.hooks(0)["blocks.0.attn.hook_pattern"].shape
    assert resid[1] == len(capture.tokens(0)) - 1 and pattern[2] == pattern[3] == resid[1]
    attention = views.head_attention(capture, 1, layer=1, head=3, query=prompt - 1)
    assert attention["weight"].iloc[prompt:].sum() == 0  # causal: no later position
    assert attention["token"].tolist() == capture.tokens(0)[:-1]


@pytest.fixture(scope="module")
def counterfactuals(interp_python, docker_client, tmp_path_factory) -> dict[str, dict]:
    """testdata/ares_counterfactual.py from step 1 of the wrong-fix sample episode, two counterfactuals in one
    process (torch and TransformerLens imported once): ``kept`` (2 actions) and ``failed`` (its model call 2
    raises); each one's JSON line by name."""
    from ares_viewer import sandbox

    docker_client.images.get("ares-viewer/sample-base:1")
    parent = REPO / "sample_runs" / "demo-run" / "aefe890e-4268-4666-90b5-dd09d3259e06.json"
    session = f"pytest-interp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    cases = {"kept": ("2", "-"), "failed": ("3", "2")}
    outs = {name: str(tmp_path_factory.mktemp(f"cf-{name}") / "cf") for name in cases}
    command = [interp_python, str(REPO / "testdata" / "ares_counterfactual.py"), "--episode", str(parent), "--step",
               "1", "--session", session]
    for name, (max_steps, fail_at) in cases.items():
        command += ["--case", outs[name], max_steps, fail_at]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        sandbox.cleanup(docker_client, session=session)
    assert done.returncode == 0, done.stderr[-3000:]
    by_out = {r["out"]: r for r in map(json.loads, (line for line in done.stdout.splitlines()
                                                    if line.startswith("{")))}
    return {name: by_out[out] for name, out in outs.items()}


def test_a_counterfactual_through_a_hooked_transformer_keeps_its_activations(counterfactuals):
    """counterfactual.run with ARES's in-process client and ``activations=`` its ActivationCapture: a linked
    episode, its capture beside it with the tokens of every call, one model call per action, like a recorded
    episode's."""
    result = counterfactuals["kept"]
    episode = load_episode(result["path"])
    assert episode.metadata["counterfactual"]["step"] == 1
    assert episode.context(1)[-1].content.endswith("Hint: look at the tests first.")
    assert [s.response for s in episode.actions] == result["responses"]
    linked = activations.find(episode)
    assert linked is not None and linked.steps() == [1, 2] and not linked.warnings
    assert linked.capture.model_name == "random-tiny"
    # The recorder's notes: which step each call answered, the tokens it ran on and produced, their logprobs.
    for i in (0, 1):
        meta = linked.capture.meta(i)
        assert meta["step"] == i + 1 and len(meta["tokens"]) == len(meta["token_ids"]) > meta["prompt_length"]
        assert len(meta["logprobs"]) == len(meta["token_ids"]) - meta["prompt_length"]
    assert episode.metadata["recording"]["activations"]["folder"] == f"activations/{episode.episode_id}"
    assert episode.metadata["recording"]["activations"]["model_calls"] == 2
    frame = tokens.token_frame(episode.step(1), capture=linked.capture)
    assert frame is not None and len(frame) == len(linked.capture.meta(0)["logprobs"])


def test_a_counterfactual_whose_model_fails_keeps_the_activations_of_the_actions_before(counterfactuals):
    result = counterfactuals["failed"]
    assert result["status"] == "errored" and "scripted failure at model call 2" in result["error"]
    episode = load_episode(result["path"])
    assert episode.num_actions == 1 and "scripted failure" in episode.error
    linked = activations.find(episode)
    assert linked is not None and linked.steps() == [1] and not linked.warnings
    assert linked.capture.meta(0)["step"] == 1 and linked.capture.tokens(0)


DECODE = """
import json, sys
import transformers
answers = []
for request in json.load(sys.stdin):
    tokenizer = transformers.AutoTokenizer.from_pretrained(request["folder"], local_files_only=True)
    answers.append([tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
                    for ids in request["ids"]])
print(json.dumps(answers))
"""
CLIPPED = [("kv-episode", "end"), ("left-episode", "start")]


def _decode(interp_python: str, requests: list[tuple[str, list[list[int]]]]) -> list[list[str]]:
    """For each ``(tokenizer folder, ids)``, the ids decoded by transformers in the interp venv with that tokenizer
    (the one the model ran with), all in one process."""
    done = subprocess.run([interp_python, "-c", DECODE],
                          input=json.dumps([{"folder": folder, "ids": ids} for folder, ids in requests]),
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def decoded_prompts(recorded, interp_python) -> dict[str, dict[int, str]]:
    """By episode of ``CLIPPED``, each capture step's model input (the capture's ids up to its prompt length)
    decoded again in the interp venv with the episode's tokenizer: one process for both episodes."""
    linked = {episode_id: _linked(recorded, episode_id) for episode_id, _ in CLIPPED}
    requests = [(found.capture.meta(0)["tokenizer"], [found.capture.meta(i)["token_ids"][
        :found.capture.meta(i)["prompt_length"]] for i in found.capture.steps]) for found in linked.values()]
    answers = _decode(interp_python, requests)
    return {episode_id: dict(zip(found.capture.steps, texts, strict=True))
            for (episode_id, found), texts in zip(linked.items(), answers, strict=True)}


@pytest.mark.parametrize(("episode_id", "end"), CLIPPED)
def test_an_exported_clipped_step_holds_exactly_the_tokens_the_model_ran_on(recorded, decoded_prompts, tmp_path,
                                                                            monkeypatch, episode_id, end):
    """Every step is marked and exported with its hooks: the ids are those the capture recorded as the model's
    input, their text (decoded again in the interp venv) is the prompt's, the clip and its end are flagged, and
    the messages are the part of the context the model saw."""
    out, _ = recorded
    monkeypatch.setenv("ARES_VIEWER_REVIEW_DB", str(tmp_path / "review.sqlite"))
    opened = ares_viewer.open_run(str(out))
    linked = _linked(recorded, episode_id)
    with review.open_store() as store:
        for step in linked.steps():
            store.add(opened, episode_id, step, author="ada", label="clipped")
        records = list(review.export_records(opened, store, activations_dir=tmp_path / "hooks"))
    path = tmp_path / "marked.jsonl"
    review.write_export(records, path)
    back = sorted(review.read_export(path), key=lambda r: r["step"])
    assert [r["step"] for r in back] == linked.steps()
    ran_on = [linked.capture.meta(r["capture_step"])["token_ids"][:linked.capture.meta(r["capture_step"])[
        "prompt_length"]] for r in back]
    assert [r["prompt_token_ids"] for r in back] == ran_on  # exactly the model's input the capture recorded
    # their text, decoded again from those same ids (decoded_prompts decodes the capture's, equal as just checked)
    decoded = [decoded_prompts[episode_id][r["capture_step"]] for r in back]
    for record, text in zip(back, decoded, strict=True):
        step = record["step"]
        assert len(record["prompt_token_ids"]) == N_CTX - MAX_NEW_TOKENS
        if record["tokenizer"] != "unknown":  # a tokenizer loads in this environment too
            assert record["prompt_text"] == text
        assert record["clipped"] is True and record["clipped_end"] == end, record["clipping"]
        context = [m.to_dict() for m in linked.episode.context(step)]
        assert record["context_messages"] == context
        seen = record["messages"]
        assert seen and seen[0 if end == "start" else -1]["cut"] == end
        cut = seen[0] if end == "start" else seen[-1]
        whole = context[len(context) - len(seen) if end == "start" else len(seen) - 1]["content"]
        assert (whole.endswith if end == "start" else whole.startswith)(cut["content"])
        assert cut["chars"] == len(whole) > len(cut["content"]) > 0
        assert all(m["content"] in text for m in seen)  # the model saw each of them, as exported
        hooks = record["activations"]
        i = record["capture_step"]
        assert set(hooks["hooks"]) == set(linked.capture.hooks(i))
        for hook, name in hooks["hooks"].items():
            assert np.array_equal(np.load(os.path.join(hooks["folder"], name)), linked.capture.array(i, hook))


@pytest.mark.parametrize(("episode_id", "end"), [("kv-episode", "end"), ("left-episode", "start")])
def test_without_a_tokenizer_or_text_the_ids_say_which_end_was_cut(recorded, tmp_path, episode_id, end):
    """The capture copied without its tokenizer's name and without the recorded token texts: the ids alone (at the
    limit, and how consecutive prompts of a growing context begin) tell clipping and its end."""
    linked = _linked(recorded, episode_id)
    copy = tmp_path / "bare"
    copy.mkdir()
    meta = json.loads((pathlib.Path(linked.capture.folder) / "metadata.json").read_text(encoding="utf-8"))
    for entry in meta["step_metadata"]:
        entry.pop("tokenizer", None)
        entry.pop("tokens", None)
    (copy / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    for i in linked.capture.steps:
        (copy / f"step_{i:04d}.pt").symlink_to(linked.capture.path(i))
    bare = activations.link(linked.episode, activations.Capture(copy))
    for step in bare.steps():
        found = clipping.of_step(bare, step)
        assert found.clipped is True and found.end == end, found.evidence
        assert prompt.of_capture(bare.capture, step - 1).texts is None  # no text was read
