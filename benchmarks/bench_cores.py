"""The cold index's CPU cost against the parse's, and the figures that predict it on many cores, for every format.

    python3 -m benchmarks.bench_cores                      # every format at the sizes below (a few minutes, 2 cores)
    python3 -m benchmarks.bench_cores --scale 0.2          # a quicker look
    python3 -m benchmarks.bench_cores --formats tinker,ares --workers 1,2,4

For each format (ARES episode files, Tinker JSON Lines rollouts, Ray runner JSON Lines, mini-swe-agent JSON Lines,
one Inspect ``.eval`` log written by Inspect's own writer, copies of a log Inspect's ``eval()`` writes
(``inspect-eval``), and copies of the real run in ``../shared/real-runs/``),
prints:

- single-core ``read + orjson.loads`` of the same files (each line of a JSON Lines file, each member of an ``.eval``):
  its CPU seconds, the parse's ceiling;
- for each ``--workers``, the cold index (``open_run`` in a fresh process, empty cache, files in the page cache):
  wall seconds, CPU seconds of every process and the RATIO to orjson's CPU (target <= 1.0), CPU seconds per
  worker, the peak RSS of each worker process (the ordinary path's) or of the indexing process (the fast paths
  read side by side on threads: the process's growth per added worker is printed), and, at 1 worker, the serial
  fraction: the part of the wall time outside the per-batch work that workers share (file listing, choosing the
  path, commits, the manifest), which bounds the speed-up on N cores (Amdahl: serial + rest / N).

The sizes are scaled to run in a few minutes on a 2-core machine (the issue measured 4,000 ARES episodes and 1,000,000
rollouts on 16 cores); ``--scale`` multiplies them. CPU seconds are what a busy shared machine changes least.
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

import orjson

from ares_viewer.formats import zipped

REPO = pathlib.Path(__file__).resolve().parent.parent
# The shared folder beside the checkout (a worktree's is one level further up).
REAL_RUNS = next((p / "shared" / "real-runs" for p in (REPO.parent, REPO.parent.parent)
                  if (p / "shared" / "real-runs").is_dir()), REPO.parent / "shared" / "real-runs")
# Sizes that index in seconds here; multiplied by --scale.
# ``real``: copies of the real run's trajectories, so that the cost per episode shows rather than the fixed costs.
# ``inspect-eval``: samples, as copies of one 100-sample log that Inspect's ``eval()`` writes.
SIZES = {"ares": 1_000, "tinker": 200_000, "ray": 40_000, "mini": 10_000, "inspect": 300, "inspect-eval": 4_000,
         "real": 60}

# The cold index in a fresh process, with the per-batch work timed: ``builder._staged_batch`` (the ordinary path,
# in worker processes when there are several: each appends its CPU and peak RSS to a file) and
# ``fast_jsonl.read_batch`` (the fast paths, on threads of this process: thread CPU each).
_COLD = """
import json, os, resource, sys, threading, time
import ares_viewer, ares_viewer.runs.run
from ares_viewer.runs.index import builder, fast_jsonl

