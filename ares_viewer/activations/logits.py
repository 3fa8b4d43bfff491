"""What the model predicted, read from the logits a capture holds (``unembed.hook_out``, ``[batch, pos, vocab]``).

At a position of the last forward pass (the final one by default): the log-probabilities are ``log_softmax`` of
the logits (in float64, before any temperature, top-k or top-p the sampler applied), the top ``k`` tokens by
them, and the *chosen* token: the one the recorded sequence holds at the next position (``token_ids[p + 1]``),
with its logprob under these logits and, for comparison, the logprob the recorder saved for it.

The hook's positions are the sequence's last ones: position ``p`` of the sequence is index ``p - (T - P)`` of
the hook's ``P`` positions, ``T`` being the positions the last pass covered (the attention patterns' key count,
else the recorded ``token_ids`` minus the last token, which no pass was fed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ares_viewer.activations import capture as capture_mod
from ares_viewer.activations import prompt, tokenizer, views

HOOK = "unembed.hook_out"


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """``log_softmax`` along the last axis, in float64 (stable: the largest logit is subtracted first)."""
    values = np.asarray(logits, dtype=np.float64)
    shifted = values - values.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@dataclasses.dataclass(frozen=True)
class Predictions:
    """The model's prediction at one position.

    Attributes:
        position: the sequence position whose next token the logits predict (None when it cannot be placed).
        top: one row per predicted token, best first: ``rank``, ``token_id``, ``token`` (decoded, else None),
            ``logprob``, ``prob``.
        chosen_id: the token the sequence holds next, when recorded; ``chosen_token`` its text.
        chosen_logprob: its logprob under the logits; ``chosen_rank`` its rank (1 = the top token).
        recorded_logprob: the logprob the recorder saved for it, when it did.
        decoder: the tokenizer that decoded the ids, or None (ids only).
    """

    position: int | None
    top: pd.DataFrame
    chosen_id: int | None = None
    chosen_token: str | None = None
    chosen_logprob: float | None = None
    chosen_rank: int | None = None
    recorded_logprob: float | None = None
    decoder: str | None = None


def _sequence_length(capture: capture_mod.Capture, i: int, ids: Sequence[int] | None) -> int | None:
    """How many positions the call's last forward pass covered (see the module's docstring)."""
    for name, info in capture.hooks(i).items():
        if views.is_pattern(name, info.shape):
            return info.shape[3]
    return len(ids) - 1 if ids else None


def _ids(meta: dict) -> list[int] | None:
    ids = meta.get("token_ids")
    return list(ids) if isinstance(ids, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                                      for v in ids) and ids else None


def predictions(capture: capture_mod.Capture, step: int, position: int | None = None, k: int = 10
                ) -> Predictions | None:
    """The top ``k`` tokens and the chosen token's logprob at trajectory step ``step``, at sequence position
    ``position`` (the last the hook holds by default); None when the step recorded no ``unembed.hook_out``.

    Raises:
        KeyError: ``position`` is not among the hook's positions.
    """
    i = views._capture_step(capture, step)
    info = capture.hooks(i).get(HOOK)
    if info is None or len(info.shape) != 3 or not all(info.shape):
        return None
    meta = dict(capture.meta(i))
    ids = _ids(meta)
    covered = _sequence_length(capture, i, ids)
    held = info.shape[1]
    first = covered - held if covered is not None else None
    if position is None:
        index = held - 1
        position = covered - 1 if covered is not None else None
    elif first is None or not first <= position < first + held:
        raise KeyError(f"step {step}'s {HOOK} holds positions {first}..{(first or 0) + held - 1}, not {position}")
    else:
        index = position - first
    logprobs = log_softmax(capture.array(i, HOOK)[0, index])
    return _predictions(capture, meta, ids, position, logprobs, k)


def _predictions(capture: capture_mod.Capture, meta: dict, ids: list[int] | None, position: int | None,
                 logprobs: np.ndarray, k: int) -> Predictions:
    order = np.argsort(-logprobs, kind="stable")[:k]
    found = tokenizer.find(capture.folder, capture.metadata, capture.step_metadata)
    chosen = ids[position + 1] if ids is not None and position is not None and position + 1 < len(ids) else None
    wanted = [int(t) for t in order] + ([chosen] if chosen is not None else [])
    texts = _decode(found, wanted)
    top = pd.DataFrame({"rank": range(1, len(order) + 1), "token_id": [int(t) for t in order],
                        "token": texts[:len(order)] if texts else [None] * len(order),
                        "logprob": logprobs[order], "prob": np.exp(logprobs[order])})
    if chosen is None or not 0 <= chosen < logprobs.shape[0]:
        return Predictions(position, top, decoder=found.name if found and texts else None)
    recorded = _recorded_logprob(meta, position)
    return Predictions(position, top, chosen, texts[-1] if texts else _recorded_text(meta, position),
                       float(logprobs[chosen]), int((logprobs > logprobs[chosen]).sum()) + 1, recorded,
                       found.name if found and texts else None)


def _decode(found: tokenizer.Tokenizer | None, ids: list[int]) -> list[str] | None:
    if found is None:
        return None
    try:
        return found.decode(ids)
    except Exception:  # an id outside the tokenizer's vocabulary: ids only
        return None


def _recorded_text(meta: dict, position: int | None) -> str | None:
    texts = prompt._strings(meta.get("tokens"))
    return texts[position + 1] if texts is not None and position is not None and position + 1 < len(texts) else None


def _recorded_logprob(meta: dict, position: int | None) -> float | None:
    """The recorder's logprob of the token after ``position`` (``logprobs`` run from ``prompt_length``)."""
    start, saved = meta.get("prompt_length"), meta.get("logprobs")
    if position is None or not isinstance(start, int) or not isinstance(saved, list):
        return None
    index = position + 1 - start
    value = saved[index] if 0 <= index < len(saved) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
