"""How a run-wide search shares one budget across episodes: pure logic, no containers (``run_search`` runs it).

The search goes in rounds. In each round every episode that is not *settled* asks for its next probe, the step
the bisection on V would sample next (``values.next_probe``: the ends first, then the middle of the largest change,
then more samples on both sides of a change between adjacent steps until their intervals separate), ``batch``
branches each. The rounds give:

1. **coarse values for every episode first**: the first round probes every episode's ends, so each episode gets a
   rough curve (V at its first branchable step beside its last value) before any episode gets a second probe;
2. **then samples where a decisive step is not yet sure**: later rounds go to the episodes whose bisection is not
   done, the one with the largest unresolved change of V first (an episode with a drop that is not yet sure is
   where the next samples tell the most), ties to the episode that has spent the fewest branches.

A round's jobs are dealt out one per episode at a time (round robin, in that order), so when the budget runs out
mid-round the branches spent are spread over the episodes, never all on the first.

An episode is settled when its bisection is done (the largest change lies between adjacent steps whose intervals
separate: ``sure``; or V does not change between its ends: ``no change``), when every step it still wants has
``samples`` counted branches or ``2 * samples`` tries (``capped``: a change that stays unsure), when it has no step
to branch from (``no steps``), or when its first ``batch`` or more branches all failed for one reason and none
counted (``failing``: a restore that cannot work, an endpoint that refuses; spending more there is waste).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence

from ares_viewer.counterfactual import values

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
    """

    key: str
    steps: tuple[int, ...]
    curve: Mapping[int, values.Estimate]
    tried: Mapping[int, int] = dataclasses.field(default_factory=dict)
    counted: Mapping[int, int] = dataclasses.field(default_factory=dict)
    failures: tuple[str, ...] = ()

    @property
    def spent(self) -> int:
        return sum(self.tried.values())


@dataclasses.dataclass(frozen=True)
class Plan:
    """One round: the jobs in the order they start (episode key, step), and each episode's status."""

    jobs: tuple[tuple[str, int], ...]
    status: Mapping[str, str]


def _wanted(state: EpisodeState, samples: int) -> tuple[list[int], bool]:
    """The steps the episode's bisection wants next (those under their caps) and whether it is done."""
    wanted, done = values.next_probe(dict(state.curve), list(state.steps))
    kept = [s for s in wanted if state.counted.get(s, 0) < samples and state.tried.get(s, 0) < 2 * samples]
    return kept, done or not kept


def status(state: EpisodeState, samples: int, batch: int) -> str:
    """The episode's status (the module's rule): one of ``SETTLED`` or ``pending``."""
    if not state.steps:
        return NO_STEPS
    if not any(state.counted.values()) and len(state.failures) >= batch and len(set(state.failures)) == 1:
        return FAILING
    _, done = _wanted(state, samples)
    if done:
        found = values.decisive(list(state.curve.values()))
        if found is None:
            return NO_CHANGE
        return SURE if found.sure else CAPPED
    return PENDING


def _unresolved(state: EpisodeState) -> float:
    """The largest change of V between neighbouring valued steps (0 without two values)."""
    known = sorted((s, e.value) for s, e in state.curve.items() if e.value is not None)
    return max((abs(b[1] - a[1]) for a, b in itertools.pairwise(known)), default=0.0)


def plan(states: Sequence[EpisodeState], *, samples: int, batch: int) -> Plan:
    """The next round for ``states`` (the module's rule): every pending episode's next probe, ``batch`` branches a
    step, episodes without a value first, then the largest unresolved change first, then the fewest spent; dealt
    out round robin."""
    said = {s.key: status(s, samples, batch) for s in states}
    pending = [s for s in states if said[s.key] == PENDING]
    pending.sort(key=lambda s: (any(e.value is not None for e in s.curve.values() if not e.recorded),
                                -_unresolved(s), s.spent, s.key))
    queues: list[list[tuple[str, int]]] = []
    for state in pending:
        wanted, _ = _wanted(state, samples)
        jobs = []
        for step in wanted:
            room = min(samples - state.counted.get(step, 0), 2 * samples - state.tried.get(step, 0))
            jobs += [(state.key, step)] * max(0, min(batch, room))
        queues.append(jobs)
    dealt = [queue[i] for i in range(max((len(q) for q in queues), default=0)) for queue in queues if i < len(queue)]
    return Plan(tuple(dealt), said)


def estimate_left(states: Sequence[EpisodeState], *, samples: int, batch: int) -> int:
    """About how many branches the pending episodes still need: for each, the bisection's remaining splits of its
    branchable steps (log2 of their count) plus the two sides of the change, ``batch`` branches each. An estimate
    for the progress bar's time left, never a limit."""
    left = 0
    for state in states:
        if status(state, samples, batch) != PENDING:
            continue
        known = [s for s, e in state.curve.items() if e.value is not None]
        probes = 2 + (0 if len(known) >= 3 else math.ceil(math.log2(max(2, len(state.steps)))))
        left += probes * batch
    return left
