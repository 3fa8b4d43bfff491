"""The app in a real browser: Debian's Chromium drives a real Streamlit server.

The flow a researcher follows: the run's figures -> a failed episode -> step with the keyboard ->
the prompt diff -> reload the deep link -> compare with a successful attempt.
"""

from __future__ import annotations

import os
import pathlib
import re
import urllib.parse

import pytest
from conftest import TEXT_BLOCK, settled_box
from playwright.sync_api import expect

import ares_viewer

pytestmark = pytest.mark.browser

REPO = pathlib.Path(__file__).resolve().parents[2]
# The README's screenshot is refreshed only when asked (ARES_VIEWER_SCREENSHOT=1): a test run never edits the
# checkout.
DOCS_SCREENSHOT = REPO / "docs" / "screenshot-episode.png"


def first_run(runs_root: pathlib.Path) -> ares_viewer.Run:
    name = sorted(p.name for p in runs_root.iterdir() if p.is_dir() and any(p.rglob("*.json")))[0]
    return ares_viewer.open_run(runs_root / name)


def failed_episode(run: ares_viewer.Run) -> str:
    """A finished attempt that failed, at a task that some other attempt solved (the best case to inspect)."""
    frame = run.episodes
    solved = set(frame.loc[frame["total_reward"] > 0, "task_name"])
    failed = frame[(frame["total_reward"] <= 0) & (frame["num_actions"] >= 2)]
    preferred = failed[failed["task_name"].isin(solved)]
    return (preferred if len(preferred) else failed).sort_values("num_actions")["episode_id"].iloc[0]


def metric(page, label: str):
    """The value of the Overview's headline figure ``label`` (``blocks.figures``: label above, value below)."""
    return page.locator(f'[data-ares-figure="{label}"] > div:nth-child(2)')


def step_caption(page):
    return page.locator('[data-testid="stCaptionContainer"]', has_text=re.compile(r"^step \d+ \("))


def ready_for_keys(page, wait_idle) -> None:
    """The key script is in and the page is idle (a key pressed while the first run still draws may be lost),
    with the focus on the page rather than a widget."""
    page.wait_for_function("window.__aresViewerKeys === true")
    wait_idle(page)
    page.evaluate("document.activeElement && document.activeElement.blur()")


def test_overview_to_failed_episode_keyboard_deep_link_and_compare(page, app_url, runs_root, wait_idle, tmp_path):
    run = first_run(runs_root)
    stats = run.stats()
    episode_id = failed_episode(run)
    episode = run.episode(episode_id)

    # The run overview shows the run's headline figures and its plots.
    page.goto(app_url)
    expect(metric(page, "Episodes")).to_have_text(str(stats["episodes"]))
    expect(metric(page, "Success rate")).to_have_text(f"{stats['success_rate']:.0%}")
    # how it is computed, shown when the pointer rests on the figure
    expect(page.locator('[data-ares-figure="Success rate"]')).to_have_attribute("title", re.compile("judged on"))
    expect(page.locator(".ares-chart")).to_have_count(4)
    expect(page.locator(".js-plotly-plot")).to_have_count(0)  # drawn on the server: no Plotly on the page

    # Narrow the table to the failed episode and select its row: the episode opens.
    contains = page.get_by_label("Contains")
    contains.fill(episode_id)
    contains.press("Enter")
    expect(page.get_by_text(f"1 of {stats['episodes']} episodes")).to_be_visible()
    grid = page.locator('[data-testid="stDataFrame"]').last  # the episode table, below "Why episodes failed"
    box = settled_box(page, grid)
    page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)  # the first row's selection cell, below the header
    expect(page).to_have_url(re.compile(rf"/episode\?.*episode={episode_id}"))
    expect(step_caption(page)).to_contain_text("step 1 (")

    # Step forward with the keyboard; the prompt diff shows what entered the context since step 1.
    ready_for_keys(page, wait_idle)
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(r"step=2"))
    expect(step_caption(page)).to_contain_text("step 2 (")
    new = episode.new_messages(2)
    assert [m.role for m in new] == ["assistant", "user"]
    expect(page.get_by_text("Prompt: new since the previous call")).to_be_visible()
    first_line = new[0].content.splitlines()[0]
    expect(page.locator(TEXT_BLOCK, has_text=first_line).first).to_be_visible()
    page.keyboard.press("ArrowRight")
    expect(page).to_have_url(re.compile(r"step=3"))
    page.keyboard.press("k")
    expect(page).to_have_url(re.compile(r"step=2"))
    expect(step_caption(page)).to_contain_text("step 2 (")

    shot = DOCS_SCREENSHOT if os.environ.get("ARES_VIEWER_SCREENSHOT") == "1" else tmp_path / "episode.png"
    page.set_viewport_size({"width": 1400, "height": 1250})
    expect(page.locator('[data-ares-step="2"]')).to_have_count(1)  # the step panes are drawn at step 2
    wait_idle(page)
    page.screenshot(path=str(shot))
    assert shot.stat().st_size < 300_000

    # Reloading the deep link lands on the same episode and step (a new session, same view).
    link = page.url
    page.reload()
    expect(step_caption(page)).to_contain_text("step 2 (")
    assert page.url == link
    expect(page.get_by_text(episode.task_name).first).to_be_visible()

    # The episode links to the Compare page with a solved attempt at the same task; there, the steps are aligned.
    page.get_by_role("link", name=re.compile(r"^Compare with a solved attempt at this task")).click()
    expect(page).to_have_url(re.compile(r"/compare"))
    expect(page.get_by_text(re.compile(r"aligned (rows|steps)")).first).to_be_visible()
    expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(1)
    assert f"episode={episode_id}" in page.url and "other=" in page.url


