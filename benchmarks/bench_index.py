"""Speed and memory of the library foundation, as ratios against baselines measured in the same run.

    python3 -m benchmarks.bench_index                  # 2,000 x 40-step episodes (~1.7 GB), 10,000 warm, 250 steps
    python3 -m benchmarks.bench_index --episodes 300   # a quicker look

Prints:
- cold index throughput / single-core ``read + orjson.loads`` throughput over the same files, in a fresh process,
  without and with ``import ares_viewer`` (target >= 1.5);
- a fresh process reopening the indexed run of ``--listed`` (300) episodes and listing their ids (target <= 0.05 s,
  after the import, which is printed apart);
- in-process listing of those episodes (``open_run`` + ``.episodes``) and opening one episode with its last context,
  each beside Inspect AI's ``read_eval_log_sample_summaries`` / ``read_eval_log_sample`` on the same episodes written
  into one ``.eval`` log by Inspect's own writer, where ``inspect-ai`` is installed (the ``bench`` extra);
- warm reopen of 10,000 episodes, seconds (target < 0.5) and vs a bare listing + stat of the files;
- opening a 250-step episode / bare ``orjson.loads`` of it (target <= 2);
- peak RSS while indexing the cold run, parent and largest worker (target < 600 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import orjson

from testdata import synthetic

_TEMPLATES = 16


def _replicate(folder: pathlib.Path, count: int, actions: int, output_chars: int) -> int:
    """Write ``count`` episodes from a few distinct templates (fresh ids), fast. Returns total bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    templates = []
    for i in range(min(_TEMPLATES, count)):
        ending = ("completed", "completed", "truncated", "errored")[i % 4]
        doc = synthetic.episode_dict(task_name=f"calc__calc-{i % 5}", actions=actions, ending=ending,
                                     reward=float(i % 2), output_chars=output_chars, seed=i)
        templates.append((doc["episode_id"], json.dumps(doc, indent=2).encode()))
    total = 0
    for n in range(count):
        old_id, data = templates[n % len(templates)]
        new_id = str(uuid.UUID(int=n + 1, version=4))
        data = data.replace(old_id.encode(), new_id.encode(), 1)
        (folder / f"{new_id}.json").write_bytes(data)
        total += len(data)
    return total


def _orjson_baseline(folder: pathlib.Path) -> tuple[float, float]:
    """Seconds for one core to read and ``orjson.loads`` every file: wall time and CPU time."""
    start, used = time.perf_counter(), time.process_time()
    for path in sorted(folder.iterdir()):
        orjson.loads(path.read_bytes())
    return time.perf_counter() - start, time.process_time() - used


_COLD = """
import json, resource, sys, time
begun = time.perf_counter()
import ares_viewer
import ares_viewer.runs.run  # what open_run loads (ares_viewer loads its names on first use): the import, timed apart
def cpu():
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))
used = cpu()
start = time.perf_counter()
run = ares_viewer.open_run(sys.argv[1])
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "import": start - begun, "episodes": len(run), "errors": len(run.errors),
                  "cpu": cpu() - used,
                  "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _cold_index(folder: pathlib.Path, cache: pathlib.Path) -> dict:
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, ARES_VIEWER_CACHE=str(cache))
    out = subprocess.run([sys.executable, "-c", _COLD, str(folder)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


_REOPEN = """
import json, sys, time
begun = time.perf_counter()
import ares_viewer
import ares_viewer.runs.run  # what open_run loads (ares_viewer loads its names on first use): the import, timed apart
start = time.perf_counter()
run = ares_viewer.open_run(sys.argv[1])
ids = run.episode_ids
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "import": start - begun, "episodes": len(ids), "parsed": run.parsed_files,
                  "loaded": sorted({"pandas", "pyarrow"} & set(sys.modules))}))
"""


def _fresh_reopen(folder: pathlib.Path, repeat: int) -> dict:
    """The best of ``repeat`` fresh processes reopening an indexed run and listing its episode ids, with the whole
    process's wall time (interpreter start and imports included)."""
    best: dict = {}
    for _ in range(repeat):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _REOPEN, str(folder)], capture_output=True, text=True, check=True)
        found = json.loads(out.stdout.strip().splitlines()[-1]) | {"process": time.perf_counter() - start}
        best = {k: min(v, best.get(k, v)) if isinstance(v, float) else v for k, v in found.items()}
    return best


