"""The page figures of issue #46 on real episodes, each beside its target: Chromium against a real ``streamlit run``.

Real episodes cost what generated ones do not (long distinct outputs, growing contexts, heredocs, failed steps), so
these runs are written by mini-swe-agent's own agent loop (``testdata.long_episodes``): ``long`` (two attempts at one
task, 188 and 176 steps, and a 115-step episode), ``small-a`` and ``small-b`` (11 episodes each, of the same tasks);
and the public real run in ``../shared/real-runs/`` where it is present. Timed, each the best of ``--repeat``:

- the Episode page of the 115-step episode at its middle step in a new tab (a new Streamlit session in a window
  whose tabs share an HTTP cache; the episode parsed by the first), to its step drawn (content) and to Streamlit
  idle; the first, cold open too (the server's parse, the window's empty HTTP cache);
- the bound of that page in a new tab: a page of the same elements in the same layout (59 element containers, 30
  vertical blocks, 22 columns, 2 expanders, a form, as the Episode page draws the 115-step episode's middle step),
  with fixed content, no run read and no component (``bench_targets.like_episode``), opened in new tabs of the
  same window in turn with the Episode page's; the Episode page's new-tab figures are printed also as ratios to it
  (what a Streamlit page of that many elements costs in a new tab here, whatever its code does);
- the next step with ``j``, from the key press to the next step drawn and idle;
- the Overview of ``small-a`` (11 episodes) and of the public real run: to its figures (content), to every chart
  drawn (its SVG image decoded; Plotly's SVG in each chart of an app from before #46's SVG charts) and to idle;
- Compare of the two ~180-step attempts: cold (a fresh server: nothing parsed or aligned) and warm: again in a new
  tab, and followed as a user reaches it, by the "Compare with ..." link of the first attempt's Episode page (the
  app's own navigation, in the same tab: the session and its websocket kept); to the aligned table drawn and idle;
- Compare runs, ``small-a`` against ``small-b``, to its charts drawn and to idle;
- the floor: a one-element Streamlit page served the same way (what no page can beat), followed in the same tab and
  in a new tab; and when a new tab's websocket to the server opened (nothing a page sends can show before it:
  until then a new tab loads and runs Streamlit's own scripts); and a fragment of one button and the marker rerun
  by the button's click, as ``j`` reruns the Episode page's step panes. Every figure is printed also as a ratio to
  the floor of its kind (a figure in a new tab to the new tab's, ``j`` to the rerun's), which holds across machines
  and loads better than seconds do; a page in a new tab prints when its websocket opened too.

Run: ``python3 -m benchmarks.bench_real_pages [--runs DIR] [--repeat 3]`` (``--runs``: keep the written runs there
and reuse them; writing them takes a minute or more on a quiet machine).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator

from benchmarks import bench_targets, chromium
from testdata import app_server

_METRIC = "[data-testid=\"stMetric\"], [data-ares-figure]"
_ALIGNED = "aligned (rows|steps)"  # Compare's caption over its aligned table
# every chart on the page drawn, at least ``n`` of them, and Streamlit idle: a Plotly chart (Compare runs; the
# Overview before #46) once Plotly's SVG is in it, an SVG chart drawn on the server (the Overview,
# ``svg_plots.html``) once its image is decoded
_CHARTS = """(n) => {
  const plotly = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  const drawn = [...document.querySelectorAll('.ares-chart img')];
  return plotly.length + drawn.length >= n && plotly.every(c => c.querySelector('.main-svg') !== null)
    && drawn.every(i => i.complete && i.naturalWidth > 0)
    && IDLE_EXPRESSION;
}""".replace("IDLE_EXPRESSION", app_server.IDLE_EXPRESSION)


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


# When the page's websocket to the server opened, in ms from its navigation's start: nothing a Streamlit page draws
# can come before it (the server sends the page only through it). In a new tab it comes after the tab has loaded and
# run Streamlit's scripts, which is most of a new tab's floor.
_WS_OPEN = """(() => {
  const Base = window.WebSocket;
  window.WebSocket = class extends Base {
    constructor(...args) {
      super(...args);
      this.addEventListener("open", () => { window.__aresWsOpen ??= performance.now(); });
    }
  };
})();"""


def _tab(window):
    """A new tab of ``window`` (``_tabs``), recording when its websocket opened (``_opened``)."""
    tab = window.new_page()
    tab.set_default_timeout(300_000)
    tab.add_init_script(_WS_OPEN)
    return tab


def _opened(tab) -> float:
    """Seconds from the last navigation of ``tab`` (a ``_tab``) to its websocket's opening."""
    return tab.evaluate("window.__aresWsOpen") / 1000


