"""Pages timed in Chromium: Debian's ``/usr/bin/chromium`` through Playwright's Python API, against a real
``streamlit run`` server on 127.0.0.1 (``testdata.app_server``). Shared by the benchmarks that time pages."""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
import time
from collections.abc import Callable, Iterator, Mapping

from testdata import app_server

REPO = pathlib.Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
IDLE = app_server.IDLE  # the script has finished running


def best(fn: Callable[[], object], repeat: int) -> float:
    """The least seconds of ``repeat`` calls of ``fn`` (a float ``fn`` returns is taken as its own time)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        took = fn()
        times.append(took if isinstance(took, float) else time.perf_counter() - start)
    return min(times)


@contextlib.contextmanager
def served_page(env: Mapping[str, str], log_path: pathlib.Path, *, width: int = 1500, height: int = 1000,
                script: str | None = None, repo: pathlib.Path = REPO) -> Iterator:
    """A Chromium page and the URL of the app (or another Streamlit ``script``) served with ``env`` (``repo``, this
    checkout unless another is named, on ``PYTHONPATH``)."""
    from playwright.sync_api import sync_playwright

    with served(env, log_path, script=script, repo=repo) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(300_000)
        try:
            yield page, url
        finally:
            browser.close()


@contextlib.contextmanager
def served(env: Mapping[str, str], log_path: pathlib.Path, *, script: str | None = None,
           repo: pathlib.Path = REPO) -> Iterator[str]:
    """The URL of the app (or another Streamlit ``script``) served with ``env`` (``repo`` on ``PYTHONPATH``), with no
    browser: beside a ``served_page``'s, to open pages of both in one browser."""
    script = script or str(repo / "app" / "main.py")
    env = {**env, "PYTHONPATH": str(repo)}
    with open(log_path, "w+b") as log, app_server.served(env, log, script=script, repo=repo) as (url, _):
        yield url


# Whether a CSS selector's element is on the page (``visible``: and shown), or a text matching a regular expression
# (``text``) is. Playwright's own waits (``wait_for_selector``, a locator's ``wait_for``) look again after 0, 20, 50,
# 100, 100 ms and then only every 500 ms, so an element drawn 0.3 s in was reported up to half a second late: these
# checks run at every animation frame (a text every 20 ms). A text is looked for in the page's ``textContent``, which
# costs no layout: ``innerText`` laid the page out at every look, 50 times a second on a page being drawn.
_THERE = """([selector, visible]) => {
  const element = document.querySelector(selector);
  if (!element || !visible) return !!element;
  return element.getClientRects().length > 0 && getComputedStyle(element).visibility !== "hidden";
}"""
_TEXT = "(pattern) => new RegExp(pattern).test(document.body ? document.body.textContent : '')"


def wait(page, selector: str | None = None, *, text: str | None = None, visible: bool = True) -> None:
    """Until ``selector`` (CSS) is on the page (and, with ``visible``, shown), or a text matches ``text``."""
    if text is not None:
        page.wait_for_function(_TEXT, arg=text, polling=20)
    else:
        page.wait_for_function(_THERE, arg=[selector, visible], polling="raf")


def shown(page, link: str, selector: str | None = None, *, text: str | None = None) -> tuple[float, float]:
    """Seconds from following ``link`` (from a blank page) to ``selector`` (or ``text``) there and to Streamlit
    idle."""
    page.goto("about:blank")
    start = time.perf_counter()
    page.goto(link)
    # The step view's marker is an empty element: there once drawn, never "visible".
    wait(page, selector, text=text, visible=selector is None or "data-ares-step" not in selector)
    content = time.perf_counter() - start
    page.wait_for_function(IDLE)
    return content, time.perf_counter() - start


def followed(page, name: str, selector: str | None = None, *, text: str | None = None) -> tuple[float, float]:
    """Seconds from a click on the first link whose name matches ``name`` (a regular expression) on the page as it
    is, to ``selector`` (or ``text``) and to Streamlit idle: the app's own navigation between its pages, which keeps
    the session and its websocket (as a user following a link within the app does)."""
    link = page.get_by_role("link", name=re.compile(name)).first
    link.wait_for(state="visible")
    start = time.perf_counter()
    link.click()
    wait(page, selector, text=text, visible=selector is None or "data-ares-step" not in selector)
    content = time.perf_counter() - start
    page.wait_for_function(IDLE)
    return content, time.perf_counter() - start


# When each of some elements first reached the page, in ms from the navigation's start: recorded by the page
# itself (a MutationObserver), so a main thread busy drawing something else does not delay the reading.
_FIRST_SEEN = """(selectors) => {
  window.__aresSeen = {};
  const check = () => {
    for (const [name, selector] of Object.entries(selectors))
      if (!(name in window.__aresSeen) && document.querySelector(selector))
        window.__aresSeen[name] = performance.now();
  };
  // a class set on an element already there (the step list's current row) counts when it is set
  new MutationObserver(check).observe(document, {subtree: true, childList: true, attributes: true,
                                                 attributeFilter: ["class"]});
}"""


def record_first_seen(page, selectors: Mapping[str, str]) -> None:
    """From the next navigation on, record when each of ``selectors`` (name -> CSS selector) first appears."""
    page.add_init_script(f"({_FIRST_SEEN})({json.dumps(dict(selectors))})")


def first_seen(page) -> dict[str, float]:
    """Seconds from the last navigation's start to each recorded element's first appearance (those seen)."""
    return {name: ms / 1000 for name, ms in (page.evaluate("window.__aresSeen || {}") or {}).items()}