def inspect_log_of(folder: pathlib.Path, path: pathlib.Path) -> list[str] | None:
    """The episodes of ``folder`` written into one ``.eval`` log by Inspect AI's own writer (each episode a sample:
    its messages, its last response as the output, its reward as the score); their sample ids. None without
    ``inspect-ai``."""
    try:
        from inspect_ai import log as inspect_log
        from inspect_ai import model as inspect_model
        from inspect_ai import scorer as inspect_scorer
    except ImportError:
        return None
    import ares_viewer

    kinds = {"system": inspect_model.ChatMessageSystem, "user": inspect_model.ChatMessageUser,
             "assistant": inspect_model.ChatMessageAssistant, "tool": inspect_model.ChatMessageTool}
    samples = []
    for episode in ares_viewer.open_run(folder):
        messages = [kinds.get(m.role, inspect_model.ChatMessageUser)(content=m.content) for m in episode.messages]
        last = next((m for m in reversed(messages) if m.role == "assistant"), None)
        samples.append(inspect_log.EvalSample(
            id=episode.episode_id, epoch=1, input=messages[:1] or "", target="", messages=messages,
            output=inspect_model.ModelOutput.from_content("synthetic", last.text if last else ""),
            scores={"reward": inspect_scorer.Score(value=episode.total_reward or 0.0)}))
    spec = inspect_log.EvalSpec(created="2026-01-01T00:00:00+00:00", task="ares-episodes", model="synthetic",
                                dataset=inspect_log.EvalDataset(), config=inspect_log.EvalConfig())
    inspect_log.write_eval_log(inspect_log.EvalLog(eval=spec, status="success", samples=samples), str(path),
                               format="eval")
    return [str(s.id) for s in samples]