def new_tabs(window, link: str, repeat: int, selector: str | None = None, *, text: str | None = None) -> list:
    """``link`` opened in ``repeat`` new tabs of ``window`` (after one more that fills the window's HTTP cache, not
    counted): for each, ``((content, idle), Chromium CPU seconds, websocket opened)``."""
    return in_turn(window, [(link, selector, text)], repeat)[0]


def in_turn(window, pages: list[tuple[str, str | None, str | None]], repeat: int) -> list[list]:
    """Each of ``pages`` (link, CSS selector, text: as ``chromium.shown`` takes them) opened in a new tab of
    ``window``, one after the other, ``repeat`` times (after a first round that fills the window's HTTP cache, not
    counted): what ``new_tabs`` returns, for each page. Pages measured in turn share the machine's load."""
    timed: list[list] = [[] for _ in pages]
    for _ in range(repeat + 1):
        for figures, (link, selector, text) in zip(timed, pages, strict=True):
            tab = _tab(window)
            took, cpu = _with_cpu(tab, lambda tab=tab, link=link, selector=selector, text=text:
                                  chromium.shown(tab, link, selector, text=text))
            figures.append((took, cpu, _opened(tab)))
            tab.close()
    return [figures[1:] for figures in timed]


def _cpu(page) -> float:
    """CPU seconds every process of ``page``'s Chromium has spent so far (``SystemInfo.getProcessInfo``)."""
    browser = page.context.browser
    session = getattr(browser, "_ares_cpu_session", None)
    if session is None:
        session = browser._ares_cpu_session = browser.new_browser_cdp_session()
    return sum(p["cpuTime"] for p in session.send("SystemInfo.getProcessInfo")["processInfo"])


def _with_cpu(page, measure):
    """``measure()``'s result and the CPU seconds Chromium spent meanwhile."""
    before = _cpu(page)
    result = measure()
    return result, _cpu(page) - before


def episode_figures(page, url: str, episode: str, steps: int, repeat: int, bound: str | None = None) -> list[tuple]:
    """The Episode page of ``episode`` at its middle step in a new tab (cold once, then best of ``repeat``), and
    ``j``; with ``bound`` (the URL of ``bound_served``), the bound page in new tabs of the same window, in turn with
    the Episode page's."""
    mid = steps // 2
    link = f"{url}/episode?run=long&episode={episode}&step={mid}"
    marker = f"[data-ares-step='{mid}']"
    window = _tabs(page)
    tab = _tab(window)  # the first open: the server parses the episode, the window's HTTP cache is empty
    cold = _with_cpu(tab, lambda: chromium.shown(tab, link, marker))
    tab.close()
    warm, *beside = in_turn(window, [(link, marker, None), *([(f"{bound}/p", _BOUND_MARKER, None)] if bound else [])],
                            repeat)
    nexts = [_with_cpu(page, lambda: bench_targets.next_step(page, link, mid)) for _ in range(repeat)]
    # (next_step settles the page before it presses j: its CPU is that of the whole measurement, an upper bound)
    name = f"Episode page, {steps}-step episode, new tab"
    cpu = min(c for _, c, _ in warm)
    rows = [(f"{name}, first open: content", cold[0][0], None, None),
            (f"{name}, first open: idle", cold[0][1], None, cold[1])]
    for timed in beside:
        rows += [(f"{BOUND}: websocket open", min(o for _, _, o in timed), None, None),
                 (f"{BOUND}: content", min(t[0] for t, _, _ in timed), None, None),
                 (f"{BOUND}: idle", min(t[1] for t, _, _ in timed), None, min(c for _, c, _ in timed))]
    return [*rows,
            (f"{name}: websocket open", min(o for _, _, o in warm), None, None),
            (f"{name}: content", min(t[0] for t, _, _ in warm), 0.5, None),
            (f"{name}: idle", min(t[1] for t, _, _ in warm), 1.0, cpu),
            ("next step with j, to drawn and idle", min(t for t, _ in nexts), 0.3, None)]


