"""The app's page names its server (``ares_viewer_app.serving.served``): a link to a page at a path connects at once, at
the root or under a proxy's base path, in a real browser against ``streamlit run app/main.py``."""

from __future__ import annotations

import urllib.request

import pytest
from playwright.sync_api import expect

from testdata import app_server

pytestmark = pytest.mark.browser

EPISODE = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # demo-run's pager episode, reward 0, 12 actions


@pytest.fixture
def sample_run(runs_root) -> str:
    if not (runs_root / "demo-run" / f"{EPISODE}.json").is_file():
        pytest.skip("the bundled sample run is not there")
    return "demo-run"


def _opened(page, url: str) -> list[str]:
    """Open the Episode page's step 1 at ``url`` (the app's root URL); the paths the page asked the server for."""
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{url}/episode?run=demo-run&episode={EPISODE}&step=1")
    expect(page.locator("[data-ares-step='1']")).to_be_attached()
    expect(page.get_by_role("button", name="Next")).to_be_visible()
    return asked


def test_a_link_to_a_page_asks_for_the_server_at_the_root_only(page, app_url, sample_run, server_log):
    asked = _opened(page, app_url)
    assert f"{app_url}/_stcore/health" in asked
    assert not [url for url in asked if "/episode/_stcore/" in url]  # no probe under the page's path (a 404)
    assert page.evaluate("window.__streamlit.BACKEND_BASE_URL") == f"{app_url}/"
    # The page and the server's own answers are Streamlit's: the health check, and its scripts, as shipped.
    with urllib.request.urlopen(f"{app_url}/_stcore/health", timeout=10) as answer:
        assert answer.read() == b"ok"
    # What the first page imports was imported once the runtime had started: no cached function found none.
    assert "No runtime found" not in server_log.read_text(errors="replace")


def test_under_a_base_path_the_page_names_it_and_works(page, runs_root, sample_run, tmp_path):
    env = {"ARES_VIEWER_RUNS": str(runs_root), "ARES_VIEWER_CACHE": str(tmp_path / "cache"),
           "ARES_VIEWER_REVIEW_DB": str(tmp_path / "review.sqlite")}
    with open(tmp_path / "streamlit.log", "w+b") as log:
        try:
            with app_server.served(env, log, base_path="viewer") as (url, _):
                assert url.endswith("/viewer")
                asked = _opened(page, url)
                assert page.evaluate("window.__streamlit.BACKEND_BASE_URL") == f"{url}/"
                assert f"{url}/_stcore/health" in asked
                assert not [u for u in asked if "/viewer/episode/_stcore/" in u]
                # A step move goes through the server as usual.
                page.get_by_role("button", name="Next").click()
                expect(page.locator("[data-ares-step='2']")).to_be_attached()
        except app_server.AppStartError as exc:
            pytest.fail(str(exc), pytrace=False)
