"""The Episode page's "Decisive step" panel in a real browser, searches run on the real Docker engine.

The endpoint is the operator's (``model.toml`` in the server's cache folder, read on every page load), never typed
on the page. On the bundled sample: its shipped 16-branch curve (decisive step 2) with the table beside it, a
branch opened as an episode, then a search against an unreachable endpoint: a warning naming why, and the curve
still there with the failure counted (#43, defect 2). On a copy of the episode without shipped branches: a search
whose two branches from step 3 both fail the task, so V does not change: "No change found", no decisive step
(#43, defect 3). The policy is the sample's seeded one, served on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

import chat_server
import pytest
from conftest import REPO, open_expander, serve_app
from playwright.sync_api import expect

from ares_viewer.runs.run import load_episode

pytestmark = pytest.mark.browser

sys.path.insert(0, str(REPO / "tests"))
import sample_scripts  # noqa: E402 - tests/ holds the helper

WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"
PANEL = "Decisive step: the value of each step from branched rollouts"


def _search(page, wait_idle, steps: str, samples: int) -> None:
    """Start a search from the panel: the steps and samples typed, the button pressed."""
    wait_idle(page)
    expect(page.get_by_role("textbox", name="Endpoint (OpenAI-compatible)")).to_have_count(0)  # never typed
    page.get_by_role("textbox", name="Steps", exact=True).fill(steps)
    page.get_by_role("spinbutton", name="Samples per step").fill(str(samples))
    page.get_by_role("spinbutton", name="At most, model tokens").fill("100000")
    wait_idle(page)
    page.get_by_role("button", name="Branch and estimate V").click()


def test_the_panel_through_a_failed_search_and_a_search_that_changes_nothing(page, runs_root, tmp_path, wait_idle):
    sample = runs_root / "demo-run"
    if not (sample / ".branches" / WRONG_FIX).is_dir():
        pytest.skip("the bundled sample with precomputed branches is not there")
    root = tmp_path / "runs"
    _copy_with_and_without_shipped_branches(sample, root)
    policy = sample_scripts.load("decisive_branches").Policy(
        load_episode(sample / f"{SOLVED}.json").step(5).command, seed=11
    )
    cache = tmp_path / "cache"
    cache.mkdir()
    config = cache / "model.toml"
    config.write_text('url = "http://127.0.0.1:9/v1"\nmodel = "policy"\n')  # nothing listens there
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    with (
        chat_server.serve(lambda body: policy.answer(body["messages"])) as server,
        serve_app(root, cache, tmp_path / "review.sqlite", tmp_path, env=env) as url,
    ):
        _shipped_curve_and_a_branch_opened_as_an_episode(page, url, root, wait_idle)
        _a_search_against_an_unreachable_endpoint(page, url, wait_idle, server)

        # The operator points the server at the policy; a search whose branches all fail the task, as the episode
        # did: V stays 0, so no step is decisive.
        config.write_text(f'url = "{server.base_url}"\nmodel = "policy"\n')
        _a_search_that_changes_nothing(page, url, wait_idle, server)
        assert list((cache / "branches").glob("*/branches.jsonl"))


def _copy_with_and_without_shipped_branches(sample, root) -> None:
    """Under ``root``: the sample run as shipped (``demo-run``) and the same episode with no branches
    (``plain-run``)."""
    shutil.copytree(sample, root / "demo-run")
    plain = root / "plain-run"
    plain.mkdir()
    shutil.copy(sample / f"{WRONG_FIX}.json", plain)
    shutil.copytree(sample / "snapshots" / WRONG_FIX, plain / "snapshots" / WRONG_FIX)
    shutil.copytree(sample / "tasks", plain / "tasks")


def _shipped_curve_and_a_branch_opened_as_an_episode(page, url, root, wait_idle) -> None:
    """The shipped 16-branch curve with its decisive step, chart and table; a branch opens as an episode."""
    page.goto(f"{url}/episode?run=demo-run&episode={WRONG_FIX}&step=1")
    open_expander(page, PANEL)
    decisive = "Decisive step 2: a drop of 1.00 in V from step 1 (the intervals separate)."
    expect(page.get_by_text(decisive)).to_be_visible()
    expect(page.locator('[data-testid="stPlotlyChart"]').first).to_be_visible()
    expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible()
    expect(page.get_by_text("16 branch(es) supplied with the run in")).to_be_visible()
    expect(page.get_by_text("Searches ask model policy at")).to_be_visible()
    wait_idle(page)
    page.get_by_role("button", name="Open as episode").first.click()
    expect(page).to_have_url(re.compile(rf"episode=(?!{WRONG_FIX})[0-9a-f-]{{36}}"), timeout=30_000)
    branch_id = page.url.split("episode=")[1].split("&")[0]
    assert (root / "demo-run" / ".branches" / WRONG_FIX / f"{branch_id}.json").is_file()
    expect(page.get_by_text(branch_id[:8]).first).to_be_visible()


def _a_search_against_an_unreachable_endpoint(page, url, wait_idle, server) -> None:
    """A warning with the reason; the shipped curve stays, and the failed branch is counted."""
    page.goto(f"{url}/episode?run=demo-run&episode={WRONG_FIX}&step=1")
    open_expander(page, PANEL)
    _search(page, wait_idle, "3", 1)
    ended = page.get_by_text("The search ended (done) with failures: 1 new branch(es)")
    expect(ended).to_be_visible(timeout=180_000)
    reason = re.compile(r"1 branch\(es\) failed and are not counted: model: ModelEndpointError: "
                        r"cannot reach http\u2060?://127\.0\.0\.1:9/v1")
    expect(page.get_by_text(reason)).to_have_count(2)  # the search's end, and the stored branches' warning
    expect(page.locator('[data-testid="stAlertContentSuccess"]')).to_have_count(0)
    expect(page.get_by_text("Decisive step 2: a drop of 1.00 in V from step 1")).to_be_visible()
    expect(page.get_by_text("1 branch(es) computed here, stored in")).to_be_visible()
    expect(page.get_by_text("16 branch(es) supplied with the run in")).to_be_visible()
    assert not server.requests  # nothing reached the policy


def _a_search_that_changes_nothing(page, url, wait_idle, server) -> None:
    """On the run without shipped branches, two branches from step 3 that fail as the episode did: "No change
    found", no decisive step."""
    page.goto(f"{url}/episode?run=plain-run&episode={WRONG_FIX}&step=1")
    open_expander(page, PANEL)
    expect(page.get_by_text("No branch stored for this episode yet.")).to_be_visible()
    expect(page.get_by_text("The search ended")).to_have_count(0)  # the other run's search is not this one's
    _search(page, wait_idle, "3", 2)
    ended = page.get_by_text(re.compile(r"The search ended \(done\): 2 new branch\(es\), [\d,]+ model tokens\."))
    expect(ended).to_be_visible(timeout=240_000)
    assert server.requests  # the page asked the operator's endpoint
    expect(page.get_by_text("No change found: V is 0.00 at steps 3 and 4 (the intervals overlap")).to_be_visible()
    expect(page.get_by_text("Decisive step", exact=False).filter(has_text=re.compile(r"Decisive step \d"))) \
        .to_have_count(0)
    expect(page.get_by_text("2 branch(es) computed here, stored in")).to_be_visible()
