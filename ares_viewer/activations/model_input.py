"""What the model ran on at a step, for exports: the prompt's token ids from the capture, their text, whether and
which end the client clipped (``clipping``), the messages as the model saw them, and the step's hook arrays.

``fields(linked, step, context)`` gives the export's fields (``FIELDS``); ``seen_messages`` cuts the context to
what the prompt's text holds: the messages the model never saw are left out, and the one the clipping cut holds
only the part the model saw, marked ``"cut": "start"`` or ``"end"`` (with ``"chars"``, its whole length). Without
text (no tokenizer, no recorded tokens) which messages were seen is unknown: ``messages`` is None. With only the
start cut, messages are placed from the last one back (an agent's context repeats messages, so a message found
from the front may be a later copy); otherwise from ``prompt``'s message starts. Texts are compared on their ASCII
characters (a token holding part of a character decodes alone as U+FFFD).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ares_viewer.activations import clipping, prompt, tokenizer

if TYPE_CHECKING:
    from ares_viewer.activations import linking

FIELDS = ("prompt_token_ids", "prompt_text", "prompt_text_source", "tokenizer", "clipped", "clipped_end",
          "clipping", "system_prompt_seen", "capture", "capture_step")
PROBE = 24  # characters looked for to place a cut message's seen part
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def empty(why: str | None = None) -> dict[str, Any]:
    """The fields of a step with no capture (or no model call): nothing known; ``clipping`` says why."""
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    out["clipping"] = why
    return out


def fields(linked: linking.Linked, step: int, context: Sequence[Mapping[str, Any]]
           ) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """The export fields of trajectory step ``step``, and its messages as the model saw them (``context``: the
    file's message dicts; returned unchanged when not clipped, None when clipped and the text is unknown)."""
    i = linked.capture_step(step)
    if i is None:
        why = f"the capture at {linked.capture.folder} has no model call for step {step}"
        return empty(why), [dict(m) for m in context]
    contents = [str(c.get("content")) if isinstance(c.get("content"), str) else "" for c in context]
    found_tok = tokenizer.find(linked.capture.folder, linked.capture.metadata, linked.capture.step_metadata)
    found = prompt.of_capture(linked.capture, i, contents)
    verdict = clipping.of_step(linked, step, found)
    out = empty()
    out.update(clipped=verdict.clipped, clipped_end=verdict.end, clipping=verdict.evidence,
               capture=linked.capture.folder, capture_step=i,
               tokenizer=found_tok.name if found_tok is not None else "unknown")
    if found is None:
        return out, ([dict(m) for m in context] if verdict.clipped is not True else None)
    out["prompt_token_ids"] = found.ids
    if found.ids is not None and found_tok is not None:
        with contextlib.suppress(Exception):  # an id outside its vocabulary: the recorded text below
            out["prompt_text"] = found_tok.text(found.ids)
            out["prompt_text_source"] = f"the tokenizer at {found_tok.name}"
    if out["prompt_text"] is None and found.texts is not None:
        out["prompt_text"], out["prompt_text_source"] = "".join(found.texts), found.text_source
    if not verdict.clipped:
        out["system_prompt_seen"] = True if verdict.clipped is False and linked.episode.system_prompt else None
        return out, [dict(m) for m in context]
    seen = seen_messages(context, found, verdict.end)
    out["system_prompt_seen"] = _system_seen(linked.episode.system_prompt, verdict.end, context, seen)
    return out, seen


def _system_seen(system: str | None, end: str | None, context: Sequence[Mapping[str, Any]],
                 seen: Sequence[Mapping[str, Any]] | None) -> bool | None:
    """Whether a clipped prompt held the system prompt (ARES's client puts it first): yes when only the end was
    cut; no when the start was cut and the first message is gone or cut; else unknown."""
    if not system or end is None:
        return None
    if end == "end":
        return True
    if seen is None:
        return None
    # The start was cut: the seen messages are the context's last ones. The first message seen whole: the cut fell
    # before it, in the system prompt or just after it (unknown); else the system prompt is gone.
    first_whole = len(seen) == len(context) and bool(seen) and seen[0].get("cut") is None
    return None if first_whole else False


def seen_messages(context: Sequence[Mapping[str, Any]], found: prompt.PromptTokens, end: str | None
                  ) -> list[dict[str, Any]] | None:
    """The context's messages the clipped prompt holds, the cut one marked; None when the text cannot tell."""
    starts, texts = found.message_starts, found.texts
    if texts is None or not context or end not in ("start", "end", "start and end"):
        return None
    if end == "start":  # the end is whole: place the messages from the last one back
        return _from_end(context, texts)
    if not starts:
        return None
    first, last = starts[0], starts[-1]
    out: list[dict[str, Any] | None] = [dict(m) for m in context[first.message:last.message + 1]]
    if "start" in end and first.partial:
        following = starts[1].position if len(starts) > 1 else len(texts)
        out[0] = _cut_start(dict(context[first.message]), texts[:following])
    if "end" in end:
        out[-1] = _cut_end(dict(context[last.message]), texts[last.position:])
    return None if any(m is None for m in out) else [m for m in out if m is not None]


def _ascii(text: str) -> tuple[str, list[int]]:
    """The text's ASCII characters, and where each is in the text: a token may hold part of a character's bytes
    (decoded alone, it reads U+FFFD), so texts are aligned on their ASCII characters."""
    where = [i for i, char in enumerate(text) if char.isascii()]
    return "".join(text[i] for i in where), where


def _from_end(context: Sequence[Mapping[str, Any]], texts: Sequence[str]) -> list[dict[str, Any]] | None:
    """The messages a prompt whose start was cut holds: each message, from the last, found whole before the one
    after it (searched backwards: an agent's context repeats messages); the first not found whole is the cut one,
    its end at the prompt's start. None when that end is not found."""
    joined, _ = _ascii("".join(texts))
    cursor, out = len(joined), list[dict[str, Any]]()
    for j in range(len(context) - 1, -1, -1):
        content = context[j].get("content")
        if not isinstance(content, str):
            return None
        body, _ = _ascii(content)
        at = joined.rfind(body, 0, cursor)
        if at < 0:
            lead = texts[:_token_at(texts, cursor)]
            cut = _cut_start(dict(context[j]), lead)
            return None if cut is None else [cut, *reversed(out)]
        out.append(dict(context[j]))
        cursor = at
    return list(reversed(out))  # every message whole: the cut fell before the first


def _token_at(texts: Sequence[str], ascii_chars: int) -> int:
    """How many tokens hold the first ``ascii_chars`` ASCII characters of their text (one more when one is split)."""
    seen = 0
    for n, piece in enumerate(texts):
        if seen >= ascii_chars:
            return n
        seen += len(_ascii(piece)[0])
    return len(texts)


def _cut_start(message: dict[str, Any], texts: Sequence[str]) -> dict[str, Any] | None:
    """The message holding only its end the prompt begins with, or None when the prompt's start is not in it."""
    content = message.get("content")
    if not isinstance(content, str) or not texts:
        return None
    head, _ = _ascii(texts[0])  # perhaps part of a character's bytes: the probe starts after it
    rest, _ = _ascii("".join(texts[1:]))
    body, where = _ascii(content)
    probe = rest[:PROBE]
    if len(probe) < 8:
        return None
    # Where the prompt's text goes on as the message does, to the message's end or the text's (a probe may occur
    # more than once in a message).
    at = next((i for i in _occurrences(body, probe) if rest.startswith(body[i:]) or body[i:].startswith(rest)), -1)
    if at < 0:
        return None
    at = at - len(head) if head and at >= len(head) and body[at - len(head):at] == head else at
    return {**message, "content": content[where[at]:], "cut": "start", "chars": len(content)}


def _occurrences(text: str, probe: str) -> Iterator[int]:
    at = text.find(probe)
    while at >= 0:
        yield at
        at = text.find(probe, at + 1)


def _cut_end(message: dict[str, Any], texts: Sequence[str]) -> dict[str, Any] | None:
    """The message holding only its beginning the prompt ends with (whole when the cut fell after it), or None
    when its beginning is not in the text."""
    content = message.get("content")
    if not isinstance(content, str) or not content:
        return None
    joined, _ = _ascii("".join(texts))
    body, where = _ascii(content)
    at = next((joined.find(body[:n]) for n in (16, 8, 4, 2, 1) if body and joined.find(body[:n]) >= 0), -1)
    if at < 0:
        return None
    rest = joined[at:]
    same = next((n for n, (a, b) in enumerate(zip(body, rest, strict=False)) if a != b), min(len(body), len(rest)))
    if same == len(body):
        return message  # the whole message was seen: the cut fell after it
    return {**message, "content": content[:where[same]] if same < len(where) else content, "cut": "end",
            "chars": len(content)}


def write_hooks(linked: linking.Linked, step: int, folder: str | os.PathLike) -> dict[str, Any] | None:
    """Write trajectory step ``step``'s hook arrays as ``<folder>/<hook>.npy`` (one file a hook, numpy's own
    format); returns ``{"folder", "capture_step", "hooks": {hook: file name}}`` or None when the capture has no
    call for the step.

    Raises:
        activations.Error: the step's file cannot be read.
    """
    i = linked.capture_step(step)
    if i is None:
        return None
    os.makedirs(folder, exist_ok=True)
    written: dict[str, str] = {}
    for hook in linked.capture.hooks(i):
        name = _UNSAFE.sub("_", hook) + ".npy"
        np.save(os.path.join(folder, name), linked.capture.array(i, hook), allow_pickle=False)
        written[hook] = name
    return {"folder": os.fspath(folder), "capture_step": i, "hooks": written}
