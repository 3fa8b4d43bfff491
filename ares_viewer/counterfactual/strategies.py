"""Per-episode search strategies: which steps a decisive-step search samples next, and what it concludes.

Pure logic, no containers (``branching.search`` runs the branches; ``benchmarks/bench_planted.py`` replays the
same rules on recorded outcomes). A strategy is named by ``branching.search(steps=...)``:

- ``all`` (exhaustive): ``samples`` branches from every branchable step; the decisive step is the largest change
  of V between neighbouring steps (``values.decisive``).
- ``bisect``: the adaptive bisection on V (``values.next_probe``).
- ``adaptive``: one branch from every step first (the curve's coarse shape), then ``batch`` more at a time to the
  two ends of the largest change of V while their intervals still overlap, up to ``samples`` counted branches a
  step; it stops when the largest change is sure, when V does not change, or when no step of an unsure change can
  take another sample. Its conclusion is the exhaustive one (``values.decisive``) on the steps it sampled.
- ``spectrum``: FAMAS-like spectrum over the branches (arXiv 2509.13782). A branch from step k replays the
  recorded actions 1..k, so each branch is one execution covering those actions; with the failing class the
  branches that did the opposite of the episode's first estimated step (a fall from a winning start, a rise from
  a losing one), the Ochiai suspiciousness of action j is ``ef / sqrt(F * (ef + ep))`` (``ef``/``ep``: failing
  and passing branches from steps >= j, ``F``: all failing ones). The most suspicious action is the candidate; it
  is claimed decisive when the branches pooled before it and from it on have Wilson intervals that separate
  (``Decisive.change`` is then the pooled V after minus before). It samples like ``adaptive``'s coarse pass,
  then adds ``batch`` branches to the candidate and its predecessor while unsure.

A step never takes more than ``samples`` counted branches, nor more than twice as many tries (failed branches
are retried a bounded number of times); the recorded terminal step is never sampled.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence

from ares_viewer.counterfactual import values

__all__ = ["EXHAUSTIVE", "NAMES", "Plan", "change_interval", "corrected", "looks", "next_batch", "spectrum_scores",
           "verdict"]

EXHAUSTIVE = "all"
BISECT = "bisect"
ADAPTIVE = "adaptive"
SPECTRUM = "spectrum"
NAMES = (EXHAUSTIVE, BISECT, ADAPTIVE, SPECTRUM)
ADAPTIVE_NAMES = (BISECT, ADAPTIVE, SPECTRUM)
_NO_CHANGE = 1e-9  # as in values: a smaller difference of shares is rounding


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a strategy knows when it picks the next branches.

    Attributes:
        rewards: per step, the rewards of its branches so far (None: a failed branch, not counted).
        steps: the branchable steps, in order.
        terminal: the recorded terminal step's estimate (``values.terminal``), when the episode has one.
        samples: the most counted branches a step may take.
        batch: the branches added to a step at a time once the coarse pass is done.
    """

    rewards: Mapping[int, Sequence[float | None]]
    steps: Sequence[int]
    terminal: values.Estimate | None = None
    samples: int = 4
    batch: int = 2

    def curve(self) -> dict[int, values.Estimate]:
        """Step -> estimate for every step with a branch, plus the recorded terminal step."""
        found = {step: values.estimate(step, rewards) for step, rewards in self.rewards.items() if rewards}
        if self.terminal is not None:
            found[self.terminal.step] = self.terminal
        return found

    def counted(self, step: int) -> int:
        return sum(1 for r in self.rewards.get(step, ()) if r is not None)

    def room(self, step: int) -> int:
        """How many more branches ``step`` may take (0 for the recorded terminal step and unbranchable ones)."""
        if step not in self.steps:
            return 0
        tried = len(self.rewards.get(step, ()))
        return max(0, min(self.samples - self.counted(step), 2 * self.samples - tried))


