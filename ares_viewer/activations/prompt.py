"""The prompt a model call ran on, from a capture's ``step_metadata``: its token ids, their text, whether the client
clipped it, and where each message of the step's context begins in it.

Where the ids are read (first found wins), in ``step_metadata[i]``:

- ``prompt_token_ids`` (or ``input_ids``): the prompt's ids;
- ``token_ids`` with ``prompt_length``: the recorder's (``ares_viewer.recorder.activations``): the whole sequence,
  the prompt first.

Their text: decoded with the capture's tokenizer when one loads offline (``tokenizer``), else the recorded
``tokens`` (one string per id; ``prompt_tokens`` for a prompt recorded alone), else none (ids only).

**Clipping.** ARES's ``HookedTransformerLLMClient`` cuts the prompt from the left to the model's context window
minus the generation budget (``n_ctx - max_new_tokens``), silently. A call's prompt is:

- *clipped* when its text lacks the beginning of the step's context's first message and either begins inside
  a message's text or holds a later message with too little text before it to hold the messages before it
  (the start was cut), or, when the text cannot tell, when its length is the limit the capture records
  (``n_ctx`` / ``context_window`` minus ``max_new_tokens`` / ``max_output_tokens``, per step or at the top of
  ``metadata.json``);
- *not clipped* when its text holds the beginning of the context's first message, or when it is shorter than
  the recorded limit;
- *unknown* otherwise (``clipped is None``): nothing is claimed without evidence.

**Message starts** (best effort): each message's first characters are looked for in the prompt's text, in order;
the token holding that character is where the message begins. A message cut by the clipping begins before the
first token (``partial``); messages whose text is not found are counted in ``unlocated``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from ares_viewer.activations import tokenizer

if TYPE_CHECKING:
    from ares_viewer.activations import capture as capture_mod

WINDOW_KEYS = ("n_ctx", "context_window", "max_context_tokens")
BUDGET_KEYS = ("max_new_tokens", "max_output_tokens", "max_tokens")
HEAD = 48  # characters of a message looked for in the prompt's text


@dataclasses.dataclass(frozen=True, slots=True)
class MessageStart:
    """Message ``message`` (its index in the step's context) begins at token ``position`` of the prompt;
    ``partial``: its beginning was clipped, so the prompt starts inside it."""

    message: int
    position: int
    partial: bool = False


@dataclasses.dataclass(frozen=True)
class PromptTokens:
    """One model call's prompt, as the capture recorded it.

    Attributes:
        ids: the token ids (None when only their text was recorded).
        texts: one string per token, or None (ids only).
        key: where the tokens were read, e.g. ``step_metadata[2].token_ids[:prompt_length]``.
        text_source: where ``texts`` came from (``the tokenizer at …`` or ``step_metadata[2].tokens``), or None.
        clipped: True, False, or None when the capture cannot tell (see the module's rule).
        evidence: the sentence saying why ``clipped`` is what it is.
        seen_tokens: how many tokens of the context the model saw (the prompt's length).
        limit: the most tokens the client passes on (window minus budget), when recorded.
        message_starts: where each located message begins, in order; None when there was no text to look in.
        unlocated: how many messages of the context (after the first located one) were not found.
    """

    ids: list[int] | None
    texts: list[str] | None
    key: str
    text_source: str | None
    clipped: bool | None
    evidence: str
    seen_tokens: int
    limit: int | None = None
    message_starts: tuple[MessageStart, ...] | None = None
    unlocated: int = 0

    def labels(self) -> list[str]:
        """One label per token: its text, else its id."""
        if self.texts is not None:
            return list(self.texts)
        return [str(i) for i in self.ids or []]

    def frame(self) -> pd.DataFrame:
        """One row per token: ``position``, ``token_id`` (None when unrecorded), ``token`` (text, else None) and
        ``message`` (the index of the context message beginning at that token, else None; ``partial`` on the row
        of a message whose beginning was clipped)."""
        n = self.seen_tokens
        begins: dict[int, int] = {}
        partial: set[int] = set()
        for start in self.message_starts or ():
            begins.setdefault(start.position, start.message)
            if start.partial:
                partial.add(start.position)
        return pd.DataFrame({
            "position": range(n),
            "token_id": pd.array(self.ids if self.ids is not None else [None] * n, dtype="Int64"),
            "token": self.texts if self.texts is not None else [None] * n,
            "message": pd.array([begins.get(p) for p in range(n)], dtype="Int64"),
            "partial": [p in partial for p in range(n)],
        })

    def boundaries(self) -> str:
        """A sentence on the message starts: how many were found, or why none could be."""
        if self.message_starts is None and self.texts is None:
            return "Message boundaries cannot be found: the prompt's tokens have no text (no tokenizer, no text)."
        if self.message_starts is None:
            return "Message boundaries are not marked: the step's context is not known."
        if not self.message_starts:
            return "No message of the step's context was found in the prompt's text: boundaries are not marked."
        found = f"{len(self.message_starts)} message start(s) found in the prompt's text"
        return found + (f"; {self.unlocated} later message(s) not found" if self.unlocated else "")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ids(value: Any) -> list[int] | None:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes) and value and all(
            _int(v) is not None for v in value):
        return list(value)
    return None


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes) and value and all(
            isinstance(v, str) for v in value):
        return list(value)
    return None


def _first_int(keys: Sequence[str], *sources: Mapping[str, Any]) -> tuple[int, str] | None:
    for source in sources:
        for key in keys:
            if _int(source.get(key)) is not None:
                return source[key], key
    return None


def read_ids(meta: Mapping[str, Any], step: int) -> tuple[list[int] | None, list[str] | None, str] | None:
    """``(ids, recorded texts, key)`` of a call's prompt from its ``step_metadata`` entry, or None when absent."""
    name = f"step_metadata[{step}]"
    for key in ("prompt_token_ids", "input_ids"):
        ids = _ids(meta.get(key))
        if ids is not None:
            texts = _strings(meta.get("prompt_tokens"))
            return ids, texts if texts is not None and len(texts) == len(ids) else None, f"{name}.{key}"
    length = _int(meta.get("prompt_length"))
    ids, texts = _ids(meta.get("token_ids")), _strings(meta.get("tokens"))
    if length is None or length <= 0:
        return None
    if ids is not None and length <= len(ids):
        kept = texts[:length] if texts is not None and len(texts) == len(ids) else None
        return ids[:length], kept, f"{name}.token_ids[:prompt_length]"
    if texts is not None and length <= len(texts):
        return None, texts[:length], f"{name}.tokens[:prompt_length]"
    return None


def prompt_tokens(meta: Mapping[str, Any], step: int, *, top: Mapping[str, Any] | None = None,
                  decode: Callable[[list[int]], list[str]] | None = None, decoder: str | None = None,
                  messages: Sequence[str] | None = None) -> PromptTokens | None:
    """The prompt of capture step ``step`` (``meta``: its ``step_metadata`` entry), or None when none is recorded.

    Args:
        top: the rest of ``metadata.json`` (for a window and budget recorded once).
        decode: a tokenizer's ids -> one text per id; ``decoder`` names it.
        messages: the contents of the step's context, in order (``episode.context(step + 1)``), to tell whether
            the prompt's start was cut and where each message begins.
    """
    found = read_ids(meta, step)
    if found is None:
        return None
    ids, texts, key = found
    source = f"step_metadata[{step}].{'prompt_tokens' if key.endswith(('_ids', 'input_ids')) else 'tokens'}"
    if ids is not None and decode is not None:
        with contextlib.suppress(Exception):  # an id outside the tokenizer's vocabulary: keep the recorded text
            texts, source = decode(ids), f"the tokenizer at {decoder or 'unknown'}"
    if texts is None:
        source = None
    n = len(ids) if ids is not None else len(texts or [])
    window = _first_int(WINDOW_KEYS, meta, top or {})
    budget = _first_int(BUDGET_KEYS, meta, top or {})
    limit = window[0] - budget[0] if window and budget else None
    starts, unlocated, head_found, later_found = None, 0, None, False  # later_found: begins inside a later message
    if texts is not None and messages:
        starts, unlocated, head_found, later_found = _locate(texts, messages)
    clipped, evidence = _verdict(n, limit, window, budget, head_found, later_found, bool(messages))
    return PromptTokens(ids, texts, key, source, clipped, evidence, n, limit, starts, unlocated)


def _verdict(n: int, limit: int | None, window: tuple[int, str] | None, budget: tuple[int, str] | None,
             head_found: bool | None, later_found: bool, have_messages: bool) -> tuple[bool | None, str]:
    at = (f"its {n} tokens are the recorded limit, {window[1]} {window[0]} minus {budget[1]} {budget[0]}"
          if limit is not None and window and budget else "")
    if head_found is False and later_found:
        return True, ("the prompt's text lacks the beginning of the context's first message and begins inside a "
                      "message, or holds too little text before a later one: its start was cut"
                      ) + (f"; {at}" if at and limit is not None and n >= limit else "")
    if head_found:
        return False, "the prompt's text holds the beginning of the context's first message"
    if limit is not None and n >= limit:
        return True, f"{at}: the client cuts longer prompts from the left"
    if limit is not None:
        return False, f"its {n} tokens are under the recorded limit ({limit}): the client cut nothing"
    why = "the capture records no context window or generation budget"
    if not have_messages:
        return None, f"{why}, and the step's context is not known"
    return None, f"{why}, and the prompt's text does not show the context's messages"


def _normal(text: str) -> str:
    return " ".join(text.split())


def _normal_tokens(texts: Sequence[str]) -> tuple[str, list[int]]:
    """The tokens' text with whitespace collapsed (tokenizers and chat templates differ in spacing), and the token
    each of its characters came from."""
    chars: list[str] = []
    owner: list[int] = []
    for index, piece in enumerate(texts):
        for char in piece:
            if char.isspace():
                if not chars or chars[-1] == " ":
                    continue
                char = " "
            chars.append(char)
            owner.append(index)
    return "".join(chars), owner


def _locate(texts: Sequence[str], messages: Sequence[str]
            ) -> tuple[tuple[MessageStart, ...], int, bool | None, bool]:
    """Message starts in the tokens' text; how many messages after the first located one were not found; whether
    the first message's beginning was found (None: the context has no text); whether the text before the first
    located message is too short to hold the messages before it (the prompt's beginning was cut)."""
    normal, owner = _normal_tokens(texts)
    heads = [(index, _normal(content)[:HEAD]) for index, content in enumerate(messages)]
    heads = [(index, head) for index, head in heads if head]
    if not heads or not normal:
        return (), 0, None, False
    starts: list[MessageStart] = []
    unlocated, cursor, cut_inside = 0, 0, False
    first_found = normal.find(heads[0][1]) >= 0
    for order, (index, head) in enumerate(heads):
        at = normal.find(head, cursor)
        if at < 0:
            unlocated += bool(starts)
            continue
        if not starts and not first_found and order > 0:
            # The prompt begins inside the message before (its beginning cut, the message partial), or there is
            # too little text before this message to hold the ones before it: the start was cut either way.
            before = _normal(messages[heads[order - 1][0]])
            skip = owner.index(1) if 1 in owner else len(normal)  # past the first token, perhaps a partial one
            probe = normal[skip:skip + 24].strip()
            inside = at > 0 and len(probe) >= 8 and before.find(probe) > 0
            cut_inside = inside or at < sum(len(_normal(messages[i])) for i in range(index))
            if inside:
                starts.append(MessageStart(heads[order - 1][0], 0, partial=True))
        starts.append(MessageStart(index, owner[at]))
        cursor = at + len(head)
    return tuple(starts), unlocated, first_found, cut_inside


# ----- from a capture ---------------------------------------------------------------------------------


def of_capture(capture: capture_mod.Capture, step: int, messages: Sequence[str] | None = None
               ) -> PromptTokens | None:
    """The prompt of capture step ``step``, decoded with the capture's tokenizer when one loads offline
    (``tokenizer.find``); ``messages``: the step's context (trajectory step ``step + 1``)."""
    found = tokenizer.find(capture.folder, capture.metadata, capture.step_metadata)
    return prompt_tokens(capture.meta(step), step, top=capture.metadata, messages=messages,
                         decode=found.decode if found else None, decoder=found.name if found else None)


def sequence_labels(capture: capture_mod.Capture, step: int) -> list[str] | None:
    """One label per position of the sequence capture step ``step`` ran on, from its first position: the ids
    (``token_ids``, else ``prompt_token_ids``/``input_ids``) decoded with the capture's tokenizer, else the
    recorded ``tokens``, else the ids themselves; None when the capture recorded neither."""
    meta = capture.meta(step)
    ids = next((v for v in map(_ids, (meta.get(k) for k in ("token_ids", "prompt_token_ids", "input_ids")))
                if v is not None), None)
    found = tokenizer.find(capture.folder, capture.metadata, capture.step_metadata) if ids else None
    if ids is not None and found is not None:
        with contextlib.suppress(Exception):  # an id outside its vocabulary: the recorded text, or the ids
            return found.decode(ids)
    texts = _strings(meta.get("tokens"))
    if texts is not None:
        return texts
    return [str(i) for i in ids] if ids is not None else None
