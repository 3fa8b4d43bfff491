"""Whether a model call's prompt was clipped and which end was cut, with its evidence, with or without a tokenizer.

    from ares_viewer.activations import clipping
    found = clipping.of_step(linked, 3)        # trajectory step 3 (capture step 2)
    found.clipped, found.end, found.evidence   # True, "start", "... begin with different tokens ..."

Read from the capture, never assumed (a client may cut either end: ARES's ``HookedTransformerLLMClient`` cuts to
``n_ctx - max_new_tokens`` on the side its tokenizer's ``truncation_side`` says). In this order:

1. the prompt's text (decoded with the capture's tokenizer, or its recorded ``tokens``) against the step's context
   (``prompt``): it lacks the first message's beginning (start cut) or ends inside a message (end cut);
2. the ids alone, when the length says clipped (the ids' count is the capture's window minus its generation
   budget) but not which end, or when no limit is recorded: two calls whose context only grew between them
   (``Episode.context_change(k).extends``) and

   - whose prompts are the same ids: the new messages never reached the model: the **end** was cut;
   - where the later prompt, at the limit, does not begin with the ids an earlier one begins with: the context's
     beginning did not change, so the later prompt lost its **start** (when the earlier one is also at the limit,
     the client cut the start of both: it cuts one side);
   - where the later one begins with them: the start was kept: the **end** was cut;

3. else which end is unknown (``end`` None) though the length says clipped, and clipping itself is unknown
   (``clipped`` None) when neither a limit nor text tells.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ares_viewer.activations import prompt

if TYPE_CHECKING:
    from ares_viewer.activations import linking

HEAD_IDS = 16  # ids compared at the start of two prompts
SAME = "ran on the same"  # the evidence of two calls on the same ids
MIN_OVERLAP = 4  # ids an earlier prompt's end and a later one's start share to say where the later begins


@dataclasses.dataclass(frozen=True, slots=True)
class Clipping:
    """Whether a call's prompt was clipped.

    Attributes:
        clipped: True, False, or None (unknown).
        end: the end that was cut: ``"start"``, ``"end"``, ``"start and end"``; None when not clipped or unknown.
        evidence: why, in a sentence, naming the capture steps and keys read.
        seen_tokens: the prompt's length in tokens (None: no prompt recorded).
        limit: the capture's window minus its generation budget, when recorded.
    """

    clipped: bool | None
    end: str | None
    evidence: str
    seen_tokens: int | None = None
    limit: int | None = None

    def sentence(self) -> str:
        """``"clipped: its start was cut (evidence)"``, ``"not clipped (…)"`` or ``"clipping unknown (…)"``."""
        if self.clipped is None:
            return f"clipping unknown ({self.evidence})"
        if not self.clipped:
            return f"not clipped ({self.evidence})"
        which = f"its {self.end} was cut" if self.end else "which end was cut is unknown"
        return f"clipped to {self.seen_tokens:,} tokens: {which} ({self.evidence})"


def _begins(ids: Sequence[int], head: Sequence[int]) -> bool:
    return list(ids[:len(head)]) == list(head)


def pair_end(earlier: Sequence[int], later: Sequence[int], limit: int | None, names: tuple[str, str]
             ) -> tuple[str, str] | None:
    """Which end the client cuts, from two prompts whose context only grew between them: ``(end, evidence)``,
    or None when the pair does not tell. ``names``: how the evidence names the two calls."""
    a, b = names
    if not earlier or not later:
        return None
    if list(earlier) == list(later):
        return "end", (f"{a} and {b} {SAME} {len(later):,} token ids although the context grew between "
                       "them: the new messages never reached the model")
    head = list(earlier[:min(HEAD_IDS, max(1, len(earlier) // 2), len(later))])
    at_limit = limit is not None and len(later) >= limit
    if not at_limit:
        return None
    if not _begins(later, head):
        shift = next((d for d in range(1, len(earlier) - MIN_OVERLAP + 1)
                      if list(earlier[d:]) == list(later[:len(earlier) - d])), None)
        moved = f"; it begins {shift:,} tokens into {a}'s" if shift else ""
        return "start", (f"{b} holds {len(later):,} ids, the limit, and does not begin with the {len(head)} ids {a} "
                         f"begins with, although the context only grew between them{moved}")
    if limit is not None and len(earlier) < limit:
        return "end", (f"{b} holds {len(later):,} ids, the limit, and begins with the ids {a} (not clipped, "
                       f"{len(earlier):,} ids) begins with: the start was kept")
    return None


def sides(ids: Sequence[Sequence[int] | None], grew: Sequence[bool] | Callable[[int], bool], limit: int | None,
          step: int) -> tuple[str, str] | None:
    """Which end the client cuts, from consecutive prompts: ``ids[i]`` is capture step ``i``'s prompt (None when
    unrecorded), ``grew[i]`` (or ``grew(i)``, asked only for the pairs tried) whether the context of step ``i + 1``
    only extends step ``i``'s. The pairs nearest to ``step`` are tried first."""
    grown = grew if callable(grew) else (lambda i: i < len(grew) and grew[i])
    pairs = sorted(range(len(ids) - 1), key=lambda i: (abs(i - step + 0.5), i))
    for i in pairs:
        earlier, later = ids[i], ids[i + 1]
        if earlier and later and grown(i):
            found = pair_end(earlier, later, limit, (f"capture step {i}", f"capture step {i + 1}"))
            if found is not None:
                return found
    return None