def next_batch(strategy: str, plan: Plan) -> list[int]:
    """The branches to run next, one entry per branch (a step repeated for several); empty when done.

    Raises:
        ValueError: an unknown strategy (not one of :data:`ADAPTIVE_NAMES`; exhaustive plans all at once).
    """
    if strategy == BISECT:
        return _bisect(plan)
    if strategy == ADAPTIVE:
        return _adaptive(plan)
    if strategy == SPECTRUM:
        return _spectrum(plan)
    raise ValueError(f"strategy {strategy!r}: expected one of {', '.join(ADAPTIVE_NAMES)}")


def verdict(strategy: str, curve: Sequence[values.Estimate], rewards: Mapping[int, Sequence[float | None]],
            *, looks: int = 1) -> values.Decisive | None:
    """What the strategy concludes from the branches: the decisive step (``sure`` when its evidence separates),
    or None when no step is decisive. ``spectrum`` pools branches (:func:`spectrum_scores`) and tests the change
    at the level corrected for its candidate splits and ``looks`` (:func:`looks`: what its search could take);
    the others take the largest change between neighbouring steps (``values.decisive``)."""
    if strategy != SPECTRUM:
        return values.decisive(curve)
    terminal = next((e for e in curve if e.recorded), None)
    return _spectrum_verdict(rewards, terminal, looks)


def looks(steps: int, samples: int, batch: int) -> int:
    """The times an adaptive search over ``steps`` branchable steps may test its evidence: once after the coarse
    pass, then once a batch (``batch`` more to each of two steps) until every step has ``samples``."""
    return 1 + math.ceil(max(samples - 1, 0) * steps / max(2 * batch, 1))


def _coarse(plan: Plan) -> list[int]:
    """One branch for every step without a counted one (that may still take one)."""
    return [s for s in plan.steps if plan.counted(s) == 0 and plan.room(s) > 0]


def _top_up(plan: Plan, steps: Sequence[int]) -> list[int]:
    return [s for s in steps for _ in range(min(plan.batch, plan.room(s)))]


def _bisect(plan: Plan) -> list[int]:
    curve = plan.curve()
    wanted, done = values.next_probe(curve, list(plan.steps))
    if done:
        return []
    return _top_up(plan, wanted)


def _adaptive(plan: Plan) -> list[int]:
    coarse = _coarse(plan)
    if coarse:
        return coarse
    known = sorted((e for e in plan.curve().values() if e.value is not None), key=lambda e: e.step)
    changes = sorted(
        ((abs(b.value - a.value), a, b) for a, b in itertools.pairwise(known)  # type: ignore[operator]
         if abs(b.value - a.value) > _NO_CHANGE),  # type: ignore[operator]
        key=lambda c: (-c[0], c[2].step),
    )
    for _, a, b in changes:  # the largest change first; one that cannot be refined leaves room to the next
        if values.separated(a, b):
            return []  # the largest change that can still move is sure
        more = _top_up(plan, [a.step, b.step])
        if more:
            return more
    return []


# ----- the spectrum ---------------------------------------------------------------------------------------------


def _outcomes(rewards: Mapping[int, Sequence[float | None]]) -> list[tuple[int, bool]]:
    """(step, success) of every counted branch."""
    return [(step, r >= values.SUCCESS_AT) for step, rs in rewards.items() for r in rs if r is not None]


def spectrum_scores(rewards: Mapping[int, Sequence[float | None]], terminal: values.Estimate | None = None
                    ) -> dict[int, float]:
    """The Ochiai suspiciousness of each step's action from the branches (see the module's note).

    The failing class is the outcome opposite to the first estimated step's majority (a drop from a winning start:
    failures; a rise from a losing one: successes). Steps without a branch get no score; an empty dict when every
    branch had the same outcome (no action separates them).
    """
    runs = _outcomes(rewards)
    if terminal is not None and terminal.value is not None:
        runs.append((terminal.step, terminal.value >= values.SUCCESS_AT))  # the recorded episode: one more execution
    if not runs or len({ok for _, ok in runs}) < 2:
        return {}
    first = min(step for step, _ in runs)
    start = [ok for step, ok in runs if step == first]
    failing_is = not (sum(start) * 2 >= len(start))  # the outcome the start does not have
    total_failing = sum(1 for _, ok in runs if ok == failing_is)
    scores: dict[int, float] = {}
    for j in sorted({step for step, _ in runs}):
        ef = sum(1 for step, ok in runs if step >= j and ok == failing_is)
        ep = sum(1 for step, ok in runs if step >= j and ok != failing_is)
        scores[j] = ef / math.sqrt(total_failing * (ef + ep)) if ef else 0.0
    return scores