def cpu(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime

log, lock, batch_wall, fast_threads = sys.argv[3], threading.Lock(), [0.0], {}
staged, read_batch = builder._staged_batch, fast_jsonl.read_batch

def timed_staged(folder, files):
    start, used = time.perf_counter(), cpu(resource.RUSAGE_SELF)
    out = staged(folder, files)
    with open(log, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "wall": time.perf_counter() - start,
                            "cpu": cpu(resource.RUSAGE_SELF) - used,
                            "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}) + "\\n")
    return out

def timed_read(con, spec, files, target):
    start, used = time.perf_counter(), time.thread_time()
    out = read_batch(con, spec, files, target)
    with lock:
        batch_wall[0] += time.perf_counter() - start
        me = threading.get_ident()
        fast_threads[me] = fast_threads.get(me, 0.0) + time.thread_time() - used
    return out

builder._staged_batch = timed_staged
fast_jsonl.read_batch = timed_read
used = cpu(resource.RUSAGE_SELF) + cpu(resource.RUSAGE_CHILDREN)
start = time.perf_counter()
run = ares_viewer.open_run(sys.argv[1], workers=int(sys.argv[2]))
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "episodes": len(run), "errors": len(run.errors),
                  "cpu": cpu(resource.RUSAGE_SELF) + cpu(resource.RUSAGE_CHILDREN) - used,
                  "fast_wall": batch_wall[0], "fast_threads": sorted(fast_threads.values()),
                  "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def cold_index(folder: pathlib.Path, workers: int, scratch: pathlib.Path) -> dict:
    """The cold index of ``folder`` in a fresh process with ``workers``: its figures (see ``_COLD``)."""
    cache, log = scratch / "cache", scratch / "batches.jsonl"
    shutil.rmtree(cache, ignore_errors=True)
    log.unlink(missing_ok=True)
    env = dict(os.environ, ARES_VIEWER_CACHE=str(cache), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _COLD, str(folder), str(workers), str(log)], env=env,
                         capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    batches = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    per_pid: dict[int, dict] = {}
    for b in batches:
        mine = per_pid.setdefault(b["pid"], {"cpu": 0.0, "rss_kb": 0})
        mine["cpu"] += b["cpu"]
        mine["rss_kb"] = max(mine["rss_kb"], b["rss_kb"])
    found["ordinary_wall"] = sum(b["wall"] for b in batches)
    found["ordinary_workers"] = sorted(per_pid.values(), key=lambda w: -w["cpu"])
    return found


def orjson_cpu(paths: list[pathlib.Path]) -> float:
    """CPU seconds for one core to read every file and ``orjson.loads`` its documents (each line of a JSON Lines
    file, each JSON member of a zip)."""
    used = time.process_time()
    for path in paths:
        if path.suffix == ".eval":  # zstd members, which Inspect writes and ``zipfile`` cannot read: the
            archive = zipped.opened(path.read_bytes(), 1 << 40)  # index's own reader of them
            for member in archive.members():
                if member.name.endswith(".json"):
                    orjson.loads(member.read())
        elif path.suffix in (".jsonl", ".ndjson"):
            for line in path.read_bytes().split(b"\n"):
                if line.strip():
                    orjson.loads(line)
        else:
            orjson.loads(path.read_bytes())
    return time.process_time() - used


def data_files(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".eval"))


def generate(fmt: str, count: int, folder: pathlib.Path) -> str:
    """Write ``count`` episodes of ``fmt`` into ``folder`` (the real run: ``count`` copies); what was written."""
    from benchmarks import bench_index, bench_scale

    if fmt == "ares":
        bench_index._replicate(folder, count, 40, 700)
        return f"{count:,} ARES episode files x 40 steps"
    if fmt in ("tinker", "ray", "mini"):
        bench_scale.write_run(folder, count, fmt=fmt)
        return f"{count:,} {fmt} JSON Lines episodes"
    if fmt == "inspect":
        episodes = folder.parent / "inspect-episodes"
        bench_index._replicate(episodes, count, 40, 700)
        folder.mkdir(parents=True, exist_ok=True)
        samples = bench_index.inspect_log_of(episodes, folder / "run.eval")
        shutil.rmtree(episodes, ignore_errors=True)
        if samples is None:
            return ""
        return f"one .eval of {len(samples):,} samples (Inspect's writer)"
    if fmt == "inspect-eval":
        return _copies_of_an_eval_log(count, folder)
    return _copies_of_real_runs(count, folder)


# The samples of the log ``_copies_of_an_eval_log`` has Inspect write: each kind of ``inspect_logs.SAMPLES`` 20 times.
_EVAL_COPIES = 20


def _copies_of_an_eval_log(count: int, folder: pathlib.Path) -> str:
    """Copies of one log that Inspect's own ``eval()`` writes (``testdata.inspect_logs``: its mock model calling a
    tool, the tool's listings of 30 more files moved into attachments, a sample that errors, one ended by its
    message limit, a model-graded scorer), as many as hold ``count`` samples, each under a name of its own. Inspect's
    ``bench_cores`` log above holds messages alone (no events, no attachments), and at its size its index is mostly
    fixed costs."""
    try:
        from testdata import inspect_logs
    except ImportError:
        return ""
    written = inspect_logs.write_logs(folder.parent / "inspect-eval-written", "eval", copies=_EVAL_COPIES, files=30)
    per_log = _EVAL_COPIES * len(inspect_logs.SAMPLES)
    folder.mkdir(parents=True, exist_ok=True)
    logs = max(1, -(-count // per_log))
    for n in range(logs):
        shutil.copyfile(written, folder / f"log-{n:03d}.eval")
    shutil.rmtree(written.parent, ignore_errors=True)
    return f"{logs} copies of one {per_log}-sample log written by Inspect's eval()"


def _copies_of_real_runs(count: int, folder: pathlib.Path) -> str:
    """``count`` copies of the real run(s)' trajectories, each under an instance name of its own in the same run
    folder (``{output}/{instance}-007/{instance}-007.traj.json``, as mini-swe-agent's run-batch names them): one
    run of ``count`` times the episodes; the run's other files once."""
    files = [p for p in REAL_RUNS.rglob("*") if p.is_file()] if REAL_RUNS.is_dir() else []
    if not files:
        return ""
    for path in files:
        parts = path.relative_to(REAL_RUNS).parts
        instance = parts[-2] if len(parts) > 1 and path.name == f"{parts[-2]}.traj.json" else None
        for copy in range(count) if instance else [None]:
            where = parts if copy is None else (*parts[:-2], f"{instance}-{copy:03d}",
                                                f"{instance}-{copy:03d}.traj.json")
            target = folder.joinpath(*where)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return f"the real run in {REAL_RUNS}, each trajectory {count} times"


def _worker_figures(found: dict) -> str:
    if found["ordinary_workers"]:
        each = ", ".join(f"{w['cpu']:.2f} s / {w['rss_kb'] / 1024:.0f} MB" for w in found["ordinary_workers"])
        return f"per worker process (CPU / peak RSS): {each}"
    if found["fast_threads"]:
        each = ", ".join(f"{t:.2f} s" for t in found["fast_threads"])
        return f"per fast-path thread CPU: {each}; process peak RSS {found['self_kb'] / 1024:.0f} MB"
    return "no batch work"


def report(fmt: str, what: str, folder: pathlib.Path, workers: list[int], scratch: pathlib.Path) -> dict:
    files = data_files(folder)
    size = sum(p.stat().st_size for p in files)
    base = min(orjson_cpu(files) for _ in range(2))  # the first also fills the page cache
    print(f"\n== {fmt}: {what}, {len(files):,} files, {size / 1e6:,.0f} MB; single-core read+orjson.loads "
          f"CPU {base:.2f} s")
    figures: dict = {"orjson": base}
    peak1 = None
    for n in workers:
        found = min((cold_index(folder, n, scratch) for _ in range(2)), key=lambda r: r["cpu"])
        figures[n] = found
        batch_wall = found["ordinary_wall"] + found["fast_wall"]
        line = (f"  workers {n}: {found['episodes']:,} episodes ({found['errors']} errors) in {found['wall']:.2f} s; "
                f"CPU {found['cpu']:.2f} s, RATIO {found['cpu'] / base:.2f}x orjson's CPU (target <= 1.0); "
                f"CPU per worker {found['cpu'] / n:.2f} s")
        print(line)
        print(f"    {_worker_figures(found)}; largest worker process {found['children_kb'] / 1024:.0f} MB")
        if n == 1:
            serial = max(0.0, found["wall"] - batch_wall)
            frac = serial / found["wall"] if found["wall"] else 0.0
            figures["serial"] = frac
            peak1 = found["self_kb"]
            predicted = ", ".join(f"{c} cores {serial + (found['wall'] - serial) / c:.2f} s" for c in (2, 8, 16))
            print(f"    serial fraction of the wall time {frac:.2f} ({serial:.2f} s outside the batches); "
                  f"Amdahl's prediction: {predicted}")
        elif peak1 is not None and not found["ordinary_workers"]:
            grow = (found["self_kb"] - peak1) / 1024 / max(1, n - 1)
            print(f"    indexing process peak RSS grows {grow:+.0f} MB per added worker")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formats", default="ares,tinker,ray,mini,inspect,inspect-eval,real")
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the sizes (" + ", ".join(
        f"{k} {v:,}" for k, v in SIZES.items()) + ")")
    parser.add_argument("--keep", help="keep the generated runs in this folder (and reuse them)")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    root = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="ares-viewer-cores-"))
    print(f"{os.cpu_count()} cores here; sizes scaled to run in minutes on them (x{args.scale:g}); data in {root}")
    summary = []
    for fmt in args.formats.split(","):
        count = max(1, int(SIZES.get(fmt, 0) * args.scale))
        folder = root / fmt
        marker = root / f".{fmt}-{count}"
        if not marker.exists():
            shutil.rmtree(folder, ignore_errors=True)
            what = generate(fmt, count, folder)
            if not what:
                print(f"\n== {fmt}: skipped (inspect-ai not installed, or no real run here)")
                continue
            marker.write_text(what)
        os.sync()
        figures = report(fmt, marker.read_text(), folder, workers, root)
        summary.append((fmt, figures))
    print("\nformat   | orjson CPU | " + " | ".join(f"index CPU w={n} (ratio)" for n in workers) + " | serial")
    for fmt, f in summary:
        cells = " | ".join(f"{f[n]['cpu']:.2f} s ({f[n]['cpu'] / f['orjson']:.2f}x)" for n in workers)
        print(f"{fmt:8} | {f['orjson']:.2f} s | {cells} | {f.get('serial', float('nan')):.2f}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
