"""Record a real ARES episode with its activations: a random-weight TransformerLens model behind ARES's own client.

Runs in the Python 3.12 interp venv (``bash .ci/interp-venv.sh``) with the checkout on ``PYTHONPATH`` and a Docker
engine holding the sample base image, not in the project's environment. ARES's ``CodeEnvironment`` runs a sample
task (``sample_runs/``) in a ``DockerContainer`` on the sample base image with ARES's mini-swe-agent; the model
is ARES's ``HookedTransformerLLMClient`` around a random-weight ``HookedTransformer`` inside
``automatic_activation_capture``, and ``ares_viewer.recorder.record(env, out, activations=capture)`` records
the episodes: ``<out>/<episode id>.json``, the snapshots, and ``<out>/activations/<episode id>/`` with the tokens
of every model call. The model's text is random, as its weights are: every answer is a format error and the
episode is truncated at the step limit. Nothing is downloaded: the tokenizer is a byte-level BPE trained in
memory on a few sentences, saved to a folder and loaded from it (transformer-lens would otherwise look it up on
the Hub); harbor's dataset registry is pointed at an empty local file before ARES is imported. Prints one JSON
object per episode: its file, its capture folder, the responses and the prompt token counts.

    PYTHONPATH=. $(bash .ci/interp-venv.sh) testdata/ares_capture.py --out /tmp/run --steps 3 \
        --episode kv-episode --episode full-episode:no-kv-cache --episode left-episode:left
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")
CORPUS = [
    "THOUGHT: I will list the files first.\n```bash\nls -la\n```",
    "<returncode>0</returncode><output>src tests README.md</output>",
    "Please fix the failing test in src/calc/core.py so that add(2, 3) returns 5.",
    "python -m pytest -q tests/test_core.py; sed -i 's/a - b/a + b/' src/calc/core.py",
]


def offline_harbor_registry() -> None:
    """Make harbor read an empty local dataset registry, so ``import ares`` needs no network."""
    from harbor.registry.client import factory
    from harbor.registry.client.json import JsonRegistryClient

    registry = pathlib.Path(tempfile.mkdtemp()) / "registry.json"
    registry.write_text("[]\n", encoding="utf-8")
    factory.RegistryClientFactory.create = staticmethod(lambda info=None: JsonRegistryClient(path=registry))


def tokenizer_folder(folder: pathlib.Path) -> pathlib.Path:
    import tokenizers
    import transformers

    bpe = tokenizers.ByteLevelBPETokenizer()
    specials = ["<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|pad|>"]
    bpe.train_from_iterator(CORPUS * 20, vocab_size=400, min_frequency=1, special_tokens=specials)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|end|>",
                                                bos_token="<|end|>", pad_token="<|pad|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.truncation_side = "left"  # an agent's prompt grows: keep its end
    fast.save_pretrained(folder)
    return folder


def build_client(*, kv_cache: bool = True, max_new_tokens: int = 6) -> tuple:
    """A random-weight 2-layer HookedTransformer, its tokenizer and ARES's client around it (all offline)."""
    offline_harbor_registry()
    import torch
    import transformers
    from ares.contrib import mech_interp
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    torch.manual_seed(0)
    work = pathlib.Path(tempfile.mkdtemp())
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_folder(work / "tokenizer"))
    tokenizer.truncation_side = "left"
    cfg = HookedTransformerConfig(n_layers=2, d_model=64, d_head=16, n_heads=4, d_mlp=256, n_ctx=512,
                                  d_vocab=len(tokenizer), act_fn="gelu_new", normalization_type="LN", seed=0,
                                  device="cpu", model_name="random-tiny")
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    client = mech_interp.HookedTransformerLLMClient(
        model=model, max_new_tokens=max_new_tokens,
        generation_kwargs={"use_past_kv_cache": kv_cache, "verbose": False})
    return model, tokenizer, client


