"""The Groups page in a real browser: the rollouts of one prompt side by side, another group, the deep link.

Opens the hand-written Tinker fixture run (``tests/fixtures/tinker/math-rl``) by its folder path, as a reader
pastes a run's location; the expected rollouts and rewards are read from the same files through the library.
"""

from __future__ import annotations

import pathlib
import re
import urllib.parse

import pytest
from playwright.sync_api import expect

import ares_viewer
from ares_viewer.analysis import groups

pytestmark = pytest.mark.browser

MATH_RL = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tinker" / "math-rl"


def rollout_headers(page):
    """The first line of each rollout card ("traj 2 completed · reward 0")."""
    return page.locator('[data-testid="stMarkdownContainer"]', has_text=re.compile(r"^traj \d+ "))


def expect_group(page, run: ares_viewer.Run, group: str) -> None:
    """The page shows the group's prompt and its rollouts, each with its reward and its answer, and no other."""
    members = groups.rollouts(run.episodes, group)
    prompt = run.episode(members["episode_id"].iloc[0]).context(1)[-1].content
    expect(page.locator('[data-testid="stCode"]', has_text=prompt)).to_have_count(1)
    expect(rollout_headers(page)).to_have_count(len(members))
    for _, row in members.iterrows():
        episode = run.episode(row["episode_id"])
        header = rollout_headers(page).filter(has_text=re.compile(rf"^traj {int(row['traj_idx'])} "))
        expect(header).to_contain_text(f"reward {episode.total_reward:g}")
        expect(header).to_contain_text(episode.outcome.value)
        answer = episode.actions[-1].response.splitlines()[-1]
        expect(page.locator('[data-testid="stCode"]', has_text=answer).first).to_be_visible()


def wait_for_query(page, **expected: str) -> None:
    """Wait until the URL's query parameters hold these values (Streamlit writes them after the run)."""
    page.wait_for_function(
        "expected => Object.entries(expected).every(([k, v]) => new URLSearchParams(location.search).get(k) === v)",
        arg=expected)


def test_a_group_deep_link_another_group_and_a_reload(page, app_url, wait_idle):
    run = ares_viewer.open_run(MATH_RL)
    table = groups.summary(run.episodes)
    # Two groups of four rollouts whose rewards differ, so each shows something the other does not.
    spread = table[(table["rollouts"] == 4) & (table["reward_spread"] > 0)]["group"].tolist()
    first, second = spread[-1], spread[0]
    assert len({tuple(groups.rollouts(run.episodes, g)["total_reward"]) for g in (first, second)}) == 2
    where = str(MATH_RL)
    opened = groups.rollouts(run.episodes, first)["episode_id"].iloc[2]

    # A deep link to an episode opens its group: the prompt, then its rollouts with their rewards.
    page.goto(f"{app_url}/groups?{urllib.parse.urlencode({'run': where, 'episode': opened})}")
    picker = page.get_by_role("combobox", name="Group")
    expect(picker).to_have_value(re.compile(rf"^{re.escape(first)} · 4 rollouts · "))
    expect_group(page, run, first)

    # Choosing another group shows its rollouts; the URL names that group's first rollout.
    wait_idle(page)
    picker.click()
    page.get_by_role("option").filter(has_text=f"{second} · ").click()
    expect(picker).to_have_value(re.compile(rf"^{re.escape(second)} · 4 rollouts · "))
    expect_group(page, run, second)
    shown = groups.rollouts(run.episodes, second)["episode_id"].iloc[0]
    wait_for_query(page, run=where, episode=shown)

    # Reloading the URL (a new session) lands on the same group.
    link = page.url
    page.reload()
    expect(picker).to_have_value(re.compile(rf"^{re.escape(second)} · 4 rollouts · "))
    expect_group(page, run, second)
    wait_for_query(page, run=where, episode=shown)
    assert page.url == link
