"""The Episode page's "Decisive step" panel in a real browser: the bundled sample's curve with no endpoint, a
branch opened as an episode, then a search run from the page against a policy served on 127.0.0.1 on the real
Docker engine, its progress shown and its new curve drawn from the cache folder."""

from __future__ import annotations

import os
import re
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


def test_the_panel_shows_the_sample_curve_opens_a_branch_and_runs_a_search(page, runs_root, tmp_path, wait_idle):
    demo = runs_root / "demo-run"
    if not (demo / ".branches" / WRONG_FIX).is_dir():
        pytest.skip("the bundled sample with precomputed branches is not there")
    policy = sample_scripts.load("decisive_branches").Policy(
        load_episode(demo / f"{SOLVED}.json").step(5).command, seed=11
    )
    cache = tmp_path / "cache"
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    with (
        chat_server.serve(lambda body: policy.answer(body["messages"])) as server,
        serve_app(runs_root, cache, tmp_path / "review.sqlite", tmp_path, env=env) as url,
    ):
        page.goto(f"{url}/episode?run=demo-run&episode={WRONG_FIX}&step=1")
        open_expander(page, "Decisive step: the value of each step from branched rollouts")
        expect(page.get_by_text("Decisive step 2: a drop of 1.00 in V from step 1")).to_be_visible()
        expect(page.locator('[data-testid="stPlotlyChart"]').first).to_be_visible()
        expect(page.get_by_text("16 branch(es) stored in")).to_be_visible()
        wait_idle(page)
        page.get_by_role("button", name="Open as episode").first.click()
        expect(page).to_have_url(re.compile(rf"episode=(?!{WRONG_FIX})[0-9a-f-]{{36}}"), timeout=30_000)
        branch_id = page.url.split("episode=")[1].split("&")[0]
        assert (demo / ".branches" / WRONG_FIX / f"{branch_id}.json").is_file()
        expect(page.get_by_text(branch_id[:8]).first).to_be_visible()

        # Back on the parent: a search from the page, one branch from step 3, into the cache folder.
        page.goto(f"{url}/episode?run=demo-run&episode={WRONG_FIX}&step=1")
        open_expander(page, "Decisive step: the value of each step from branched rollouts")
        wait_idle(page)
        page.get_by_role("textbox", name="Endpoint (OpenAI-compatible)").fill(server.base_url)
        page.get_by_role("textbox", name="Model", exact=True).fill("policy")
        page.get_by_role("textbox", name="Steps", exact=True).fill("3")
        page.get_by_role("spinbutton", name="Samples per step").fill("1")
        page.get_by_role("spinbutton", name="At most, model tokens").fill("100000")
        wait_idle(page)
        page.get_by_role("button", name="Branch and estimate V").click()
        ended = page.get_by_text(re.compile(r"The search ended \(done\): 1 new branch\(es\), [\d,]+ model tokens\."))
        expect(ended).to_be_visible(timeout=180_000)
        expect(page.get_by_text("1 branch(es) stored in")).to_be_visible()
        assert list((cache / "branches").glob("*/branches.jsonl"))
        assert server.requests  # the page asked the endpoint
        # The endpoint reports usage (2 tokens a call): the page counts what the branch spent, not "unknown".
        spent = 2 * len(server.requests)
        expect(page.get_by_text(f"The search ended (done): 1 new branch(es), {spent:,} model tokens.")).to_be_visible()
        expect(page.get_by_text(f"{spent:,} tokens", exact=False).first).to_be_visible()
