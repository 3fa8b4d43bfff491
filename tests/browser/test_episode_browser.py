"""Reading an episode in a real browser: the step list and its keys, the response above the fold, the context
change counted by content, why the last step's reward is what it is, and the view surviving a reload."""

from __future__ import annotations

import copy
import json
import pathlib
import re
import shutil
import urllib.parse

import pytest
from conftest import TEXT_BLOCK
from playwright.sync_api import expect
from test_app_browser import first_run, ready_for_keys, step_caption

import ares_viewer
from testdata import synthetic

pytestmark = pytest.mark.browser

REPO = pathlib.Path(__file__).resolve().parents[2]
DEMO = REPO / "sample_runs" / "demo-run"
FAILED_SAMPLE = "aefe890e-4268-4666-90b5-dd09d3259e06"  # completed, reward 0, with a snapshot per step

DIFF = ("diff --git a/textkit/slug.py b/textkit/slug.py\n--- a/textkit/slug.py\n+++ b/textkit/slug.py\n"
        "@@ -8,3 +8,3 @@ def slugify(text):\n-    text = re.sub(r\"[^a-z0-9]+\", \"-\", text.lower())\n"
        "+    text = re.sub(r\"[^a-z0-9]+\", \"-\", strip_accents(text).lower())\n")
VERIFIER_OUTPUT = ("============================= test session starts ==============================\n"
                   "tests/test_slug.py .F                                                     [100%]\n"
                   "FAILED tests/test_slug.py::test_accents - AssertionError: 'cafe-creme' != 'caf-cr-me'\n"
                   "1 failed, 1 passed in 0.03s\n")


def episode_url(app_url: str, run: str, episode: str, **params: str) -> str:
    return f"{app_url}/episode?" + urllib.parse.urlencode({"run": run, "episode": episode, **params})


def run_name(run: ares_viewer.Run) -> str:
    return pathlib.Path(run.location).name


def test_six_fast_j_presses_land_on_step_six_and_shift_j_finds_failures(page, app_url, runs_root, wait_idle):
    run = first_run(runs_root)
    longest = run.episodes.sort_values("num_actions")["episode_id"].iloc[-1]
    episode = run.episode(longest)
    page.goto(episode_url(app_url, run_name(run), longest, step="0"))
    expect(step_caption(page)).to_contain_text("step 0 (FIRST)")
    # The step list lists every step, the current one marked.
    expect(page.locator(".ares-steps tr[data-step]")).to_have_count(len(episode.steps))
    ready_for_keys(page, wait_idle)
    for _ in range(6):
        page.keyboard.press("j")  # as fast as the browser sends them, no waiting between
    expect(page).to_have_url(re.compile(r"step=6(&|$)"), timeout=30_000)
    expect(step_caption(page)).to_contain_text("step 6 (")
    page.wait_for_timeout(1500)  # no late press moves it further
    assert re.search(r"step=6(&|$)", page.url)
    expect(page.locator(".ares-steps tr.current[data-step='6']")).to_have_count(1)
    # The key script waits for the slider to show the step (a press sends the slider's value): it finds it so.
    expect(page.locator('.st-key-episode-slider input[type="range"]')).to_have_value("6")
    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(page).to_have_url(re.compile(r"step=4(&|$)"))

    failures = [s.index for s in episode.steps if s.returncode not in (None, 0) or s.format_error]
    after = [i for i in failures if i > 4]
    if after:
        page.keyboard.press("J")
        expect(page).to_have_url(re.compile(rf"step={after[0]}(&|$)"))
        expect(step_caption(page)).to_contain_text(f"step {after[0]} (")


# The step timeline's current-step shade (``ares_viewer_app.views.episode.timeline``): the step it shades, or null.
_TIMELINE_MARK = """() => document.querySelector(".ares-timeline [data-current-step]")
    ?.getAttribute("data-current-step") ?? null"""


