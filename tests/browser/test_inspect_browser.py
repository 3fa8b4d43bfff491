"""A folder of Inspect AI logs (written by inspect-ai itself) opened in a real browser: the overview lists every
sample, and a sample opens on the Episode page with its tool calls, reward and the scorer's explanation."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from conftest import TEXT_BLOCK
from playwright.sync_api import expect

import ares_viewer
from testdata import inspect_logs

pytestmark = pytest.mark.browser


def test_a_folder_of_inspect_logs_opens_on_the_overview_and_a_sample_on_the_episode_page(page, app_url, tmp_path,
                                                                                        wait_idle):
    folder = tmp_path / "inspect"
    inspect_logs.write_logs(folder, "eval")
    page.goto(f"{app_url}/home?" + urllib.parse.urlencode({"run": str(folder)}))
    # /home is the overview too (no "Page not found" on the way).
    expect(page.get_by_text("Episodes", exact=True).first).to_be_visible(timeout=30_000)
    expect(page.get_by_text("Page not found")).to_have_count(0)
    expect(page.get_by_text(f"{len(inspect_logs.SAMPLES)} of {len(inspect_logs.SAMPLES)} episodes")).to_be_visible()
    page.locator('[data-testid="stDataFrame"]').last.scroll_into_view_if_needed()
    cells = page.locator('[data-testid="stDataFrame"] [role=gridcell]')
    for name in inspect_logs.SAMPLES:  # one row per sample, in the episode table
        expect(cells.filter(has_text=re.compile(rf"^arith/{name}$"))).to_have_count(1, timeout=30_000)
    expect(page.get_by_text("could not be read")).to_have_count(0)

    rows = ares_viewer.open_run(folder).episodes
    solved = rows.loc[rows["task_name"] == "arith/solve", "episode_id"].iloc[0]
    page.goto(f"{app_url}/episode?" + urllib.parse.urlencode({"run": str(folder), "episode": solved, "step": 1}))
    wait_idle(page)
    # The tool call's command, and the scorer's explanation as the why of the reward.
    expect(page.locator(TEXT_BLOCK, has_text="ls step0").first).to_be_visible(timeout=30_000)
    expect(page.get_by_text(re.compile("the answer contains the target '42'")).first).to_be_visible()
