"""The episode page shows a reasoning model's reasoning first, and a command that timed out as its output."""

from __future__ import annotations

import pathlib
import shutil

import atif_fixtures as af
import page_text
import pytest
import reasoning_fixtures as rf

TESTS = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    rf.write(root / "reasoning")
    shutil.copytree(TESTS / "fixtures" / "mini-swe-agent-real", root / "mini")
    af.write_job(root / "harbor")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))


def test_reasoning_comes_first_and_folds(runs, app):
    at = app("episode", run="reasoning", episode="deepseek-run/calc__calc-1", step="1")
    assert not at.exception
    (box,) = [e for e in at.expander if e.label.startswith("Reasoning (")]
    assert rf.DEEPSEEK_REASONING in [c.value for c in page_text.blocks(box)]
    assert box.proto.expanded  # open at first, folds away on a click
    # Shown before the prompt and the response, in page order.
    texts = (getattr(node, "label", None) or getattr(node, "value", None) for node in _walk(at.main))
    order = [text for text in texts if isinstance(text, str)]  # tables hold frames, not text
    assert order.index(box.label) < order.index("#### Prompt: new since the previous call")
    assert order.index(box.label) < order.index("#### Response")


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def test_a_timed_out_command_shows_its_failure_and_times(runs, app):
    at = app("episode", run="mini", episode="deterministic-run/text-timeout", step="1")
    assert not at.exception
    shown = page_text.of(at)
    assert ":orange-badge[timed out]" in shown and "timed out after 2 seconds" in shown
    assert "command 2.0 s" in shown


def test_a_harbor_trial_on_the_overview_and_episode_pages(runs, app):
    at = app(run="harbor")
    assert not at.exception
    table = at.dataframe(key="overview.table").value.set_index("episode_id")
    assert table.loc[f"{af.JOB}/{af.TRIAL}", "verdict"] == "verifier (result.json)"
    at = app("episode", run="harbor", episode=f"{af.JOB}/{af.TRIAL}", step="1")
    assert not at.exception
    assert any(af.REASONING in c.value for e in at.expander if e.label.startswith("Reasoning")
               for c in page_text.blocks(e))
    assert "ls -la /app" in page_text.of(at)