def test_the_step_timeline_shade_follows_j_and_k(page, app_url, runs_root, wait_idle):
    run = first_run(runs_root)
    longest = run.episodes.sort_values("num_actions")["episode_id"].iloc[-1]
    page.goto(episode_url(app_url, run_name(run), longest, step="2"))
    expect(step_caption(page)).to_contain_text("step 2 (")
    page.wait_for_function(f"({_TIMELINE_MARK})() === '2'")
    # The shade spans the bars and the tokens, over step 2's column.
    shade = page.locator(".ares-timeline [data-current-step]").bounding_box()
    column = page.locator('.ares-timeline [data-step="2"]').bounding_box()
    assert abs(shade["x"] - column["x"]) < 1 and abs(shade["height"] - column["height"]) < 1
    ready_for_keys(page, wait_idle)
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(r"step=3(&|$)"))
    page.wait_for_function(f"({_TIMELINE_MARK})() === '3'")
    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(page).to_have_url(re.compile(r"step=1(&|$)"))
    page.wait_for_function(f"({_TIMELINE_MARK})() === '1'")


def test_the_timeline_comes_as_a_picture_with_the_page_and_gives_way_to_the_chart(page, app_url, runs_root,
                                                                                 wait_idle):
    # A page just opened draws the timeline's still picture with its HTML (the chart's component comes a few frames
    # later): it shades the step the page opened on, and is hidden once the chart is drawn, never both shown.
    run = first_run(runs_root)
    longest = run.episodes.sort_values("num_actions")["episode_id"].iloc[-1]
    page.goto(episode_url(app_url, run_name(run), longest, step="2"))
    still = page.locator("img.ares-timeline-picture")
    expect(still).to_have_attribute("data-current-step", "2")
    assert page.evaluate("document.querySelector('img.ares-timeline-picture').naturalWidth") > 0  # an image
    page.wait_for_function(f"({_TIMELINE_MARK})() === '2'")
    expect(still).to_be_hidden()
    ready_for_keys(page, wait_idle)
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(r"step=3(&|$)"))
    page.wait_for_function(f"({_TIMELINE_MARK})() === '3'")
    wait_idle(page)
    expect(page.locator("img.ares-timeline-picture:visible")).to_have_count(0)


def write_long_prompt_run(folder: pathlib.Path) -> tuple[str, int]:
    """A run whose step 3 answers a prompt that grew by a 10,000-character output; returns (episode, step)."""
    doc = synthetic.episode_dict(task_name="calc__calc-9", actions=5, output_chars=24_000, seed=21)
    folder.mkdir(parents=True)
    synthetic.write_episode(folder, doc)
    episode = ares_viewer.open_run(folder).episode(doc["episode_id"])
    step = 3
    grown = sum(len(m.content) for m in episode.context_change(step).new)
    assert grown >= 10_000, grown
    return doc["episode_id"], step


def test_the_response_is_above_the_fold_at_a_step_with_a_10k_character_prompt(page, app_url, tmp_path, wait_idle):
    episode_id, step = write_long_prompt_run(tmp_path / "long-prompt")
    page.goto(episode_url(app_url, str(tmp_path / "long-prompt"), episode_id, step=str(step)))
    expect(step_caption(page)).to_contain_text(f"step {step} (")
    wait_idle(page)
    viewport = page.viewport_size["height"]
    response = page.get_by_role("heading", name="Response")
    expect(response).to_be_visible()
    box = response.bounding_box()
    assert box["y"] + box["height"] < viewport, f"the response heading is at {box['y']:.0f} px, below the fold"
    command = page.locator(".ares-text pre[data-language='bash']").first
    assert command.bounding_box()["y"] < viewport
    # The long output is collapsed to head and tail until asked for.
    expect(page.get_by_role("button", name=re.compile(r"^Show all [\d,]+ characters$")).first).to_be_visible()


