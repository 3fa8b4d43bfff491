"""The Lost tasks page in a real browser on the planted suite's small part, as ``ares-viewer branch RUN --episodes
failed`` left it (conftest's ``searched_planted_suite``: recorded through real ARES, searched with real containers
and the suite's policy over HTTP): it counts the failed episodes by whether a step is decisive, names the planted
step and its kind in the decisive episode's link, and that link opens the Episode page at that step. The app reads
the branches from the cache folder the command wrote them to, as a user's app would."""

from __future__ import annotations

import re

import pytest
from conftest import serve_app
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.ares]


@pytest.fixture(scope="module")
def planted_app(browser, searched_planted_suite, tmp_path_factory):
    """``(url, searched suite)``: the app serving the searched suite's runs folder, with the search's cache folder.
    Chromium is asked for first (the test asks for the suite through this fixture only), so that without it the
    test stops before the suite is recorded and searched."""
    log_dir = tmp_path_factory.mktemp("planted-server")
    with serve_app(searched_planted_suite.root, searched_planted_suite.cache, log_dir / "review.sqlite",
                   log_dir) as url:
        yield url, searched_planted_suite


def test_the_lost_tasks_page_counts_the_searched_suite_and_opens_the_planted_step(page, planted_app, wait_idle):
    url, s = planted_app
    drop, flat = s.entries["statskit-drop-delete"], s.entries["units-none-reads"]
    run = s.run.name
    page.goto(f"{url}/lost?run={run}")
    expect(page.get_by_role("heading", name="Lost tasks")).to_be_visible()
    wait_idle(page)
    for label, value in (("Failed episodes", "2"), ("Decisive step", "1"), ("No change", "1"),
                         ("Not searched", "0")):
        metric = page.locator('[data-testid="stMetric"]', has_text=label)
        expect(metric.locator('[data-testid="stMetricValue"]')).to_have_text(value)
    expect(page.get_by_text(f"ares-viewer branch {run} --episodes failed")).to_be_visible()
    # one link, for the planted drop; none for the episode with no decisive step
    expect(page.get_by_role("link", name=re.compile(re.escape(flat["episode_id"])))).to_have_count(0)
    link = page.get_by_role("link", name=f"{drop['episode_id']} · drop of 1.00 at step {drop['planted']} (delete)")
    expect(link).to_have_count(1)
    link.click()
    expect(page).to_have_url(re.compile(rf"/episode\?.*episode={drop['episode_id']}.*step={drop['planted']}"))
    expect(page.locator('[data-testid="stCaptionContainer"]',
                        has_text=re.compile(rf"^step {drop['planted']} \("))).to_be_visible()
    expect(page.get_by_text("git rm -q statskit/__init__.py").first).to_be_visible()
