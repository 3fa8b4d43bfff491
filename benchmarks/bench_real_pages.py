"""The page figures of issue #46 on real episodes, each beside its target: Chromium against a real ``streamlit run``.

Real episodes cost what generated ones do not (long distinct outputs, growing contexts, heredocs, failed steps), so
these runs are written by mini-swe-agent's own agent loop (``testdata.long_episodes``): ``long`` (two attempts at one
task, 188 and 176 steps, and a 115-step episode), ``small-a`` and ``small-b`` (11 episodes each, of the same tasks);
and the public real run in ``../shared/real-runs/`` where it is present. Timed, each the best of ``--repeat``:

- the Episode page of the 115-step episode at its middle step in a new tab (a new Streamlit session in a window
  whose tabs share an HTTP cache; the episode parsed by the first), to its step drawn (content) and to Streamlit
  idle; the first, cold open too (the server's parse, the window's empty HTTP cache);
- the next step with ``j``, from the key press to the next step drawn and idle;
- the Overview of ``small-a`` (11 episodes) and of the public real run: to its figures (content), to every chart
  drawn (Plotly's SVG in each chart) and to idle;
- Compare of the two ~180-step attempts: cold (a fresh server: nothing parsed or aligned) and warm (again, in a new
  tab), to the aligned table drawn and to idle;
- Compare runs, ``small-a`` against ``small-b``, to its charts drawn and to idle;
- the floor: a one-element Streamlit page served the same way (what no page can beat): every figure is printed
  also as a ratio to it, which holds across machines and loads better than seconds do.

Run: ``python3 -m benchmarks.bench_real_pages [--runs DIR] [--repeat 3]`` (``--runs``: keep the written runs there
and reuse them; writing them takes a minute or more on a quiet machine).
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import shutil
import tempfile
import time

from benchmarks import bench_targets, chromium

_METRIC = "[data-testid=\"stMetric\"]"  # the Overview's headline figures
# every Plotly chart on the page drawn (its SVG there), at least ``n`` of them, and Streamlit idle
_CHARTS = """(n) => {
  const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  return charts.length >= n && charts.every(c => c.querySelector('.main-svg') !== null)
    && !document.querySelector('[data-testid="stStatusWidget"]');
}"""


def runs_in(folder: pathlib.Path | None) -> pathlib.Path:
    """The written runs (``long``, ``small-a``, ``small-b``) in ``folder`` (written there when missing)."""
    from testdata import long_episodes

    root = folder or pathlib.Path(tempfile.mkdtemp(prefix="ares-bench-real-"))
    done = root / "done"
    if not done.exists():
        start = time.perf_counter()
        shutil.rmtree(root, ignore_errors=True)
        long_episodes.write_runs(root)
        done.write_text(f"{time.perf_counter() - start:.0f} s\n")
    return root


def timed_charts(page, link: str, charts: int, content: str | None = None) -> tuple[float, float, float]:
    """Seconds from following ``link`` to ``content`` (a CSS selector; the charts when None), to ``charts`` charts
    drawn, and to idle."""
    page.goto("about:blank")
    start = time.perf_counter()
    page.goto(link)
    if content is not None:
        chromium.wait(page, content)
    first = time.perf_counter() - start
    page.wait_for_function(_CHARTS, arg=charts, polling="raf")
    drawn = time.perf_counter() - start
    page.wait_for_function(chromium.IDLE)
    return (first if content is not None else drawn), drawn, time.perf_counter() - start


def _tabs(page):
    """A browser window beside ``page``'s, to open new tabs in (``_tab``): its tabs share its HTTP cache, as a
    browser's tabs do, and each is a new Streamlit session."""
    return page.context.browser.new_context(viewport={"width": 1500, "height": 1000})


def _tab(window):
    """A new tab of ``window`` (``_tabs``)."""
    tab = window.new_page()
    tab.set_default_timeout(300_000)
    return tab


def episode_figures(page, url: str, episode: str, steps: int, repeat: int) -> list[tuple]:
    """The Episode page of ``episode`` at its middle step in a new tab (cold once, then best of ``repeat``), and
    ``j``."""
    mid = steps // 2
    link = f"{url}/episode?run=long&episode={episode}&step={mid}"
    marker = f"[data-ares-step='{mid}']"
    times, window = [], _tabs(page)
    for _ in range(repeat + 1):
        tab = _tab(window)
        times.append(chromium.shown(tab, link, marker))
        tab.close()
    cold, warm = times[0], times[1:]

    t_next = chromium.best(lambda: bench_targets.next_step(page, link, mid), repeat)
    name = f"Episode page, {steps}-step episode, new tab"
    return [(f"{name}, first open: content", cold[0], None),
            (f"{name}, first open: idle", cold[1], None),
            (f"{name}: content", min(c for c, _ in warm), 0.5),
            (f"{name}: idle", min(i for _, i in warm), 1.0),
            ("next step with j, to drawn and idle", t_next, 0.3)]