@contextlib.contextmanager
def bound_served(env: dict[str, str], work: pathlib.Path, steps: int = 115,
                 repo: pathlib.Path = chromium.REPO) -> Iterator[str]:
    """The URL of a server of the Episode page's bound: a page of its elements at the middle step of a
    ``steps``-step episode, in its layout, with fixed content, no run read and no component
    (``bench_targets.like_episode``), at ``/p`` (its step marker ``_BOUND_MARKER``) of a two-page app."""
    script = work / "like_episode.py"
    script.write_text(bench_targets.like_episode(steps))
    entry = work / "like_paths.py"
    entry.write_text(bench_targets.at_path(script))
    with chromium.served(env, work / "bound.log", script=str(entry), repo=repo) as url:
        yield url


BOUND = "bound: the Episode page's elements, new tab"
_BOUND_MARKER = "[data-ares-step='1']"
_EPISODE = "Episode page, 115-step episode, new tab"


def against_bound(rows: list[tuple]) -> str:
    """The Episode page's new-tab figures as ratios to the bound page's, measured in turn in the same window."""
    found = {name: (seconds, cpu) for name, seconds, _, cpu in rows}
    if f"{BOUND}: idle" not in found or f"{_EPISODE}: idle" not in found:
        return ""
    (content, _), (idle, cpu) = found[f"{_EPISODE}: content"], found[f"{_EPISODE}: idle"]
    (b_content, _), (b_idle, b_cpu) = found[f"{BOUND}: content"], found[f"{BOUND}: idle"]
    return (f"{'Episode page / its bound, new tab':<58} content {content / b_content:5.2f}x, idle "
            f"{idle / b_idle:5.2f}x, Chromium CPU {cpu / b_cpu:5.2f}x")


def from_episode(page, url: str, run: str, ids: tuple[str, str]) -> tuple[float, float]:
    """Compare of ``ids`` as a user reaches it: the Episode page of the first, settled, then its "Compare with ..."
    link (the best other attempt at the task, which must be the second), followed within the app."""
    chromium.shown(page, f"{url}/episode?run={run}&episode={ids[0]}&step=1", "[data-ares-step='1']")
    timed = chromium.followed(page, "^Compare with", text=_ALIGNED)
    other = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query).get("other")
    if other != [ids[1]]:
        raise RuntimeError(f"the Episode page's Compare link opened {page.url}, not {ids[1]}")
    return timed


def compare_figures(env: dict[str, str], work: pathlib.Path, ids: tuple[str, str], sizes: str, repeat: int,
                    run: str = "long", repo: pathlib.Path = chromium.REPO) -> list[tuple]:
    """Compare of two episodes: cold (a fresh server each time), then warm: in a new tab of the last server, and
    followed from the first episode's page in the same tab."""
    link = f"/compare?run={run}&episode={ids[0]}&other={ids[1]}"
    cold, warm, followed = [], [], []
    for n in range(repeat):
        with chromium.served_page(env, work / f"compare-{run}-{n}.log", repo=repo) as (page, url):
            cold.append(_with_cpu(page, lambda: chromium.shown(page, url + link, text=_ALIGNED)))
            if n == repeat - 1:
                warm = new_tabs(_tabs(page), url + link, repeat, text=_ALIGNED)
                followed = [from_episode(page, url, run, ids) for _ in range(repeat)]
    name = f"Compare {sizes} ({run})"
    return [(f"{name}, cold: content", min(t[0] for t, _ in cold), 3.0, None),
            (f"{name}, cold: idle", min(t[1] for t, _ in cold), None, min(c for _, c in cold)),
            (f"{name}, warm, new tab: websocket open", min(o for _, _, o in warm), None, None),
            (f"{name}, warm, new tab: content", min(t[0] for t, _, _ in warm), 0.5, None),
            (f"{name}, warm, new tab: idle", min(t[1] for t, _, _ in warm), None, min(c for _, c, _ in warm)),
            (f"{name}, warm, by its link: content", min(t[0] for t in followed), 0.5, None),
            (f"{name}, warm, by its link: idle", min(t[1] for t in followed), None, None)]


