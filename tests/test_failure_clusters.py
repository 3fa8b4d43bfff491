"""Failure clusters: a run's failed episodes grouped by root cause read from each episode, in the library and
the ``failures --clusters`` command."""

from __future__ import annotations

import json
import pathlib

import crafted_episodes

from ares_viewer import cli, model
from ares_viewer.analysis import failure_clusters
from ares_viewer.runs import run

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
MEAN_ERRORED = "c03d1292-fb4b-4aab-acee-f25250a93f54"
MEAN_TRUNCATED = "298f05c6-7948-423a-8b0c-825ff593fc8d"
SLUGIFY_WRONG = "aefe890e-4268-4666-90b5-dd09d3259e06"


def test_the_sample_runs_failures_split_by_dead_container_crash_and_hidden_tests():
    found = failure_clusters.of_run(run.open_run(DEMO)).set_index("kind", append=True)
    assert found["episodes"].sum() == 5  # the five unsolved of ten
    assert set(found["share"]) == {0.1}
    by_episode = {ids[0]: cause for cause, ids in zip(found["cause"], found["episode_ids"], strict=True)}
    # The root of the chain, not ARES's "Code agent task failed" wrapper; the container id masked.
    assert by_episode[MEAN_ERRORED].startswith("error: APIError: N Client Error for http+docker:")
    assert "8eb09b95" not in by_episode[MEAN_ERRORED]
    assert by_episode[MEAN_TRUNCATED] == (
        "last failing command python3 (exit 1): statistics.StatisticsError: mean requires at least one data point"
    )
    assert by_episode[SLUGIFY_WRONG] == (
        "tests failed: ../tests/tests/test_slug_hidden.py::test_accents, "
        "../tests/tests/test_slug_hidden.py::test_uppercase_accents"
    )


def errored(episode_id: str, message: str) -> model.Episode:
    error = {
        "type": "RuntimeError",
        "message": "Code agent task failed",
        "cause": {"type": "FileNotFoundError", "message": message},
    }
    return crafted_episodes.episode(
        episode_id=episode_id, reward=None, outcome=model.Outcome.ERRORED, metadata={"error": error}
    )


def test_errors_differing_only_in_paths_ids_and_numbers_are_one_cluster():
    episodes = [
        errored("a", "[Errno 2] No such file: /tmp/run-81f2c3d4e5/out.json"),
        errored("b", "[Errno 2] No such file: /var/data/7/out.json"),
        errored("c", "disk quota exceeded"),
    ]
    found = failure_clusters.clusters(episodes)
    assert found["episodes"].tolist() == [2, 1]
    assert found.loc[0, "cause"] == "error: FileNotFoundError: [Errno N] No such file: <path>"
    assert found.loc[0, "episode_ids"] == ["a", "b"]
    assert found.loc[0, "share"] == 2 / 3


def test_the_failures_command_prints_clusters_with_shares(capsys):
    assert cli.main(["failures", str(DEMO), "--clusters"]) == 0
    text = capsys.readouterr().out
    assert "10.0%  [error] error: APIError" in text
    assert MEAN_TRUNCATED in text
    assert cli.main(["failures", str(DEMO), "--clusters", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["kind"] for r in records} == {"error", "command", "tests"}
    assert cli.main(["failures", str(DEMO)]) == 0  # without --clusters: the index's reasons, as before
    assert "completed, not solved" in capsys.readouterr().out
