"""The command line and a run's notebook face on a run of 200,000 rollouts: they print counts and the first rows
through the index's queries, and never load the run's whole episode table (``Run.episodes``)."""

from __future__ import annotations

import json

import pytest

from ares_viewer import cli
from ares_viewer.runs import run

ROLLOUTS = 200_000
FIRST = "big/it0/train/g0/t0"


@pytest.fixture
def big(big_run, no_whole_table, monkeypatch):
    """The path of ``big``, its index shared by the tests; loading the whole episode table fails the test."""
    root, cache = big_run
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(cache))
    return str(root / "big")


def test_episodes_with_a_limit_prints_the_first_and_says_how_many_more(big, capsys):
    assert cli.main(["episodes", big, "--limit", "5"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 6 and lines[0].split()[0] == "episode_id" and lines[1].split()[0] == FIRST
    assert f"{ROLLOUTS - 5:,} more episode(s) of {ROLLOUTS:,} not shown (raise --limit)" in captured.err


def test_episodes_filters_unsolved_and_by_task_as_json(big, capsys):
    assert cli.main(["episodes", big, "--unsolved", "--limit", "50", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 50 and all(r["total_reward"] == 0 for r in rows)
    task = rows[0]["task_name"]
    assert cli.main(["episodes", big, "--task", task, "--limit", "20", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 20 and {r["task_name"] for r in rows} == {task}


def test_every_episode_streams_in_run_order(big, capsys):
    assert cli.main(["episodes", big]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == ROLLOUTS + 1
    assert lines[1].split()[0] == FIRST and lines[-1].split()[0] == "big/it99/train/g249/t7"
    assert len({len(line) for line in lines[:5000]}) == 1  # one table: the columns line up


def test_failures_counts_reasons(big, capsys):
    assert cli.main(["failures", big]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = [int(line.split()[0]) for line in lines]
    assert 0 < sum(counts) < ROLLOUTS and "completed, not solved" in lines[0] and ", ...)" in lines[0]
    assert cli.main(["failures", big, "--json", "--ids", "5"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["episodes"] for r in records] == counts
    assert all(len(r["episode_ids"]) == min(5, r["episodes"]) for r in records)


def test_the_notebook_face_shows_figures_and_the_first_rows(big):
    opened = run.open_run(big)
    text = str(opened)
    assert f"episodes: {ROLLOUTS}" in text and FIRST in text
    assert f"… and {ROLLOUTS - 20:,} more episodes" in text
    card = opened._repr_html_()
    assert f"<b>{ROLLOUTS}</b> episodes" in card and card.count("<tr>") == 21  # a header and 20 rows
    assert f"{ROLLOUTS - 20:,} more episodes" in card