def page_figures(env: dict[str, str], work: pathlib.Path, real: str | None, repeat: int,
                 repo: pathlib.Path = chromium.REPO) -> list[tuple]:
    """Episode page, ``j``, the overviews and Compare runs, on one server."""
    rows = []
    with chromium.served_page(env, work / "pages.log", repo=repo) as (page, url), \
            bound_served(env, work, repo=repo) as bound:
        chromium.shown(page, f"{url}/?run=small-a", _METRIC)  # the server's imports, once
        chromium.shown(page, f"{bound}/p", _BOUND_MARKER)  # its first run
        rows += episode_figures(page, url, "long/acme__parser-2210", 115, repeat, bound)
        for run, charts in (("small-a", 4), *(((real, 2),) if real else ())):  # small-a: its four reward charts
            timed = [_with_cpu(page, lambda run=run, charts=charts: timed_charts(page, f"{url}/?run={run}", charts,
                                                                                  _METRIC)) for _ in range(repeat)]
            rows += [(f"Overview of {run}: figures", min(t[0] for t, _ in timed), None, None),
                     (f"Overview of {run}: charts drawn", min(t[1] for t, _ in timed), 1.0, None),
                     (f"Overview of {run}: idle", min(t[2] for t, _ in timed), None, min(c for _, c in timed))]
        timed = [_with_cpu(page, lambda: timed_charts(page, f"{url}/compare_runs?run=small-a&other_run=small-b", 2))
                 for _ in range(repeat)]
        rows += [("Compare runs small-a / small-b: charts drawn", min(t[1] for t, _ in timed), None, None),
                 ("Compare runs small-a / small-b: idle", min(t[2] for t, _ in timed), None, min(c for _, c in timed))]
    return rows


def profiles(env: dict[str, str], work: pathlib.Path, folder: pathlib.Path, only: str | None) -> None:
    """A CPU profile and timeline trace of each slow page, once settled (``browser_profile``), written to ``folder``
    and printed: the floor page, the Episode page in a new tab and ``j``, the Overview of ``small-a``, Compare cold
    and warm."""
    from benchmarks import browser_profile

    floor_script = work / "floor.py"
    floor_script.write_text(bench_targets._served("st.html('<div data-ares-step=\"1\"></div>')"))
    with chromium.served_page(env, work / "floor-profile.log", script=str(floor_script)) as (page, url):
        chromium.shown(page, url, "[data-ares-step='1']")
        page.goto("about:blank")
        with browser_profile.recorded(page) as record:
            chromium.shown(page, url, "[data-ares-step='1']")
        print(browser_profile.write(folder, "floor page", record), flush=True)
    if only in (None, "pages"):
        _profile_bound(env, work, folder)
        _profile_pages(env, work, folder)
    if only in (None, "compare"):
        _profile_compare(env, work, folder)


def _profile_bound(env: dict[str, str], work: pathlib.Path, folder: pathlib.Path) -> None:
    """``profiles`` of the Episode page's bound (``bound_served``) in a new tab."""
    from benchmarks import browser_profile

    with bound_served(env, work) as url, chromium.served_page(env, work / "bound-profile.log") as (page, _):
        window = _tabs(page)
        for _ in range(2):  # the window's HTTP cache filled
            tab = _tab(window)
            chromium.shown(tab, url + "/p", _BOUND_MARKER)
            tab.close()
        tab = _tab(window)
        with browser_profile.recorded(tab) as record:
            chromium.shown(tab, url + "/p", _BOUND_MARKER)
        print(browser_profile.write(folder, "bound of the Episode page, new tab, to idle", record), flush=True)


