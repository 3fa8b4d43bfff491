"""The Compare runs page in a real browser: two runs task by task, a lost task picked in the table, and from it the
Compare page on that task's failing attempt against the other run's best."""

from __future__ import annotations

import re
import urllib.parse

import demo_runs
import pytest
from conftest import settled_box
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_lost_task_opens_in_compare_on_the_right_two_episodes(page, app_url, tmp_path, wait_idle):
    ids = demo_runs.write(tmp_path)
    run_a, run_b = str(tmp_path / "run-b"), str(tmp_path / "run-a")  # run-a lost calc-3, which run-b solved
    query = urllib.parse.urlencode({"run": run_a, "other_run": run_b, "show": "lost", "pick": "calc__calc-1"})
    page.goto(f"{app_url}/compare_runs?{query}")
    expect(page.get_by_text("Task calc__calc-1")).to_be_visible()
    expect(page.get_by_text(re.compile(r"3 tasks · 1 lost, 0 gained"))).to_be_visible()

    # The lost list holds one task; picking its row shows it.
    wait_idle(page)
    grid = page.locator('[data-testid="stDataFrame"]')
    grid.scroll_into_view_if_needed()
    expect(grid.locator("[role=gridcell]", has_text="calc__calc-3")).to_have_count(1)
    box = settled_box(page, grid)
    page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)  # the first row's selection cell, below the header
    expect(page.get_by_text("Task calc__calc-3")).to_be_visible()
    expect(page).to_have_url(re.compile(r"pick=calc__calc-3"))

    # One click to Compare: run-a's failed attempt (A) against run-b's solved one (B, from the other run).
    page.get_by_text("Compare run-a's failing attempt with run-b's best").click()
    expect(page).to_have_url(re.compile(r"/compare\?"))
    params = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    assert params["episode"] == [ids["run-a"]["errored"]] and params["other"] == [ids["run-b"]["solved3"]]
    assert params["run"] == [run_b] and params["other_in"] == [run_a]
    expect(page.get_by_text(f"From {run_a}.")).to_be_visible()
