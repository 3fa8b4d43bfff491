"""The decisive-step search strategies on the planted suite: accuracy, false claims, rollouts, throughput.

    python3 -m benchmarks.bench_planted [--suite DIR | --record DIR] [--minutes 20] [--parallel 2] [--pool FILE]

The suite (``sample_runs/planted_suite.py``) is recorded through real ARES by the project's recorder (``--record``:
needs the ARES venv, ``bash .ci/ares-venv.sh``), or an earlier recording is reused (``--suite``); its
``manifest.json`` names the planted step of each episode. The policy is the suite's seeded stochastic one, served
over HTTP on 127.0.0.1 (``tests/chat_server.py``).

Every rollout is real: a branch restored in a container from the recorded snapshot (``branching.run_branch``,
without per-step snapshots), the policy asked over HTTP, the task's verifier run. The rollouts of an episode's step
form a pool, filled on demand and shared by the strategies: the i-th sample a strategy draws at step k is the pool's
i-th real rollout from step k (run when first asked for), so the strategies are compared on the same outcomes and
the machine runs each rollout once. Exhaustive draws ``--samples`` at every step; bisect, adaptive and spectrum
draw what their rules ask (``counterfactual.strategies``), at most ``--samples`` counted a step. ``--pool FILE``
keeps the pool across runs (resume).

Printed per strategy: the planted step named (sure) for the episodes with one, "decisive" claimed (sure) where none
was planted, rollouts per episode (beside exhaustive's); then rollouts a minute with 1, 2 and 4 containers at once
(``--rate`` branches each). What the machine's time did not allow (``--minutes``) is said: the episodes left out.
``--simulate SEEDS`` runs only the rules, on outcomes drawn from each episode's V(k) as the policy makes it (no
container), labelled as simulated: the strategies' accuracy at the suite's scale when the machine has no time for it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import docker

from ares_viewer import counterfactual, sandbox
from ares_viewer.counterfactual import branching, strategies, values
from ares_viewer.runs.run import load_episode

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import chat_server  # noqa: E402 - the tests' HTTP endpoint
import sample_scripts  # noqa: E402

suite = sample_scripts.load("planted_suite")
SESSION = f"bench-planted-{uuid.uuid4().hex[:8]}"
ORDER = ("bisect", "adaptive", "spectrum", "all")


class MissingError(Exception):
    """``--pool-only``: a strategy asked for a rollout the pool does not hold."""


class Pool:
    """Real rollouts per (episode, step), run on demand ``parallel`` at a time, kept in ``path`` when given
    (``frozen``: none is run; asking for one the pool lacks raises :class:`MissingError`)."""

    def __init__(self, client_of, engine, parallel: int, path: pathlib.Path | None, out: pathlib.Path,
                 frozen: bool = False) -> None:
        self.client_of, self.engine, self.parallel, self.path, self.out = client_of, engine, parallel, path, out
        self.frozen = frozen
        self.rewards: dict[str, dict[str, list[float | None]]] = {}
        if path is not None and path.exists():
            self.rewards = json.loads(path.read_text())
        self.ran = 0
        self.seconds = 0.0

    def take(self, entry: dict, episode: Any, wanted: dict[int, int]) -> dict[int, list[float | None]]:
        """The first ``wanted[k]`` rollouts of each step k (run now where the pool has fewer)."""
        have = self.rewards.setdefault(entry["episode_id"], {})
        jobs = [k for k, n in wanted.items() for _ in range(max(0, n - len(have.get(str(k), []))))]
        if jobs and self.frozen:
            raise MissingError(entry["name"])
        if jobs:
            started = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(self.parallel) as pool:
                done = list(pool.map(lambda k: (k, self._one(entry, episode, k)), jobs))
            self.seconds += time.perf_counter() - started
            self.ran += len(done)
            for k, reward in done:
                have.setdefault(str(k), []).append(reward)
            if self.path is not None:
                self.path.write_text(json.dumps(self.rewards))
        return {k: have[str(k)][:n] for k, n in wanted.items()}

    def _one(self, entry: dict, episode: Any, step: int) -> float | None:
        branch = branching.run_branch(episode, step, self.client_of(entry["model"]), self.out / entry["episode_id"],
                                      suite.MAX_STEPS, docker_client=self.engine, session=SESSION, snapshots=False)
        return branch.reward


def _search(strategy: str, entry: dict, episode: Any, pool: Pool, samples: int) -> tuple[values.Decisive | None, int]:
    """Run ``strategy`` on the episode drawing from the pool: its conclusion and the rollouts it spent."""
    steps = branching.branchable_steps(episode)
    terminal = branching._terminal(episode, steps)
    drawn: dict[int, int] = {}
    if strategy == strategies.EXHAUSTIVE:
        drawn = dict.fromkeys(steps, samples)
    else:
        while True:
            rewards = pool.take(entry, episode, drawn)  # runs what the last batch asked for, in parallel
            wanted = strategies.next_batch(strategy, strategies.Plan(rewards, steps, terminal, samples, 2))
            if not wanted:
                break
            for k in wanted:
                drawn[k] = drawn.get(k, 0) + 1
    rewards = pool.take(entry, episode, drawn)
    curve = sorted(strategies.Plan(rewards, steps, terminal).curve().values(), key=lambda e: e.step)
    found = strategies.verdict(strategy, curve, rewards, looks=strategies.looks(len(steps), samples, 2))
    return found, sum(drawn.values())


def _record(out: pathlib.Path) -> None:
    made = subprocess.run(["bash", str(REPO / ".ci" / "ares-venv.sh")], capture_output=True, text=True, check=True)
    python = made.stdout.strip().splitlines()[-1]
    subprocess.run([python, str(REPO / "sample_runs" / "planted_suite.py"), "--out", str(out), "--jobs", "2"],
                   check=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def _interleaved(entries: list[dict]) -> list[dict]:
    """Planted and none episodes alternated, tasks rotated: a run cut short by ``--minutes`` still covers both."""
    planted = [e for e in entries if e["planted"] is not None]
    none = [e for e in entries if e["planted"] is None]
    order: list[dict] = []
    while planted or none:
        order += planted[:2] + none[:1]
        planted, none = planted[2:], none[1:]
    return order


def _rate(engine, entry: dict, episode: Any, client_of, count: int) -> list[str]:
    lines = []
    step = branching.branchable_steps(episode)[0]
    for parallel in (1, 2, 4):
        os.environ["ARES_VIEWER_CACHE"] = tempfile.mkdtemp(prefix="bench-planted-rate-")
        started = time.perf_counter()
        found = branching.search(episode, client_of(entry["model"]), steps=[step], samples=count,
                                 budget=branching.Budget(parallel=parallel, snapshots=False),
                                 max_steps=suite.MAX_STEPS, docker_client=engine, session=SESSION)
        took = time.perf_counter() - started
        failed = sum(1 for b in found.branches if b.reward is None)
        ran = min(parallel, os.cpu_count() or 1)  # the search runs at most one container a core
        lines.append(f"{parallel} container(s) asked ({ran} ran at once on {os.cpu_count()} cores): "
                     f"{count / took * 60:5.1f} rollouts/min ({took:.1f} s for {count}, {failed} failed)")
    return lines


def true_value(entry: dict, step: int) -> float:
    """V(step) the suite's policy has by construction (its profile, the planted step and its noise), for
    ``--simulate``: what the rollouts estimate."""
    profile = entry["model"].split(":")[0]
    if entry["kind"] == "drop":
        return 1.0 if step < entry["planted"] else suite.RECOVER
    if entry["kind"] == "rise":
        return 0.0 if step < entry["planted"] else 1.0
    return suite.COIN if profile == "coin" else 1.0 if entry["reward"] == 1.0 else 0.0


def simulate(entries: list[dict], seeds: int, samples: int, names: tuple[str, ...] = ORDER) -> None:
    """Every strategy on every episode of the suite, ``seeds`` times, with each rollout's outcome drawn from the
    episode's known V(k) (:func:`true_value`) instead of run: the rules' accuracy at the suite's scale, no
    containers. Printed apart from the measured figures and said to be simulated."""
    results: dict[str, list[tuple[dict, values.Decisive | None, int]]] = {name: [] for name in names}
    for seed in range(seeds):
        rng = random.Random(seed)
        for entry in entries:
            steps = list(range(entry["length"] + 1))
            truncated = entry["actions"] == entry["length"] and entry["kind"] == "none" and "coin" in entry["model"]
            terminal = None if truncated else values.terminal(entry["length"] + 1, entry["reward"])
            for name in names:
                rewards: dict[int, list[float | None]] = {}
                if name == strategies.EXHAUSTIVE:
                    rewards = {k: [float(rng.random() < true_value(entry, k)) for _ in range(samples)] for k in steps}
                else:
                    while wanted := strategies.next_batch(name, strategies.Plan(rewards, steps, terminal, samples, 2)):
                        for k in wanted:
                            rewards.setdefault(k, []).append(float(rng.random() < true_value(entry, k)))
                curve = sorted(strategies.Plan(rewards, steps, terminal).curve().values(), key=lambda e: e.step)
                found = strategies.verdict(name, curve, rewards, looks=strategies.looks(len(steps), samples, 2))
                results[name].append((entry, found, sum(map(len, rewards.values()))))
    print(f"\nSIMULATED (outcomes drawn from each episode's known V(k), not run): {len(entries)} episodes x {seeds} "
          f"seeds, at most {samples} samples a step")
    _table(results, samples)


def _report(root: pathlib.Path, entries: list[dict], results: dict, left: list[str], pool: Pool, args: Any) -> None:
    done = next(iter(results.values()))
    print(f"\nplanted suite {root}: {len(entries)} episodes; measured on {len(done)} "
          f"({sum(1 for e, _, _ in done if e['planted'] is not None)} planted, "
          f"{sum(1 for e, _, _ in done if e['planted'] is None)} with none) "
          f"{'from the pool alone' if args.pool_only else f'in {args.minutes:g} min'}; real rollouts "
          f"run: {pool.ran} in {pool.seconds:.0f} s ({pool.ran / max(pool.seconds, 1e-9) * 60:.1f}/min at "
          f"{args.parallel} at once)")
    if left:
        why = "the pool lacked their rollouts (--pool-only)" if args.pool_only else \
            f"the machine's time (--minutes {args.minutes:g})"
        print(f"scaled: {why} left out {len(left)}: {', '.join(left)}")
    _table(results, args.samples)


def _table(results: dict, samples: int) -> None:
    """One line per strategy in ``results`` (in :data:`ORDER`); exhaustive's rollouts are ``samples`` x the
    branchable steps of the same episodes, computed (labelled so when exhaustive was not run)."""
    first = next(iter(results.values()))
    steps = {e["name"]: e["length"] + 1 for e, _, _ in first}  # steps 0..length branch
    exhaustive = sum(samples * steps[e["name"]] for e, _, _ in first) / max(len(first), 1)
    ran_exhaustive = strategies.EXHAUSTIVE in results
    if not ran_exhaustive:
        print(f"exhaustive not run: its rollouts/episode are computed as {samples} samples x the branchable steps")
    for name in results:
        rows = results[name]
        planted = [(e, d) for e, d, _ in rows if e["planted"] is not None]
        none = [(e, d) for e, d, _ in rows if e["planted"] is None]
        named = sum(1 for e, d in planted if d is not None and d.sure and d.step == e["planted"])
        claimed = sum(1 for _, d in none if d is not None and d.sure)
        coin = [d for e, d in none if e["model"].startswith("coin:")]
        coin_claimed = sum(1 for d in coin if d is not None and d.sure)
        spent = sum(s for _, _, s in rows) / max(len(rows), 1)
        print(f"{name:>9}: planted step named {named}/{len(planted)} ({named / max(len(planted), 1):.0%}); "
              f"decisive claimed where none {claimed}/{len(none)} ({claimed / max(len(none), 1):.0%}; on the "
              f"coin policy {coin_claimed}/{len(coin)}); rollouts/episode {spent:.1f} (exhaustive {exhaustive:.1f}"
              f"{'' if ran_exhaustive else ' computed, not run'}; {spent / max(exhaustive, 1e-9):.2f}x)")


def _run_phase(names: tuple[str, ...], entries: list[dict], root: pathlib.Path, pool: Pool, args: Any,
               results: dict, minutes: float) -> list[str]:
    """Run the strategies ``names`` on the episodes in order, none started after ``minutes``; the names left."""
    deadline = time.monotonic() + minutes * 60
    left = []
    for entry in entries:
        if time.monotonic() > deadline:
            left.append(entry["name"])
            continue
        episode = load_episode(root / entry["file"])
        said, found_all = {}, {}
        try:
            for name in names:
                found_all[name] = _search(name, entry, episode, pool, args.samples)
        except MissingError:
            left.append(entry["name"])
            continue
        for name, (found, spent) in found_all.items():
            results[name].append((entry, found, spent))
            said[name] = (found.step if found is not None and found.sure else None, spent)
        print(f"{entry['name']}: planted {entry['planted']}; named (sure), rollouts: {said}", flush=True)
    return left


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", type=pathlib.Path, help="a recorded suite (with manifest.json)")
    parser.add_argument("--record", type=pathlib.Path, help="record the suite into this folder first")
    parser.add_argument("--samples", type=int, default=4, help="exhaustive's samples a step; the others' cap")
    parser.add_argument("--parallel", type=int, default=2, help="rollouts at once while searching")
    parser.add_argument("--minutes", type=float, default=20.0, help="adaptive strategies: no new episode after")
    parser.add_argument("--exhaustive-minutes", type=float, default=20.0, help="then exhaustive, on those episodes")
    parser.add_argument("--pool", type=pathlib.Path, help="keep the rollouts here (JSON) and reuse them")
    parser.add_argument("--pool-only", action="store_true",
                        help="run no rollout: episodes needing one the pool lacks are left out (and named)")
    parser.add_argument("--rate", type=int, default=4, help="rollouts per container count for the rate (0: skip)")
    parser.add_argument("--strategies", default=",".join(ORDER),
                        help="comma-separated, of " + ", ".join(ORDER) + " ('all' is exhaustive; without it, its "
                        "rollouts are computed, not run)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--simulate", type=int, default=0, metavar="SEEDS",
                        help="only the rules, on outcomes drawn from each episode's known V(k), SEEDS times")
    return parser


def _names(parser: argparse.ArgumentParser, said: str) -> tuple[str, ...]:
    """The strategies ``--strategies`` names, in :data:`ORDER` (the parser's error for an unknown one)."""
    names = tuple(n for n in ORDER if n in said.split(","))
    unknown = set(said.split(",")) - set(ORDER)
    if unknown or not names:
        parser.error(f"--strategies: expected some of {', '.join(ORDER)}, not {', '.join(sorted(unknown))}")
    return names


def main() -> int:
    parser = _parser()
    args = parser.parse_args()
    if args.record is not None:
        _record(args.record)
    root = args.record or args.suite
    if root is None:
        parser.error("--suite or --record is needed")
    entries = json.loads((root / suite.MANIFEST).read_text())["episodes"]
    names = _names(parser, args.strategies)
    if args.simulate:
        simulate(entries, args.simulate, args.samples, names)
        return 0
    engine = docker.from_env()
    # A background run (nohup) ignores SIGINT: SIGTERM ends it through ``finally`` (its containers removed; the
    # pool keeps every rollout that ended, for a resume).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = pathlib.Path(tempfile.mkdtemp(prefix="bench-planted-"))
    os.environ["ARES_VIEWER_CACHE"] = str(out / "cache")
    policy = suite.Policy(args.seed)
    random.seed(args.seed)
    results: dict[str, list[tuple[dict, values.Decisive | None, int]]] = {name: [] for name in names}
    searched = tuple(n for n in names if n != strategies.EXHAUSTIVE)
    rate: list[str] = []
    try:
        with chat_server.serve(policy) as server:
            def client_of(model: str) -> counterfactual.Client:
                return counterfactual.openai_client(server.base_url, model)

            pool = Pool(client_of, engine, args.parallel, args.pool, out, frozen=args.pool_only)
            left = _run_phase(searched or names, _interleaved(entries), root, pool, args, results, args.minutes)
            done = [e for e, _, _ in next(iter(results.values()))]
            if searched and strategies.EXHAUSTIVE in names:
                skipped = _run_phase((strategies.EXHAUSTIVE,), done, root, pool, args, results,
                                     args.exhaustive_minutes)
                if skipped:
                    print(f"scaled: exhaustive ran on {len(done) - len(skipped)} of them (--exhaustive-minutes)")
            if args.rate:
                rate = _rate(engine, entries[0], load_episode(root / entries[0]["file"]), client_of, args.rate)
    finally:
        sandbox.cleanup(engine, session=SESSION)
    _report(root, entries, results, left, pool, args)
    for line in rate:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
