"""A reasoning model's reasoning, in every form providers write it: read, searchable, shown and exported."""

from __future__ import annotations

import pytest
import reasoning_fixtures as rf

import ares_viewer
from ares_viewer import cli
from ares_viewer.analysis import search
from ares_viewer.formats import reasoning
from ares_viewer.model import render as display


@pytest.fixture
def files(tmp_path):
    return rf.write(tmp_path / "runs")


def test_every_form_fills_the_steps_reasoning(files):
    deepseek = ares_viewer.load_episode(files["deepseek"]).step(1)
    assert deepseek.reasoning == rf.DEEPSEEK_REASONING and deepseek.response == "" and deepseek.thought == ""
    assert deepseek.command == "cat calc.py"
    gemini = ares_viewer.load_episode(files["gemini"])
    assert gemini.step(1).reasoning == rf.GEMINI_REASONING  # from extra.response (1.x)
    assert gemini.step(1).cost == pytest.approx(0.00215)  # usage.cost (1.x)
    assert gemini.start_time == 1760000100  # response.created (1.x)
    assert ares_viewer.load_episode(files["claude"]).step(1).reasoning == rf.CLAUDE_THINKING
    ares = ares_viewer.load_episode(files["ares"]).step(1)
    assert ares.reasoning == rf.ARES_THINKING
    assert ares.response == "Run the tests." and ares.command == "pytest -q"


def test_ares_tool_result_is_the_steps_output_and_created_at_splits_its_time(files):
    step = ares_viewer.load_episode(files["ares"]).step(1)
    assert step.output == "1 failed, 3 passed in 0.12s"
    assert step.model_time == pytest.approx(2.0) and step.command_time == pytest.approx(3.0)


@pytest.mark.parametrize(("message", "expected"), [
    ({"reasoning_content": "a"}, "a"),  # DeepSeek, LiteLLM
    ({"reasoning": "b"}, "b"),  # OpenRouter, vLLM
    ({"reasoning_details": [{"type": "reasoning.summary", "summary": "c"},
                            {"type": "reasoning.encrypted", "data": "xx"}]}, "c"),  # OpenRouter (o-series)
    ({"content": [{"type": "thinking", "thinking": "d", "signature": "s"}, {"type": "text", "text": "answer"}]},
     "d"),  # Anthropic Messages API content blocks
    ({"content": [{"type": "redacted_thinking", "data": "zz"}]}, "[redacted thinking]"),
    ({"content": "no reasoning"}, ""),
])
def test_reasoning_forms(message, expected):
    assert reasoning.from_message(message) == expected


def test_reasoning_is_searchable_and_in_the_frame(files):
    run = ares_viewer.open_run(files["deepseek"].parent.parent.parent)
    found = list(search.hits(run, "operator must be wrong"))
    assert [(h.episode_id, h.step, h.field) for h in found] == [("deepseek-run/calc__calc-1", 1, "reasoning")]
    frame = run.episode("deepseek-run/calc__calc-1").steps_frame()
    assert frame.loc[1, "reasoning_chars"] == len(rf.DEEPSEEK_REASONING)


def test_cli_show_prints_the_reasoning_first(files, capsys):
    assert cli.main(["show", str(files["deepseek"]), "--step", "1"]) == 0
    out = capsys.readouterr().out
    assert out.index("REASONING:") < out.index("$ cat calc.py")
    assert rf.DEEPSEEK_REASONING in out
    assert display.step_text(ares_viewer.load_episode(files["gemini"]), 1).count("REASONING:") == 1


def test_review_exports_carry_the_reasoning(files, tmp_path, monkeypatch):
    from ares_viewer import review

    monkeypatch.setenv(review.DB_ENV, str(tmp_path / "review.sqlite"))
    run = ares_viewer.open_run(files["deepseek"].parent.parent)
    store = review.open_store()
    store.add(run, "deepseek-run/calc__calc-1", 1, author="ada", label="reasoning", text="spots the bug")
    for suffix in (".jsonl", ".parquet"):
        out = tmp_path / f"marked{suffix}"
        assert review.write_export(review.export_records(run, store, labels=["reasoning"]), out) == 1
        (record,) = review.read_export(out)
        assert record["reasoning"] == rf.DEEPSEEK_REASONING and record["response"] == ""
