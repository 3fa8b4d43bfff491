"""Attention a reviewer can read: every head at one query token, the tokens named, and attention summed by the
messages of the step's context.

**Positions.** A step's attention patterns are ``[batch, head, query, key]``; their ``K`` keys are the sequence's
positions ``0 .. K-1`` and their ``Q`` queries its last ``Q`` positions (``K - Q .. K-1``): with ARES's default KV
cache the last forward pass of a call holds one query, the last token fed (a response token once the model has
generated more than one); without it, every position. A position is *prompt* below the prompt's length
(``prompt.read_ids``: the recorder's ``prompt_length``, or the length of ``prompt_token_ids``) and *response* from
there on; it is named by its token (``prompt.sequence_labels``: decoded with the capture's tokenizer, else the
recorded text, else the id), and a response position with no recorded token as "response token n".

**Segments.** The step's context messages are located in the prompt's text (``prompt.of_capture``: where each
message begins). Message ``m`` spans from its first token to the next located message's first token (the chat
template's markers between them included), the last one to the end of the prompt; the tokens before the first
located message are ``template``; the call's own generated tokens before the query are ``this response``. A
message's kind: ``system`` (instructions), ``task`` (the first user message), ``observation n`` (later user or
tool messages), ``response n`` (the model's earlier answers). A message is:

- ``seen``: in the prompt whole;
- ``cut``: in the prompt with its beginning or end clipped (its mass is the mass on the part seen);
- ``absent``: clipped away: the model never saw it (no mass: NaN, never 0);
- ``not located``: between located messages but its text was not found (its tokens count in the message before;
  NaN here).

A segment's ``mass`` is the attention weight the query put on its keys, averaged over the heads of the chosen
layers (all by default); the masses of a step's segments add up to the query's whole attended mass (1 for a
softmax pattern).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ares_viewer.activations import capture as capture_mod
from ares_viewer.activations import prompt, views

if TYPE_CHECKING:
    from ares_viewer.activations import linking

PROMPT, RESPONSE = "prompt", "response"
LAST, PROMPT_END = "last", "prompt end"
SEEN, CUT, ABSENT, NOT_LOCATED = "seen", "cut", "absent", "not located"
TEMPLATE, THIS_RESPONSE = "template", "this response"


@dataclasses.dataclass(frozen=True)
class Positions:
    """The sequence a call ran on, position by position.

    Attributes:
        labels: one label per position from the first (decoded text, recorded text or id), or None.
        prompt_length: how many positions are the prompt, or None when the capture does not say.
    """

    labels: list[str] | None
    prompt_length: int | None

    def role(self, position: int) -> str | None:
        """``"prompt"``, ``"response"``, or None when the prompt's length is unknown."""
        if self.prompt_length is None:
            return None
        return PROMPT if position < self.prompt_length else RESPONSE

    def token(self, position: int) -> str | None:
        """The token at a position (text or id), None when the capture did not record it."""
        return self.labels[position] if self.labels is not None and 0 <= position < len(self.labels) else None

    def name(self, position: int) -> str:
        """``"position 510: 'ls' (response token 5)"``: the token, its position and whether it is prompt or
        response (a response token never recorded is still named as one)."""
        token = self.token(position)
        role = self.role(position)
        where = ""
        if role == RESPONSE and self.prompt_length is not None:
            where = f"response token {position - self.prompt_length + 1}"
        elif role == PROMPT:
            where = "prompt"
        text = f": {token!r}" if token is not None else (": not recorded" if role != RESPONSE else "")
        return f"position {position}{text}" + (f" ({where})" if where else "")


def positions(capture: capture_mod.Capture, step: int) -> Positions:
    """The positions of trajectory step ``step``'s call (capture step ``step - 1``)."""
    i = step - 1
    found = prompt.read_ids(capture.meta(i), i)
    length = len(found[0] if found[0] is not None else found[1] or []) if found is not None else None
    return Positions(prompt.sequence_labels(capture, i), length or None)


def _patterns(capture: capture_mod.Capture, step: int) -> dict[int, str]:
    """Layer -> pattern hook name of a step, for the hooks a view can read."""
    i = views._capture_step(capture, step)
    found = {int(views.split_hook(n)[0]): n for n, info in capture.hooks(i).items() if views.is_pattern(n, info.shape)}
    return dict(sorted(found.items()))


def query_positions(capture: capture_mod.Capture, step: int) -> list[int]:
    """The positions whose attention a step's patterns hold (``K - Q .. K - 1``), empty when none."""
    patterns = _patterns(capture, step)
    if not patterns:
        return []
    shape = capture.hooks(step - 1)[next(iter(patterns.values()))].shape
    queries, keys = shape[2], shape[3]
    return list(range(keys - queries, keys))