def _profile_pages(env: dict[str, str], work: pathlib.Path, folder: pathlib.Path) -> None:
    """``profiles`` of the Episode page in a new tab, ``j`` and the Overview of ``small-a``."""
    from benchmarks import browser_profile

    with chromium.served_page(env, work / "pages-profile.log") as (page, url):
        chromium.shown(page, f"{url}/?run=small-a", _METRIC)
        mid = 115 // 2
        link = f"{url}/episode?run=long&episode=long/acme__parser-2210&step={mid}"
        window = _tabs(page)
        for _ in range(2):  # the episode parsed, the window's HTTP cache filled
            tab = _tab(window)
            chromium.shown(tab, link, f"[data-ares-step='{mid}']")
            tab.close()
        tab = _tab(window)
        with browser_profile.recorded(tab) as record:
            chromium.shown(tab, link, f"[data-ares-step='{mid}']")
        print(browser_profile.write(folder, "Episode page, 115 steps, new tab, to idle", record), flush=True)
        chromium.shown(tab, link, f"[data-ares-step='{mid}']")
        tab.wait_for_function(bench_targets._TIMELINE, arg=mid)  # settled, as bench_targets.next_step does
        tab.wait_for_function("window.__aresViewerKeys === true")
        tab.evaluate("document.activeElement && document.activeElement.blur()")
        with browser_profile.recorded(tab) as record:
            tab.keyboard.press("j")
            chromium.wait(tab, f"[data-ares-step='{mid + 1}']", visible=False)
            tab.wait_for_function(chromium.IDLE)
        print(browser_profile.write(folder, "j, next step, to idle", record), flush=True)
        timed_charts(page, f"{url}/?run=small-a", 4, _METRIC)
        with browser_profile.recorded(page) as record:
            timed_charts(page, f"{url}/?run=small-a", 4, _METRIC)
        print(browser_profile.write(folder, "Overview of small-a, to charts drawn and idle", record), flush=True)


def _profile_compare(env: dict[str, str], work: pathlib.Path, folder: pathlib.Path) -> None:
    """``profiles`` of Compare of the two ~180-step attempts, cold (a fresh server) and warm (a new tab)."""
    from benchmarks import browser_profile

    link = "/compare?run=long&episode=attempt-1/acme__widgets-4127&other=attempt-2/acme__widgets-4127"
    with chromium.served_page(env, work / "compare-profile.log") as (page, url):
        page.goto("about:blank")
        with browser_profile.recorded(page) as record:
            chromium.shown(page, url + link, text=_ALIGNED)
        print(browser_profile.write(folder, "Compare 188 x 176, cold, to idle", record), flush=True)
        window = _tabs(page)
        tab = _tab(window)
        chromium.shown(tab, url + link, text=_ALIGNED)
        tab.close()
        tab = _tab(window)
        with browser_profile.recorded(tab) as record:
            chromium.shown(tab, url + link, text=_ALIGNED)
        print(browser_profile.write(folder, "Compare 188 x 176, warm, new tab, to idle", record), flush=True)
        ids = ("attempt-1/acme__widgets-4127", "attempt-2/acme__widgets-4127")
        from_episode(tab, url, "long", ids)
        chromium.shown(tab, f"{url}/episode?run=long&episode={ids[0]}&step=1", "[data-ares-step='1']")
        with browser_profile.recorded(tab) as record:
            chromium.followed(tab, "^Compare with", text=_ALIGNED)
        print(browser_profile.write(folder, "Compare 188 x 176, warm, by its link, to idle", record), flush=True)


@dataclasses.dataclass(frozen=True)
class Floor:
    """The least a Streamlit page costs here: one marker element, to idle (seconds, and Chromium's CPU seconds),
    followed in the same tab (``same_tab``) and in a new tab (``new_tab``); and when a new tab's websocket opened
    (``opened``), before which no page can show anything of its own; and reached by a link of another page of the
    app (``by_link``: the app's own navigation, its session kept; seconds only)."""

    same_tab: tuple[float, float]
    new_tab: tuple[float, float]
    opened: float
    by_link: tuple[float, float]
    rerun: tuple[float, float]
    """A fragment of one button and the marker rerun by the button's click, as ``j`` reruns the Episode page's
    step panes (its script clicks the step's button): to the next marker and idle."""

    def of(self, figure: str) -> tuple[float, float]:
        """The floor ``figure`` is measured against: the new tab's for a figure in a new tab, the link's for one
        reached by a link, the fragment's rerun for ``j``."""
        if "new tab" in figure:
            return self.new_tab
        return self.by_link if "by its link" in figure else self.rerun if "with j" in figure else self.same_tab