def test_opening_an_episode_from_the_table_is_one_back_away_from_the_filtered_table(page, app_url, runs_root,
                                                                                     wait_idle):
    run = first_run(runs_root)
    episode_id = failed_episode(run)
    page.add_init_script("window.__pushes = 0; const push = history.pushState.bind(history); "
                         "history.pushState = (s, t, u) => { window.__pushes += 1; return push(s, t, u); };")
    page.goto(f"{app_url}/?contains={episode_id}&desc=1")
    expect(page.get_by_text(f"1 of {len(run)} episodes")).to_be_visible()
    wait_idle(page)
    grid = page.locator('[data-testid="stDataFrame"]').last
    box = settled_box(page, grid)
    page.evaluate("window.__pushes = 0")
    page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)
    expect(step_caption(page)).to_contain_text("step 1 (")
    wait_idle(page)
    # Streamlit's page switch takes two history entries; each URL parameter written on the way took one more.
    assert page.evaluate("window.__pushes") <= 2
    page.go_back()
    expect(page.get_by_label("Contains")).to_have_value(episode_id)
    expect(page.get_by_text(f"1 of {len(run)} episodes")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"contains={episode_id}"))


def test_plot_clicks_open_episodes_and_steps(page, app_url, runs_root, wait_idle):
    run = first_run(runs_root)
    page.goto(app_url)
    expect(page.locator(".ares-chart")).to_have_count(4)
    # "Reward vs number of actions": every point is one episode, a link to it with its figures on hover.
    plot = page.locator('[data-chart="overview.actions"]')
    expect(plot.locator(".ares-chart-title")).to_have_text("Reward vs number of actions")
    points = plot.locator("a[data-episode]")
    expect(points).to_have_count(len(run))
    point = points.first
    opened = point.get_attribute("data-episode")
    assert opened in run
    expect(point).to_have_attribute("title", re.compile(rf"{re.escape(run.episode(opened).task_name)}\n.* actions"))
    wait_idle(page)
    point.scroll_into_view_if_needed()
    tabs = len(page.context.pages)
    point.click()
    expect(page).to_have_url(re.compile(r"/episode\?.*episode="))
    assert re.search(r"episode=([^&]+)", page.url).group(1) == urllib.parse.quote(opened, safe="")
    assert len(page.context.pages) == tabs  # in the same tab
    expect(step_caption(page)).to_contain_text("step 1 (")

    # A step's column on the step timeline (below the step panes: wait until they are drawn, so it stays put)
    # selects that step.
    expect(page.locator('[data-ares-step="1"]')).to_have_count(1)
    wait_idle(page)
    timeline = page.locator(".ares-timeline")
    timeline.scroll_into_view_if_needed()
    columns = timeline.locator("[data-step]")
    expect(columns).to_have_count(run.episode(opened).num_actions)
    expect(columns.nth(2)).to_have_attribute("data-step", "3")
    columns.nth(2).click()
    expect(step_caption(page)).to_contain_text("step 3 (")
    expect(page).to_have_url(re.compile(r"step=3"))
    # Step away with the keyboard (back: the episode clicked may end at step 3), then click the same step again:
    # it selects that step again.
    page.keyboard.press("k")
    expect(step_caption(page)).to_contain_text("step 2 (")
    expect(page.locator('[data-ares-step="2"]')).to_have_count(1)
    wait_idle(page)
    columns.nth(2).click()
    expect(step_caption(page)).to_contain_text("step 3 (")

    # Back on the overview, the earlier click does not bounce the reader to the episode again.
    page.get_by_role("link", name="Run overview").click()
    expect(metric(page, "Episodes")).to_have_text(str(len(run)))
    page.wait_for_timeout(1500)
    assert "/episode" not in page.url