def compare_figures(env: dict[str, str], work: pathlib.Path, ids: tuple[str, str], sizes: str, repeat: int,
                    run: str = "long") -> list[tuple]:
    """Compare of two episodes: cold (a fresh server each time), then warm (a new tab of the last server)."""
    link = f"/compare?run={run}&episode={ids[0]}&other={ids[1]}"
    cold, warm = [], []
    for n in range(repeat):
        with chromium.served_page(env, work / f"compare-{run}-{n}.log") as (page, url):
            cold.append(chromium.shown(page, url + link, text="aligned (rows|steps)"))
            if n == repeat - 1:
                window = _tabs(page)
                for _ in range(repeat + 1):  # the first tab fills the window's HTTP cache: not counted
                    tab = _tab(window)
                    warm.append(chromium.shown(tab, url + link, text="aligned (rows|steps)"))
                    tab.close()
                warm = warm[1:]
    name = f"Compare {sizes} ({run})"
    return [(f"{name}, cold: content", min(c for c, _ in cold), 3.0),
            (f"{name}, cold: idle", min(i for _, i in cold), None),
            (f"{name}, warm: content", min(c for c, _ in warm), 0.5),
            (f"{name}, warm: idle", min(i for _, i in warm), None)]


def page_figures(env: dict[str, str], work: pathlib.Path, real: str | None, repeat: int) -> list[tuple]:
    """Episode page, ``j``, the overviews and Compare runs, on one server."""
    rows = []
    with chromium.served_page(env, work / "pages.log") as (page, url):
        chromium.shown(page, f"{url}/?run=small-a", _METRIC)  # the server's imports, once
        rows += episode_figures(page, url, "long/acme__parser-2210", 115, repeat)
        for run, charts in (("small-a", 2), *(((real, 2),) if real else ())):
            times = [timed_charts(page, f"{url}/?run={run}", charts, _METRIC) for _ in range(repeat)]
            rows += [(f"Overview of {run}: figures", min(t[0] for t in times), None),
                     (f"Overview of {run}: charts drawn", min(t[1] for t in times), 1.0),
                     (f"Overview of {run}: idle", min(t[2] for t in times), None)]
        times = [timed_charts(page, f"{url}/compare_runs?run=small-a&other_run=small-b", 2) for _ in range(repeat)]
        rows += [("Compare runs small-a / small-b: charts drawn", min(t[1] for t in times), None),
                 ("Compare runs small-a / small-b: idle", min(t[2] for t in times), None)]
    return rows


def floor(env: dict[str, str], work: pathlib.Path, repeat: int) -> float:
    """The least a Streamlit page costs here: one marker element, to idle."""
    script = work / "floor.py"
    script.write_text(bench_targets._served("st.html('<div data-ares-step=\"1\"></div>')"))
    with chromium.served_page(env, work / "floor.log", script=str(script)) as (page, url):
        chromium.shown(page, url, "[data-ares-step='1']")
        return min(chromium.shown(page, url, "[data-ares-step='1']")[1] for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=pathlib.Path, help="keep the written runs here (reused when there)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--real", type=pathlib.Path, default=bench_targets.REAL_RUN)
    parser.add_argument("--only", choices=("pages", "compare"), help="measure only these figures")
    args = parser.parse_args()

    measure(args.runs, args.real, args.repeat, args.only)


def measure(runs_dir: pathlib.Path | None, real_run: pathlib.Path, repeat: int, only: str | None = None) -> None:
    """Write (or reuse) the runs, time every figure and print each beside its target."""
    source = runs_in(runs_dir)
    work = pathlib.Path(tempfile.mkdtemp(prefix="ares-bench-real-pages-"))
    runs = work / "runs"
    runs.mkdir()
    for name in ("long", "small-a", "small-b"):
        (runs / name).symlink_to(source / name)
    real = None
    if real_run.is_dir():
        real = "real"
        (runs / real).symlink_to(real_run)
    env = {"ARES_VIEWER_RUNS": str(runs), "ARES_VIEWER_CACHE": str(work / "cache")}
    os.environ.update(env)
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    import ares_viewer

    for name in ("long", "small-a", "small-b", *([real] if real else [])):
        ares_viewer.open_run(runs / name)  # indexed: the pages' figures are not the index's
    base = floor(env, work, repeat)
    rows: list[tuple] = [("floor: a one-element Streamlit page, idle", base, None)]
    if only in (None, "pages"):
        rows += page_figures(env, work, real, repeat)
    if only in (None, "compare"):
        rows += compare_figures(env, work, ("attempt-1/acme__widgets-4127", "attempt-2/acme__widgets-4127"),
                                "188 x 176", repeat)
    print(f"runs: {source}; Chromium 1500 x 1000; best of {repeat}; load {os.getloadavg()[0]:.1f}")
    for name, seconds, target in rows:
        ratio = f"{seconds / base:5.1f}x floor"
        verdict = "" if target is None else f"target <= {target:g} s: {'ok' if seconds <= target else 'MISSED'}"
        print(f"{name:<58} {seconds:7.3f} s  {ratio}   {verdict}")
    shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