# The rerun floor's page: a fragment whose button's click (its callback) moves the marker on by one.
_RERUN_FLOOR = ("st.fragment(lambda: (st.button('next', key='next', on_click=lambda: st.session_state.update("
                "n=st.session_state.get('n', 1) + 1)), st.html(f\"<div data-ares-step='{st.session_state.get('n', 1)}'>"
                "</div>\")))()")


def _reruns(page, repeat: int) -> list[tuple[float, float]]:
    """The rerun floor: seconds from the button's click (by script, as ``j``'s) to the next marker drawn and idle,
    and Chromium's CPU seconds meanwhile; ``repeat`` times, after one untimed."""
    timed = []
    for n in range(1, repeat + 2):
        def clicked(n: int = n) -> float:
            start = time.perf_counter()
            page.evaluate("document.querySelector('.st-key-next button').click()")
            chromium.wait(page, f"[data-ares-step='{n + 1}']", visible=False)
            page.wait_for_function(chromium.IDLE)
            return time.perf_counter() - start
        timed.append(_with_cpu(page, clicked))
    return timed[1:]


def floor(env: dict[str, str], work: pathlib.Path, repeat: int) -> Floor:
    """The floor page (``Floor``), each figure the best of ``repeat``."""
    script = work / "floor.py"
    script.write_text(bench_targets._served("st.html('<div data-ares-step=\"1\"></div>')"))
    marker = "[data-ares-step='1']"
    with chromium.served_page(env, work / "floor.log", script=str(script)) as (page, url):
        chromium.shown(page, url, marker)
        timed = [_with_cpu(page, lambda: chromium.shown(page, url, marker)) for _ in range(repeat)]
        tabs = new_tabs(_tabs(page), url, repeat, marker)
    # the same page at /p of a two-page app, reached by the home page's link to it
    pages = work / "floor_pages.py"
    pages.write_text(bench_targets._served(
        f"p = st.Page({str(script)!r}, url_path='p', title='p'); st.navigation([st.Page(lambda: "
        "st.page_link(p, label='to the floor page'), title='home', default=True), p]).run()"))
    with chromium.served_page(env, work / "floor_pages.log", script=str(pages)) as (page, url):
        linked = []
        for _ in range(repeat + 1):  # the first: the server's first run of the page
            chromium.shown(page, url, text="to the floor page")
            linked.append(chromium.followed(page, "^to the floor page$", marker))
    best = min(linked[1:])
    rerun_script = work / "floor_rerun.py"
    rerun_script.write_text(bench_targets._served(_RERUN_FLOOR))
    with chromium.served_page(env, work / "floor_rerun.log", script=str(rerun_script)) as (page, url):
        chromium.shown(page, url, marker)  # to idle
        reruns = _reruns(page, repeat)
    return Floor((min(t[1] for t, _ in timed), min(c for _, c in timed)),
                 (min(t[1] for t, _, _ in tabs), min(c for _, c, _ in tabs)), min(o for _, _, o in tabs),
                 (best[1], float("nan")), (min(t for t, _ in reruns), min(c for _, c in reruns)))