@dataclasses.dataclass(frozen=True)
class Grid:
    """Every head's attention from one query position: ``weights[layer index, head, key]``.

    Attributes:
        layers: the block numbers of ``weights``' first axis.
        query: the query's position in the sequence.
        positions: the sequence's labels and prompt length.
    """

    weights: np.ndarray
    layers: list[int]
    query: int
    positions: Positions

    @property
    def keys(self) -> int:
        return int(self.weights.shape[-1])

    def query_name(self) -> str:
        return self.positions.name(self.query)

    def boundary(self) -> int | None:
        """The first response position when it lies among the keys (the prompt/response boundary), else None."""
        length = self.positions.prompt_length
        return length if length is not None and length < self.keys else None

    def frame(self) -> pd.DataFrame:
        """One row per layer, head and key: ``layer``, ``head``, ``position``, ``token``, ``role``, ``weight``."""
        layers, heads, keys = self.weights.shape
        position = np.tile(np.arange(keys), layers * heads)
        return pd.DataFrame({
            "layer": np.repeat(self.layers, heads * keys),
            "head": np.tile(np.repeat(np.arange(heads), keys), layers),
            "position": position,
            "token": [self.positions.token(p) for p in range(keys)] * (layers * heads),
            "role": [self.positions.role(p) for p in range(keys)] * (layers * heads),
            "weight": self.weights.reshape(-1).astype(np.float64),
        })


def grid(capture: capture_mod.Capture, step: int, query: int | None = None) -> Grid:
    """Every head of every layer at trajectory step ``step``, attending from sequence position ``query`` (the last
    recorded query by default; ``query_positions`` lists the others).

    Raises:
        KeyError: the step recorded no attention pattern, or not that query.
    """
    patterns = _patterns(capture, step)
    if not patterns:
        raise KeyError(f"step {step} recorded no attention patterns")
    available = query_positions(capture, step)
    query = available[-1] if query is None else query
    if query not in available:
        raise KeyError(f"step {step} recorded the attention of positions {available[0]}..{available[-1]}, not "
                       f"{query}")
    rows = []
    for _, array in capture.file(step - 1).each(list(patterns.values())):
        rows.append(np.asarray(array[0, :, query - (array.shape[3] - array.shape[2]), :], dtype=np.float64))
    return Grid(np.stack(rows), list(patterns), query, positions(capture, step))


# ----- segments ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Segment:
    """A part of a call's sequence: a message of its context, the template before them, or its own response.

    ``start``/``end``: its positions ``[start, end)`` (None when absent or not located); ``message``: its index in
    the context (None for the template and this response)."""

    name: str
    kind: str
    status: str
    message: int | None = None
    start: int | None = None
    end: int | None = None
    latest: bool = False


def message_kinds(roles: Sequence[str]) -> list[tuple[str, str]]:
    """``(name, kind)`` per message of a context: ``system``, ``task`` (the first user message),
    ``observation n`` (later user or tool messages), ``response n`` (the assistant's)."""
    named: list[tuple[str, str]] = []
    counts = {"observation": 0, "response": 0}
    task_seen = False
    for role in roles:
        if role == "system":
            named.append(("system", "system"))
        elif role == "assistant":
            counts["response"] += 1
            named.append((f"response {counts['response']}", "earlier response"))
        elif role == "user" and not task_seen:
            task_seen = True
            named.append(("task", "task"))
        else:
            counts["observation"] += 1
            named.append((f"observation {counts['observation']}", "observation"))
    return named


def segments(found: prompt.PromptTokens, roles: Sequence[str], keys: int) -> list[Segment]:
    """The segments of a call's sequence of ``keys`` positions (see the module's docstring), or an empty list when
    the messages cannot be located (no text, or no message found)."""
    if not found.message_starts:
        return []
    starts = found.message_starts
    names = message_kinds(roles)
    latest = max((m for m, (_, kind) in enumerate(names) if kind == "observation"), default=None)
    located = {s.message: s for s in starts}
    first, last = starts[0].message, starts[-1].message
    end_cut = found.cut is not None and "end" in found.cut
    prompt_end = min(found.seen_tokens, keys)
    spans = {s.message: (s.position, nxt.position) for s, nxt in itertools.pairwise(starts)}
    spans[last] = (starts[-1].position, prompt_end)
    out: list[Segment] = []
    if starts[0].position > 0:
        out.append(Segment(TEMPLATE, TEMPLATE, SEEN, None, 0, starts[0].position))
    for m, (name, kind) in enumerate(names):
        if m in located:
            cut = located[m].partial or (m == last and end_cut)
            start, end = spans[m]
            out.append(Segment(name, kind, CUT if cut else SEEN, m, start, end, m == latest))
        elif first < m < last:
            out.append(Segment(name, kind, NOT_LOCATED, m, latest=m == latest))
        else:
            status = ABSENT if found.clipped else NOT_LOCATED
            out.append(Segment(name, kind, status, m, latest=m == latest))
    if keys > prompt_end:
        out.append(Segment(THIS_RESPONSE, THIS_RESPONSE, SEEN, None, prompt_end, keys))
    return out


