"""What behaviour flags cost, as ratios against baselines measured in the same run.

    python3 -m benchmarks.bench_behaviours                          # 100,000 episodes; 1,000,000 Tinker rollouts
    python3 -m benchmarks.bench_behaviours --episodes 2000 --rollouts 20000   # a quicker look
    python3 -m benchmarks.bench_behaviours --rollouts 0             # the flag index against the index only
    python3 -m benchmarks.bench_behaviours --episodes 0             # the flag counts over 10^6 rollouts only
    python3 -m benchmarks.bench_behaviours --data /tmp/flag-runs    # generate once, reuse (before/after a change)

Prints:
- the cold run index of ``--episodes`` ARES episodes (``open_run`` in a fresh process, cold cache), then building
  the flag index of the same files (``flag_index.update`` in a fresh process, with the same number of worker
  processes): the flag index time against the index time, and ``(index + flags) / index``, what reading the flags
  adds to a first look (the flags are not in the run index: its fast paths never parse an episode whole); and the
  same ratio in CPU seconds (workers included), which other load on a shared machine changes far less (target
  <= 2: ARES files in the writer's layout are read from their commands' side, ``behaviours.ares_flags``;
  ``--episodes 5000 --rollouts 0 --workers 1`` runs in a couple of minutes);
- ``--rollouts`` Tinker rollouts written as ``bench_scale`` writes them, indexed and their flag index built (its
  CPU seconds against the cold index's, target <= 2: one-step rollouts that run no command are screened, only
  decoded, ``behaviours.screen``); then
  the overview's flag counts from the flag index (``flag_queries.rate_table``: every flag among solved and failed)
  and the Behaviour filter's ids for one flag (``flag_queries.episode_ids``), in seconds (target: under 1 s each),
  and against a bare ``count(*)`` of the run's episodes.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from benchmarks import bench_index, bench_scale

REPO = pathlib.Path(__file__).resolve().parent.parent
# CPU seconds of this process and its finished children (the worker processes): a figure the other processes on
# a shared machine change far less than the wall time.
_CPU = """
import resource
def cpu():
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))
"""
_INDEX = (
    _CPU
    + """
import json, sys
import ares_viewer
used = cpu()
print(json.dumps({"episodes": len(ares_viewer.open_run(sys.argv[1])), "cpu": cpu() - used}))
"""
)
_FLAGS = (
    _CPU
    + """
import json, sys, time
import ares_viewer
from ares_viewer.analysis.behaviours import flag_index
run = ares_viewer.open_run(sys.argv[1])
start, used = time.perf_counter(), cpu()
result = flag_index.update(run, workers=int(sys.argv[2]))
print(json.dumps({"seconds": time.perf_counter() - start, "cpu": cpu() - used, "episodes": result.episodes,
                  "failed": len(result.failed)}))
"""
)


def _run(code: str, args: list[str], cache: pathlib.Path) -> str:
    env = dict(os.environ, ARES_VIEWER_CACHE=str(cache), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1]


def _index_seconds(folder: pathlib.Path, cache: pathlib.Path) -> tuple[float, float]:
    """Wall seconds of a cold index in a fresh process (its start included), and the CPU seconds it took."""
    start = time.perf_counter()
    done = json.loads(_run(_INDEX, [str(folder)], cache))
    return time.perf_counter() - start, done["cpu"]


def _flag_index(folder: pathlib.Path, cache: pathlib.Path, workers: int) -> dict:
    return json.loads(_run(_FLAGS, [str(folder), str(workers)], cache))


def _counts(folder: pathlib.Path, cache: pathlib.Path) -> tuple[float, float, float]:
    os.environ["ARES_VIEWER_CACHE"] = str(cache)
    import ares_viewer
    from ares_viewer.analysis.behaviours import flag_queries

    run = ares_viewer.open_run(folder)
    start = time.perf_counter()
    run.query("SELECT count(*) FROM episodes").fetchall()
    bare = time.perf_counter() - start
    start = time.perf_counter()
    flag_queries.rate_table(run)
    counted = time.perf_counter() - start
    start = time.perf_counter()
    flag_queries.episode_ids(run, ["format_errors"])
    return counted, time.perf_counter() - start, bare


def _kept(data: pathlib.Path | None, name: str, write: Callable[[pathlib.Path], int]) -> tuple[pathlib.Path, int]:
    """The generated run ``name``: in ``data`` when given (written once, then reused: the same files for runs of
    the benchmark before and after a change), else in the caller's temporary folder (``write`` gives its bytes)."""
    folder = (data or pathlib.Path(tempfile.gettempdir())) / name
    if data is not None and (folder / ".complete").exists():
        return folder, int((folder / ".complete").read_text())
    size = write(folder)
    if data is not None:
        (folder / ".complete").write_text(str(size))
    return folder, size


def _index_against_flags(episodes: int, actions: int, workers: int, data: pathlib.Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = pathlib.Path(tmp) / "cache"
        folder, size = _kept(data, f"ares-{episodes}x{actions}" if data else f"{tmp}/run",
                             lambda f: bench_index._replicate(f, episodes, actions, 400))
        print(f"{episodes:,} episodes, {size / 1e6:,.0f} MB, {workers} worker(s)")
        index, index_cpu = _index_seconds(folder, cache)
        print(f"cold index {index:.1f} s", flush=True)
        flags = _flag_index(folder, cache, workers)
        print(f"cold index {index:.1f} s; flag index {flags['seconds']:.1f} s ({flags['episodes']:,} episodes)")
        print(
            f"flag index / cold index: {flags['seconds'] / index:.2f}; "
            f"(index + flags) / index: {(index + flags['seconds']) / index:.2f}; "
            f"in CPU seconds {flags['cpu']:.1f} / {index_cpu:.1f}: RATIO {flags['cpu'] / index_cpu:.2f}  (target <= 2)",
            flush=True,
        )


def _overview_counts(rollouts: int, workers: int, data: pathlib.Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = pathlib.Path(tmp) / "cache"
        folder, size = _kept(data, f"tinker-{rollouts}" if data else f"{tmp}/tinker",
                             lambda f: bench_scale.write_run(f, rollouts))
        index, index_cpu = _index_seconds(folder, cache)
        print(f"{rollouts:,} Tinker rollouts: cold index {index:.1f} s", flush=True)
        flags = _flag_index(folder, cache, workers)
        print(
            f"{rollouts:,} Tinker rollouts, {size / 1e6:,.0f} MB: cold index {index:.1f} s, "
            f"flag index {flags['seconds']:.1f} s ({flags['failed']} file(s) failed); in CPU seconds "
            f"{flags['cpu']:.1f} / {index_cpu:.1f}: RATIO {flags['cpu'] / index_cpu:.2f}  (target <= 2)"
        )
        counted, filtered, bare = _counts(folder, cache)
        print(
            f"overview flag counts among solved and failed: {counted:.3f} s "
            f"({counted / bare if bare else float('nan'):.1f}x a bare count(*)); Behaviour filter ids "
            f"{filtered:.3f} s; target < 1 s each"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--actions", type=int, default=10)
    parser.add_argument("--rollouts", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--data", type=pathlib.Path, help="keep the generated runs in this folder and reuse them "
                        "(a run before and after a change reads the same files; delete the folder when done)")
    args = parser.parse_args()
    if args.episodes:
        _index_against_flags(args.episodes, args.actions, args.workers, args.data)
    if args.rollouts:
        _overview_counts(args.rollouts, args.workers, args.data)


if __name__ == "__main__":
    main()