def _candidate(rewards: Mapping[int, Sequence[float | None]], terminal: values.Estimate | None
               ) -> tuple[int | None, int]:
    """The most suspicious action (ties: the earlier) and how many splits were candidates (scored actions after
    the first estimated state): the family the verdict's test corrects for."""
    scores = spectrum_scores(rewards, terminal)
    estimated = sorted(s for s, rs in rewards.items() if any(r is not None for r in rs))
    scores = {s: v for s, v in scores.items() if estimated and s > estimated[0]}  # an action after the first state
    if not scores:
        return None, 0
    best = max(scores.values())
    return min(s for s, v in scores.items() if v >= best - _NO_CHANGE), len(scores)


def change_interval(before: values.Estimate, after: values.Estimate, confidence: float = values.CONFIDENCE
                    ) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) for ``V(after) - V(before)``, from the two Wilson
    intervals at ``confidence``; ``(-1, 1)`` when either side has no value.

    A recorded terminal outcome counts as one execution of its side (``n`` 0 with a value: one sample).
    """
    if before.value is None or after.value is None:
        return -1.0, 1.0
    ends = []
    for e in (before, after):
        n = max(e.n, 1)
        wins = round(e.value * n)  # type: ignore[operator]
        ends.append((wins / n, *values.wilson(wins, n, confidence)))
    (p0, l0, u0), (p1, l1, u1) = ends
    diff = p1 - p0
    return diff - math.hypot(p1 - l1, u0 - p0), diff + math.hypot(u1 - p1, p0 - l0)


def corrected(splits: int, confidence: float = values.CONFIDENCE) -> float:
    """The confidence each of ``splits`` tests needs for the family to keep ``confidence`` (Bonferroni)."""
    return 1 - (1 - confidence) / max(splits, 1)


def _pools(rewards: Mapping[int, Sequence[float | None]], terminal: values.Estimate | None, split: int
           ) -> tuple[values.Estimate, values.Estimate]:
    """The branches before ``split`` and from it on, each pooled into one estimate (the terminal step's recorded
    outcome joins the later pool as one execution)."""
    before = [r for s, rs in rewards.items() if s < split for r in rs]
    after = [r for s, rs in rewards.items() if s >= split for r in rs]
    if terminal is not None and terminal.value is not None and terminal.step >= split:
        after.append(terminal.value)
    return values.estimate(split - 1, before), values.estimate(split, after)


def _spectrum_verdict(rewards: Mapping[int, Sequence[float | None]], terminal: values.Estimate | None,
                      tests: int = 1) -> values.Decisive | None:
    """The candidate split (:func:`_candidate`), sure when the interval of its change excludes 0 at the level
    Bonferroni-corrected for every split it could have been and every look (``tests``) the search takes."""
    split, splits = _candidate(rewards, terminal)
    if split is None:
        return None
    early, late = _pools(rewards, terminal, split)
    if early.value is None or late.value is None or abs(late.value - early.value) <= _NO_CHANGE:
        return None
    before = max(s for s, rs in rewards.items() if s < split and any(r is not None for r in rs))
    low, high = change_interval(early, late, corrected(splits * tests))
    return values.Decisive(split, before, late.value - early.value, low > 0 or high < 0)


def _spectrum(plan: Plan) -> list[int]:
    coarse = _coarse(plan)
    if coarse:
        return coarse
    found = _spectrum_verdict(plan.rewards, plan.terminal, looks(len(plan.steps), plan.samples, plan.batch))
    if found is None or found.sure:
        return []
    # Unsure: sample the states on either side of the candidate action, nearest first.
    lower = sorted((s for s in plan.steps if s < found.step), reverse=True)
    upper = [s for s in plan.steps if s >= found.step]
    for a, b in zip([*lower, *[None] * len(upper)], [*upper, *[None] * len(lower)], strict=False):
        more = _top_up(plan, [s for s in (a, b) if s is not None])
        if more:
            return more
    return []
