"""A model's answer with the token usage its endpoint reported (``model_client.openai_client`` returns one).

A :class:`Completion` is a ``str``, so every caller of a counterfactual client takes it as the response text; the
decisive-step search reads its ``usage`` to count and budget model tokens (``branching``).

A token budget never takes a call as free: a call whose endpoint reported no usage, or a total of 0, counts against
it as an estimate from its size, one token per :data:`BYTES_PER_TOKEN` bytes of the request's messages and the
answer (:func:`counted`), while the tokens shown as spent stay unknown.
"""

from __future__ import annotations

import json
from typing import Any

BYTES_PER_TOKEN = 4  # a call without a usable usage counts one token per this many bytes it sent and received


class Completion(str):
    """A model's response text (a ``str``, so any caller of a client takes it as text) with the token usage the
    endpoint reported: ``usage`` is ``{"prompt_tokens", "generated_tokens", "total_tokens"}`` (ARES's names for the
    first two), or None when the endpoint reported none (unknown, never 0). ``estimate`` is the call's size in
    tokens (:func:`estimate`), set by whoever saw its request (``counterfactual._ask``), else None."""

    usage: dict[str, int] | None
    estimate: int | None

    def __new__(cls, text: str, usage: dict[str, int] | None = None, estimate: int | None = None) -> Completion:
        made = super().__new__(cls, text)
        made.usage = usage
        made.estimate = estimate
        return made

    def __reduce__(self) -> tuple[Any, ...]:  # a Ray task returns it whole
        return (Completion, (str(self), self.usage, self.estimate))


def usage_of(text: str) -> dict[str, int] | None:
    """The usage a client's answer carries (a :class:`Completion`'s), or None (unknown) for plain text."""
    return getattr(text, "usage", None)


def usage(answer: Any) -> dict[str, int] | None:
    """An OpenAI-compatible ``usage`` object as counts, or None when it is missing, not whole numbers, or counts
    nothing (a total of 0: a chat completion always reads some prompt). A total below the prompt's and the
    generated tokens is taken as their sum."""
    raw = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(raw, dict):
        return None
    prompt, generated, total = (_count(raw.get(key)) for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if prompt is None or generated is None:
        return None
    total = max(prompt + generated, total or 0)
    if total == 0:
        return None
    return {"prompt_tokens": prompt, "generated_tokens": generated, "total_tokens": total}


def estimate(messages: Any, system_prompt: str | None, answer: str) -> int:
    """A call's size in tokens, for a budget: its messages (as JSON), system prompt and answer in UTF-8 bytes, one
    token per :data:`BYTES_PER_TOKEN` bytes, rounded up (at least 1)."""
    sent = len(json.dumps(messages, ensure_ascii=False, default=str).encode("utf-8", "replace"))
    size = sent + len((system_prompt or "").encode("utf-8", "replace")) + len(answer.encode("utf-8", "replace"))
    return max(1, -(-size // BYTES_PER_TOKEN))


def with_estimate(answer: str, messages: Any, system_prompt: str | None) -> Completion:
    """``answer`` as a :class:`Completion` (keeping its usage) that carries the call's :func:`estimate`."""
    return Completion(answer, usage_of(answer), estimate(messages, system_prompt, answer))


def counted(text: str) -> int:
    """The tokens one call counts against a token budget: the total its endpoint reported, else its
    :func:`estimate` (else the answer's own size, when nothing recorded the request)."""
    reported = usage_of(text)
    if reported is not None:
        return reported["total_tokens"]
    known = getattr(text, "estimate", None)
    return known if isinstance(known, int) else estimate([], None, text)


def _count(value: Any) -> int | None:
    """A whole, non-negative token count, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
