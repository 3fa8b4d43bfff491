"""The Files page in a real browser: from a step of the episode view to the diff of the file the agent edited.

Uses the bundled sample run: in pager-solved, action 2 fixes both off-by-one errors in ``pager/paging.py``.
"""

from __future__ import annotations

import re
import time
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


def _tree_paths(page) -> list[str]:
    """The path column of the change tree, as the grid's accessible cells give it (indents stripped)."""
    cells = page.locator('[data-testid="stDataFrame"] [role=row]').locator("[role=gridcell]:first-of-type")
    return [text.replace("\u2003", "").strip() for text in cells.all_inner_texts()]


def _click_tree_row(page, wait_idle, text: str) -> None:
    """Click the tree row showing ``text``, once the page is idle and the (re-mounted) grid shows that row."""
    wait_idle(page)
    deadline = time.monotonic() + 15
    while text not in (paths := _tree_paths(page)):
        assert time.monotonic() < deadline, f"{text!r} is not a row of the tree: {paths}"
        page.wait_for_timeout(200)
    grid = page.locator('[data-testid="stDataFrame"]')
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 12, box["y"] + 35 + 35 * paths.index(text) + 17)  # the row's selection cell


def test_change_tree_opens_and_closes_folders_and_picks_files(page, app_url, sample_run, wait_idle):
    page.goto(f"{app_url}/files?run={sample_run}&episode={PAGER_SOLVED}&old=base&step=2")
    expect(page.get_by_text("base image → step 2", exact=False).first).to_be_visible()
    expect(page.locator('[data-testid="stDataFrame"] [role=gridcell]', has_text="items.csv")).to_have_count(1)
    paths = _tree_paths(page)
    # The repository folder is open with its folders first; .git (changed by every commit) starts closed.
    assert paths[:3] == ["▾ /testbed/", "▸ .git/", "▾ data/"], paths
    assert "paging.py" in paths and "index" not in paths

    # Picking a file row shows that file; the URL names it.
    _click_tree_row(page, wait_idle, "paging.py")
    expect(page).to_have_url(re.compile(rf"file={re.escape(urllib.parse.quote(PAGING, safe=''))}"))
    expect(page.locator('[data-testid="stCode"]', has_text="+    return -(-n_items // per_page)")).to_be_visible()

    # Picking a folder row opens it (its rows appear) and picking it again closes it; the file stays shown.
    _click_tree_row(page, wait_idle, "▸ .git/")
    expect(page.locator('[data-testid="stDataFrame"] [role=gridcell]', has_text="▾ .git/")).to_have_count(1)
    assert "index" in _tree_paths(page) and "COMMIT_EDITMSG" in _tree_paths(page)
    _click_tree_row(page, wait_idle, "▾ .git/")
    expect(page.locator('[data-testid="stDataFrame"] [role=gridcell]', has_text="▸ .git/")).to_have_count(1)
    assert "index" not in _tree_paths(page)
    page.get_by_role("button", name="Close all folders").click()
    expect(page.locator('[data-testid="stDataFrame"] [role=gridcell]', has_text="▸ /testbed/")).to_have_count(1)
    assert _tree_paths(page) == ["▸ /testbed/"]
    expect(page).to_have_url(re.compile(r"file=.*paging\.py"))


def test_the_download_buttons_show_their_whole_labels(page, app_url, sample_run):
    """Each patch button names the two sides it diffs; at 1400 px the label is shown whole, not cut short."""
    page.goto(f"{app_url}/files?run={sample_run}&episode={PAGER_SOLVED}&step=4&old=base")
    buttons = page.locator('[data-testid="stDownloadButton"]')
    expect(buttons.filter(has_text="Download the patch (base image → step 4)")).to_be_visible()
    expect(buttons.filter(has_text="Download the whole episode's patch (step 0 → step 4)")).to_be_visible()
    cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stDownloadButton"]')]
        .filter(b => [b, ...b.querySelectorAll('*')].some(e => e.clientWidth > 1 && e.scrollWidth > e.clientWidth + 1))
        .map(b => b.innerText)""")
    assert cut == []
