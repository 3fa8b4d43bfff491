"""``torch.save`` files of numpy arrays, written without torch (``hostile_pt``'s opcodes with real data), so the
library's views are tested on exact, known tensors on a machine with no torch."""

from __future__ import annotations

import json
import pathlib

import hostile_pt
import numpy as np


def save(path: pathlib.Path, arrays: dict[str, np.ndarray]) -> pathlib.Path:
    """What ``torch.save({name: torch.from_numpy(array)})`` writes, for float32 arrays (C order)."""
    entries, storages = {}, {}
    for i, (name, array) in enumerate(arrays.items()):
        data = np.ascontiguousarray(array, dtype="<f4")
        strides = tuple(s // 4 for s in data.strides)
        entries[name] = hostile_pt.tensor(str(i), max(data.size, 1), data.shape, strides)
        storages[str(i)] = data.tobytes() or b"\0\0\0\0"
    return hostile_pt.write(path, hostile_pt.pickle_of(entries), storages)


def capture(folder: pathlib.Path, steps: list[dict[str, np.ndarray]], step_metadata: list[dict] | None = None,
            **top) -> pathlib.Path:
    """A capture folder: ``metadata.json`` and one ``step_NNNN.pt`` per entry of ``steps``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, arrays in enumerate(steps):
        save(folder / f"step_{i:04d}.pt", arrays)
    meta = {"model_name": "numpy-tiny", "num_steps": len(steps),
            "step_metadata": step_metadata or [{} for _ in steps], **top}
    (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


def softmax_patterns(rng: np.random.Generator, layers: int, heads: int, queries: int, keys: int
                     ) -> dict[str, np.ndarray]:
    """Causal softmax attention patterns ``[1, head, query, key]`` per layer (the queries are the last positions)."""
    out = {}
    for layer in range(layers):
        scores = rng.normal(size=(1, heads, queries, keys))
        mask = np.tril(np.ones((queries, keys), dtype=bool), keys - queries)
        weights = np.exp(np.where(mask, scores, -np.inf) - scores.max(axis=-1, keepdims=True))
        out[f"blocks.{layer}.attn.hook_pattern"] = (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)
    return out


def chat_capture(folder: pathlib.Path, episode, *, clip_step: int | None = 3, vocab: int = 40, seed: int = 2
                 ) -> pathlib.Path:
    """A KV-cached capture of ``episode``: each call's prompt is its step's context in a chat template, in tokens
    of 12 characters (recorded as ``tokens``, with ``token_ids`` and ``prompt_length``), then 3 generated tokens;
    at ``clip_step`` the prompt is cut from the left (the first message and half of the second gone). Each step
    holds 2 layers x 2 heads of patterns, the residual stream and ``unembed.hook_out`` of the last pass."""
    rng = np.random.default_rng(seed)
    steps, metas = [], []
    for step in range(1, episode.num_actions + 1):
        context = episode.context(step)
        pieces: list[str] = []
        for message in context:
            content = message.content or ""
            pieces += [f"<|{message.role}|>", *(content[i:i + 12] for i in range(0, len(content), 12)), "<|end|>"]
        pieces.append("<|assistant|>")
        if step == clip_step:
            first, second = (-(-len(m.content or "") // 12) for m in context[:2])
            pieces = pieces[first + 3 + second // 2:]
        sequence = [*pieces, "ls", " -la", "<|end|>"]
        ids = [int(i) for i in rng.integers(0, vocab, size=len(sequence))]
        arrays = softmax_patterns(rng, layers=2, heads=2, queries=1, keys=len(sequence) - 1)
        for layer in range(2):
            arrays[f"blocks.{layer}.hook_resid_post"] = rng.normal(size=(1, 1, 8)).astype(np.float32)
        logits = rng.normal(scale=2.0, size=(1, 1, vocab)).astype(np.float32)
        arrays["unembed.hook_out"] = logits * 40
        logprob = logits[0, 0].astype(np.float64) * 40
        logprob = logprob - logprob.max() - np.log(np.exp(logprob - logprob.max()).sum())
        metas.append({"step": step, "tokens": sequence, "token_ids": ids, "prompt_length": len(pieces),
                      "logprobs": [-0.5, -1.0, float(logprob[ids[-1]])]})
        steps.append(arrays)
    return capture(folder, steps, metas)
