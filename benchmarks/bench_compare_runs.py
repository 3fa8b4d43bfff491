"""Two Tinker runs compared task by task (``ares_viewer.compare_runs``): the time to the per-task table on warm
indexes, against baselines measured in the same run, and the comparing process's peak RSS.

    python3 -m benchmarks.bench_compare_runs                       # 2 x 100,000 rollouts (a couple of minutes)
    python3 -m benchmarks.bench_compare_runs --rollouts 1000000    # 2 x 1,000,000: the issue's figure (~2.2 GB)

The runs are ``benchmarks.bench_scale``'s synthetic Tinker runs (two seeds). Each is indexed once (cold, not part
of the figure); then, in a fresh process that opens both warm indexes:
- ``compare_runs(a, b)``: the per-task table with its tests, lists and overall rates (target < 5 s at 1,000,000 a
  side), the first time and again; and run A's first and last iterations compared (``by="iteration"``);
- the baseline: ``run.stats()`` of both runs (each one aggregate query over its table), and, with ``--pandas``,
  loading both episode tables into pandas (``run.episodes``: what the comparison avoids);
- the process's peak RSS (target < 1 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import bench_scale

REPO = pathlib.Path(__file__).resolve().parent.parent

_COMPARE = """
import json, resource, sys, time
import ares_viewer
out = {}
start = time.perf_counter()
a, b = ares_viewer.open_run(sys.argv[1]), ares_viewer.open_run(sys.argv[2])
out["open_s"] = time.perf_counter() - start
start = time.perf_counter()
found = ares_viewer.compare_runs(a, b)
out["compare_s"] = time.perf_counter() - start
start = time.perf_counter()
ares_viewer.compare_runs(a, b)
out["again_s"] = time.perf_counter() - start
start = time.perf_counter()
ares_viewer.compare_runs(a, by="iteration", sides=(0, int(sys.argv[4])))
out["split_s"] = time.perf_counter() - start
start = time.perf_counter()
a.queries.stats(), b.queries.stats()
out["stats_s"] = time.perf_counter() - start
out["rss_compare_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if sys.argv[3] == "1":
    start = time.perf_counter()
    len(a.episodes), len(b.episodes)
    out["pandas_s"] = time.perf_counter() - start
out.update(tasks=len(found.tasks), counts=found.counts(), episodes=[len(a), len(b)],
           rates=[found.overall_a["rate"], found.overall_b["rate"]], sign_p=found.sign_test.p_value)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=100_000, help="rollouts in each run")
    parser.add_argument("--pandas", action="store_true", help="also time loading both tables into pandas")
    parser.add_argument("--keep", help="keep the generated runs and their index in this folder (reused when there)")
    args = parser.parse_args()

    root = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="ares-viewer-compare-"))
    cache = root / "cache"
    env = dict(os.environ, ARES_VIEWER_CACHE=str(cache), PYTHONPATH=str(REPO))
    runs = [root / "a", root / "b"]
    start = time.perf_counter()
    for seed, folder in enumerate(runs):
        done = folder / f"done-{args.rollouts}"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            bench_scale.write_run(folder, args.rollouts, seed=seed)
            done.write_text("")
    print(f"data in {root}: 2 x {args.rollouts:,} Tinker rollouts, written in {time.perf_counter() - start:.1f} s")
    for folder in runs:  # the cold index, once (not part of the figure)
        opened = bench_scale.open_in_process(folder, cache)
        print(f"  indexed {folder.name}: {opened['episodes']:,} rollouts in {opened['seconds']:.1f} s")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _COMPARE,
            str(runs[0]),
            str(runs[1]),
            "1" if args.pandas else "0",
            str((args.rollouts - 1) // bench_scale.PER_FILE),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"warm open of both runs: {found['open_s']:.2f} s; {found['tasks']:,} tasks, counts {found['counts']}; "
        f"rates {found['rates'][0]:.3f} / {found['rates'][1]:.3f}, sign test p = {found['sign_p']}"
    )
    print(
        f"compare_runs, per-task table ready: {found['compare_s']:.2f} s (again: {found['again_s']:.2f} s)  "
        "(target < 5 s at 1,000,000 a side)"
    )
    print(f'  run A\'s first and last iterations compared (by="iteration"): {found["split_s"]:.2f} s')
    print(
        f"  baseline run.stats() of both runs: {found['stats_s']:.2f} s; RATIO compare / stats = "
        f"{found['compare_s'] / found['stats_s']:.1f}"
    )
    if "pandas_s" in found:
        print(
            f"  baseline loading both tables into pandas: {found['pandas_s']:.2f} s; RATIO compare / pandas = "
            f"{found['compare_s'] / found['pandas_s']:.2f}"
        )
    print(f"peak RSS of the comparing process: {found['rss_compare_kb'] / 1024:.0f} MB  (target < 1 GB)")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
