"""The ares-viewer command line."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from ares_viewer import cli
from ares_viewer.base import durations
from testdata import synthetic


def test_episodes_table_and_json(tmp_path, capsys):
    synthetic.write_run(tmp_path, 3, actions=4)
    assert cli.main(["episodes", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "episode_id" in table and "calc__calc-0" in table
    assert cli.main(["episodes", str(tmp_path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and {"episode_id", "outcome", "num_actions"} <= set(rows[0])


def test_show_episode_and_step(tmp_path, capsys):
    path = synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=3, seed=5))
    assert cli.main(["show", path]) == 0
    assert "outcome: completed" in capsys.readouterr().out
    assert cli.main(["show", path, "--step", "2"]) == 0
    out = capsys.readouterr().out
    assert "THOUGHT:" in out and "returncode:" in out and "$ " in out


def test_show_says_why_the_sample_errored_episode_ended_with_its_root_cause(capsys):
    root = pathlib.Path(__file__).resolve().parent.parent / "sample_runs" / "demo-run"
    assert cli.main(["show", str(root / "c03d1292-fb4b-4aab-acee-f25250a93f54.json")]) == 0
    why = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("why:"))
    assert "failed before it was scored" in why and "root cause: APIError: 409" in why and "is not running" in why


def test_errors_go_to_stderr_with_nonzero_exit(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "episodes", str(tmp_path / "nope")],
                             capture_output=True, text=True)
    assert missing.returncode != 0 and "no such file or folder" in missing.stderr and missing.stdout == ""
    # show says it as every other command does, not as Python's "[Errno 2] No such file or directory".
    nofile = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "show", str(tmp_path / "nope.json")],
                            capture_output=True, text=True)
    assert (nofile.returncode, nofile.stderr, nofile.stdout) == (2, f"error: {tmp_path / 'nope.json'}: no such file "
                                                                    "or folder\n", "")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    shown = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "show", str(bad)], capture_output=True, text=True)
    assert shown.returncode == 1 and "bad.json" in shown.stderr and "truncated JSON" in shown.stderr


def test_step_out_of_range(tmp_path, capsys):
    path = synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=2))
    assert cli.main(["show", path, "--step", "9"]) == 1
    assert "no step 9" in capsys.readouterr().err


def test_failures_lists_reasons_with_counts(tmp_path, capsys):
    failed = [synthetic.episode_dict(task_name=f"calc__calc-{i}", reward=0.0, seed=i, actions=2) for i in range(2)]
    errored = synthetic.episode_dict(task_name="calc__calc-9", ending="errored", seed=9, actions=2)
    for doc in (*failed, errored, synthetic.episode_dict(reward=1.0, seed=5, actions=2)):
        synthetic.write_episode(tmp_path, doc)
    assert cli.main(["failures", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "2" and "completed, not solved" in lines[0]
    # The ids listed are the episodes', labelled as such, after the count of tasks.
    listed = lines[0].split("(2 task(s); episodes: ")[1].rstrip(")").split(", ")
    assert sorted(listed) == sorted(d["episode_id"] for d in failed)
    assert len(lines) == 2 and lines[1].split()[0] == "1" and errored["episode_id"] in lines[1]
    assert cli.main(["failures", str(tmp_path), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["episodes"] for r in records] == [2, 1]
    assert sorted(records[0]["episode_ids"]) == sorted(d["episode_id"] for d in failed)


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400)])
def test_parse_duration(text, seconds):
    assert durations.parse_duration(text) == seconds


def test_parse_duration_refuses_nonsense():
    with pytest.raises(ValueError, match="not a duration"):
        durations.parse_duration("2 fortnights")


def test_a_mini_swe_agent_thought_is_labelled_once(capsys):
    """mini-swe-agent's responses open with "THOUGHT:"; the step shows it as the heading, not again under it."""
    path = (pathlib.Path(__file__).parent / "fixtures" / "mini-swe-agent" / "swebench-gpt4o-v1" / "django__django-11099"
            / "django__django-11099.traj.json")
    assert cli.main(["show", str(path), "--step", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("THOUGHT:") == 1
    assert "THOUGHT:\nLet me look at the validators.\n" in out


def test_failures_say_whose_failure_each_is_and_the_success_rate_without_the_infrastructure(tmp_path, capsys):
    solved = synthetic.episode_dict(reward=1.0, seed=5, actions=2)
    timed_out = synthetic.episode_dict(ending="errored", seed=6, actions=2)
    timed_out["error"] = {"type": "APITimeoutError", "message": "Request timed out."}
    for doc in (solved, timed_out):
        synthetic.write_episode(tmp_path, doc)
    assert cli.main(["failures", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("1 failure(s) of the infrastructure") and "100% of 1 episodes" in lines[0]
    assert "[infrastructure] errored: APITimeoutError" in lines[1]
