"""A real Streamlit server and a real Chromium (Debian's, through Playwright) for the browser tests."""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
from collections.abc import Mapping

import demo_runs
import pytest

from testdata import app_server

REPO = pathlib.Path(__file__).resolve().parents[2]
# A text block of the Episode page (``blocks.text_block``): the text itself, without its copy button.
TEXT_BLOCK = ".ares-text pre"

_CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]


def _has_runs(root: pathlib.Path) -> bool:
    return root.is_dir() and any(p.is_dir() and any(p.rglob("*.json")) for p in root.iterdir())


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory) -> pathlib.Path:
    """The bundled sample runs when they are there, else small synthetic runs of the same shape."""
    bundled = REPO / "sample_runs"
    if _has_runs(bundled):
        return bundled
    root = tmp_path_factory.mktemp("runs")
    demo_runs.write(root)
    return root


# The running server's log file (the app_url fixture fills it in).
_SERVER = {}


@pytest.fixture
def server_log(app_url) -> pathlib.Path:
    """The log file of the server behind ``app_url`` (stdout and stderr)."""
    return _SERVER["log"]


@contextlib.contextmanager
def serve_app(runs_root: pathlib.Path, cache: pathlib.Path, review_db: pathlib.Path, log_dir: pathlib.Path,
              env: Mapping[str, str] | None = None):
    """``streamlit run app/main.py`` on a free localhost port with its own cache and review database (and ``env``
    added to its environment); yields its URL and stops it on exit."""
    env = {"ARES_VIEWER_RUNS": str(runs_root), "ARES_VIEWER_CACHE": str(cache), "ARES_VIEWER_REVIEW_DB": str(review_db),
           **(env or {})}
    with open(log_dir / "streamlit.log", "w+b") as log, contextlib.ExitStack() as stack:
        try:
            url, _ = stack.enter_context(app_server.served(env, log))
        except app_server.AppStartError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield url


@pytest.fixture(scope="session")
def app_url(runs_root, tmp_path_factory):
    """``streamlit run app/main.py`` on a free localhost port, until the session ends."""
    log_dir = tmp_path_factory.mktemp("server")
    _SERVER["log"] = log_dir / "streamlit.log"
    with serve_app(runs_root, tmp_path_factory.mktemp("server-cache"), tmp_path_factory.getbasetemp() / "review.sqlite",
                   log_dir) as url:
        yield url


@pytest.fixture(scope="session")
def browser(chromium_path):
    """Debian's Chromium, headless (never a downloaded one)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        try:
            instance = p.chromium.launch(executable_path=chromium_path, args=_CHROMIUM_ARGS)
        except Exception as exc:
            if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
                pytest.fail(f"Chromium did not start: {exc}", pytrace=False)
            pytest.skip(f"Chromium did not start: {exc}")
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    from playwright.sync_api import expect

    # The first page of a fresh server takes seconds (imports, indexing); later ones are quick.
    expect.set_options(timeout=30_000)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto = functools.partial(_goto, page.goto)
    yield page
    context.close()


def _goto(goto, url: str, **kwargs):
    """``page.goto``, again when Chromium aborted the load because the host's network interfaces changed (the
    Docker engine adds and removes a container's interface at any moment; the server on 127.0.0.1 is fine)."""
    from playwright.sync_api import Error

    for attempt in range(3):
        try:
            return goto(url, **kwargs)
        except Error as exc:
            if "ERR_NETWORK_CHANGED" not in str(exc) or attempt == 2:
                raise
    return None


def _wait_idle(page) -> None:
    """Wait until Streamlit has finished running the script (``app_server.IDLE``). A run that an action just
    started reaches the page a moment later, from the server: that moment is waited first, as Streamlit's own
    browser tests do."""
    page.wait_for_timeout(200)
    page.wait_for_function(app_server.IDLE)


def settled_box(page, locator) -> dict:
    """``locator``'s box once the page stops moving it (charts above a table draw after the script ends and
    push it down: a click at an earlier box lands on what is there now)."""
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    for _ in range(50):
        page.wait_for_timeout(200)
        locator.scroll_into_view_if_needed()
        now = locator.bounding_box()
        if now == box:
            return now
        box = now
    return box


def fill_settled(page, box, text: str) -> None:
    """Type ``text`` into ``box`` once the page has settled: a rerun the last click started (a tab change reruns
    the page) redraws the box and drops what was typed, and may not have reached the page yet; so the text is
    typed again until it is still there once the page is idle."""
    for _ in range(10):
        _wait_idle(page)
        box.fill(text)
        page.wait_for_timeout(300)  # time for a pending rerun to reach the page
        _wait_idle(page)
        if box.input_value() == text:
            return
    raise AssertionError(f"the page kept dropping the text typed into {box}")


def enter_settled(page, box, text: str) -> None:
    """Type ``text`` into ``box`` as ``fill_settled`` does and press Enter, then wait for the rerun that sends it
    to be drawn. The rerun reaches the page only after a moment: a key pressed before then met the page mid-run
    (a label's digit key once did nothing at all)."""
    fill_settled(page, box, text)
    box.press("Enter")
    page.wait_for_timeout(300)  # time for the rerun to reach the page
    _wait_idle(page)


def open_expander(page, label: str) -> None:
    """Open the expander whose title holds ``label``, or leave it open. A click on its title toggles it, so the
    click is sent only while the expander shows closed, once it is drawn and the page is idle; and it is checked
    again once the page is idle (a run that was still drawing may have drawn it again)."""
    details = page.locator('[data-testid="stExpander"] details', has=page.locator("summary", has_text=label)).first
    is_open = "d => d.open && !d.querySelector('[data-testid=\"stExpanderDetails\"]').inert"
    for _ in range(5):
        details.wait_for()
        _wait_idle(page)
        if not details.evaluate(is_open):
            details.locator("summary").click()
        page.wait_for_timeout(300)  # time for a pending rerun to reach the page
        _wait_idle(page)
        if details.evaluate(is_open):
            return
    raise AssertionError(f"the expander {label!r} did not stay open")


@pytest.fixture
def wait_idle():
    """``wait_idle(page)``: wait until the page is idle, before acting on it (an input sent while a run still
    draws may be lost). Not a wait for a result: a rerun that has not started yet also looks idle."""
    return _wait_idle
