"""Full-text search on a large Tinker run: a rare query, the byte-prefiltered search against searching every
episode one by one (the search before it), on the same run.

    python3 -m benchmarks.bench_search                     # 100,000 rollouts (~110 MB)
    python3 -m benchmarks.bench_search --rollouts 20000    # a quicker look

Prints the run's size, the index time (not part of the search), then for a rare query (one rollout holds it) and
a rare query in the task prompt only: the search's seconds, episodes parsed, hits. The episode-by-episode search
is timed on the run's first episodes for ``--baseline-seconds`` and extrapolated to the whole run (searching all
of it that way takes hours), and the ratio of the two is printed. Also the time to the first 100 hits of a
common query, and regular expressions with and without literal text (without, every record is parsed).
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import ares_viewer
from ares_viewer.analysis import search
from benchmarks import bench_scale

RARE = "zanzibar quokka"
RARE_TASK = "platypus-only-in-the-prompt"


def plant(folder: pathlib.Path) -> tuple[str, str]:
    """Put the rare texts into two rollouts in the middle of the run: one in an answer, one in a task prompt."""
    files = sorted(folder.rglob("*.jsonl"))
    target = files[len(files) // 2]
    lines = target.read_bytes().split(b"\n")
    lines[777] = lines[777].replace(b"Working it out", b"Working it out (" + RARE.encode() + b")", 1)
    user = b'"role": "user", "content": "'
    lines[1333] = lines[1333].replace(user, user + RARE_TASK.encode() + b" ", 1)
    target.write_bytes(b"\n".join(lines))
    return RARE, RARE_TASK


def timed_search(run, query: str, limit: int | None = None) -> tuple[float, search.Search, int]:
    start = time.perf_counter()
    found = search.Search(run, query)
    hits = sum(1 for _ in found.hits(limit=limit))
    return time.perf_counter() - start, found, hits


def baseline_rate(run, query: str, seconds: float) -> tuple[float, int]:
    """Episodes per second of searching episode by episode (``run.episode`` then its hits), over the first
    episodes of the run for about ``seconds``."""
    pattern = search.compile_pattern(query)
    start = time.perf_counter()
    done = 0
    for episode_id in run.episode_ids:
        list(search.episode_hits(run.episode(episode_id), pattern))
        done += 1
        if time.perf_counter() - start >= seconds:
            break
    return done / (time.perf_counter() - start), done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--baseline-seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "big"
        size = bench_scale.write_run(folder, args.rollouts)
        plant(folder)
        start = time.perf_counter()
        run = ares_viewer.open_run(folder, use_cache=False)
        print(f"run: {len(run):,} rollouts in {len(run.files())} files, {size / 1e6:.0f} MB; "
              f"indexed in {time.perf_counter() - start:.1f} s")
        rate, sampled = baseline_rate(run, RARE, args.baseline_seconds)
        baseline = len(run) / rate
        print(f"episode by episode: {rate:.1f} episodes/s over the first {sampled:,}; "
              f"the whole run ~{baseline:,.0f} s (extrapolated)")
        for label, query in (("rare (an answer)", RARE), ("rare (task prompt only)", RARE_TASK)):
            seconds, found, hits = timed_search(run, query)
            print(f"{label}: {seconds:.2f} s, {found.progress.episodes_parsed} episodes parsed, {hits} hit(s); "
                  f"ratio episode-by-episode / prefiltered: {baseline / seconds:,.0f}x")
        seconds, found, hits = timed_search(run, "answer is", limit=100)
        print(f"common query, first 100 hits: {seconds:.2f} s ({found.progress.episodes_parsed} episodes parsed)")
        for label, expression in (("regular expression with literal text", r"[Zz]anzibar\s+quokka"),
                                  ("regular expression without (every record parsed)", r"\d{7}")):
            found = search.Search(run, expression, regex=True)
            start = time.perf_counter()
            hits = sum(1 for _ in found.hits(seconds=args.baseline_seconds))
            seconds = time.perf_counter() - start
            progress = found.progress
            print(f"{label}: {progress.episodes_parsed:,} episodes parsed in {seconds:.1f} s "
                  f"({progress.episodes_parsed / seconds:,.0f}/s), {progress.files_searched} of {progress.files} "
                  f"files{' (time budget reached)' if progress.stopped == 'time' else ''}, {hits} hit(s)")


if __name__ == "__main__":
    main()
