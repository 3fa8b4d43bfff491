"""The Lost tasks page in a real browser on the bundled sample run: reached from the sidebar, it counts the failed
episodes by whether a step is decisive, and a decisive step's link opens the Episode page at that step."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"


def test_the_lost_tasks_page_counts_failed_episodes_and_opens_the_decisive_step(page, app_url, runs_root,
                                                                                 wait_idle):
    assert (runs_root / "demo-run" / ".branches" / WRONG_FIX).is_dir(), "the bundled sample's branches are missing"
    page.goto(f"{app_url}/?run=demo-run")
    wait_idle(page)
    page.get_by_role("link", name="Lost tasks").click()
    expect(page.get_by_role("heading", name="Lost tasks")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/lost\?.*run=demo-run"))
    wait_idle(page)
    for label, value in (("Failed episodes", "4"), ("Decisive step", "1"), ("No change", "0"),
                         ("Not searched", "3")):
        metric = page.locator('[data-testid="stMetric"]', has_text=label)
        expect(metric.locator('[data-testid="stMetricValue"]')).to_have_text(value)
    expect(page.get_by_text("ares-viewer branch demo-run --episodes failed")).to_be_visible()
    link = page.get_by_role("link", name=f"{WRONG_FIX} · drop of 1.00 at step 2 (edit)")
    expect(link).to_have_count(1)
    link.click()
    expect(page).to_have_url(re.compile(rf"/episode\?.*episode={WRONG_FIX}.*step=2"))
    expect(page.locator('[data-testid="stCaptionContainer"]', has_text=re.compile(r"^step 2 \("))).to_be_visible()
