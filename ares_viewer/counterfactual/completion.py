"""A model's answer with the token usage its endpoint reported (``model_client.openai_client`` returns one).

A :class:`Completion` is a ``str``, so every caller of a counterfactual client takes it as the response text; the
decisive-step search reads its ``usage`` to count and budget model tokens (``branching``).
"""

from __future__ import annotations

from typing import Any


class Completion(str):
    """A model's response text (a ``str``, so any caller of a client takes it as text) with the token usage the
    endpoint reported: ``usage`` is ``{"prompt_tokens", "generated_tokens", "total_tokens"}`` (ARES's names for the
    first two), or None when the endpoint reported none (unknown, never 0)."""

    usage: dict[str, int] | None

    def __new__(cls, text: str, usage: dict[str, int] | None = None) -> Completion:
        made = super().__new__(cls, text)
        made.usage = usage
        return made

    def __reduce__(self) -> tuple[Any, ...]:  # a Ray task returns it whole
        return (Completion, (str(self), self.usage))


def usage_of(text: str) -> dict[str, int] | None:
    """The usage a client's answer carries (a :class:`Completion`'s), or None (unknown) for plain text."""
    return getattr(text, "usage", None)


def usage(answer: Any) -> dict[str, int] | None:
    """An OpenAI-compatible ``usage`` object as counts, or None when it is missing or not whole numbers."""
    raw = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(raw, dict):
        return None
    prompt, generated, total = (_count(raw.get(key)) for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if prompt is None or generated is None:
        return None
    total = prompt + generated if total is None else total
    return {"prompt_tokens": prompt, "generated_tokens": generated, "total_tokens": total}


def _count(value: Any) -> int | None:
    """A whole, non-negative token count, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
