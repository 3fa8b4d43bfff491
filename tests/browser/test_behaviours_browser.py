"""The Behaviours page and the overview's behaviour filter in a real browser on the bundled sample run: pick a
flag, follow its evidence link to the step; filter the overview's table by a flag and keep it in the URL."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

import ares_viewer
from ares_viewer.analysis import behaviours

pytestmark = pytest.mark.browser

PAGER_EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # puts a symlink under tests/ at step 9, reward 0


@pytest.fixture
def sample_run(runs_root) -> str:
    assert (runs_root / "demo-run" / f"{PAGER_EXPLORER}.json").is_file(), "the bundled sample run is missing"
    return "demo-run"


def test_a_flags_evidence_link_opens_the_episode_at_the_step(page, app_url, sample_run, wait_idle):
    page.goto(f"{app_url}/behaviours?run={sample_run}")
    expect(page.get_by_role("heading", name="Behaviours")).to_be_visible()
    expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(1)
    wait_idle(page)
    picker = page.get_by_role("combobox", name="Episodes with the flag")
    picker.click()
    page.keyboard.type("touched_tests_files")  # the list draws only the options in sight: narrowed to it
    page.get_by_role("option", name="touched_tests_files", exact=True).click()
    expect(picker).to_have_value("touched_tests_files")
    expect(page.get_by_text("/testbed/tests/data (added)")).to_be_visible()
    link = page.get_by_role("link", name=f"{PAGER_EXPLORER} · failed · step 9")
    expect(link).to_have_count(1)
    link.click()
    expect(page).to_have_url(re.compile(rf"/episode\?.*episode={PAGER_EXPLORER}.*step=9"))
    expect(page.locator('[data-testid="stCaptionContainer"]', has_text=re.compile(r"^step 9 \("))).to_be_visible()


def _pick_overview_flag(page, sample_run: str, app_url: str, wait_idle, flag: str, listed: int) -> None:
    """Open the sample run's overview and pick ``flag`` in its Behaviour filter; ``listed`` episodes remain, the
    flag in the URL."""
    page.goto(f"{app_url}/?run={sample_run}")
    expect(page.get_by_text("10 of 10 episodes")).to_be_visible()
    wait_idle(page)
    chooser = page.locator('[data-testid="stMultiSelect"]', has_text="Behaviour")
    chooser.scroll_into_view_if_needed()
    chooser.locator("input").click()
    page.get_by_role("option", name=flag, exact=True).click()
    expect(page.get_by_text(f"{listed} of 10 episodes")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"flag={flag}(&|$)"))


def test_the_overview_filtered_by_a_flag_keeps_it_in_the_url(page, app_url, sample_run, wait_idle):
    _pick_overview_flag(page, sample_run, app_url, wait_idle, "touched_tests", 1)
    page.reload()
    expect(page.get_by_text("1 of 10 episodes")).to_be_visible()


_EPISODE_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _listed_ids(page, expected: set[str]) -> set[str]:
    """The episode ids the overview's table shows, as the grid's accessible cells give them (once it shows
    ``expected``, or what it shows after 15 s)."""
    grid = page.locator('[data-testid="stDataFrame"]').last
    grid.scroll_into_view_if_needed()
    cells = grid.locator("[role=gridcell]")
    deadline = time.monotonic() + 15
    while True:
        # The id is the table's last column: scroll the grid to its right end, where the grid draws it.
        grid.locator(".dvn-scroller").evaluate("s => { s.scrollLeft = s.scrollWidth; }")
        shown = {text.strip() for text in cells.all_inner_texts() if _EPISODE_ID.match(text.strip())}
        if shown == expected or time.monotonic() > deadline:
            return shown
        page.wait_for_timeout(200)


def test_the_overview_lists_exactly_the_flagged_episodes_and_a_reload_keeps_the_flag(
    page, app_url, sample_run, runs_root, wait_idle
):
    _, evidence = behaviours.collect(ares_viewer.open_run(runs_root / sample_run), behaviours.episode_findings)
    flagged = set(evidence.loc[evidence["flag"] == "ran_tests", "episode_id"])
    assert 1 < len(flagged) < 10  # a flag some episodes show and others do not
    _pick_overview_flag(page, sample_run, app_url, wait_idle, "ran_tests", len(flagged))
    wait_idle(page)
    assert _listed_ids(page, flagged) == flagged
    page.reload()
    expect(page.get_by_text(f"{len(flagged)} of 10 episodes")).to_be_visible()
    expect(page.locator('[data-testid="stMultiSelect"]', has_text="Behaviour").get_by_text("ran_tests")).to_be_visible()
    wait_idle(page)
    assert _listed_ids(page, flagged) == flagged
