"""Per-step values from branch rewards: V(k) with a Wilson interval, the decisive step, and where to probe next.

Pure logic, no containers: :mod:`ares_viewer.counterfactual.branching` runs the branches and feeds their rewards
here. A reward counts as a success when it is at least one half (the verifiers here write 1.0 or 0.0), so V(k) is
the share of successful branches from step k's state, and its interval is Wilson's score interval, which stays
inside [0, 1] and is honest for a handful of samples. Branches that failed (the model's endpoint, the container,
a verifier that gave no reward) are not samples at all: they never count as a reward of 0.

The decisive step is the step whose action changed V the most: ``change(k) = V(k) - V(k-1)`` over the steps
estimated (a drop for a failed episode, a rise for a solved one: the largest in size either way). It is *sure*
when the two intervals do not overlap. When V does not change at all, no step is decisive ("no change found").
The terminal step's value is the recorded episode's reward (its state is final: the verifier's verdict is its
value), so a search needs no branches there.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "CONFIDENCE", "Decisive", "Estimate", "decisive", "describe", "estimate", "next_probe", "separated", "wilson",
]

CONFIDENCE = 0.95
SUCCESS_AT = 0.5


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval for ``successes`` out of ``n``; ``(0.0, 1.0)`` when ``n`` is 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes out of {n} samples")
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """V(k) at one step.

    Attributes:
        step: the step index k (branches restore the state after action k).
        value: the share of successful branches; None without any counted branch.
        low, high: the Wilson interval (``0, 1`` without samples; the reward itself for a recorded terminal step).
        n: branches counted (those with a reward).
        failed: branches that gave no reward (model, container or verifier failure): not counted.
        recorded: the value is the parent episode's own reward at its terminal step, not an estimate.
    """

    step: int
    value: float | None
    low: float
    high: float
    n: int
    failed: int = 0
    recorded: bool = False


def estimate(step: int, rewards: Iterable[float | None], *, confidence: float = CONFIDENCE) -> Estimate:
    """V(step) from its branches' rewards (None: a failed branch, not counted)."""
    rewards = list(rewards)
    counted = [r for r in rewards if r is not None]
    wins = sum(1 for r in counted if r >= SUCCESS_AT)
    low, high = wilson(wins, len(counted), confidence)
    value = wins / len(counted) if counted else None
    return Estimate(step, value, low, high, len(counted), len(rewards) - len(counted))


def terminal(step: int, reward: float) -> Estimate:
    """The recorded terminal step's value: its reward, known exactly."""
    value = 1.0 if reward >= SUCCESS_AT else 0.0
    return Estimate(step, value, value, value, 0, recorded=True)


def separated(a: Estimate, b: Estimate) -> bool:
    """Whether the two intervals do not overlap (both estimated)."""
    if a.value is None or b.value is None:
        return False
    return a.high < b.low or b.high < a.low


@dataclasses.dataclass(frozen=True)
class Decisive:
    """The step whose action changed V the most.

    Attributes:
        step: the step (its action moved the state from ``before``'s value to this step's).
        before: the previous estimated step.
        change: ``V(step) - V(before)``: negative for a drop.
        sure: the two intervals do not overlap.
    """

    step: int
    before: int
    change: float
    sure: bool


def decisive(curve: Sequence[Estimate]) -> Decisive | None:
    """The largest change of V between consecutive estimated steps of ``curve``; ties go to the earlier step (the
    first action that lost, or won, the task). None with fewer than two estimated steps, and None when V does not
    change at all: no step is decisive then (:func:`describe` says so)."""
    best: Decisive | None = None
    for a, b in itertools.pairwise(_known(curve)):
        change = b.value - a.value  # type: ignore[operator]
        if abs(change) > _NO_CHANGE and (best is None or abs(change) > abs(best.change)):
            best = Decisive(b.step, a.step, change, separated(a, b))
    return best


def describe(curve: Sequence[Estimate]) -> str:
    """What the curve shows, in one sentence (the app and the CLI say this): the decisive step with its change and
    whether the intervals separate, or "No change found" with the value and whether any intervals separate, or
    that fewer than two steps have a value."""
    known = _known(curve)
    if len(known) < 2:
        return "No decisive step yet: fewer than two steps have a value."
    found = decisive(curve)
    if found is not None:
        way = "drop" if found.change < 0 else "rise"
        sure = "the intervals separate" if found.sure else "the intervals overlap: more samples would make it sure"
        return f"Decisive step {found.step}: a {way} of {abs(found.change):.2f} in V from step {found.before} ({sure})."
    steps = [str(e.step) for e in known]
    where = f"{', '.join(steps[:-1])} and {steps[-1]}" if len(steps) < 8 else f"all {len(steps)} steps with a value"
    apart = any(separated(a, b) for a, b in itertools.pairwise(known))
    intervals = (
        "some intervals separate" if apart else "the intervals overlap: more samples could still show a change"
    )
    return f"No change found: V is {known[0].value:.2f} at steps {where} ({intervals}), so no step is decisive."


_NO_CHANGE = 1e-9  # V is a share of a few samples: a smaller difference is rounding, not a change


def _known(curve: Sequence[Estimate]) -> list[Estimate]:
    return sorted((e for e in curve if e.value is not None), key=lambda e: e.step)


def next_probe(curve: Mapping[int, Estimate], steps: Sequence[int]) -> tuple[list[int], bool]:
    """Where a bisection on V should sample next.

    ``curve`` holds what is known (step -> estimate; the recorded terminal step's value included), ``steps`` the
    steps that can be branched from, in order. The ends come first (the last branchable step only when nothing is
    known beyond it); then the pair of neighbouring known steps with the largest change of V that still has steps
    between it is split in the middle; once the largest change lies between adjacent steps, both ends get more
    samples until their intervals separate. The search assumes V changes mostly once (a bisection's premise); a
    curve with several drops still ends on the largest drop among the steps it probed.

    Returns:
        The steps to give more samples next and whether the search is done (the largest change lies between
        adjacent steps whose intervals separate, or V does not change between the ends).
    """
    if not steps:
        return [], True
    known = sorted(s for s, e in curve.items() if e.value is not None)
    ends = [steps[0]] + ([steps[-1]] if not any(s > steps[-1] for s in known) else [])
    missing = [s for s in ends if s not in known]
    if missing:
        return sorted(set(missing)), False
    pairs = [
        (a, b, abs(curve[b].value - curve[a].value))  # type: ignore[operator]
        for a, b in itertools.pairwise(known)
    ]
    a, b, change = max(pairs, key=lambda p: p[2]) if pairs else (0, 0, 0.0)
    if change == 0:
        return [], True
    between = [s for s in steps if a < s < b]
    if between:
        return [between[(len(between) - 1) // 2]], False
    if separated(curve[a], curve[b]):
        return [], True
    return [s for s in (a, b) if not curve[s].recorded], False