def _mean_weights(capture: capture_mod.Capture, step: int, query: str, layers: Sequence[int] | None
                  ) -> tuple[np.ndarray, int] | str:
    """The query's weights over the keys averaged over the chosen layers' heads, and its position; or why not."""
    patterns = _patterns(capture, step)
    chosen = [patterns[layer] for layer in (layers if layers is not None else patterns) if layer in patterns]
    if not chosen:
        return "no attention pattern of the chosen layers was recorded"
    available = query_positions(capture, step)
    if query == LAST:
        position = available[-1]
    else:
        length = positions(capture, step).prompt_length
        position = length - 1 if length is not None else -1
        if position not in available:
            return ("the end of the prompt's attention was not recorded (with a KV cache the capture holds the "
                    "last forward pass only)" if length is not None else "the prompt's length is not recorded")
    total = None
    for _, array in capture.file(step - 1).each(chosen):
        row = np.asarray(array[0, :, position - (array.shape[3] - array.shape[2]), :], dtype=np.float64).mean(axis=0)
        total = row if total is None else total + row
    assert total is not None
    return total / len(chosen), position


def by_segment(linked: linking.Linked, query: str = LAST, layers: Sequence[int] | None = None) -> pd.DataFrame:
    """Steps x segments: how much attention the query (``"last"``: the last recorded position; ``"prompt end"``:
    the prompt's last token, the one that chose the response's first) put on each segment of every step.

    One row per step and segment: ``step``, ``segment``, ``kind``, ``message`` (context index, else None),
    ``status``, ``latest`` (the step's latest observation), ``tokens`` (positions in it), ``mass`` (NaN when absent
    or not located). ``frame.attrs["notes"]``: step -> why it has no rows; ``["errors"]``: file -> reason;
    ``["queries"]``: step -> the query's position.
    """
    rows: list[dict] = []
    notes: dict[int, str] = {}
    errors: dict[str, str] = {}
    queries: dict[int, int] = {}
    episode = linked.episode
    for step in linked.steps():
        try:
            weights = _mean_weights(linked.capture, step, query, layers)
            if isinstance(weights, str):
                notes[step] = weights
                continue
            context = episode.context(step)
            found = prompt.of_capture(linked.capture, step - 1, [m.content or "" for m in context])
        except capture_mod.Error as exc:
            errors[linked.capture.path(step - 1)] = str(exc)
            continue
        vector, queries[step] = weights
        parts = segments(found, [m.role for m in context], vector.shape[0]) if found is not None else []
        if not parts:
            notes[step] = (found.boundaries() if found is not None else
                           "the capture records no prompt tokens for this call")
            continue
        rows.extend(_segment_row(step, part, vector) for part in parts)
    frame = pd.DataFrame(rows, columns=["step", "segment", "kind", "message", "status", "latest", "tokens", "mass"])
    frame.attrs.update(notes=notes, errors=errors, queries=queries)
    return frame


def _segment_row(step: int, part: Segment, vector: np.ndarray) -> dict:
    spanned = part.start is not None and part.end is not None
    mass = float(vector[part.start:part.end].sum()) if spanned else float("nan")
    return {"step": step, "segment": part.name, "kind": part.kind, "message": part.message, "status": part.status,
            "latest": part.latest, "tokens": (part.end - part.start) if spanned else 0,  # type: ignore[operator]
            "mass": mass}


def by_kind(frame: pd.DataFrame) -> pd.DataFrame:
    """Steps x kinds from ``by_segment``'s frame: ``system``, ``task``, ``latest observation``, ``earlier
    observations``, ``earlier responses``, ``this response``, ``template`` (each the sum of its segments' mass; NaN
    when none of them was seen)."""
    if frame.empty:
        return pd.DataFrame()
    kind = frame["kind"].replace({"observation": "earlier observations", "earlier response": "earlier responses"})
    kind = kind.where(~frame["latest"].astype(bool), "latest observation")
    table = frame["mass"].groupby([frame["step"], kind]).sum(min_count=1).unstack()
    order = ["system", "task", "latest observation", "earlier observations", "earlier responses", THIS_RESPONSE,
             TEMPLATE]
    table = table[[c for c in order if c in table.columns]]
    table.columns.name = "segment"
    return table
