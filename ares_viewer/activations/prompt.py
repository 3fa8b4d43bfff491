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

**Message starts** (best effort): each message's first characters (whitespace collapsed, non-ASCII characters
left out) are looked for in the prompt's text, in order; the token holding that character is where the message
begins. A message cut by the clipping begins before the first token (``partial``); messages whose text is not
found are counted in ``unlocated``.
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
        cut: which part the clipping removed when the text shows it: ``"start"``, ``"end"``, ``"start and end"``;
            None when not clipped or when only the length tells.
        evidence: the sentence saying why ``clipped`` is what it is.
        seen_tokens: how many tokens of the context the model saw (the prompt's length).
        limit: the most tokens the client passes on (window minus budget), when recorded.
        message_starts: where each located message begins, in order; None when there was no text to look in.
        unlocated: how many messages between the first and the last located ones were not found.
        unseen: how many messages at the end of the context the model never saw (its end cut).
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
    cut: str | None = None
    unseen: int = 0

    def kept(self) -> str:
        """``"its last 506 tokens"`` (start cut), ``"its first 506 tokens"`` (end cut) or ``"506 tokens"``."""
        side = {"start": "its last ", "end": "its first "}.get(self.cut or "", "")
        return f"{side}{self.seen_tokens:,} tokens"

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
        found += f"; {self.unlocated} message(s) between them not found" if self.unlocated else ""
        return found + (f"; the last {self.unseen} message(s) were cut off" if self.unseen else "")


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
    source: str | None = f"step_metadata[{step}].{'prompt_tokens' if key.endswith(('_ids', 'input_ids')) else 'tokens'}"
    if ids is not None and decode is not None:
        with contextlib.suppress(Exception):  # an id outside the tokenizer's vocabulary: keep the recorded text
            texts, source = decode(ids), f"the tokenizer at {decoder or 'unknown'}"
    if texts is None:
        source = None
    n = len(ids) if ids is not None else len(texts or [])
    window = _first_int(WINDOW_KEYS, meta, top or {})
    budget = _first_int(BUDGET_KEYS, meta, top or {})
    limit = window[0] - budget[0] if window and budget else None
    where = _locate(texts, messages) if texts is not None and messages else None
    clipped, cut, evidence = _verdict(n, limit, window, budget, where, bool(messages))
    if where is None:
        return PromptTokens(ids, texts, key, source, clipped, evidence, n, limit, cut=cut)
    return PromptTokens(ids, texts, key, source, clipped, evidence, n, limit, where.starts, where.unlocated, cut,
                        where.unseen)


@dataclasses.dataclass(frozen=True, slots=True)
class _Located:
    starts: tuple[MessageStart, ...]
    unlocated: int = 0
    unseen: int = 0
    head: bool | None = None  # the first message's beginning is in the text (None: the context has no text)
    start_cut: bool = False  # the text begins inside a message, or too little text precedes a later one
    end_cut: bool = False  # the text ends inside a message
    tail: bool = False  # the last message's end is in the text


def _verdict(n: int, limit: int | None, window: tuple[int, str] | None, budget: tuple[int, str] | None,
             where: _Located | None, have_messages: bool) -> tuple[bool | None, str | None, str]:
    at_limit = limit is not None and n >= limit and window is not None and budget is not None
    at = f"its {n} tokens are the recorded limit, {window[1]} {window[0]} minus {budget[1]} {budget[0]}" \
        if at_limit and window and budget else ""
    if where is not None and (where.start_cut or where.end_cut):
        parts = []
        if where.start_cut:
            parts.append("lacks the beginning of the context's first message and begins inside a message or holds "
                         "too little text before a later one: its start was cut")
        if where.end_cut:
            parts.append(f"ends inside message {where.starts[-1].message + 1} of the context: its end was cut"
                         + (f", and the last {where.unseen} message(s) were never seen" if where.unseen else ""))
        cut = " and ".join(p for p, on in (("start", where.start_cut), ("end", where.end_cut)) if on)
        return True, cut, "the prompt's text " + "; it ".join(parts) + (f"; {at}" if at else "")
    if where is not None and where.head and where.tail:
        return False, None, ("the prompt's text holds the beginning of the context's first message and the end of "
                             "its last")
    if at_limit:
        return True, None, f"{at}, the most the client passes on: it cuts longer prompts"
    if limit is not None:
        return False, None, f"its {n} tokens are under the recorded limit ({limit}): the client cut nothing"
    why = "the capture records no context window or generation budget"
    if not have_messages:
        return None, None, f"{why}, and the step's context is not known"
    return None, None, f"{why}, and the prompt's text does not show where the context begins and ends"


def _normal(text: str) -> str:
    """Whitespace collapsed and non-ASCII characters dropped: a token may hold part of a character's bytes (which
    decodes as U+FFFD), and tokenizers and chat templates differ in spacing."""
    return " ".join(text.encode("ascii", "ignore").decode("ascii").split())


def _normal_tokens(texts: Sequence[str]) -> tuple[str, list[int]]:
    """The tokens' text as ``_normal`` leaves it, and the token each of its characters came from."""
    chars: list[str] = []
    owner: list[int] = []
    for index, piece in enumerate(texts):
        for char in piece:
            if not char.isascii():
                continue
            if char.isspace():
                if not chars or chars[-1] == " ":
                    continue
                char = " "
            chars.append(char)
            owner.append(index)
    return "".join(chars), owner


PROBE = 24  # characters of the prompt's own text looked for inside a message


def _locate(texts: Sequence[str], messages: Sequence[str]) -> _Located:
    """Where the context's messages are in the tokens' text, and whether the text begins or ends inside one."""
    normal, owner = _normal_tokens(texts)
    bodies = [_normal(content) for content in messages]
    order = [index for index, body in enumerate(bodies) if body]
    if not order or not normal:
        return _Located(())
    starts: list[MessageStart] = []
    found: dict[int, int] = {}  # message -> where its text begins in ``normal``
    cursor, start_cut = 0, False
    head = normal.find(bodies[order[0]][:HEAD]) >= 0
    for rank, index in enumerate(order):
        at = normal.find(bodies[index][:HEAD], cursor)
        if at < 0:  # the text may end within the message's first characters
            at = normal.find(bodies[index][:8], cursor)
            at = at if at >= 0 and bodies[index].startswith(normal[at:]) else -1
        if at < 0:
            continue
        if not starts and not head and rank > 0:
            # The prompt begins inside the message before (its beginning cut: partial), or there is too little text
            # before this message to hold the ones before it.
            # Past the first token, perhaps a partial one (the next tokens may hold no ASCII: part of a character).
            first = next((j for j, o in enumerate(owner) if o >= 1), len(normal))
            probe = normal[first:first + PROBE].strip()
            inside = at > 0 and len(probe) >= 8 and bodies[order[rank - 1]].find(probe) > 0
            start_cut = inside or at < sum(len(bodies[i]) for i in order[:rank])
            if inside:
                starts.append(MessageStart(order[rank - 1], 0, partial=True))
        starts.append(MessageStart(index, owner[at]))
        found[index] = at
        cursor = at + min(len(bodies[index]), HEAD)
    if not found:
        return _Located((), head=head)
    last = max(found)
    body = bodies[last]
    tail = last == order[-1] and normal.find(body[-HEAD:], found[last]) >= 0
    # The text ends inside the last located message: the text before the last token (perhaps a partial one) is in
    # that message, with more of the message after it.
    final = owner.index(owner[-1])
    probe = normal[max(found[last], final - PROBE):final].strip()
    where = body.rfind(probe) if len(probe) >= 8 and not tail else -1
    end_cut = where >= 0 and where + len(probe) + len(normal) - final < len(body)
    after = [i for i in order if i > min(found) and i not in found]
    unseen = sum(1 for i in after if i > last) if end_cut else 0
    return _Located(tuple(starts), len(after) - unseen, unseen, head, start_cut, end_cut, tail)


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
