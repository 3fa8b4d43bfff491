"""The Files page in a real browser: from a step of the episode view to the diff of the file the agent edited.

Uses the bundled sample run: in pager-solved, action 2 fixes both off-by-one errors in ``pager/paging.py``.
"""

from __future__ import annotations

import re
import urllib.parse

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PAGER_SOLVED = "7c5d6d73-83f0-4d4c-a772-785a9f5c3580"
PAGING = "/testbed/pager/paging.py"


@pytest.fixture
def sample_run(runs_root) -> str:
    if not (runs_root / "demo-run" / f"{PAGER_SOLVED}.json").is_file():
        pytest.skip("the bundled sample run is not there")
    return "demo-run"


def test_files_changed_link_opens_the_diff_of_the_edited_file(page, app_url, sample_run):
    page.goto(f"{app_url}/episode?run={sample_run}&episode={PAGER_SOLVED}&step=2")
    expect(page.locator('[data-testid="stCaptionContainer"]', has_text=re.compile(r"^step 2 \("))).to_be_visible()

    link = page.get_by_role("link", name="1 file changed at this step")
    expect(link).to_be_visible()
    link.click()

    quoted = re.escape(urllib.parse.quote(PAGING, safe=""))
    expect(page).to_have_url(re.compile(rf"/files\?.*episode={PAGER_SOLVED}"))
    expect(page).to_have_url(re.compile(rf"file={quoted}"))
    expect(page).to_have_url(re.compile(r"step=2"))
    expect(page.get_by_text("step 1 → step 2", exact=False).first).to_be_visible()
    diff = page.locator('[data-testid="stCode"]', has_text="+    return -(-n_items // per_page)")
    expect(diff).to_be_visible()
    expect(diff).to_contain_text("-    return n_items // per_page")
    expect(diff).to_contain_text("+    start = (page - 1) * per_page")

    # Reloading the link shows the same file again; the side-by-side view renders both versions.
    page.reload()
    expect(page.locator('[data-testid="stCode"]', has_text="-(-n_items // per_page)")).to_be_visible()
    page.get_by_text("Side by side", exact=True).click()
    table = page.locator("table", has_text="step 1").filter(has_text="(page - 1) * per_page")
    expect(table.first).to_be_visible()
