"""Activation captures shaped like ARES's ``TrajectoryActivations.save`` output, written with torch.

Tests and the benchmark use them; torch is needed to write them (``torch.save``), never to read them. The hooks
are TransformerLens's, with its shapes: ``[batch, pos, d_model]`` for the residual stream, ``[batch, pos, head,
d_head]`` for q/k/v/z, ``[batch, head, query, key]`` for attention scores and patterns.
"""

from __future__ import annotations

import json
import os
from typing import Any


def hook_tensors(torch: Any, generator: Any, *, layers: int, heads: int, d_model: int, positions: int,
                 queries: int | None = None, dtype: Any = None) -> dict[str, Any]:
    """One forward pass's hooks, random but plausible: attention patterns are causal softmaxes that sum to 1.

    ``queries`` < ``positions`` is what a KV cache leaves: every hook holds the last ``queries`` positions only,
    attention still spans all ``positions`` keys. Q, K and V are views into one
    shared storage (as a fused projection gives), so a reader must honour offsets and strides.
    """
    dtype = dtype or torch.float32
    queries = positions if queries is None else queries
    d_head = d_model // heads
    out: dict[str, Any] = {}

    def randn(*shape: int) -> Any:
        return torch.randn(*shape, generator=generator).to(dtype)

    out["hook_embed"] = randn(1, queries, d_model)
    out["hook_pos_embed"] = randn(1, queries, d_model)
    for layer in range(layers):
        prefix = f"blocks.{layer}"
        out[f"{prefix}.hook_resid_pre"] = randn(1, queries, d_model) * (layer + 1)
        qkv = randn(1, queries, 3, heads, d_head)  # one storage, three strided views
        out[f"{prefix}.attn.hook_q"] = qkv[:, :, 0]
        out[f"{prefix}.attn.hook_k"] = qkv[:, :, 1]
        out[f"{prefix}.attn.hook_v"] = qkv[:, :, 2]
        scores = torch.randn(1, heads, queries, positions, generator=generator) * (1 + layer)
        mask = torch.ones(queries, positions, dtype=torch.bool).tril(positions - queries)
        scores = scores.masked_fill(~mask, float("-inf"))
        out[f"{prefix}.attn.hook_attn_scores"] = scores.to(dtype)
        out[f"{prefix}.attn.hook_pattern"] = scores.softmax(-1).to(dtype)
        out[f"{prefix}.attn.hook_z"] = randn(1, queries, heads, d_head)
        out[f"{prefix}.hook_attn_out"] = randn(1, queries, d_model)
        out[f"{prefix}.mlp.hook_post"] = randn(1, queries, 4 * d_model).transpose(1, 2).transpose(1, 2)
        out[f"{prefix}.hook_resid_post"] = randn(1, queries, d_model) * (layer + 2)
    out["ln_final.hook_scale"] = randn(1, queries, 1).abs()
    return out


def write_capture(folder: str | os.PathLike, *, steps: int = 3, layers: int = 2, heads: int = 4, d_model: int = 16,
                  positions: int = 12, kv_cache: bool = False, tokens: bool = True, seed: int = 0,
                  model_name: str = "random-tiny", dtype: Any = None) -> str:
    """Write a capture folder (``metadata.json`` + ``step_NNNN.pt``) as ``TrajectoryActivations.save`` does.

    Each step's prompt grows by ``positions`` tokens (an agent's growing context); with ``kv_cache`` a step keeps
    only its last query, as ARES's default generation leaves it. ``tokens`` records the token strings in
    ``step_metadata`` (ARES records none; a recorder may).
    """
    import torch  # tests and benchmarks only: the library reads captures without it

    os.makedirs(folder, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    step_metadata: list[dict[str, Any]] = []
    for i in range(steps):
        n = positions * (i + 1)
        tensors = hook_tensors(torch, generator, layers=layers, heads=heads, d_model=d_model, positions=n,
                               queries=1 if kv_cache else None, dtype=dtype)
        torch.save(tensors, os.path.join(folder, f"step_{i:04d}.pt"))
        meta: dict[str, Any] = {"step": i}
        if tokens:
            meta["tokens"] = [f"tok{j}" for j in range(n)]
        step_metadata.append(meta)
    with open(os.path.join(folder, "metadata.json"), "w", encoding="utf-8") as handle:
        json.dump({"model_name": model_name, "num_steps": steps, "step_metadata": step_metadata}, handle, indent=2)
    return os.fspath(folder)


CHAT = ("<|{role}|>{content}<|end|>", "<|assistant|>")  # the chat template of write_tokenizer's tokenizer


def write_tokenizer(folder: str | os.PathLike, corpus: list[str]) -> str:
    """A byte-level BPE trained on ``corpus`` (plus the chat markers of ``CHAT``), saved as ``<folder>/tokenizer.json``
    (the file ``tokenizers`` and ``transformers`` load offline). Needs the ``tokenizers`` package."""
    import tokenizers

    bpe = tokenizers.ByteLevelBPETokenizer()
    specials = ["<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
    bpe.train_from_iterator(corpus * 20, vocab_size=400, min_frequency=1, special_tokens=specials)
    os.makedirs(folder, exist_ok=True)
    bpe.save(os.path.join(folder, "tokenizer.json"))
    return os.fspath(folder)


def chat_ids(folder: str | os.PathLike, messages: list[tuple[str, str]]) -> list[int]:
    """The ids of ``messages`` (role, content) in ``CHAT``'s template with the generation prompt, encoded with the
    tokenizer ``write_tokenizer`` saved in ``folder``."""
    import tokenizers

    bpe = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    text = "".join(CHAT[0].format(role=r, content=c) for r, c in messages) + CHAT[1]
    return bpe.encode(text).ids
