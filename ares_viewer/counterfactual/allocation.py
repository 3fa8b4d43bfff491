"""How a run-wide search shares one budget across episodes: pure logic, no containers (``run_search`` runs it).

Each episode is searched by the ``spectrum`` strategy (``strategies``: the FAMAS-like spectrum over its branches,
as ``branching.search(steps="spectrum")`` runs it on one episode): its next batch is ``strategies.next_batch``
(one branch from every branchable step first, then ``batch`` more to the states on either side of the candidate
action while its change is unsure) and its conclusion ``strategies.verdict`` (the candidate's pooled change, sure
when its interval excludes 0 at the level corrected for the splits and the looks, ``strategies.looks``, a search
of ``samples`` and ``batch`` takes). The search goes in rounds. In each round every episode that is not *settled*
gets its next batch. The rounds give:

1. **coarse values for every episode first**: the first round is every episode's coarse pass (one branch a step),
   so each episode gets a rough curve before any episode gets a second branch from a step;
2. **then samples where a decisive step is not yet sure**: later rounds go to the episodes whose spectrum search
   is not done, the one with the largest unresolved change of V first (the unsure candidate's pooled change; an
   episode with a drop that is not yet sure is where the next samples tell the most), ties to the episode that has
   spent the fewest branches.

A round's jobs are dealt out one per episode at a time (round robin, in that order), so when the budget runs out
mid-round the branches spent are spread over the episodes, never all on the first.

An episode is settled when its spectrum search is done (its verdict is sure: ``sure``; it names no step, every
branch and the recorded end having one outcome or the pools no change: ``no change``; it stays unsure when no
step around the candidate can take another branch, each having ``samples`` counted branches or ``2 * samples``
tries: ``capped``), when it has no step to branch from (``no steps``), or when its first ``batch`` or more branches
all failed for one reason and none counted (``failing``: a restore that cannot work, an endpoint that refuses;
spending more there is waste).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

from ares_viewer.counterfactual import strategies, values

__all__ = ["EpisodeState", "Plan", "estimate_left", "plan", "status"]

SURE = "sure"
NO_CHANGE = "no change"
CAPPED = "capped"
NO_STEPS = "no steps"
FAILING = "failing"
PENDING = "pending"
SETTLED = (SURE, NO_CHANGE, CAPPED, NO_STEPS, FAILING)


@dataclasses.dataclass(frozen=True)
class EpisodeState:
    """What the allocation knows of one episode.

    Attributes:
        key: the episode's id.
        steps: the steps a branch can start from, in order.
        curve: step -> V(k) from the branches stored so far (the recorded terminal value included).
        tried: step -> branches run from it (counted or failed).
        counted: step -> branches with a reward.
        failures: the failure kind of every stored branch that gave no reward (``Branch.failure``).
        rewards: step -> the rewards of its branches (None: a failed branch), what the spectrum reads.
    """

    key: str
    steps: tuple[int, ...]
    curve: Mapping[int, values.Estimate]
    tried: Mapping[int, int] = dataclasses.field(default_factory=dict)
    counted: Mapping[int, int] = dataclasses.field(default_factory=dict)
    failures: tuple[str, ...] = ()
    rewards: Mapping[int, tuple[float | None, ...]] = dataclasses.field(default_factory=dict)

    @property
    def spent(self) -> int:
        return sum(self.tried.values())


@dataclasses.dataclass(frozen=True)
class Plan:
    """One round: the jobs in the order they start (episode key, step), and each episode's status."""

    jobs: tuple[tuple[str, int], ...]
    status: Mapping[str, str]


def _plan_of(state: EpisodeState, samples: int, batch: int) -> strategies.Plan:
    terminal = next((e for e in state.curve.values() if e.recorded), None)
    return strategies.Plan(state.rewards, state.steps, terminal, samples, batch)


def _wanted(state: EpisodeState, samples: int, batch: int) -> list[int]:
    """The spectrum's next batch for the episode (a step repeated for several branches; empty when it is done)."""
    return strategies.next_batch(strategies.SPECTRUM, _plan_of(state, samples, batch))


def _verdict(state: EpisodeState, samples: int, batch: int) -> values.Decisive | None:
    return strategies.verdict(strategies.SPECTRUM, list(state.curve.values()), state.rewards,
                              looks=strategies.looks(len(state.steps), samples, batch))


def status(state: EpisodeState, samples: int, batch: int) -> str:
    """The episode's status (the module's rule): one of ``SETTLED`` or ``pending``."""
    if not state.steps:
        return NO_STEPS
    if not any(state.counted.values()) and len(state.failures) >= batch and len(set(state.failures)) == 1:
        return FAILING
    if _wanted(state, samples, batch):
        return PENDING
    found = _verdict(state, samples, batch)
    if found is None:
        return NO_CHANGE
    return SURE if found.sure else CAPPED


def _unresolved(state: EpisodeState, samples: int, batch: int) -> float:
    """The unsure candidate's pooled change of V, else the largest change between neighbouring valued steps (0
    without two values)."""
    found = _verdict(state, samples, batch)
    if found is not None:
        return abs(found.change)
    known = sorted((s, e.value) for s, e in state.curve.items() if e.value is not None)
    return max((abs(b[1] - a[1]) for a, b in itertools.pairwise(known)), default=0.0)


def plan(states: Sequence[EpisodeState], *, samples: int, batch: int) -> Plan:
    """The next round for ``states`` (the module's rule): every pending episode's next spectrum batch, episodes
    without a value first, then the largest unresolved change first, then the fewest spent; dealt out round
    robin."""
    said = {s.key: status(s, samples, batch) for s in states}
    pending = [s for s in states if said[s.key] == PENDING]
    pending.sort(key=lambda s: (any(e.value is not None for e in s.curve.values() if not e.recorded),
                                -_unresolved(s, samples, batch), s.spent, s.key))
    queues = [[(state.key, step) for step in _wanted(state, samples, batch)] for state in pending]
    dealt = [queue[i] for i in range(max((len(q) for q in queues), default=0)) for queue in queues if i < len(queue)]
    return Plan(tuple(dealt), said)


def estimate_left(states: Sequence[EpisodeState], *, samples: int, batch: int) -> int:
    """About how many branches the pending episodes still need: for each, its next batch (the coarse pass's steps
    without a branch, or a top-up around the candidate) plus one more top-up of ``batch`` to each of the two states
    around the candidate. An estimate for the progress bar's time left, never a limit."""
    left = 0
    for state in states:
        if status(state, samples, batch) != PENDING:
            continue
        left += len(_wanted(state, samples, batch)) + 2 * batch
    return left
