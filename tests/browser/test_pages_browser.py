"""Compare, Search, Files and Review journeys in a real browser on the bundled sample run: what a link or a
reload brings back, and what the page picks by default."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from conftest import enter_settled, settled_box
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PAGER_FAILED = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # pager, reward 0, 12 actions
PAGER_SHORT = "7c5d6d73-83f0-4d4c-a772-785a9f5c3580"  # pager, reward 1, 4 actions (the 62-action one is solved too)
PAGING = "/testbed/pager/paging.py"


@pytest.fixture
def sample_run(runs_root) -> str:
    if not (runs_root / "demo-run" / f"{PAGER_SHORT}.json").is_file():
        pytest.skip("the bundled sample run is not there")
    return "demo-run"


def test_compare_defaults_to_the_shortest_solved_attempt_and_keeps_the_row(page, app_url, sample_run, wait_idle):
    page.goto(f"{app_url}/compare?run={sample_run}&episode={PAGER_FAILED}")
    partner = page.get_by_role("combobox", name="Episode B")
    expect(partner).to_have_value(re.compile(rf"reward 1 · 4 actions · {PAGER_SHORT[:8]}"))
    # The summary names what one attempt did and the other never did.
    expect(page.get_by_text("Only A:", exact=False)).to_be_visible()
    expect(page.get_by_text("deleted files", exact=False).first).to_be_visible()
    # The sentence names the row the page shows first.
    sentence = page.get_by_text(re.compile(r"They diverge at row \d+,")).inner_text()
    row = re.search(r"They diverge at row (\d+),", sentence).group(1)
    expect(page.get_by_role("heading", name=f"Row {row}")).to_be_visible()
    # Both final submissions, side by side.
    expect(page.get_by_text("Final submissions, side by side")).to_be_visible()
    expect(page.locator(".ares-text", has_text="+    start = (page - 1) * per_page").first).to_be_visible()

    # Picking another row names it in the URL; a reload shows that row again.
    wait_idle(page)
    grid = page.locator('[data-testid="stDataFrame"]').first
    box = settled_box(page, grid)
    page.mouse.click(box["x"] + 12, box["y"] + 35 + 35 * 9 + 17)  # the tenth row's selection cell: rows count from 1
    expect(page).to_have_url(re.compile(r"[?&]row=10(&|$)"))
    expect(page.get_by_role("heading", name="Row 10")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Row 10")).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]row=10(&|$)"))


def test_search_finds_the_task_prompt_highlights_and_keeps_the_query(page, app_url, sample_run, wait_idle):
    page.goto(f"{app_url}/search?run={sample_run}&q=skip%20the%20first%20ten")
    expect(page.get_by_role("link", name=re.compile(r"step 0 · task prompt")).first).to_be_visible()
    marked = page.locator("mark", has_text=re.compile("skip the first ten", re.I))
    expect(marked.first).to_be_visible()
    expect(page.get_by_text(re.compile(r"\d+ hit\(s\) in \d+ episode\(s\)"))).to_be_visible()
    # The run's text is shown as text: a query with markup characters is escaped, not rendered.
    box = page.get_by_role("textbox", name="Text or regular expression")
    expect(box).to_have_value("skip the first ten")
    wait_idle(page)
    box.fill("<pr_description>")
    box.press("Enter")
    expect(page).to_have_url(re.compile(r"[?&]q=%3Cpr_description%3E"))
    expect(page.locator("mark", has_text="<pr_description>").first).to_be_visible()
    page.reload()
    expect(page.get_by_role("textbox", name="Text or regular expression")).to_have_value("<pr_description>")
    expect(page.locator("mark", has_text="<pr_description>").first).to_be_visible()


def test_files_view_mode_and_file_round_trip_through_the_url(page, app_url, sample_run, wait_idle):
    page.goto(f"{app_url}/files?run={sample_run}&episode={PAGER_SHORT}&step=2&view=history")
    expect(page.get_by_text("Changed at 2 step(s)")).to_be_visible()
    expect(page.locator('[data-testid="stCode"]', has_text="sed -i").first).to_be_visible()  # the command
    wait_idle(page)
    page.get_by_text("Side by side", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]view=side(&|$)"))
    page.reload()
    table = page.locator("table", has_text="step 1").filter(has_text="(page - 1) * per_page")
    expect(table.first).to_be_visible()
    expect(page).to_have_url(re.compile(r"file=%2Ftestbed%2Fpager%2Fpaging\.py"))
    expect(page.get_by_role("button", name=re.compile(r"Download the patch \(step 1 → step 2\)"))).to_be_visible()


def test_the_reviewer_is_remembered_across_reloads(page, app_url, sample_run, wait_idle):
    page.goto(f"{app_url}/review?run={sample_run}")
    name = page.get_by_role("textbox", name="Your name")
    expect(name).to_have_value("")
    wait_idle(page)
    enter_settled(page, name, "Ada Lovelace")
    page.wait_for_function("() => document.cookie.includes('ares_viewer_reviewer=Ada%20Lovelace')")
    page.reload()
    expect(page.get_by_role("textbox", name="Your name")).to_have_value("Ada Lovelace")
    # Another page, in a new tab of the same browser, knows the name too.
    other = page.context.new_page()
    other.goto(f"{app_url}/episode?run={sample_run}&episode={PAGER_SHORT}&step=2")
    expect(other.get_by_role("textbox", name="Your name")).to_have_value("Ada Lovelace")
    other.close()


def test_no_deprecation_warnings_in_the_server_log(page, app_url, sample_run, wait_idle, server_log):
    """Every page, twice (a rerun), without the server log filling with deprecated-argument warnings."""
    pages = (("overview", page.get_by_role("heading", name="Run overview")),
             (f"episode?episode={PAGER_SHORT}&step=2", page.get_by_role("textbox", name="Your name")),
             (f"files?episode={PAGER_SHORT}&step=2", page.get_by_role("button", name=re.compile("Download the patch"))),
             (f"compare?episode={PAGER_FAILED}", page.get_by_text("Final submissions, side by side")),
             ("groups", page.get_by_text("each group here is the attempts at the same task", exact=False)),
             ("search?q=paginate", page.locator("mark").first),
             ("review", page.get_by_role("textbox", name="Your name")),
             (f"sandbox?episode={PAGER_SHORT}&step=0", page.get_by_role("button", name="Restore")))
    for path, last in pages:
        separator = "&" if "?" in path else "?"
        for _ in range(2):
            page.goto(f"{app_url}/{path}{separator}run={sample_run}")
            expect(last).to_be_visible()
            wait_idle(page)
    text = server_log.read_text(errors="replace")
    # Streamlit logs "Please replace `x` with `y`. `x` will be removed after …" (the word "deprecated" is rare).
    marks = ("deprecat", "please replace", "will be removed")
    warnings = [line for line in text.splitlines() if any(mark in line.lower() for mark in marks)]
    assert not warnings, "\n".join(warnings[:10])


def test_the_episode_chooser_finds_an_episode_by_typed_text(page, app_url, sample_run, wait_idle):
    page.goto(f"{app_url}/episode?run={sample_run}&episode={PAGER_FAILED}&step=1")
    chooser = page.get_by_role("combobox", name="Episode")
    expect(chooser).to_have_value(re.compile(rf"reward 0 · 12 actions · {PAGER_FAILED[:8]}"))
    wait_idle(page)
    # Typing part of an id narrows the choices on the server: the match, and the episode still shown.
    page.get_by_role("textbox", name="Find episodes").fill(PAGER_SHORT[:13])
    page.get_by_role("textbox", name="Find episodes").press("Enter")
    expect(page.get_by_text("No episode matches")).to_have_count(0)
    wait_idle(page)
    options = page.get_by_role("option")
    for _ in range(5):  # a list opened just before the rerun that narrows it closes again: open it once more
        chooser.click()
        try:
            expect(options).to_have_count(2, timeout=5_000)
            break
        except AssertionError:
            page.keyboard.press("Escape")
            wait_idle(page)
    expect(options).to_have_count(2)
    options.filter(has_text=PAGER_SHORT[:8]).click()
    expect(page).to_have_url(re.compile(rf"[?&]episode={PAGER_SHORT}(&|$)"))
    expect(page.get_by_text(PAGER_SHORT, exact=False).first).to_be_visible()
    expect(chooser).to_have_value(re.compile(rf"reward 1 · 4 actions · {PAGER_SHORT[:8]}"))


def test_the_overviews_headline_numbers_are_shown_whole(page, app_url, sample_run):
    """At 1400 px, every headline label and number fits its column: none ends in an ellipsis (the tokens'
    "prompt / generated" pair is twice a number's width)."""
    page.goto(f"{app_url}/?run={sample_run}")
    tokens = page.locator('[data-ares-figure="Tokens (prompt / gen.)"] > div:nth-child(2)')
    expect(tokens).to_have_text(re.compile(r"\d+(\.\d)?k / \d+(\.\d)?k"))
    cut = page.evaluate("""() => [...document.querySelectorAll('[data-ares-figure] > div')]
        .filter(m => [m, ...m.querySelectorAll('*')].some(e => e.clientWidth > 1 && e.scrollWidth > e.clientWidth + 1))
        .map(m => m.innerText)""")
    assert cut == []


def test_compare_shows_both_episode_choosers_whole(page, app_url, sample_run):
    """Episode A and B each fill half the page: their labels (reward, actions, id) and the Unsolved switches are
    shown whole, not cut short."""
    page.goto(f"{app_url}/compare?run={sample_run}&episode={PAGER_FAILED}&other={PAGER_SHORT}")
    expect(page.get_by_role("combobox", name="Episode B")).to_have_value(re.compile(rf"{PAGER_SHORT[:8]}$"))
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("Unsolved", exact=True)).to_have_count(2)
    for switch in main.get_by_text("Unsolved", exact=True).all():
        expect(switch).to_be_visible()
    cut = page.evaluate("""() => [...document.querySelectorAll(
            '[data-testid="stMain"] [data-testid="stSelectbox"], [data-testid="stMain"] [data-testid="stCheckbox"]')]
        .filter(w => [w, ...w.querySelectorAll('*')].some(e => e.clientWidth > 1 && e.scrollWidth > e.clientWidth + 1))
        .map(w => w.innerText)""")
    assert cut == []


def test_no_page_fetches_its_icon_or_anything_else_from_another_host(page, app_url, sample_run, wait_idle):
    """Every page's favicon is the package's own (inline, or from this server) and the browser asks no other host
    for anything: a viewer on a machine without internet access, or one that must not be seen calling out, works
    the same."""
    elsewhere = []
    page.on("request", lambda request: elsewhere.append(request.url)
            if urllib.parse.urlsplit(request.url).hostname not in (None, "", "127.0.0.1") else None)
    for path in ("", "/episode", "/files", "/compare", "/groups", "/search", "/sandbox", "/review", "/activations"):
        page.goto(f"{app_url}{path}?run={sample_run}")
        expect(page.locator('[data-testid="stSidebarNav"]')).to_be_visible()
        wait_idle(page)
        page.wait_for_timeout(500)  # the favicon is set once the page's script has run
        icon = page.locator("link[rel='shortcut icon']").get_attribute("href")
        assert icon.startswith(("data:image/svg+xml", app_url, "./", "/")), (path, icon)
        assert "gstatic" not in icon and "material" not in icon, (path, icon)
    assert elsewhere == []
