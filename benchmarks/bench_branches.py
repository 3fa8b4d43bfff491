"""Speed of branched rollouts (the decisive-step search) on the real Docker engine, with baselines from this run.

    python3 -m benchmarks.bench_branches [--branches 4]

The parent is the bundled slugify wrong-fix episode and the policy the bundled sample's seeded in-process policy
(``sample_runs/decisive_branches.py``: no model endpoint, so the model's own time is ~0 and what is measured is
the project's):

- rollouts per minute at 1, 2 and 4 containers at once (``--branches`` branches each, from step 1);
- a branch's cost (restore + per-step snapshots + the episode file + the verifier) against a bare
  ``sandbox.restore`` + the same commands run with ``box.run`` + ``sandbox.verify`` of the same step, in this
  process, one after the other: with per-step snapshots (the default) and without (``Budget(snapshots=False)``,
  what a search that needs only rewards runs), with where the time goes (restore, commands, snapshots,
  verifier, the rest: the episode file and reading it back) and the ratio to the bare run (target <= 1.3);
- adaptive (bisect) against exhaustive (every step): rollouts spent until each finds the planted step 2 with
  separated intervals (4 samples a step for exhaustive; the bisection adds 2 at a time up to 4).

Every container made here is labelled with a benchmark session and removed at the end.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import pathlib
import statistics
import sys
import tempfile
import time
import uuid

import docker

from ares_viewer import container, sandbox
from ares_viewer.base import agent_text
from ares_viewer.counterfactual import branching
from ares_viewer.runs.run import load_episode

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import sample_scripts  # noqa: E402 - the sample scripts' loader lives with the tests

DEMO = REPO / "sample_runs" / "demo-run"
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"
SESSION = f"bench-branches-{uuid.uuid4().hex[:8]}"


def _fresh_cache() -> None:
    os.environ["ARES_VIEWER_CACHE"] = tempfile.mkdtemp(prefix="bench-branches-")


def _search(parent, policy, engine, **options) -> branching.Search:
    _fresh_cache()
    return branching.search(parent, policy, max_steps=4, docker_client=engine, session=SESSION, **options)


def _bare(parent, policy, engine) -> float:
    """Restore step 1, run the policy's commands with ``box.run``, verify: the same work without the project."""
    started = time.perf_counter()
    box = sandbox.restore(parent, 1, client=engine, session=SESSION)
    try:
        messages = [m.to_dict() for m in parent.observation(1)]
        for _ in range(4):
            text = policy(messages, None)
            command = agent_text.parse_response(text).command
            result = box.run(command)
            if agent_text.is_submit(command):
                break
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": agent_text.result_message(result.returncode, result.output)},
            ]
        reward = sandbox.verify(box, sandbox.task_recipe(parent)).reward
        assert reward == 1.0, reward
    finally:
        box.remove()
    return time.perf_counter() - started


@contextlib.contextmanager
def _stage_times():
    """Seconds spent in each stage of the branches run inside (summed over threads): restore, commands (``box.run``),
    snapshots (``capture_snapshot``), verifier (``sandbox.verify``)."""
    spent: dict[str, float] = collections.defaultdict(float)
    originals = []

    def wrap(owner, name, stage):
        original = getattr(owner, name)
        originals.append((owner, name, original))

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[stage] += time.perf_counter() - started

        setattr(owner, name, timed)

    wrap(sandbox, "restore", "restore")
    wrap(sandbox.Sandbox, "run", "commands")
    wrap(container, "capture_snapshot", "snapshots")
    wrap(sandbox, "verify", "verifier")
    try:
        yield spent
    finally:
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)


def _cost(parent, policy, engine, count: int, snapshots: bool) -> tuple[float, dict[str, float]]:
    """The median seconds of ``count`` branches from step 1, one at a time, and the mean seconds per stage."""
    with _stage_times() as spent:
        found = _search(parent, policy, engine, steps=[1], samples=count,
                        budget=branching.Budget(parallel=1, snapshots=snapshots))
    assert len(found.branches) == count and all(b.reward == 1.0 for b in found.branches), found.branches
    total = sum(b.duration_s for b in found.branches)
    stages = {stage: seconds / count for stage, seconds in spent.items()}
    stages["rest"] = total / count - sum(stages.values())
    return statistics.median(b.duration_s for b in found.branches), stages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--branches", type=int, default=4, help="branches per parallelism level")
    args = parser.parse_args()
    engine = docker.from_env()
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    sample = sample_scripts.load("decisive_branches")
    policy = sample.Policy(load_episode(DEMO / f"{SOLVED}.json").step(5).command, seed=1)
    try:
        bare = [_bare(parent, policy, engine) for _ in range(3)]
        bare_s = statistics.median(bare)
        for snapshots in (True, False):
            branch_s, stages = _cost(parent, policy, engine, args.branches, snapshots)
            where = ", ".join(f"{stage} {seconds:.2f} s" for stage, seconds in sorted(stages.items()))
            print(
                f"one branch {'with' if snapshots else 'without'} per-step snapshots: {branch_s:.2f} s (median) vs "
                f"bare restore + commands + verifier {bare_s:.2f} s: ratio {branch_s / bare_s:.2f}x ({where})"
            )
        for parallel in (1, 2, 4):
            started = time.perf_counter()
            found = _search(parent, policy, engine, steps=[1], samples=args.branches,
                            budget=branching.Budget(parallel=parallel, snapshots=False))
            took = time.perf_counter() - started
            assert len(found.branches) == args.branches and all(b.reward == 1.0 for b in found.branches)
            print(
                f"{parallel} container(s) at once, no per-step snapshots: {args.branches / took * 60:5.1f} "
                f"rollouts/min ({took:.1f} s for {args.branches})"
            )
        exhaustive = _search(parent, policy, engine, steps="all", samples=4, budget=branching.Budget(parallel=2))
        adaptive = _search(parent, policy, engine, steps="bisect", samples=4, budget=branching.Budget(parallel=2))
        for name, found in (("exhaustive", exhaustive), ("adaptive", adaptive)):
            d = found.decisive
            print(
                f"{name:>10}: {found.new:3d} rollouts, decisive step {d.step} (change {d.change:+.2f}, sure {d.sure})"
            )
        print(f"adaptive / exhaustive rollouts: {adaptive.new / exhaustive.new:.2f}")
    finally:
        sandbox.cleanup(engine, session=SESSION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