def test_the_context_rewrite_step_counts_messages_by_content(page, app_url, runs_root):
    run = first_run(runs_root)
    found = [(e, s.index) for e in (run.episode(i) for i in run.episodes["episode_id"])
             for s in e.steps if s.context_rewritten]
    assert found, "the sample run has a context rewrite"
    episode, k = found[0]
    change = episode.context_change(k)
    assert len(change.new) < episode.step(k).new_message_count  # position alone would count more as new
    page.goto(episode_url(app_url, run_name(run), episode.episode_id, step=str(k)))
    expect(step_caption(page)).to_contain_text(f"step {k} (")
    expect(page.get_by_text(f"{change.summary()} (matched by content)")).to_be_visible()
    warning = rf"^Earlier context was dropped or rewritten before this call: {len(change.dropped)} message\(s\)"
    expect(page.get_by_text(re.compile(warning))).to_be_visible()


@pytest.fixture
def recorded_run(tmp_path) -> tuple[pathlib.Path, str, int]:
    """A sample episode (reward 0) with what a recorder keeps at its end: the submit output and the verifier."""
    if not DEMO.is_dir():
        pytest.skip("the bundled sample runs are not in this checkout")
    folder = tmp_path / "recorded"
    folder.mkdir()
    doc = json.loads((DEMO / f"{FAILED_SAMPLE}.json").read_text())
    last = doc["steps"][-1]["step_index"]
    recorded = copy.deepcopy(doc)
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    recorded["final_command"] = {"step_index": last, "returncode": 0, "duration_s": 0.2, "command": submit,
                                 "output": f"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n{DIFF}"}
    recorded["verifier"] = {"step_index": last, "returncode": 1, "output": VERIFIER_OUTPUT, "reward": 0.0,
                            "reward_file": {"path": "/logs/verifier/reward.txt", "content": "0"},
                            "commands": [{"command": "bash /tests/test.sh", "returncode": 1,
                                          "output": VERIFIER_OUTPUT}]}
    (folder / f"{FAILED_SAMPLE}.json").write_text(json.dumps(recorded, indent=2))
    shutil.copytree(DEMO / "snapshots" / FAILED_SAMPLE, folder / "snapshots" / FAILED_SAMPLE)
    return folder, FAILED_SAMPLE, last


def test_the_last_step_says_why_the_reward_is_zero_with_the_diff_and_the_verifier(page, app_url, recorded_run):
    folder, episode_id, last = recorded_run
    page.goto(episode_url(app_url, str(folder), episode_id, step=str(last)))
    expect(step_caption(page)).to_contain_text(f"step {last} (LAST)")
    expect(page.get_by_role("heading", name="Why this reward")).to_be_visible()
    expect(page.get_by_text("completed, reward 0: the verifier's tests failed (exit code 1)")).to_be_visible()
    expect(page.locator(TEXT_BLOCK, has_text="strip_accents(text).lower()").first).to_be_visible()
    expect(page.locator(TEXT_BLOCK, has_text="FAILED tests/test_slug.py::test_accents")
           .first).to_be_visible()
    link = page.get_by_role("link", name=re.compile(rf"^Re-verify the final state \(step {last}\) in the Sandbox"))
    expect(link).to_be_visible()
    link.click()
    expect(page).to_have_url(re.compile(rf"/sandbox\?.*step={last}"))
    assert f"episode={episode_id}" in page.url