def test_a_step_sends_little_to_the_browser(page, app_url, runs_root, wait_idle):
    """Stepping ships the step on screen, not the episode: websocket bytes per step stay far under 1 MB."""
    run = first_run(runs_root)
    longest = run.episodes.sort_values("num_actions")["episode_id"].iloc[-1]
    received: list[int] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: received.append(len(frame))))
    page.goto(f"{app_url}/episode?run={pathlib.Path(run.location).name}&episode={longest}&step=1")
    expect(step_caption(page)).to_contain_text("step 1 (")
    ready_for_keys(page, wait_idle)
    page.wait_for_timeout(500)
    opened = sum(received)
    received.clear()
    last = f"step {run.episode(longest).num_actions} ("
    # On a loaded machine a key pressed just as the page settles is, rarely, not acted on (seen in 2 of ~10 full
    # runs, never alone): press it again, up to three times in all; a key that never works still fails.
    for _ in range(3):
        page.keyboard.press("End")
        try:
            expect(step_caption(page)).to_contain_text(last, timeout=8_000)
            break
        except AssertionError:
            ready_for_keys(page, wait_idle)
    expect(step_caption(page)).to_contain_text(last)
    page.wait_for_timeout(500)
    stepped = sum(received)
    print(f"websocket bytes: opening the episode {opened:,}, jumping to its last step {stepped:,}")
    assert 0 < stepped < 1_000_000, stepped
    assert opened < 1_000_000, opened


def test_a_search_hit_opens_its_step(page, app_url, runs_root, wait_idle):
    run = first_run(runs_root)
    page.goto(f"{app_url}/search?run={pathlib.Path(run.location).name}")
    box = page.get_by_label("Text or regular expression")
    expect(box).to_be_visible()
    wait_idle(page)  # an input sent while the first run still draws may be lost
    box.fill("COMPLETE_TASK_AND_SUBMIT")
    box.press("Enter")
    # The progress line says "searched all" once the search is over (while hits still come it says "Searching…").
    expect(page.get_by_text(re.compile(r"\d+ hit\(s\) .* searched all"))).to_be_visible()
    wait_idle(page)  # a link clicked while the page still draws may carry the state of the run before
    # One element, held: its label names the step and its link goes there (a locator would be found again at the
    # click, maybe on another hit if the page redrew in between).
    hit = page.locator('[data-testid="stPageLink"] a').first.element_handle()
    step = int(re.search(r"step (\d+)", hit.inner_text()).group(1))
    assert re.search(rf"[?&]step={step}(&|$)", hit.get_attribute("href")), hit.get_attribute("href")
    hit.click()
    expect(page).to_have_url(re.compile(rf"/episode\?.*step={step}"))
    expect(step_caption(page)).to_contain_text(f"step {step} (")
    expect(page.locator(TEXT_BLOCK, has_text="COMPLETE_TASK_AND_SUBMIT").first).to_be_visible()
