"""Failing tests known only from the verifier's output, named at run level: the run table's ``why``, ``Run.failures()``
(the overview's failure groups) and ``ares-viewer failures`` say what the episode's ending says, from the index.

On the sample run (recorded by the project's recorder through real ARES: the verifier's pytest output is in each
episode file) and on harbor 0.25's trials (``tests/fixtures/harbor``: the verifier's ``verifier/test-stdout.txt``
beside ``result.json``; ``oracle-job`` a trial without a trajectory, ``mini-job`` an ATIF trajectory). Before, all
three said "completed, not solved (reward ≤ 0)" for them."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

import ares_viewer
from ares_viewer.cli import main

HERE = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = HERE.parent / "sample_runs" / "demo-run"
HARBOR = HERE / "fixtures" / "harbor"
# run -> (how to lay it out, an episode's failing test its verifier's output names)
RUNS = {
    "sample": (lambda root: shutil.copytree(SAMPLE, root), "../tests/tests/test_core_hidden.py::test_mean_generator"),
    "harbor-trial": (lambda root: shutil.copytree(HARBOR / "oracle-job", root), "test_hello"),
    "harbor-atif": (lambda root: shutil.copytree(HARBOR / "mini-job", root), "test_hello"),
}


@pytest.fixture(params=list(RUNS))
def run(request, tmp_path) -> tuple[ares_viewer.Run, str]:
    lay_out, test = RUNS[request.param]
    lay_out(tmp_path / "run")
    return ares_viewer.open_run(tmp_path / "run"), test


def _why(run: ares_viewer.Run) -> dict[str, str | None]:
    rows = run.queries.page(columns=["episode_id", "why"], limit=1000).to_dict("records")
    return {r["episode_id"]: r["why"] if isinstance(r["why"], str) else None for r in rows}


def test_the_why_column_names_the_failing_tests_as_the_ending_does(run):
    opened, test = run
    whys = _why(opened)
    named = {key: why for key, why in whys.items() if why and test in why}
    assert named, whys  # the index names the test
    for key, why in whys.items():
        assert why == ares_viewer.ending.of(opened.episode(key)).why
    for key, why in named.items():
        ending = ares_viewer.ending.of(opened.episode(key))
        assert test in [t.name for t in ending.failing_tests]
        assert why.startswith("completed, not solved: failed in the verifier's run: ")
        assert ending.failing_tests[0].source in why  # the file (or the record) it was read from


def test_run_failures_group_by_the_named_tests(run, capsys):
    opened, test = run
    failures = opened.failures()
    groups = {row["reason"]: set(row["episode_ids"]) for row in failures.to_dict("records")}
    named = [reason for reason in groups if test in reason]
    assert len(named) == 1
    assert groups[named[0]] == {k for k, why in _why(opened).items() if why == named[0]}
    assert "completed, not solved (reward ≤ 0)" not in groups
    assert main(["failures", str(opened.location), "--json"]) == 0
    said = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert any(test in str(entry.get("reason")) for entry in said), said


def test_failure_reasons_of_a_frame_say_what_its_explained_column_says():
    import pandas as pd

    from ares_viewer.runs.run import failure_reasons

    said = "failed in the verifier's run: test_hello (from verifier/test-stdout.txt)"
    frame = pd.DataFrame({"outcome": ["completed", "completed"], "total_reward": [0.0, 0.0], "error": [None, None],
                          "explained": [said, None]})
    assert failure_reasons(frame).tolist() == ["completed, not solved: " + said, "completed, not solved (reward ≤ 0)"]