def test_the_episode_view_survives_a_reload(page, app_url, runs_root, wait_idle):
    run = first_run(runs_root)
    frame = run.episodes.sort_values("num_actions")
    episode_id = frame["episode_id"].iloc[-1]
    other = frame["episode_id"].iloc[0]
    page.goto(episode_url(app_url, run_name(run), episode_id, step="3", failed="1", diff="other", other=other))
    expect(step_caption(page)).to_contain_text("step 3 (")
    expect(page.get_by_label("Failed steps only")).to_be_checked()
    expect(page.get_by_text("Other episode", exact=True)).to_be_visible()
    ready_for_keys(page, wait_idle)
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(r"step=4(&|$)"))
    link = page.url
    page.reload()
    expect(step_caption(page)).to_contain_text("step 4 (")
    assert page.url == link
    expect(page.get_by_label("Failed steps only")).to_be_checked()
    expect(page.get_by_text("Other episode", exact=True)).to_be_visible()

    # The transcript view is a link of its own, too.
    page.get_by_role("radio", name="Transcript").or_(page.get_by_role("button", name="Transcript")).first.click()
    expect(page).to_have_url(re.compile(r"view=transcript"))
    expect(page.get_by_text(re.compile(r"^Step 1$")).or_(page.get_by_text("Step 1", exact=True)).first).to_be_visible()
    page.reload()
    expect(page).to_have_url(re.compile(r"view=transcript"))
    expect(page.get_by_text("Step 2", exact=True).first).to_be_visible()


def test_an_unknown_episode_says_so(page, app_url, runs_root):
    run = first_run(runs_root)
    page.goto(episode_url(app_url, run_name(run), "no-such-episode", step="2"))
    expect(page.get_by_text("The run has no episode “no-such-episode”")).to_be_visible()
    expect(step_caption(page)).to_have_count(0)
    page.goto(episode_url(app_url, run_name(run), run.episodes["episode_id"].iloc[0], step="999"))
    expect(page.get_by_text(re.compile(r"This episode has no step 999"))).to_be_visible()


def test_a_text_blocks_copy_button_copies_the_command_exactly(page, app_url, runs_root, wait_idle):
    run = first_run(runs_root)
    frame = run.episodes.sort_values("num_actions")
    episode = run.episode(frame["episode_id"].iloc[-1])
    step = next(s for s in episode.steps if s.command and s.command.strip())
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(episode_url(app_url, run_name(run), episode.episode_id, step=str(step.index)))
    expect(step_caption(page)).to_contain_text(f"step {step.index} (")
    ready_for_keys(page, wait_idle)  # the page's script, which works the copy buttons, is in
    block = page.locator(".ares-text", has=page.locator("pre[data-language='bash']")).first
    block.locator("[data-ares-copy]").click()
    expect(block.locator("[data-ares-copy]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == step.command


def test_a_click_on_a_step_list_row_opens_that_step_and_file_text_stays_text(page, app_url, tmp_path, wait_idle):
    doc = synthetic.episode_dict(task_name="calc__calc-5", actions=6, seed=5)
    hostile = '<img src="x" onerror="window.__aresPwned = 1"> && echo done'
    doc["steps"][4]["action"]["data"][0]["content"] = f"THOUGHT: run it.\n\n```bash\n{hostile}\n```"
    folder = tmp_path / "hostile-list"
    folder.mkdir()
    synthetic.write_episode(folder, doc)
    page.goto(episode_url(app_url, str(folder), doc["episode_id"], step="1"))
    expect(step_caption(page)).to_contain_text("step 1 (")
    wait_idle(page)
    row = page.locator(".ares-steps tr[data-step='4']")
    expect(row.locator("td.command")).to_have_text(hostile)
    assert page.locator(".ares-steps img").count() == 0 and page.evaluate("window.__aresPwned") is None
    row.click()
    expect(page).to_have_url(re.compile(r"step=4(&|$)"))
    expect(step_caption(page)).to_contain_text("step 4 (")
    expect(page.locator(".ares-steps tr.current[data-step='4']")).to_have_count(1)
    # The slider moves the view after a click on a row too (a move by the list wins only in the run of its click).
    wait_idle(page)
    slider = page.locator('.st-key-episode-slider input[type="range"]')
    expect(slider).to_have_value("4")
    slider.focus()
    page.keyboard.press("ArrowLeft")
    expect(page).to_have_url(re.compile(r"step=3(&|$)"))
    expect(step_caption(page)).to_contain_text("step 3 (")
