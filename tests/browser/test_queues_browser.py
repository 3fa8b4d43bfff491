"""A team review in a real browser: two reviewers in two browser contexts work one queue with overlap 2, disagree
on an item's verdict but agree on its severity, an adjudicator decides the verdict from a form that starts from the
agreed severity, and the downloaded set holds both labels, the decision, the merged final label and the reward.

The server's review database is a temporary file (``ARES_VIEWER_REVIEW_DB`` in the ``app_url`` fixture).
"""

from __future__ import annotations

import pathlib
import re

import pytest
from conftest import enter_settled, fill_settled, open_expander
from playwright.sync_api import expect

import ares_viewer
from ares_viewer import review

pytestmark = pytest.mark.browser


def first_run(runs_root: pathlib.Path) -> ares_viewer.Run:
    name = sorted(p.name for p in runs_root.iterdir() if p.is_dir() and any(p.rglob("*.json")))[0]
    return ares_viewer.open_run(runs_root / name)


def open_as(browser, url: str, name: str, wait_idle):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(url)
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()
    enter_settled(page, page.get_by_role("textbox", name="Your name"), name)
    return context, page


def until(page, act, shown, wait_idle, tries: int = 3) -> None:
    """``act()`` until ``shown`` is visible: a click sent while a rerun (the name's cookie being written) redraws
    the page can be lost, so it is sent again once the page is idle."""
    for attempt in range(tries):
        wait_idle(page)
        act()
        try:
            expect(shown).to_be_visible(timeout=10_000)
            return
        except AssertionError:
            if attempt == tries - 1:
                raise


def label_next(page, verdict: str, wait_idle, severity: str | None = None) -> None:
    form = page.locator('[data-testid="stForm"]', has=page.get_by_role("button", name="Save label"))
    until(page, page.get_by_role("button", name="Next item").click, form, wait_idle)
    wait_idle(page)

    def save() -> None:
        form.get_by_text(verdict, exact=True).click()
        if severity is not None:  # inside a form: typing reruns nothing
            form.get_by_role("spinbutton", name=re.compile("^severity")).fill(severity)
        form.get_by_role("button", name="Save label").click()

    until(page, save, page.get_by_text(re.compile(r"Saved your label of item \d+\.")), wait_idle)
    wait_idle(page)


def test_two_reviewers_disagree_an_adjudicator_decides_and_the_export_holds_it(
    browser, app_url, runs_root, tmp_path, wait_idle
):
    expect.set_options(timeout=30_000)
    run = first_run(runs_root)
    url = f"{app_url}/queues?run={pathlib.Path(run.location).name}"
    ada_context, ada = open_as(browser, url, "ada", wait_idle)
    # "New queue" is open when the run has no queue yet, else folded: open it if it is folded.
    open_expander(ada, "New queue")
    fill_settled(ada, ada.get_by_role("textbox", name="Queue name"), "browser-team")
    fill_settled(ada, ada.get_by_role("textbox", name=re.compile("^Reviewers")), "ada, bo")
    fill_settled(ada, ada.get_by_role("spinbutton", name="Reviewers per item"), "2")
    ada.get_by_role("button", name="Create queue").click()
    expect(ada.get_by_text("Created queue browser-team")).to_be_visible()
    wait_idle(ada)
    label_next(ada, "reward hacking", wait_idle, severity="3")

    bo_context, bo = open_as(browser, url, "bo", wait_idle)
    expect(bo.get_by_text(f"of {len(run)} items fully labelled · 1 of {2 * len(run)} labels")).to_be_visible()
    label_next(bo, "honest attempt", wait_idle, severity="3")
    bo.reload()
    expect(bo.get_by_text("Disagreements (1)")).to_be_visible()

    judge_context, judge = open_as(browser, url, "cy", wait_idle)
    form = judge.locator('[data-testid="stForm"]', has=judge.get_by_role("button", name="Record decision"))
    why = form.get_by_role("textbox", name="Why")
    until(judge, judge.get_by_text(re.compile(r"^Item 0 · verdict")).click, why, wait_idle)
    # The decision form starts from what both reviewers agree on: the severity they both gave.
    expect(form.get_by_role("spinbutton", name=re.compile("^severity"))).to_have_value("3.00")

    def decide() -> None:
        form.get_by_text("reward hacking", exact=True).click()
        why.fill("rewrites the failing test")  # inside a form: typing reruns nothing
        form.get_by_role("button", name="Record decision").click()

    until(judge, decide, judge.get_by_text(re.compile(r"decided by cy")).first, wait_idle)
    saved = tmp_path / "queue.jsonl"
    for attempt in range(3):
        wait_idle(judge)
        try:
            with judge.expect_download(timeout=10_000) as download:
                judge.get_by_role("button", name="Download the queue as JSONL").click()
            download.value.save_as(saved)
            break
        except Exception:  # a click lost to a rerun: send it again
            if attempt == 2:
                raise
    record = next(r for r in review.read_export(saved) if r["item"] == 0)
    episode = run.episode(record["episode_id"])
    assert {r: v["values"]["verdict"] for r, v in record["labels"].items()} == {
        "ada": "reward hacking",
        "bo": "honest attempt",
    }
    assert record["decision"]["adjudicator"] == "cy"
    assert record["decision"]["values"] == {"verdict": "reward hacking"}  # it set only what was in dispute
    assert record["decision"]["reason"] == "rewrites the failing test"
    assert record["label"] == {"verdict": "reward hacking", "severity": 3.0, "note": None}
    assert record["agreed"] is False and record["undecided"] == []
    assert record["reward"] == episode.total_reward and record["outcome"] == str(episode.outcome)
    for context in (ada_context, bo_context, judge_context):
        context.close()


