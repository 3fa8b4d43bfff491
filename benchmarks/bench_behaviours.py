"""What behaviour flags cost, as ratios against baselines measured in the same run.

    python3 -m benchmarks.bench_behaviours                      # 100,000 episodes x 10 actions; 1,000,000 rows
    python3 -m benchmarks.bench_behaviours --episodes 2000 --rows 100000   # a quicker look

Prints:
- indexing the run (``open_run``, cold cache) and then computing every episode-file flag of every episode (each
  file parsed, ``behaviours.episode_findings``), with the same number of worker processes: the index time with
  flags against without, ``(index + flags) / index``. The flags are not an index column yet, so this is what
  computing them while indexing would cost when they need the parse the index's fast path skips;
- the overview's flag counts over ``--rows`` Tinker-sized rows held as the planned compact column (a BIGINT
  bitmask, one bit per episode-file flag) in DuckDB: seconds to count every flag among solved and failed, and
  against a bare ``count(*)`` of the same table (target: under 1 s at 1,000,000 rows).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import duckdb

from benchmarks import bench_index

_INDEX = "import sys, ares_viewer; print(len(ares_viewer.open_run(sys.argv[1])))"


def _flags_of(paths: list[str]) -> int:
    from ares_viewer.analysis import behaviours
    from ares_viewer.runs import run

    return sum(len(behaviours.episode_findings(run.load_episode(p))) for p in paths)


def _index_seconds(folder: pathlib.Path, cache: pathlib.Path) -> float:
    env = dict(os.environ, ARES_VIEWER_CACHE=str(cache))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _INDEX, str(folder)], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _flag_seconds(folder: pathlib.Path, workers: int) -> tuple[float, int]:
    paths = sorted(str(p) for p in folder.glob("*.json"))
    chunks = [paths[i::workers] for i in range(workers)]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        found = sum(pool.map(_flags_of, chunks))
    return time.perf_counter() - start, found


def _counts(rows: int) -> tuple[float, float]:
    from ares_viewer.analysis import behaviours

    names = [n for n, f in behaviours.FLAGS.items() if f.source == behaviours.EPISODE]
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE episodes AS SELECT (random() < 0.4) AS solved, "
        f"CAST(floor(random() * {2 ** len(names)}) AS BIGINT) AS flags FROM range({rows})"
    )
    start = time.perf_counter()
    con.execute("SELECT count(*) FROM episodes").fetchall()
    bare = time.perf_counter() - start
    sums = ", ".join(f"sum(((flags >> {bit}) & 1)::INT) AS {name}" for bit, name in enumerate(names))
    start = time.perf_counter()
    con.execute(f"SELECT solved, count(*), {sums} FROM episodes GROUP BY solved").fetchall()
    return time.perf_counter() - start, bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--actions", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, cache = pathlib.Path(tmp) / "run", pathlib.Path(tmp) / "cache"
        size = bench_index._replicate(folder, args.episodes, args.actions, 400)
        print(f"{args.episodes:,} episodes, {size / 1e6:,.0f} MB, {args.workers} worker(s)")
        index = _index_seconds(folder, cache)
        flags, found = _flag_seconds(folder, args.workers)
        print(f"index {index:.1f} s; episode-file flags {flags:.1f} s ({found:,} found)")
        print(f"index time with flags / without: {(index + flags) / index:.2f}")
    counted, bare = _counts(args.rows)
    print(
        f"flag counts among solved and failed over {args.rows:,} rows (bitmask column): {counted:.3f} s "
        f"({counted / bare if bare else float('nan'):.1f}x a bare count(*)); target < 1 s"
    )


if __name__ == "__main__":
    main()