def _best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _listing_figures(root: pathlib.Path, args: argparse.Namespace) -> None:
    """Reopening and listing an indexed run, and opening one episode, beside Inspect AI on the same episodes."""
    import ares_viewer

    folder = root / "listed"
    _replicate(folder, args.listed, args.steps, args.output_chars)
    run = ares_viewer.open_run(folder)  # indexed once; every figure below reopens it
    ids = run.episode_ids
    fresh = _fresh_reopen(folder, args.repeat + 2)
    print(f"fresh-process reopen of {len(ids)} indexed episodes + their ids: {fresh['seconds'] * 1e3:.1f} ms "
          f"(target <= 50 ms; parsed {fresh['parsed']} files, loaded {fresh['loaded'] or 'neither pandas nor pyarrow'})"
          f"; `import ares_viewer` {fresh['import'] * 1e3:.0f} ms; whole process {fresh['process'] * 1e3:.0f} ms")
    listing = _best_of(args.repeat + 2, lambda: len(ares_viewer.open_run(folder).episodes))
    picks = [ids[len(ids) * n // 5] for n in range(5)]

    def open_one(episode_id: str) -> None:
        episode = run.episode(episode_id)
        episode.context(len(episode.steps) - 1)

    one = min(_best_of(1, lambda e=e: open_one(e)) for e in picks)  # each a different file: no cache answers
    log = root / "listed.eval"
    start = time.perf_counter()
    samples = inspect_log_of(folder, log)
    if samples is None:
        print(f"in-process listing (open_run + .episodes): {listing * 1e3:.1f} ms; open one episode + its last "
              f"context: {one * 1e3:.1f} ms  (inspect-ai not installed: `pip install inspect-ai` to compare)")
        return
    from inspect_ai import log as inspect_log

    written = time.perf_counter() - start
    theirs = _best_of(args.repeat + 2, lambda: inspect_log.read_eval_log_sample_summaries(str(log)))
    theirs_one = min(_best_of(1, lambda e=e: inspect_log.read_eval_log_sample(str(log), id=e)) for e in picks)
    print(f"  (the same {len(samples)} episodes as one Inspect .eval log: {log.stat().st_size / 1e6:.0f} MB, "
          f"written in {written:.1f} s)")
    print(f"in-process listing (open_run + .episodes): {listing * 1e3:.1f} ms; Inspect read_eval_log_sample_summaries: "
          f"{theirs * 1e3:.1f} ms; RATIO {listing / theirs:.2f}x Inspect's time  (target < 1)")
    print(f"open one episode + its last context: {one * 1e3:.1f} ms; Inspect read_eval_log_sample: "
          f"{theirs_one * 1e3:.1f} ms; RATIO {one / theirs_one:.2f}x Inspect's time  (target < 1)")


def _arguments() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2000, help="episodes in the cold-index run")
    parser.add_argument("--steps", type=int, default=40, help="actions per episode in the cold-index run")
    parser.add_argument("--output-chars", type=int, default=700, help="typical command output size")
    parser.add_argument("--listed", type=int, default=300, help="episodes in the reopen and listing run")
    parser.add_argument("--warm", type=int, default=10_000, help="episodes in the warm-reopen run")
    parser.add_argument("--long", type=int, default=250, help="actions of the long episode")
    parser.add_argument("--keep", help="keep the generated data in this folder")
    parser.add_argument("--repeat", type=int, default=3, help="cold-index and baseline measurements (best of each)")
    return parser.parse_args()


def main() -> None:
    args = _arguments()

    root = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="ares-viewer-bench-"))
    cache = root / "cache"
    os.environ["ARES_VIEWER_CACHE"] = str(cache)
    import ares_viewer  # after the cache folder is set

    print(f"data in {root}")
    # 1. cold index vs single-core orjson.
    cold_dir = root / "cold"
    total = _replicate(cold_dir, args.episodes, args.steps, args.output_chars)
    os.sync()  # the files are written out first: write-back must not land in one measurement and not the other
    # Baseline and index alternate, best of --repeat each: a shared machine's noise hits both alike.
    baseline, baseline_cpu, runs = float("inf"), float("inf"), []
    for _ in range(args.repeat):
        wall, used = _orjson_baseline(cold_dir)  # the first also warms the page cache for both
        baseline, baseline_cpu = min(baseline, wall), min(baseline_cpu, used)
        runs.append(_cold_index(cold_dir, cache))
    cold = {"seconds": min(r["seconds"] for r in runs), "episodes": runs[0]["episodes"],
            "with_import": min(r["seconds"] + r["import"] for r in runs), "cpu": min(r["cpu"] for r in runs),
            "self_kb": max(r["self_kb"] for r in runs), "children_kb": max(r["children_kb"] for r in runs)}
    ours_mb_s = total / cold["seconds"] / 1e6
    base_mb_s = total / baseline / 1e6
    print(f"cold index (empty cache, best of {args.repeat}): {cold['episodes']} episodes, {total / 1e9:.2f} GB in "
          f"{cold['seconds']:.2f} s "
          f"= {ours_mb_s:.0f} MB/s; single-core read+orjson.loads: {baseline:.2f} s = {base_mb_s:.0f} MB/s")
    print(f"  RATIO cold index throughput / orjson throughput = {ours_mb_s / base_mb_s:.2f}  (target >= 1.5)")
    print(f"  with `import ares_viewer` in the fresh process: {cold['with_import']:.2f} s, "
          f"RATIO {baseline / cold['with_import']:.2f}")
    print(f"  CPU time (every process, what a busy machine's share of cores cannot skew): index {cold['cpu']:.2f} s, "
          f"orjson {baseline_cpu:.2f} s; RATIO {baseline_cpu / cold['cpu']:.2f}")
    print(f"  peak RSS while indexing: parent {cold['self_kb'] / 1024:.0f} MB, "
          f"largest worker {cold['children_kb'] / 1024:.0f} MB  (target < 600 MB)")

    _listing_figures(root, args)

    # 2. warm reopen of many episodes.
    warm_dir = root / "warm"
    _replicate(warm_dir, args.warm, 3, 200)
    ares_viewer.open_run(warm_dir)  # fills the cache
    warm = _best_of(3, lambda: ares_viewer.open_run(warm_dir))
    listing = _best_of(3, lambda: [e.stat() for e in os.scandir(warm_dir)])
    reopened = ares_viewer.open_run(warm_dir)
    assert reopened.parsed_files == 0 and len(reopened) == args.warm
    print(f"warm reopen of {args.warm} episodes: {warm:.3f} s (target < 0.5 s); "
          f"bare scandir+stat: {listing:.3f} s; RATIO {warm / listing:.1f}x the bare listing")

    # 3. one long episode vs bare orjson.loads.
    long_doc = synthetic.episode_dict(actions=args.long, output_chars=args.output_chars, seed=99, ending="truncated")
    long_path = synthetic.write_episode(root, long_doc)
    data = pathlib.Path(long_path).read_bytes()
    bare = _best_of(5, lambda: orjson.loads(data))
    opened = _best_of(5, lambda: ares_viewer.load_episode(long_path))
    print(f"open {args.long}-step episode ({len(data) / 1e6:.1f} MB): {opened:.3f} s; bare orjson.loads {bare:.3f} s; "
          f"RATIO {opened / bare:.2f}x  (target <= 2)")
    episode = ares_viewer.load_episode(long_path)
    in_file = sum(len(s["observation"]["messages"]) for s in long_doc["steps"] if s["observation"])
    print(f"  distinct messages kept: {len(episode.messages)} (vs {in_file} in the file's cumulative observations)")
    print(f"benchmark process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