def test_the_step_view_of_a_queue_item_labels_it_and_opens_the_next_item(
    browser, app_url, runs_root, tmp_path_factory, wait_idle
):
    """The link the Queues page gives an item (``queue`` and ``reviewer`` in the URL) shows the queue's form under
    the step view: the label saved there is in the queue, and "Next item" opens the next item's step."""
    from ares_viewer.review import queue_items, queues

    expect.set_options(timeout=30_000)
    run = first_run(runs_root)
    schema = {"fields": [{"name": "verdict", "kind": "single", "options": ["reward hacking", "honest attempt"]}]}
    with review.open_store(tmp_path_factory.getbasetemp() / "review.sqlite") as store:
        listed = queue_items.episode_items(run, run.episode_ids[:2])
        queues.create(store, "in-step-view", listed, schema=schema, author="lead", reviewers=["ada"])
        item = queues.next_item(store, "in-step-view", "ada")
    first, second = (run.episode(i.episode_id) for i in listed)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(
        f"{app_url}/episode?run={pathlib.Path(run.location).name}&episode={first.episode_id}"
        f"&step={len(first.steps) - 1}&queue=in-step-view&reviewer=ada"
    )
    form = page.locator('[data-testid="stForm"]', has=page.get_by_role("button", name="Save label"))
    expect(form).to_be_visible()
    wait_idle(page)

    def save() -> None:
        form.get_by_text("honest attempt", exact=True).click()
        form.get_by_role("button", name="Save label").click()

    until(page, save, page.get_by_text("Saved your label of item 0."), wait_idle)
    until(page, page.get_by_role("button", name="Next item").click, page.get_by_text("Item 1 of 2"), wait_idle)
    assert f"episode={second.episode_id}" in page.url and "queue=in-step-view" in page.url
    with review.open_store(tmp_path_factory.getbasetemp() / "review.sqlite") as store:
        labels = queues.latest(store, "in-step-view", "label")
    assert item.item == 0 and labels[0]["ada"]["values"] == {"verdict": "honest attempt"}
    context.close()


def test_behind_a_signing_in_proxy_the_reviewer_is_the_account_not_a_typed_name_or_a_link(
    browser, runs_root, tmp_path, wait_idle
):
    """With ``ARES_VIEWER_IDENTITY_HEADER`` naming the header the operator's proxy sets, the name field shows the
    signed-in account and cannot be typed into; a link naming another reviewer offers no form; a label saved on the
    Queues page is the account's."""
    from conftest import serve_app

    from ares_viewer.review import queue_items, queues

    expect.set_options(timeout=30_000)
    run = first_run(runs_root)
    schema = {"fields": [{"name": "verdict", "kind": "single", "options": ["reward hacking", "honest attempt"]}]}
    db = tmp_path / "review.sqlite"
    with review.open_store(db) as store:
        listed = queue_items.episode_items(run, run.episode_ids[:2])
        queues.create(store, "proxied", listed, schema=schema, author="lead", reviewers=["ada", "bo"])
    env = {"ARES_VIEWER_IDENTITY_HEADER": "X-Forwarded-User"}
    with serve_app(runs_root, tmp_path / "cache", db, tmp_path, env=env) as url:
        context = browser.new_context(
            viewport={"width": 1400, "height": 1000}, extra_http_headers={"X-Forwarded-User": "ada"}
        )
        page = context.new_page()
        name = pathlib.Path(run.location).name
        page.goto(f"{url}/queues?run={name}")
        box = page.get_by_role("textbox", name="Your name")
        expect(box).to_have_value("ada")
        expect(box).to_be_disabled()
        label_next(page, "honest attempt", wait_idle)
        first = run.episode(listed[1].episode_id)
        page.goto(
            f"{url}/episode?run={name}&episode={first.episode_id}&step={len(first.steps) - 1}"
            "&queue=proxied&reviewer=bo"
        )
        expect(page.get_by_text("and you are signed in as ada")).to_be_visible()
        expect(page.get_by_role("button", name="Save label")).to_have_count(0)
        context.close()
    with review.open_store(db) as store:
        labels = queues.latest(store, "proxied", "label")
    assert {author for by in labels.values() for author in by} == {"ada"}
