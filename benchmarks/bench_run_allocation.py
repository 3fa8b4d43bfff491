"""How well one budget shared across a run's episodes finds their decisive steps (``counterfactual.allocation``),
against spending it one episode after another, on simulated branches (no containers: the rule is pure logic).

    python3 -m benchmarks.bench_run_allocation [--episodes 40] [--seed 1]

Each simulated episode has 4 to 24 branchable steps and its recorded reward 0 at the end. Two thirds have a planted
decisive step at a random position (a branch from a step before it succeeds with p = 0.9, from it on with p = 0.1);
one third has none (every branch succeeds with p = 0.1). A branch's reward is a coin seeded by (seed, episode,
step, its number at that step), so both strategies see the same outcome for the same branch. For each total budget
(rollouts for the whole run), both strategies run until the budget is spent or every episode is settled:

- ``shared``: the run-wide rule (``allocation.plan``: the spectrum strategy per episode, coarse values for every
  episode first, then the largest unresolved change first, dealt round robin);
- ``sequential``: the same spectrum search per episode, one episode at a time until it is settled (what a loop
  over ``ares-viewer branch RUN EPISODE --steps spectrum`` spends).

Printed per budget: the share of planted episodes whose planted step is named (``found``), the share of
no-decisive episodes wrongly given a step (``false``), the episodes left without two values (``unsearched``) and
the rollouts spent, with the shared rule's found-ratio against the sequential one. An episode's step is named by
the spectrum's verdict (``strategies.verdict``), as the run-wide search's folders are judged.
"""

from __future__ import annotations

import argparse
import random

from ares_viewer.counterfactual import allocation, strategies, values


def _episodes(count: int, rng: random.Random) -> list[tuple[int, int | None]]:
    out = []
    for i in range(count):
        steps = rng.randint(4, 24)
        out.append((steps, rng.randint(1, steps - 1) if i % 3 else None))
    return out


def _p(planted: int | None, step: int) -> float:
    return 0.1 if planted is None or step >= planted else 0.9


def _state(key: str, steps: int, draws: dict[int, list[float]]) -> allocation.EpisodeState:
    curve = {s: values.estimate(s, r) for s, r in draws.items()}
    curve[steps] = values.terminal(steps, 0.0)
    return allocation.EpisodeState(key, tuple(range(steps)), curve, {s: len(r) for s, r in draws.items()},
                                   {s: len(r) for s, r in draws.items()}, (),
                                   {s: tuple(r) for s, r in draws.items()})


def _simulate(episodes: list[tuple[int, int | None]], budget: int, shared: bool, seed: int) -> dict[str, float]:
    draws: list[dict[int, list[float]]] = [{} for _ in episodes]
    spent = 0
    order = list(range(len(episodes)))
    while spent < budget:
        active = order if shared else [i for i in order if allocation.status(
            _state(str(i), episodes[i][0], draws[i]), 4, 2) == allocation.PENDING][:1]
        states = [_state(str(i), episodes[i][0], draws[i]) for i in active]
        jobs = allocation.plan(states, samples=4, batch=2).jobs
        if not jobs:
            break
        for key, step in jobs[: budget - spent]:
            i = int(key)
            made = draws[i].setdefault(step, [])
            coin = random.Random(f"{seed}/{i}/{step}/{len(made)}").random()
            made.append(1.0 if coin < _p(episodes[i][1], step) else 0.0)
            spent += 1
    found = false = unsearched = 0
    for i, (steps, planted) in enumerate(episodes):
        state = _state(str(i), steps, draws[i])
        curve = list(state.curve.values())
        d = strategies.verdict(strategies.SPECTRUM, curve, state.rewards, looks=strategies.looks(steps, 4, 2))
        unsearched += sum(1 for e in curve if e.value is not None) < 2
        if planted is None:
            false += d is not None and d.sure
        else:
            found += d is not None and d.step == planted
    planted_count = sum(1 for _, p in episodes if p is not None)
    return {"found": found / planted_count, "false": false / (len(episodes) - planted_count),
            "unsearched": unsearched, "spent": spent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5, help="runs averaged, each with its own episodes and coins")
    args = parser.parse_args()
    print(f"{args.episodes} simulated episodes a run (two thirds with a planted step), {args.seeds} runs averaged")
    print(f"{'budget':>7} {'strategy':<10} {'found':>6} {'false':>6} {'unsearched':>10} {'spent':>6}  found ratio")
    for per_episode in (2, 4, 8, 12, 16):
        budget = per_episode * args.episodes
        rows = {}
        for name in ("sequential", "shared"):
            runs = [_simulate(_episodes(args.episodes, random.Random(seed)), budget, name == "shared", seed)
                    for seed in range(args.seeds)]
            rows[name] = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
        for name, r in rows.items():
            ratio = ""
            if name == "shared" and rows["sequential"]["found"]:
                ratio = f"{r['found'] / rows['sequential']['found']:.2f}x"
            print(f"{budget:>7} {name:<10} {r['found']:>6.2f} {r['false']:>6.2f} {r['unsearched']:>10.1f} "
                  f"{r['spent']:>6.0f}  {ratio}")


if __name__ == "__main__":
    main()
