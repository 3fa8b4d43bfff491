"""The Search page on a run too big to search within one page run's time budget: it says how far it got,
"Continue" goes on from there, and "Stop" stops a search, keeping what it found."""

from __future__ import annotations

import json
import pathlib
import random
import re
import time
import urllib.parse
import urllib.request

from conftest import serve_app
from playwright.sync_api import expect

from benchmarks import bench_scale
from testdata import synthetic

FILES, PER_FILE = 48, 1000
BUDGET_S = 3
SECONDS_ENV = "ARES_VIEWER_SEARCH_SECONDS"  # seconds one page run searches for
# A regular expression without literal text every match holds: its search parses every record (slow on purpose).
QUERY = r"quokka-\d+|nothing-matches-this"


def write_planted_run(folder: pathlib.Path) -> None:
    """A Tinker run of ``FILES`` files of ``PER_FILE`` rollouts; one rollout of each file says ``quokka-<file>``."""
    rng = random.Random(0)
    for block in range(FILES):
        lines = []
        for n in range(PER_FILE):
            line = json.dumps(bench_scale._line("tinker", block, block * PER_FILE + n, rng))
            if n == PER_FILE // 2:
                line = line.replace("Working it out", f"Working it out (quokka-{block})", 1)
                assert f"quokka-{block}" in line
            lines.append(line + "\n")
        target = folder / f"iteration_{block:06d}" / "train_rollout_summaries.jsonl"
        target.parent.mkdir(parents=True)
        target.write_text("".join(lines), encoding="utf-8")


def progress(page) -> str:
    """The progress line once no search runs (it starts with the hit count; "Searching…" while one runs)."""
    line = page.locator('[data-testid="stCaptionContainer"]', has_text=re.compile(r"hit\(s\) in"))
    expect(line).to_have_text(re.compile(r"^\d+ hit\(s\) in \d+ episode\(s\)"))
    return line.inner_text()


def counts(line: str) -> tuple[int, int | None]:
    """Hits and files searched in a progress line (None: all of them)."""
    hits = int(re.match(r"(\d+) hit", line).group(1))
    found = re.search(r"searched (\d+) of " + str(FILES) + r" file", line)
    return hits, int(found.group(1)) if found else None


def expect_hit_links(page, count: int) -> None:
    """As many hit links on the page as the progress line counts (waiting for the page to draw the last ones)."""
    expect(page.locator('[data-testid="stPageLink"] a', has_text=re.compile(r" · step \d+ · "))).to_have_count(count)


def click(page, name: str) -> None:
    """Click the button named ``name``: read and clicked through one held element."""
    button = page.get_by_role("button", name=name)
    expect(button).to_be_visible()
    held = button.element_handle()
    assert name in held.inner_text()
    held.click()


def new_search(page, wait_idle, query: str) -> None:
    box = page.get_by_label("Text or regular expression")
    wait_idle(page)
    box.fill(query)
    box.press("Enter")


def test_search_stops_at_its_budget_continues_and_stops(page, wait_idle, tmp_path):
    runs = tmp_path / "runs"
    write_planted_run(runs / "big")
    with serve_app(runs, tmp_path / "cache", tmp_path / "review.sqlite", tmp_path,
                   env={SECONDS_ENV: str(BUDGET_S)}) as url:
        page.goto(f"{url}/search?run=big")
        expect(page.get_by_label("Text or regular expression")).to_be_visible()
        wait_idle(page)
        page.get_by_text("Regular expression", exact=True).click()
        new_search(page, wait_idle, QUERY)

        # The budget ends the first page run before the end of the run: the page says how far it got.
        expect(page.get_by_role("button", name="Continue")).to_be_visible()
        wait_idle(page)
        first = progress(page)
        hits, files = counts(first)
        assert files is not None and files < FILES, first
        assert f"of {FILES * PER_FILE:,} episodes" in first
        assert hits in (files, files + 1), first  # one per file searched, and maybe the one of the file it was in
        expect_hit_links(page, hits)

        # Continue goes on from there, finding more; again until the whole run is searched.
        click(page, "Continue")
        expect(page.get_by_text(first)).to_have_count(0)
        line = progress(page)
        more, further = counts(line)
        assert more > hits and (further is None or further > files), line
        for _ in range(3 * FILES):
            if further is None:
                break
            wait_idle(page)
            click(page, "Continue")
            expect(page.get_by_text(line)).to_have_count(0)
            line = progress(page)
            _, further = counts(line)
        assert line.startswith(f"{FILES} hit(s) in {FILES} episode(s) · searched all {FILES} file(s)"), line
        expect_hit_links(page, FILES)
        expect(page.get_by_role("button", name="Continue")).to_have_count(0)

        # Stop during a search keeps the hits found so far and offers to continue.
        new_search(page, wait_idle, QUERY + "|nor-this")
        expect(page.get_by_text(re.compile(r"^Searching…"))).to_be_visible()
        click(page, "Stop")
        expect(page.get_by_role("button", name="Continue")).to_be_visible()
        wait_idle(page)
        stopped = progress(page)
        hits, files = counts(stopped)
        assert files is not None and files < FILES, stopped
        expect_hit_links(page, hits)
        time.sleep(BUDGET_S + 1)  # stopped means stopped: nothing more comes by itself
        assert progress(page) == stopped
        click(page, "Continue")
        expect(page.get_by_text(stopped)).to_have_count(0)
        more, further = counts(progress(page))
        assert more > hits and (further is None or further > files)


def test_a_link_to_a_backtracking_expression_holds_up_no_other_visitor(browser, page, tmp_path):
    """One visitor opens a link searching ``(a+)+$`` over 28 letters a before a "!" (a backtracking engine takes
    2**28 steps, holding the server's interpreter throughout); meanwhile the server answers its health check and
    another visitor's page at once, and the first page says it searched the run."""
    runs = tmp_path / "runs"
    synthetic.write_output_run(runs / "letters", "a" * 28 + "!")
    with serve_app(runs, tmp_path / "cache", tmp_path / "review.sqlite", tmp_path, env={SECONDS_ENV: "5"}) as url:
        searcher = browser.new_context().new_page()
        try:
            searcher.goto(f"{url}/search?run=letters&regex=1&q={urllib.parse.quote('(a+)+$')}")
            searcher.wait_for_timeout(2000)  # the search has started
            started = time.monotonic()
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=30) as answer:
                assert answer.status == 200
            page.goto(f"{url}/search?run=letters&q=aaa")
            expect(page.get_by_text(re.compile(r"^\d+ hit\(s\) in 1 episode\(s\)"))).to_be_visible(timeout=30_000)
            assert time.monotonic() - started < 10
            expect(searcher.get_by_text(re.compile(r"^0 hit\(s\) in 0 episode\(s\) · searched all 1 file\(s\)"))
                   ).to_be_visible(timeout=5_000)
        finally:
            searcher.context.close()