def decide(found: prompt.PromptTokens | None, pair: tuple[str, str] | None) -> Clipping:
    """The verdict from a prompt's own reading (``prompt.prompt_tokens``) and from its neighbours' ids."""
    if found is None:
        return Clipping(None, None, "the capture records no prompt tokens for this call")
    n, limit = found.seen_tokens, found.limit
    if found.clipped and found.cut:
        return Clipping(True, found.cut, found.evidence, n, limit)
    if found.clipped:
        if pair is not None:
            return Clipping(True, pair[0], f"{found.evidence}; {pair[1]}", n, limit)
        return Clipping(True, None, f"{found.evidence}; which end is unknown: no tokenizer shows the text, and no "
                                    "neighbouring call tells", n, limit)
    if found.clipped is None and pair is not None and SAME in pair[1]:  # the same ids alone show a clip
        return Clipping(True, "end", pair[1], n, limit)
    return Clipping(found.clipped, None, found.evidence, n, limit)


def _grew(linked: linking.Linked) -> Callable[[int], bool]:
    """Whether the context of the call after the ``i``-th capture step only extends that step's."""
    episode, steps = linked.episode, linked.capture.steps

    def grew(i: int) -> bool:
        k = linked.trajectory_step(steps[i]) + 1
        return steps[i + 1] == steps[i] + 1 and k < len(episode.steps) and episode.context_change(k).extends
    return grew


def of_step(linked: linking.Linked, step: int, found: prompt.PromptTokens | None = None) -> Clipping:
    """Whether trajectory step ``step``'s model call ran on a clipped prompt (``found``: its prompt, when read)."""
    i = linked.capture_step(step)
    if i is None:
        return Clipping(None, None, f"the capture has no model call for step {step}")
    episode = linked.episode
    if found is None:
        found = prompt.of_capture(linked.capture, i, [m.content or "" for m in episode.context(step)])
    pair = None
    if found is not None and not found.cut and found.clipped is not False:
        metas = [linked.capture.meta(j) for j in linked.capture.steps]
        ids = [(prompt.read_ids(m, j) or (None, None, ""))[0] for j, m in zip(linked.capture.steps, metas,
                                                                               strict=True)]
        pair = sides(ids, _grew(linked), found.limit, linked.capture.steps.index(i))
    return decide(found, pair)
