"""The Episode page's reader for long episodes in a real browser: find in the episode (typed query, hit count,
next/previous hit, the hit step highlighted in the step list), the transcript paged and folded, and the step list's
commands readable at 1500 px."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from playwright.sync_api import expect

from testdata import app_server, synthetic

pytestmark = pytest.mark.browser

STEPS = 60
# Exactly 60 characters: the step list showed about 12 of them at 1500 px.
COMMAND = "python -m pytest -q tests/test_parser.py::test_nest_brackets"
assert len(COMMAND) == 60


@pytest.fixture(scope="module")
def long_url(tmp_path_factory):
    """A server of one run, ``long``: a 60-action episode with 4,000 to 8,000-character outputs, step 7's command the
    60-character ``COMMAND``, steps 7, 31 and 52 printing a needle. Yields the episode's URL."""
    root = tmp_path_factory.mktemp("reader-runs")
    (root / "long").mkdir()
    doc = synthetic.episode_dict(actions=STEPS, seed=5, output_chars=8_000)
    doc["steps"][7]["action"]["data"][0]["content"] = f"THOUGHT: run it.\n\n```bash\n{COMMAND}\n```"
    for k in (7, 31, 52):
        result = doc["steps"][k]["observation"]["messages"][-1]
        result["content"] = result["content"].replace("<output>\n", f"<output>\nfound the needle ({k})\n", 1)
    synthetic.write_episode(root / "long", doc)
    server = tmp_path_factory.mktemp("reader-server")
    env = {
        "ARES_VIEWER_RUNS": str(root),
        "ARES_VIEWER_CACHE": str(server / "cache"),
        "ARES_VIEWER_REVIEW_DB": str(server / "review.sqlite"),
    }
    # The server directly (not the browser conftest's serve_app: "conftest" is another module beside tests/app).
    with open(server / "streamlit.log", "w+b") as log, app_server.served(env, log) as (url, _):
        yield f"{url}/episode?" + urllib.parse.urlencode({"run": "long", "episode": doc["episode_id"]})


def url_has(page, **params: str) -> None:
    for key, value in params.items():
        expect(page).to_have_url(re.compile(rf"[?&]{key}={re.escape(value)}(&|$)"))


def test_find_in_the_episode_steps_through_hits_marked_in_the_step_list(page, long_url, wait_idle):
    page.goto(long_url + "&step=1")
    box = page.get_by_role("textbox", name="Find in this episode")
    expect(box).to_be_visible()
    wait_idle(page)
    box.fill("needle")
    box.press("Enter")
    url_has(page, find="needle", hit="1", step="7")
    expect(page.get_by_text("Hit 1 of 3")).to_be_visible()
    expect(page.locator("pre[data-ares-hit] mark")).to_have_text("needle")
    # The hit steps are shaded in the step list, the current hit's step is its current row.
    expect(page.locator(".ares-steps tr.hit")).to_have_count(3)
    assert [r.get_attribute("data-step") for r in page.locator(".ares-steps tr.hit").all()] == ["7", "31", "52"]
    expect(page.locator(".ares-steps tr.current[data-step='7']")).to_have_count(1)
    wait_idle(page)
    page.get_by_role("button", name="Next hit").click()
    url_has(page, hit="2", step="31")
    expect(page.get_by_text("Hit 2 of 3")).to_be_visible()
    expect(page.locator(".ares-steps tr.current[data-step='31']")).to_have_count(1)
    expect(page.locator("pre[data-ares-hit]")).to_contain_text("found the needle (31)")
    wait_idle(page)
    page.get_by_role("button", name="Next hit").click()
    url_has(page, hit="3", step="52")
    wait_idle(page)
    page.get_by_role("button", name="Previous hit").click()
    url_has(page, hit="2", step="31")
    expect(page.get_by_text("Hit 2 of 3")).to_be_visible()


def test_the_transcript_pages_and_folds(page, long_url, wait_idle):
    page.goto(long_url + "&view=transcript")
    steps = page.locator("[class*='st-key-episode_read_step_']")
    expect(steps).to_have_count(25)
    expect(page.locator(".st-key-episode_read_step_24")).to_be_visible()
    expect(page.locator(".st-key-episode_read_step_25")).to_have_count(0)
    wait_idle(page)
    page.get_by_role("button", name="Next steps").first.click()
    url_has(page, tpage="2")
    expect(page.locator(".st-key-episode_read_step_25")).to_be_visible()
    expect(steps).to_have_count(25)
    # Long outputs show their head and tail; "Show all" unfolds one of them.
    step = page.locator(".st-key-episode_read_step_26")
    expect(step.get_by_text(re.compile(r"characters, [\d,]+ lines hidden"))).to_have_count(1)
    wait_idle(page)
    step.get_by_role("button", name=re.compile(r"Show all [\d,]+ characters")).click()
    expect(step.get_by_text(re.compile(r"characters, [\d,]+ lines hidden"))).to_have_count(0)
    expect(page.locator(".st-key-episode_read_step_27").get_by_text(re.compile("lines hidden"))).to_have_count(1)


def test_a_60_character_command_reads_whole_in_the_step_list_at_1500_px(browser, long_url, wait_idle):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    try:
        page.goto(long_url + "&step=7")
        expect(page.locator(".ares-steps tr.current[data-step='7']")).to_have_count(1, timeout=30_000)
        wait_idle(page)
        cell = page.locator(".ares-steps tr[data-step='7'] td.command div")
        expect(cell).to_have_text(COMMAND)
        # Inside the list and not cut by its three-line clamp (before: the grid drew it from 212 px to 562 px of a
        # 400 px list, the rest out of sight).
        assert cell.evaluate("c => c.scrollHeight <= c.clientHeight + 1 && c.scrollWidth <= c.clientWidth + 1")
        box, listed = cell.bounding_box(), page.locator(".ares-steps").bounding_box()
        assert box["x"] + box["width"] <= listed["x"] + listed["width"], (box, listed)
        # The whole command is on hover too.
        assert page.locator(".ares-steps tr[data-step='7']").get_attribute("title") == COMMAND
    finally:
        context.close()
