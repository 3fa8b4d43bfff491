"""The Overview of ``small-a`` served by this checkout and by another revision side by side, loaded in turn.

``bench_real_pages --before REV`` measures one app after the other, minutes apart: on a shared machine whose load
moves from 2 to 12 meanwhile, its before/after ratios moved from 0.3x to 1.7x for unchanged pages. Here both servers
run at once and one browser loads their Overview alternately (the order swapped each round), so both see the same
load; printed: the median and best of each figure (to the headline figures, to every chart drawn, to idle,
Chromium's CPU seconds, the renderer main thread's CPU seconds from a ``devtools.timeline`` trace: the steadiest
figure on a loaded machine) and their ratio, this checkout over the other.

Run: ``python3 -m benchmarks.bench_overview_ab [--runs DIR] [--rounds 8] [--before main]`` (``--runs``: the runs
``bench_real_pages`` writes, reused when there).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import tempfile

from benchmarks import bench_real_pages, browser_profile, chromium

_FIGURES = ("figures", "charts drawn", "idle", "Chromium CPU", "main thread CPU")


def _load(tab, link: str) -> tuple[float, ...]:
    """Seconds to the figures, to the four charts drawn, to idle, Chromium's CPU seconds meanwhile and the renderer
    main thread's (traced: its tasks' thread time, whatever else runs on the machine)."""
    session = tab.context.new_cdp_session(tab)
    with browser_profile.traced(tab, session, ["devtools.timeline", "disabled-by-default-devtools.timeline"]) as trace:
        times, cpu = bench_real_pages._with_cpu(
            tab, lambda: bench_real_pages.timed_charts(tab, link, 4, bench_real_pages._METRIC))
    session.detach()
    main = browser_profile.main_thread_kinds(trace)["main thread busy (all tasks, CPU)"] / 1000
    return (*times, cpu, main)


def measure(runs_dir: pathlib.Path | None, rounds: int, before: str) -> dict[str, list[tuple[float, ...]]]:
    """Each figure of each round, per app (``now``, ``before``)."""
    from testdata import app_server

    source = bench_real_pages.runs_in(runs_dir)
    work = pathlib.Path(tempfile.mkdtemp(prefix="ares-bench-overview-ab-"))
    (work / "runs").mkdir()
    (work / "runs" / "small-a").symlink_to(source / "small-a")
    env = {"ARES_VIEWER_RUNS": str(work / "runs"), "ARES_VIEWER_CACHE": str(work / "cache")}
    os.environ.update(env)
    import ares_viewer

    ares_viewer.open_run(work / "runs" / "small-a")  # indexed: the pages' figures are not the index's
    old = bench_real_pages.checkout(before)
    found: dict[str, list[tuple[float, ...]]] = {"now": [], "before": []}
    try:
        with (open(work / "before.log", "w+b") as log,
              app_server.served({**env, "PYTHONPATH": str(old)}, log, script=str(old / "app" / "main.py"),
                                repo=old) as (old_url, _),
              chromium.served_page(env, work / "now.log") as (page, url)):
            old_page = page.context.browser.new_page(viewport={"width": 1500, "height": 1000})
            old_page.set_default_timeout(300_000)
            apps = [("now", page, url), ("before", old_page, old_url)]
            for _, tab, where in apps:  # each server's imports and first build, not counted
                bench_real_pages.timed_charts(tab, f"{where}/?run=small-a", 4, bench_real_pages._METRIC)
            for n in range(rounds):
                for name, tab, where in apps[::1 if n % 2 else -1]:
                    found[name].append(_load(tab, f"{where}/?run=small-a"))
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=pathlib.Path, help="the written runs (reused when there)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--before", default="main", metavar="REV")
    args = parser.parse_args()
    found = measure(args.runs, args.rounds, args.before)
    print(f"Overview of small-a, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}; seconds, median / best")
    print(f"{'figure':<14} {'now':>17} {'before (' + args.before + ')':>19} {'now/before':>17}")
    for k, name in enumerate(_FIGURES):
        now, then = [r[k] for r in found["now"]], [r[k] for r in found["before"]]
        median, best = statistics.median(now) / statistics.median(then), min(now) / min(then)
        print(f"{name:<14} {statistics.median(now):8.3f} / {min(now):6.3f} {statistics.median(then):10.3f} / "
              f"{min(then):6.3f} {median:8.2f}x / {best:.2f}x")


if __name__ == "__main__":
    main()