def checkout(rev: str) -> pathlib.Path:
    """This repository at ``rev`` (a commit, branch or tag), exported to a temporary folder, to serve beside it."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ares-bench-before-"))
    archive = subprocess.run(["git", "archive", rev], cwd=chromium.REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=pathlib.Path, help="keep the written runs here (reused when there)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--real", type=pathlib.Path, default=bench_targets.REAL_RUN)
    parser.add_argument("--only", choices=("pages", "compare"), help="measure only these figures")
    parser.add_argument("--before", metavar="REV",
                        help="also serve the app as it was at REV (a commit) and measure each figure for both, in "
                             "turn in the same run, printing after / before")
    parser.add_argument("--profile", type=pathlib.Path, metavar="DIR",
                        help="instead of timing, profile each slow page in Chromium once (CPU profile, main thread "
                             "by kind of work, websocket bytes) and write the summaries and .cpuprofile files to DIR")
    args = parser.parse_args()

    measure(args.runs, args.real, args.repeat, args.only, profile=args.profile, before=args.before)


def _figures(env: dict[str, str], work: pathlib.Path, real: str | None, repeat: int, only: str | None,
             repo: pathlib.Path) -> list[tuple]:
    rows: list[tuple] = []
    if only in (None, "pages"):
        rows += page_figures(env, work, real, repeat, repo=repo)
    if only in (None, "compare"):
        rows += compare_figures(env, work, ("attempt-1/acme__widgets-4127", "attempt-2/acme__widgets-4127"),
                                "188 x 176", repeat, repo=repo)
    return rows


def _cells(seconds: float, cpu: float | None, base: tuple[float, float]) -> str:
    """Seconds and CPU seconds, each also as a ratio to ``base`` (the floor it is measured against)."""
    text = f"{seconds:7.3f} s {seconds / base[0]:5.1f}x floor"
    return text + (f" | CPU {cpu:6.2f} s {cpu / base[1]:5.1f}x" if cpu is not None else " |" + " " * 19)


def measure(runs_dir: pathlib.Path | None, real_run: pathlib.Path, repeat: int, only: str | None = None, *,
            profile: pathlib.Path | None = None, before: str | None = None) -> None:
    """Write (or reuse) the runs, time every figure and print each beside its target (and, with ``before``, beside
    the same figure of the app at that commit, measured in turn in the same run)."""
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
    if profile is not None:
        profiles(env, work, profile, only)
        shutil.rmtree(work, ignore_errors=True)
        return
    old = checkout(before) if before else None
    base = floor(env, work, repeat)
    old_rows = _figures(env, work, real, repeat, only, old) if old else None
    rows = _figures(env, work, real, repeat, only, chromium.REPO)
    end_floor = floor(env, work, repeat)  # the machine's load may change meanwhile: the floor again, at the end
    print(f"runs: {source}; Chromium 1500 x 1000; best of {repeat}; load {os.getloadavg()[0]:.1f}; "
          f"CPU: all Chromium processes' CPU seconds to idle")
    print(f"{'floor: a one-element Streamlit page, idle (first, last)':<58} "
          f"{_cells(*base.same_tab, base.same_tab)}   {_cells(*end_floor.same_tab, base.same_tab)}")
    print(f"{'floor, in a new tab (first, last)':<58} "
          f"{_cells(*base.new_tab, base.new_tab)}   {_cells(*end_floor.new_tab, base.new_tab)}")
    print(f"{'floor, new tab: websocket open (first, last)':<58} {base.opened:7.3f} s {'':33}   "
          f"{end_floor.opened:7.3f} s")
    print(f"{'floor, by a link of another page (first, last)':<58} {base.by_link[0]:7.3f} s {'':33}   "
          f"{end_floor.by_link[0]:7.3f} s")
    print(f"{'floor, a fragment rerun by its button (first, last)':<58} "
          f"{_cells(*base.rerun, base.rerun)}   {_cells(*end_floor.rerun, base.rerun)}")
    print(f"{'figure':<58} {'now':^44}" + (f"   {'before (' + before + ')':^44} now/before" if before else ""))
    for n, (name, seconds, target, cpu) in enumerate(rows):
        verdict = "" if target is None else f"target <= {target:g} s: {'ok' if seconds <= target else 'MISSED'}"
        line = f"{name:<58} {_cells(seconds, cpu, base.of(name))}"
        if old_rows:
            _, then, _, then_cpu = old_rows[n]
            line += f"   {_cells(then, then_cpu, base.of(name))} {seconds / then:5.2f}x"
        print(f"{line}   {verdict}")
    for label, figures in (("now", rows), *(((f"before ({before})", old_rows),) if old_rows else ())):
        if said := against_bound(figures):
            print(said.replace("new tab", f"new tab, {label}", 1))
    shutil.rmtree(work, ignore_errors=True)
    if old:
        shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    main()
