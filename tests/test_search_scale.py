"""Search on a large run: a rare text is found by parsing next to nothing; a search streams, stops at a limit or a
time budget, and continues where it stopped."""

from __future__ import annotations

import shutil

import pytest

import ares_viewer
from ares_viewer.analysis import search
from benchmarks import bench_search


@pytest.fixture(scope="module")
def big_run(big_run, tmp_path_factory):
    """conftest's run of 200,000 rollouts (written once per session), copied and planted with the rare texts."""
    folder = tmp_path_factory.mktemp("big") / "big"
    shutil.copytree(big_run[0] / "big", folder)  # a copy: the shared run stays as written
    bench_search.plant(folder)
    return ares_viewer.open_run(folder, use_cache=False)


def test_a_rare_text_in_200000_rollouts_parses_next_to_nothing(big_run):
    found = search.Search(big_run, "ZANZIBAR Quokka")  # in any case
    hits = list(found.hits())
    assert [(h.field, h.step) for h in hits] == [("thought", 1)]
    assert "zanzibar quokka" in hits[0].snippet
    assert big_run.episode(hits[0].episode_id).step(1).thought.count(bench_search.RARE) == 1
    progress = found.progress
    assert progress.done and progress.files_searched == progress.files == 100
    assert progress.episodes_searched == progress.episodes == 200_000
    assert progress.episodes_parsed == 1
    in_prompt = search.Search(big_run, bench_search.RARE_TASK, fields=["task"])
    assert [h.field for h in in_prompt.hits()] == ["task"]
    assert in_prompt.progress.episodes_parsed == 1


def test_a_time_budget_stops_between_files_and_continues(big_run):
    found = search.Search(big_run, bench_search.RARE)
    assert list(found.hits(seconds=0)) == []
    assert found.progress.stopped == "time" and found.progress.files_searched == 1
    assert not found.progress.done
    rest = []
    while not found.progress.done:
        rest += found.hits(seconds=0.05)
    assert [h.episode_id for h in rest] == [h.episode_id for h in search.hits(big_run, bench_search.RARE)]


def test_a_limit_stops_and_continues_without_repeating(big_run):
    everything = list(search.hits(big_run, "careful math tutor", limit=12))
    found = search.Search(big_run, "careful math tutor")
    first = list(found.hits(limit=5))
    assert found.progress.stopped == "limit" and len(first) == 5
    second = list(found.hits(limit=7))
    assert first + second == everything
    assert found.progress.hits == 12 and found.progress.episodes_parsed <= 12
