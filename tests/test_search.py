"""Search across a run: plain text, regex, case, fields, bounded."""

from __future__ import annotations

import itertools
import random
import re
import time

import pytest

import ares_viewer
from ares_viewer.analysis import linear_regex, search
from testdata import synthetic


@pytest.fixture
def run(tmp_path):
    for seed in range(3):
        synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=5, seed=seed, task_name=f"calc__calc-{seed}"))
    return ares_viewer.open_run(tmp_path)


def test_plain_text_finds_commands_with_their_step(run):
    hits = list(search.hits(run, "COMPLETE_TASK_AND_SUBMIT", fields=["command"]))
    assert len(hits) == 3  # the submit command ends each episode
    for hit in hits:
        episode = run.episode(hit.episode_id)
        assert hit.step == episode.num_actions
        assert "COMPLETE_TASK_AND_SUBMIT" in episode.step(hit.step).command
        assert hit.field == "command"


def test_case_and_regex(run):
    insensitive = list(search.hits(run, "thought: step 2.", fields=["thought"]))
    assert len(insensitive) == 3
    assert not list(search.hits(run, "thought: step 2.", fields=["thought"], case=True))
    regex = list(search.hits(run, r"Step [34]\.", regex=True, fields=["thought"]))
    assert sorted({h.step for h in regex}) == [3, 4]
    assert not list(search.hits(run, r"Step [34]\.", fields=["thought"]))  # not a regex unless asked


def test_hits_are_bounded_and_lazy(run):
    assert len(list(search.hits(run, "src", limit=4))) == 4
    first = next(search.hits(run, "src"))
    assert first.snippet and "src" in first.snippet.lower()
    assert len(list(itertools.islice(search.hits(run, "e"), 2))) == 2


def test_snippet_is_one_line_around_the_match(run):
    hit = next(search.hits(run, "def parse", fields=["output"]))
    assert "\n" not in hit.snippet
    assert "def parse" in hit.snippet
    assert len(hit.snippet) <= 2 * 80 + len("def parse") + 2 + 6 * 3  # context either side, markers


def test_bad_queries_raise_value_error(run):
    with pytest.raises(ValueError, match="invalid regular expression"):
        list(search.hits(run, "([", regex=True))
    with pytest.raises(ValueError, match="empty"):
        list(search.hits(run, ""))
    with pytest.raises(ValueError, match="unknown field"):
        list(search.hits(run, "x", fields=["prompt"]))


def test_prompts_are_searched_at_step_zero(run):
    episode = run.episode(run.episode_ids[0])
    task = search.prompt_text(episode, "task")
    assert task and "COMPLETE_TASK_AND_SUBMIT" in task  # the task message quotes the submit command
    hits = list(search.hits(run, "COMPLETE_TASK_AND_SUBMIT", fields=["task"]))
    assert {h.episode_id for h in hits} == set(run.episode_ids)
    assert all(h.step == 0 and h.field == "task" for h in hits)
    assert not list(search.hits(run, "COMPLETE_TASK_AND_SUBMIT", fields=["thought"]))
    if episode.system_prompt:
        word = episode.system_prompt.split()[0]
        assert any(h.field == "system" for h in search.hits(run, word, fields=["system"]))


def test_hits_mark_the_match_and_group_by_episode(run):
    found = list(search.hits(run, "complete_task", fields=["command", "task"]))
    for hit in found:
        before, match, after = hit.pieces()
        assert match.lower() == "complete_task"
        assert hit.snippet == before + match + after
    grouped = search.group_by_episode(found)
    assert [episode for episode, _ in grouped] == list(dict.fromkeys(h.episode_id for h in found))
    assert sum(len(hits) for _, hits in grouped) == len(found)
    assert all(hits[0].field == "task" for _, hits in grouped)  # an episode's prompts come first


# RE2 is linear, but when its automaton grows too large it simulates it at a cost of length × expression size:
# this one takes ~25 s over 1 MB of a's and b's.
COSTLY = "[ab]{500}c|a[ab]{500}c"


def _letters(count: int) -> str:
    rng = random.Random(0)
    return "".join(rng.choice("ab") for _ in range(count))


def test_a_costly_match_is_stopped_at_the_budget_and_named(tmp_path):
    synthetic.write_output_run(tmp_path / "run", _letters(1_000_000))
    found = search.Search(ares_viewer.open_run(tmp_path / "run", use_cache=False), COSTLY, regex=True)
    started = time.monotonic()
    assert list(found.hits(seconds=2)) == []
    assert time.monotonic() - started < 5
    [unfinished] = found.progress.unfinished
    assert re.match(r"episode [0-9a-f-]{36} step 1 output: the expression did not finish within the time budget "
                    r"over 1,000,\d{3} characters; the rest of that episode was not searched$", unfinished)
    line = found.progress.describe(0, 0)
    assert "1 episode(s) searched in part: the expression took longer than the time budget" in line


def test_a_match_in_the_child_process_finds_what_a_match_in_place_finds(monkeypatch):
    """Offsets are characters, in a text with accents, an emoji and a lone surrogate; case folded or not."""
    text = ("Ünïcode 😀 déjà \ud800 vu " * 50 + _letters(300)) * 4
    for expression, case in (("d[ée]j[àa]\\s+\\S*", False), ("[ab]{3}", True), ("DÉJÀ", False), ("(?s).", True)):
        in_place = [m.span() for m in search.compile_pattern(expression, regex=True, case=case).finditer(text)]
        pattern = search.compile_pattern(expression, regex=True, case=case)
        pattern.deadline = time.monotonic() + 60
        monkeypatch.setattr(linear_regex, "INLINE_COST", 0)
        in_child = [(m.start(), m.end()) for m in pattern.finditer(text)]
        monkeypatch.undo()
        assert in_place and in_child == in_place, expression
