"""What the table grid draws for an unknown value, in a real Chromium: the app's dash, never Streamlit's "None" or 0,
and a numeric column with unknown cells still sorts by its numbers, the unknown cells together at one end.

The grid (Glide) draws its cells on a canvas: the test records the texts the page's canvases draw (``fillText``),
and reads the rows' order from the grid's accessible cells (where a missing cell is empty).
"""

from __future__ import annotations

import re

import pytest
from conftest import serve_app
from playwright.sync_api import expect

import ares_viewer
from testdata import no_usage

pytestmark = pytest.mark.browser

# Every text a grid's canvas draws: its grid's place on the page, the text, where (canvas pixels).
_RECORD = """
window.__drawn = [];
const fill = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
  const grid = this.canvas.closest && this.canvas.closest('[data-testid="stDataFrame"]');
  if (grid) {
    const grids = [...document.querySelectorAll('[data-testid="stDataFrame"]')];
    window.__drawn.push({grid: grids.indexOf(grid), text: String(text), x: x, y: y});
  }
  return fill.call(this, text, x, y, ...rest);
};
"""


def _drawn(page, grid: int) -> list[dict]:
    return page.evaluate(f"window.__drawn.filter(d => d.grid === {grid})")


def _wait_drawn(page, grid: int, text: str) -> None:
    page.wait_for_function(f"window.__drawn.some(d => d.grid === {grid} && d.text === {text!r})")


def _column(grid, header: str) -> list[str]:
    """The accessible cells of the grid's column ``header`` (its header may carry a sort arrow), top to bottom."""
    headers = [h.strip() for h in grid.locator("[role=columnheader]").all_inner_texts()]
    at = next(i for i, h in enumerate(headers) if re.sub(r"^[↑↓]\s*", "", h) == header)
    rows = grid.locator("[role=row]").all()[1:]
    return [r.locator("[role=gridcell],[role=columnheader]").nth(at).inner_text().strip() for r in rows]


def _grid_index(page) -> int:
    return page.locator('[data-testid="stDataFrame"]').count() - 1


@pytest.fixture(scope="module")
def mixed_app(tmp_path_factory):
    """The app on a folder holding the mixed run (``no_usage.write_mixed_run``); yields its URL and the run."""
    root = tmp_path_factory.mktemp("unknown-runs")
    ids = no_usage.write_mixed_run(root / "mixed")
    log_dir = tmp_path_factory.mktemp("unknown-server")
    with serve_app(root, tmp_path_factory.mktemp("unknown-cache"), log_dir / "review.sqlite", log_dir) as url:
        yield url, ares_viewer.open_run(root / "mixed"), ids


def test_the_overview_draws_unknown_tokens_and_cost_as_the_dash_and_sorts_them_by_number(page, mixed_app, wait_idle):
    url, run, ids = mixed_app
    task = run.episodes.set_index("episode_id")["task_name"]
    page.add_init_script(_RECORD)
    page.goto(f"{url}/?run=mixed")
    expect(page.get_by_text(f"{len(run)} of {len(run)} episodes")).to_be_visible()
    wait_idle(page)
    grid = page.locator('[data-testid="stDataFrame"]').last
    grid.scroll_into_view_if_needed()
    index = _grid_index(page)
    _wait_drawn(page, index, "–")
    texts = [d["text"] for d in _drawn(page, index)]
    assert "None" not in texts and "nan" not in texts

    # Unknown cells are empty in the accessible grid (drawn as the dash), never 0; known ones are their numbers.
    expect(grid.locator("[role=columnheader]", has_text="prompt tok.")).to_have_count(1)
    expect(grid.locator("[role=row]")).to_have_count(len(run) + 1)
    by_task = dict(zip(_column(grid, "task"), _column(grid, "prompt tok."), strict=True))
    assert [by_task[task[e]] for e in ids["unknown"]] == ["", ""]
    known = {e: int(by_task[task[e]]) for e in ids["first_call"] + ids["whole"]}
    assert all(v > 0 for v in known.values())
    assert known[ids["first_call"][0]] < 1000 < min(known[e] for e in ids["whole"])  # text order would differ

    # A click on the header sorts by the numbers, the unknown cells together at one end; a second click reverses.
    [header] = [d for d in _drawn(page, index) if d["text"] == "prompt tok."][-1:]
    canvas = grid.locator("canvas").first.bounding_box()
    ascending = sorted(known.values())
    for clicks, expected in ((1, ["", ""] + [str(v) for v in ascending]),
                             (2, [str(v) for v in reversed(ascending)] + ["", ""])):
        page.mouse.click(canvas["x"] + header["x"] + 10, canvas["y"] + header["y"])
        expect(grid.locator("[role=columnheader]", has_text="prompt tok.")).to_have_text(
            re.compile(r"^\s*[↑↓]\s*prompt tok\.\s*$"))
        for _ in range(50):
            if _column(grid, "prompt tok.") == expected:
                break
            page.wait_for_timeout(100)
        assert _column(grid, "prompt tok.") == expected, clicks


def test_lost_tasks_draws_episodes_never_given_a_step_with_the_dash_not_none(page, app_url, runs_root, wait_idle):
    assert (runs_root / "demo-run" / ".branches").is_dir(), "the bundled sample's branches are missing"
    page.add_init_script(_RECORD)
    page.goto(f"{app_url}/lost?run=demo-run")
    expect(page.get_by_role("heading", name="Lost tasks")).to_be_visible()
    wait_idle(page)
    grid = page.locator('[data-testid="stDataFrame"]').last  # the episodes, not searched ones without a step
    grid.scroll_into_view_if_needed()
    index = _grid_index(page)
    _wait_drawn(page, index, "–")
    assert "None" not in {d["text"] for d in page.evaluate("window.__drawn")}
