"""Per-token data of a response, wherever a format records it: token ids, token strings, logprobs.

Adapters keep what the file recorded in ``Step.extra``; this module reads the names formats use:

- ATIF (``metrics.completion_token_ids``, ``metrics.logprobs``): ``completion_token_ids`` and ``logprobs``;
- OpenAI-style logprobs: ``logprobs`` as a list of ``{token, logprob, ...}`` (or ``{"content": [...]}``);
- Tinker's token data (``TokensWithLogprobs``): ``tokens`` and ``maybe_logprobs``;
- the recorder's, kept with the activations it saved beside an episode (``step_metadata`` of the capture:
  ``token_ids``, ``tokens``, ``prompt_length``, ``logprobs``; see ``ares_viewer.recorder.activations``): pass the
  capture as ``capture=``; a step's own data wins. ``completion_tokens`` (token strings) is read beside the ids.

Token strings come from the file when it has them, else from ``decode`` (a tokenizer's id -> text) when given;
otherwise a token shows as its id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from ares_viewer import model
    from ares_viewer.activations import capture as capture_mod

COLUMNS = ["position", "token_id", "token", "logprob", "prob"]


def _list(value: Any) -> list[Any] | None:
    if isinstance(value, Mapping) and isinstance(value.get("content"), list):
        value = value["content"]  # OpenAI's {"content": [{token, logprob}, ...]}
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str | bytes) else None


def _number(value: Any) -> float | None:
    if isinstance(value, Mapping):
        value = value.get("logprob")
    if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    return None


def _id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def has_tokens(step: model.Step) -> bool:
    """Whether the step records per-token data."""
    extra = step.extra
    return any(_list(extra.get(k)) for k in ("logprobs", "maybe_logprobs", "completion_token_ids", "tokens"))


def token_frame(step: model.Step, decode: Callable[[int], str] | None = None, *,
                capture: capture_mod.Capture | None = None) -> pd.DataFrame | None:
    """The step's response, one row per token: ``position``, ``token_id``, ``token`` (text), ``logprob``,
    ``prob`` (None where unrecorded), or None when the step records no tokens.

    Args:
        step: a step read by any adapter.
        decode: id -> text, used when the file records ids without their text.
        capture: the episode's activations (``activations.find(episode).capture``): the tokens the recorder saved
            with them are used when the step itself records none.
    """
    extra = step.extra
    logprobs = _list(extra.get("logprobs")) or _list(extra.get("maybe_logprobs")) or []
    ids = _list(extra.get("completion_token_ids")) or [v for v in _list(extra.get("tokens")) or [] if _id(v)
                                                       is not None] or []
    texts = _list(extra.get("completion_tokens")) or []
    if not logprobs and not ids and capture is not None:
        return capture_frame(capture, step.index, decode)
    return _frame(logprobs, ids, texts, decode)


def capture_frame(capture: capture_mod.Capture, step: int, decode: Callable[[int], str] | None = None
                  ) -> pd.DataFrame | None:
    """The response tokens the recorder saved with a capture for trajectory step ``step`` (capture step
    ``step - 1``; see ``linking``), as ``token_frame`` shows them, or None when that call recorded no tokens."""
    meta = capture.meta(step - 1)
    ids = _list(meta.get("token_ids")) or []
    texts = _list(meta.get("tokens")) or []
    start = meta.get("prompt_length")
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= max(len(ids), len(texts)):
        return None
    return _frame(_list(meta.get("logprobs")) or [], ids[start:], texts[start:], decode)


def _frame(logprobs: list[Any], ids: list[Any], texts: list[Any], decode: Callable[[int], str] | None
           ) -> pd.DataFrame | None:
    n = max(len(logprobs), len(ids))
    if not n:
        return None
    rows = []
    for position in range(n):
        entry = logprobs[position] if position < len(logprobs) else None
        token_id = _id(ids[position]) if position < len(ids) else None
        text = None
        if isinstance(entry, Mapping) and isinstance(entry.get("token"), str):
            text = entry["token"]
        elif position < len(texts) and isinstance(texts[position], str):
            text = texts[position]
        elif token_id is not None and decode is not None:
            text = decode(token_id)
        logprob = _number(entry)
        rows.append((position, token_id, text, logprob, math.exp(logprob) if logprob is not None else None))
    return pd.DataFrame(rows, columns=COLUMNS)