async def run_episodes(out: pathlib.Path, episodes: list[tuple[str, bool, str]], steps: int, prefix: str) -> None:
    """Run one episode per ``(id, kv_cache, truncation side)`` through one recorded environment, one capture, one
    client. TransformerLens reloads the tokenizer it is given (its truncation side back to the default, the
    right); ``left`` sets the model's tokenizer to cut the start of a long prompt instead, as a chat model's
    tokenizer often does."""
    model, _tokenizer, client = build_client()  # before ARES is imported: offline
    sys.path.insert(0, str(REPO / "sample_runs"))
    import ares_rollout  # the sample base image's container factory
    import harbor_tasks
    import scenarios
    import torch
    from ares.contrib.mech_interp import activation_capture
    from ares.environments import code_env
    from harbor.models.task import task as harbor_task

    from ares_viewer import recorder

    sample = scenarios.TASKS["textkit__slugify-accents"]
    folder = harbor_tasks.write_task(pathlib.Path(tempfile.mkdtemp()), sample, image=harbor_tasks.BASE_IMAGE)
    env = code_env.CodeEnvironment([harbor_task.Task(task_dir=folder)],
                                   container_factory=ares_rollout.SampleBaseContainers(sample), step_limit=steps,
                                   prefix=prefix)
    with activation_capture.automatic_activation_capture(model) as capture:
        async with recorder.record(env, out, activations=capture, episode_ids=[e for e, _, _ in episodes]) as live:
            default_side = model.tokenizer.truncation_side
            for episode_id, kv_cache, side in episodes:
                client.generation_kwargs["use_past_kv_cache"] = kv_cache
                model.tokenizer.truncation_side = side or default_side
                responses, prompt_tokens = [], []
                ts = await live.reset()
                while not ts.last():
                    response = await client(ts.observation)
                    responses.append(response.data[0].content)
                    prompt_tokens.append(response.usage.prompt_tokens)
                    ts = await live.step(response)
                # ARES stops the container politely (10 s for `tail -f /dev/null`); killing it first is immediate.
                await asyncio.to_thread(ares_rollout._kill, env)
                capture_folder = out / "activations" / episode_id
                print(json.dumps({"episode_id": episode_id, "path": str(live.episodes[-1]),
                                  "folder": str(capture_folder), "responses": responses,
                                  "prompt_tokens": prompt_tokens, "truncated": ts.observation is not None,
                                  "logprob_error": logprob_error(model, capture_folder),
                                  "torch": torch.__version__}), flush=True)


def logprob_error(model, folder: pathlib.Path) -> float:
    """The largest difference between the logprobs the recorder saved and one forward pass over each call's
    recorded tokens (a check that they are the model's own, for the tokens recorded)."""
    import torch

    worst = 0.0
    with torch.no_grad():
        for meta in json.loads((folder / "metadata.json").read_text(encoding="utf-8"))["step_metadata"]:
            ids, start = meta["token_ids"], meta["prompt_length"]
            logprobs = model(torch.tensor([ids]), return_type="logits")[0].float().log_softmax(-1)
            expected = [float(logprobs[j - 1, ids[j]]) for j in range(start, len(ids))]
            assert len(expected) == len(meta["logprobs"])
            worst = max([worst, *(abs(a - b) for a, b in zip(expected, meta["logprobs"], strict=True))])
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--steps", type=int, default=3, help="the environment's step limit")
    parser.add_argument("--episode", action="append", required=True, metavar="ID[:no-kv-cache][:left]",
                        help="an episode to run; no-kv-cache keeps full sequences at every step (larger files); "
                             "left cuts a long prompt's start (the tokenizer's truncation side)")
    parser.add_argument("--prefix", default="ares_viewer_interp", help="ARES's container name prefix")
    args = parser.parse_args()
    episodes = [(spec.split(":")[0], ":no-kv-cache" not in spec, "left" if ":left" in spec else "")
                for spec in args.episode]
    asyncio.run(run_episodes(args.out, episodes, args.steps, args.prefix))


if __name__ == "__main__":
    main()
