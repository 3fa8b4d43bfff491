"""Search across a run: plain text, regex, case, fields, bounded."""

from __future__ import annotations

import itertools

import pytest

import ares_viewer
from ares_viewer.analysis import search
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
