"""Listing an Inspect AI ``.eval`` log of many samples: ares-viewer's index rows (each sample parsed, as its Episode
page reads it) against Inspect's own ``read_eval_log`` of the whole log and its ``read_eval_log_sample_summaries``.

    python3 -m benchmarks.bench_inspect                    # 10,000 samples (writing the log takes ~5 minutes)
    python3 -m benchmarks.bench_inspect --samples 1000     # a quicker look
    python3 -m benchmarks.bench_inspect --samples 3000 --log /tmp/x.eval   # written once, then reused

Also one sample opened with its last context, as the Episode page opens it (``Run.episode`` with its cache of
opened episodes emptied, then the last step's context), against Inspect's own ``read_eval_log_sample`` of that
sample. Threshold: no slower than Inspect's.

The log is written by inspect-ai itself (``testdata.inspect_logs``: a mock model, a tool, a scorer). Prints the
log's size, then seconds (best of three) for: ares-viewer's rows of the file (``formats.summarize_file``), opening
the folder as a run (index built), Inspect's whole log read and its sample summaries, and reading every sample's
episode; and the ratios. Threshold: the rows take no longer than Inspect's own reading of the log's samples.
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

from inspect_ai.log import read_eval_log, read_eval_log_sample, read_eval_log_sample_summaries

import ares_viewer
from ares_viewer import formats
from testdata import inspect_logs


def timed(action, repeat: int = 3) -> tuple[float, object]:
    """The best of ``repeat`` runs' seconds (the first pays for imports and warm-up), and the result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--log", type=pathlib.Path, help="keep the written log here; reuse it when it exists")
    args = parser.parse_args()
    copies = max(1, args.samples // len(inspect_logs.SAMPLES))
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "logs"
        if args.log is not None and args.log.exists():
            folder.mkdir()
            path = folder / args.log.name
            path.write_bytes(args.log.read_bytes())
        else:
            print(f"writing an .eval log of {copies * len(inspect_logs.SAMPLES):,} samples with inspect-ai ...")
            path = inspect_logs.write_logs(folder, "eval", copies=copies)
            if args.log is not None:
                args.log.write_bytes(path.read_bytes())
        print(f"log: {path.stat().st_size / 1e6:.1f} MB")
        ok_one = open_one(folder, path)
        rows_s, result = timed(lambda: formats.summarize_file(str(path), path.read_bytes()))
        print(f"ares-viewer rows (samples parsed):  {rows_s:7.3f} s  {len(result.rows):,} rows")
        run_s, run = timed(lambda: ares_viewer.open_run(folder, use_cache=False))
        print(f"open_run (index built):             {run_s:7.3f} s  {len(run.episode_ids):,} episodes")
        inspect_s, log = timed(lambda: read_eval_log(str(path)))
        print(f"inspect read_eval_log:              {inspect_s:7.3f} s  {len(log.samples or ()):,} samples")
        summaries_s, summaries = timed(lambda: read_eval_log_sample_summaries(str(path)))
        print(f"inspect read_eval_log_sample_summaries: {summaries_s:7.3f} s  {len(summaries):,} summaries")
        parse_s, parsed = timed(lambda: formats.read_file(str(path), path.read_bytes()))
        print(f"every sample parsed (read_file):    {parse_s:7.3f} s  {len(parsed.episodes):,} episodes")
        print(f"rows / inspect's read_eval_log: {rows_s / inspect_s:.2f}x; rows / its summaries: "
              f"{rows_s / summaries_s:.2f}x; rows / parsing every sample: {rows_s / parse_s:.3f}x")
        ok = rows_s <= inspect_s
        print("PASS" if ok else "FAIL", "rows no slower than Inspect's own reading of the log")
        return 0 if ok and ok_one else 1


def open_one(folder: pathlib.Path, path: pathlib.Path) -> bool:
    """One sample (the middle one) opened with its last context, against Inspect's ``read_eval_log_sample``."""
    run = ares_viewer.open_run(folder)
    key = run.episode_ids[len(run.episode_ids) // 2]
    sample, epoch = key.split("/")[1], int(key.rsplit("epoch", 1)[1])

    def ours() -> int:
        run._open.clear()
        episode = run.episode(key)
        return len(episode.context(len(episode.steps) - 1))

    ours_s, _ = timed(ours, 7)
    theirs_s, _ = timed(lambda: read_eval_log_sample(str(path), id=sample, epoch=epoch), 7)
    print(f"one sample with its last context:   {ours_s * 1000:7.1f} ms  ({key})")
    print(f"inspect read_eval_log_sample:       {theirs_s * 1000:7.1f} ms")
    ok = ours_s <= theirs_s
    print("PASS" if ok else "FAIL", f"one sample opened no slower than Inspect's reader ({ours_s / theirs_s:.2f}x)")
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
