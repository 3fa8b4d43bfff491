"""The Sandbox page in a real browser, against the real Docker engine: restore a step, replay, remove.

Uses the app's own server (``streamlit run app/main.py``), the same one the other browser tests use.
"""

from __future__ import annotations

import pathlib
import re
import time

import app_sandboxes
import pytest
from conftest import fill_settled
from playwright.sync_api import expect

from ares_viewer import sandbox

pytestmark = pytest.mark.browser

REPO = pathlib.Path(__file__).resolve().parents[2]
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"  # slugify-solved: 7 actions, every one reproducible

@pytest.fixture
def sandbox_url(app_url, docker_client):
    """The URL of the app's Sandbox page (the engine must answer first)."""
    return f"{app_url}/sandbox"


@pytest.fixture
def started_after(docker_client):
    """Remove any sandbox of the replayed episode made during the test, whatever happens in the browser."""
    began = time.time() - 1
    yield began
    app_sandboxes.remove_app_sandboxes(docker_client, SOLVED, began)


def _metric(page, label: str):
    return page.locator('[data-testid="stMetric"]', has_text=label).locator('[data-testid="stMetricValue"]')


def _facts(page):
    """The container's line of facts: "Container abc · Image … · State running · Age … · Filesystem step 7"."""
    return page.locator('[data-testid="stMarkdownContainer"] p', has_text=re.compile(r"^Container .* · State "))


def _fact(page, name: str) -> str:
    """One fact of that line, as the page shows it."""
    expect(_facts(page)).to_be_visible()
    parts = dict(part.split(" ", 1) for part in _facts(page).inner_text().split(" · "))
    return parts[name].strip()


def test_restore_and_replay_from_the_sandbox_page(page, sandbox_url, runs_root, docker_client, started_after):
    run_name = "demo-run" if (runs_root / "demo-run").is_dir() else None
    if run_name is None:
        pytest.skip("the bundled sample runs (with snapshots) are not there")
    page.goto(f"{sandbox_url}?run={run_name}&episode={SOLVED}&step=0")
    expect(page.get_by_text("Sandbox", exact=True).first).to_be_visible()

    page.get_by_role("button", name="Restore").click()
    expect(page.get_by_text("Restored step 0 into")).to_be_visible(timeout=60_000)
    expect(_facts(page)).to_contain_text("State running")
    container = _fact(page, "Container")
    mine = [i for i in sandbox.list_sandboxes(docker_client, role=sandbox.ROLE) if i.short_id == container]
    assert len(mine) == 1 and mine[0].episode_id == SOLVED and mine[0].step == 0 and mine[0].session

    page.get_by_role("button", name="Replay steps 1–7").click()
    expect(page.get_by_text("Replay: 7 reproduced")).to_be_visible(timeout=120_000)
    expect(_facts(page)).to_contain_text("Filesystem step 7 (restored from step 0)")

    # A command of our own, in the same container.
    page.get_by_role("tab", name="Command").click()
    fill_settled(page, page.get_by_label("Command (bash -lc"), "git log --oneline | wc -l && echo from-the-browser")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_text("from-the-browser").first).to_be_visible()

    page.get_by_role("button", name="Stop & remove").click()
    expect(page.get_by_role("button", name="Stop & remove")).to_have_count(0)
    deadline = time.monotonic() + 10
    while any(i.short_id == container for i in sandbox.list_sandboxes(docker_client)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(i.short_id == container for i in sandbox.list_sandboxes(docker_client))


def test_reload_reattaches_to_the_sessions_sandbox_and_tabs_keep_results(page, sandbox_url, runs_root, docker_client,
                                                                          started_after, wait_idle):
    if not (runs_root / "demo-run").is_dir():
        pytest.skip("the bundled sample runs (with snapshots) are not there")
    page.goto(f"{sandbox_url}?run=demo-run&episode={SOLVED}&step=0")
    page.get_by_role("button", name="Restore").click()
    expect(page.get_by_text("Restored step 0 into")).to_be_visible(timeout=60_000)
    container = _fact(page, "Container")

    # A command's result stays on the Command tab (the page does not snap back to Replay).
    wait_idle(page)
    page.get_by_role("tab", name="Command").click()
    fill_settled(page, page.get_by_label("Command (bash -lc"), "echo kept-on-its-tab")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_text("kept-on-its-tab").first).to_be_visible()
    expect(page.get_by_role("tab", name="Command")).to_have_attribute("aria-selected", "true")

    # A reload loses the page's handle, not the container: it is listed with its age, and can be reattached.
    page.reload()
    expect(page.get_by_text(re.compile(r"This session has 1 live sandbox"))).to_be_visible()
    row = page.get_by_text(container, exact=False).first
    expect(row).to_be_visible()
    expect(page.get_by_text(re.compile(r"running · age \d+ s"))).to_be_visible()
    wait_idle(page)
    page.get_by_role("button", name="Reattach").click()
    expect(_facts(page)).to_contain_text(f"Container {container}")
    expect(page.get_by_text("Reattached after a reload")).to_be_visible()
    page.get_by_role("tab", name="Command").click()
    fill_settled(page, page.get_by_label("Command (bash -lc"), "echo still-the-same-box")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_text("still-the-same-box").first).to_be_visible()

    # Removing it after another reload leaves nothing behind.
    page.reload()
    expect(page.get_by_text(re.compile(r"This session has 1 live sandbox"))).to_be_visible()
    wait_idle(page)
    page.get_by_role("button", name="Remove", exact=True).click()
    expect(page.get_by_text(re.compile(r"This session has \d+ live sandbox"))).to_have_count(0)
    assert not any(i.short_id == container for i in sandbox.list_sandboxes(docker_client))


def test_a_fork_shows_the_verifiers_output(page, sandbox_url, runs_root, docker_client, started_after, wait_idle):
    if not (runs_root / "demo-run" / "tasks").is_dir():
        pytest.skip("the bundled sample runs (with task recipes) are not there")
    page.goto(f"{sandbox_url}?run=demo-run&episode={SOLVED}&step=6")
    page.get_by_role("button", name="Restore").click()
    expect(page.get_by_text("Restored step 6 into")).to_be_visible(timeout=60_000)
    wait_idle(page)
    page.get_by_role("tab", name="Fork").click()
    fill_settled(page, page.get_by_label("Commands to run instead"), "python3 -m pytest -q 2>&1 | tail -1")
    page.get_by_role("button", name="Run fork").click()
    expect(page.get_by_text(re.compile(r"Verifier's output · exit code"))).to_be_visible(timeout=120_000)
    expect(_metric(page, "Fork's reward")).to_have_text("1")
    expect(page.get_by_role("tab", name="Fork")).to_have_attribute("aria-selected", "true")
    page.get_by_role("button", name="Stop & remove").click()
    expect(page.get_by_role("button", name="Stop & remove")).to_have_count(0)
