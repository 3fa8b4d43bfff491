"""Why an episode's reward is what it is: the submission, the verifier's run, the outcome in words."""

from __future__ import annotations

import json
import pathlib

import ares_viewer
from ares_viewer import model
from ares_viewer.analysis import ending
from testdata import synthetic

DIFF = ("diff --git a/src/calc/core.py b/src/calc/core.py\n--- a/src/calc/core.py\n+++ b/src/calc/core.py\n"
        "@@ -1 +1 @@\n-    return a - b\n+    return a + b\n")
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"
TEST_OUTPUT = "FAILED tests/test_core.py::test_negative - assert -1 == 1\n1 failed, 3 passed in 0.04s\n"


def read(tmp_path, doc):
    synthetic.write_episode(tmp_path, doc)
    return ares_viewer.open_run(tmp_path).episode(doc["episode_id"])


def recorded(reward: float, **extra):
    doc = synthetic.episode_dict(actions=4, reward=reward, seed=3)
    doc.update(extra)
    return doc


def test_a_recorded_submit_output_and_failing_verifier_explain_reward_zero(tmp_path):
    doc = recorded(0.0,
                   final_command={"step_index": 4, "command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
                                  "returncode": 0, "output": f"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n{DIFF}"},
                   verifier={"step_index": 4, "returncode": 1, "output": TEST_OUTPUT, "reward": 0.0,
                             "reward_file": {"path": "/logs/verifier/reward.txt", "content": "0\n"},
                             "commands": [{"command": "bash /tests/test.sh", "returncode": 1, "output": TEST_OUTPUT}]})
    end = ending.of(read(tmp_path, doc))
    assert end.step == 4
    assert end.submission == DIFF
    assert end.submission_source == "the output of the submit command (step 4)"
    assert end.verifier.output == TEST_OUTPUT and end.verifier.returncode == 1
    assert end.verifier.reward_file == "0\n"
    assert [c.command for c in end.verifier.commands] == ["bash /tests/test.sh"]
    assert end.explanation == ("completed, reward 0: the verifier's tests failed (exit code 1): "
                               "tests/test_core.py::test_negative failed (read from the verifier's test output)")


def test_a_passing_episode_and_a_recorded_submission(tmp_path):
    end = ending.of(read(tmp_path, recorded(1.0, submission=DIFF)))
    assert end.submission == DIFF and end.submission_source == "the agent's recorded submission"
    # no verifier run is recorded: the page does not claim one passed
    assert end.explanation == ("completed, reward 1: the reward came with the episode's last step; the recording "
                               "holds no verifier run or evaluation to say why")


def test_an_empty_submission_is_the_reason_for_reward_zero(tmp_path):
    end = ending.of(read(tmp_path, recorded(0.0, submission="")))
    assert end.submission == ""
    assert end.explanation == "completed, reward 0: the agent submitted no changes"


def test_a_verifier_that_raised_is_named(tmp_path):
    doc = recorded(0.0, verifier={"error": {"type": "TimeoutError", "message": "tests took over 600 s"}})
    end = ending.of(read(tmp_path, doc))
    assert end.explanation == "completed, reward 0: the verifier failed: TimeoutError: tests took over 600 s"


def test_truncated_and_errored_episodes_say_why_they_were_not_scored(tmp_path):
    truncated = ending.of(read(tmp_path, synthetic.episode_dict(actions=3, ending="truncated", seed=5)))
    assert truncated.explanation == "truncated, reward 0: the step limit ended the episode before the agent submitted"
    assert truncated.submission is None
    errored = ending.of(read(tmp_path, synthetic.episode_dict(actions=3, ending="errored", seed=6)))
    assert errored.reward is None
    assert errored.explanation == ("errored: the episode failed before it was scored: "
                                   "TimeoutError: container stopped answering during step execution")


def test_a_final_command_of_another_step_is_not_the_submission(tmp_path):
    doc = recorded(0.0, final_command={"step_index": 2, "returncode": 0,
                                       "output": f"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n{DIFF}"})
    assert ending.of(read(tmp_path, doc)).submission is None


def test_the_failing_tests_are_read_from_pytest_and_unittest_output():
    pytest_out = ("tests/test_a.py::test_one PASSED\ntests/test_a.py::test_two FAILED\n"
                  "=== short test summary info ===\nFAILED tests/test_a.py::test_two - assert 1 == 2\n"
                  "ERROR tests/test_b.py::test_setup - RuntimeError\n")
    assert ending.failing_tests(pytest_out) == ("tests/test_a.py::test_two", "tests/test_b.py::test_setup")
    unittest_out = "FAIL: test_slug (textkit.tests.test_slug.SlugTest)\nERROR: test_io (pkg.tests.IoTest)\n"
    assert ending.failing_tests(unittest_out) == ("test_slug (textkit.tests.test_slug.SlugTest)",
                                                  "test_io (pkg.tests.IoTest)")
    assert ending.failing_tests("5 passed in 0.1s") == ()


def test_a_verifier_record_with_bad_fields_still_reads_what_it_can(tmp_path):
    """Files are untrusted: a field of the wrong type reads as missing, the rest of the record still shows."""
    doc = recorded(0.0, verifier={"step_index": "4", "returncode": 1, "output": TEST_OUTPUT, "reward": "high",
                                  "commands": 5, "reward_file": ["0"], "changed_paths": "x", "error": None})
    end = ending.of(read(tmp_path, doc))
    assert end.verifier.output == TEST_OUTPUT and end.verifier.returncode == 1
    assert end.verifier.reward is None and end.verifier.commands == () and end.verifier.reward_file is None
    assert end.explanation.startswith("completed, reward 0: the verifier's tests failed (exit code 1)")


def test_a_recorded_verifier_is_written_back_with_the_same_keys_and_values():
    """The recorder and counterfactuals write ``VerifierRecord.to_json``: a file recorded before reads and writes
    back unchanged."""
    path = pathlib.Path(__file__).resolve().parent.parent / "sample_runs" / "demo-run" / f"{SOLVED}.json"
    raw = json.loads(path.read_text())["verifier"]
    assert model.VerifierRecord.from_json(raw).to_json() == raw


def test_a_notebook_reads_the_ending_by_the_short_name_of_the_analysis_function(tmp_path):
    doc = recorded(0.0,
                   verifier={"step_index": 4, "returncode": 1, "output": TEST_OUTPUT, "reward": 0.0,
                             "commands": [{"command": "bash /tests/test.sh", "returncode": 1, "output": TEST_OUTPUT}]})
    episode = read(tmp_path, doc)
    end = ares_viewer.ending.of(episode)
    assert end.step == 4
    assert "tests/test_core.py::test_negative" in end.explanation
    assert end.explanation == ending.of(episode).explanation
