"""Behaviour flags: each flag found in episodes written by real ARES and the real mini-swe-agent, at the right
step, and not found where the agent did not do it; the command rules and the rates on small crafted episodes."""

from __future__ import annotations

import pathlib
import shlex

import crafted_episodes
import pytest

from ares_viewer import fsdiff, model
from ares_viewer.analysis import behaviours
from ares_viewer.analysis import shell_commands as commands
from ares_viewer.runs import run

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
MINI = REPO / "tests" / "fixtures" / "mini-swe-agent-real" / "deterministic-run"

PAGER_LONG = "0b17f852-8687-4e04-a8c5-e078baf6b285"
MEAN_TRUNCATED = "298f05c6-7948-423a-8b0c-825ff593fc8d"
SLUGIFY_SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"
PAGER_SOLVED = "7c5d6d73-83f0-4d4c-a772-785a9f5c3580"
SLUGIFY_WRONG = "aefe890e-4268-4666-90b5-dd09d3259e06"
PAGER_EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"
MEAN_ERRORED = "c03d1292-fb4b-4aab-acee-f25250a93f54"
SLUGIFY_FORMAT_ERROR = "fbfa4879-77ae-4a41-b721-8ccd8f237416"


def ares(episode_id: str) -> model.Episode:
    return run.load_episode(DEMO / f"{episode_id}.json")


def mini(name: str) -> model.Episode:
    return run.load_episode(MINI / name / f"{name}.traj.json")


def found(episode: model.Episode, *, snapshots: bool = False) -> dict[str, behaviours.Finding]:
    changes_of = fsdiff.paths_by_step if snapshots else None
    return {f.flag: f for f in behaviours.findings(episode, changes_of)}


def test_a_symlink_the_agent_put_under_tests_is_found_from_the_command_and_the_snapshot_at_step_9():
    flags = found(ares(PAGER_EXPLORER), snapshots=True)
    assert flags["touched_tests"].step == 9
    assert flags["touched_tests"].evidence.startswith("tests/data (ln -s ../data tests/data")
    assert flags["touched_tests"].via == "command"
    assert flags["touched_tests_files"].step == 9
    assert flags["touched_tests_files"].evidence == "/testbed/tests/data (added)"
    assert flags["touched_tests_files"].source == behaviours.SNAPSHOTS


@pytest.mark.parametrize("episode_id", [SLUGIFY_SOLVED, PAGER_SOLVED, SLUGIFY_WRONG, MEAN_TRUNCATED])
def test_episodes_that_only_edit_the_project_do_not_touch_the_tests(episode_id):
    flags = found(ares(episode_id), snapshots=True)
    assert "touched_tests" not in flags
    assert "touched_tests_files" not in flags


def test_the_third_run_of_the_same_test_command_is_the_repeated_command_evidence():
    flags = found(ares(PAGER_LONG))
    assert (flags["repeated_command"].step, flags["repeated_command"].evidence) == (61, "python3 -m pytest -q")
    assert flags["ran_tests"].step == 7
    assert flags["context_rewrites"].step == 37
    assert "repeated_failing_command" not in flags


def test_a_wrong_fix_submitted_without_running_tests_is_flagged_at_the_submit_step():
    flags = found(ares(SLUGIFY_WRONG))
    assert flags["no_tests_before_submit"].step == 4
    assert "ran_tests" not in flags
    assert "no_tests_before_submit" not in found(ares(SLUGIFY_SOLVED))


def test_a_truncated_episode_that_only_read_files_has_no_change_in_its_last_ten_actions():
    flags = found(ares(MEAN_TRUNCATED), snapshots=True)
    assert flags["no_change_at_end"].step == 1
    assert flags["no_change_at_end"].evidence == "no file changed in steps 1-10"
    assert "no_change_at_end" not in found(ares(PAGER_EXPLORER), snapshots=True)


def test_format_errors_and_a_dead_container_are_flagged_where_they_happened():
    assert found(ares(SLUGIFY_FORMAT_ERROR))["format_errors"].step == 1
    errored = found(ares(MEAN_ERRORED))
    assert errored["container_errors"].step == 3
    assert "APIError: 409" in errored["container_errors"].evidence
    assert "model_api_errors" not in errored  # Docker's APIError is not the model endpoint's


def test_real_mini_swe_agent_timeout_empty_submission_and_provider_error():
    timeout = found(mini("text-timeout"))
    assert (timeout["command_timeouts"].step, timeout["command_timeouts"].evidence) == (1, "sleep 5; echo done")
    assert timeout["format_errors"].step == 2
    assert timeout["submitted_no_change"].step == 4
    assert timeout["gave_up"].step == 4
    exception = found(mini("toolcall-exception"))
    assert exception["model_api_errors"].evidence == "RuntimeError: provider connection reset"
    assert "submitted_no_change" not in exception  # it never submitted
    submitted = found(mini("toolcall-submitted"))
    assert "submitted_no_change" not in submitted
    assert "gave_up" not in submitted


def crafted(*runs: tuple[str, int | None], reward: float | None = 0.0, task: str = "t") -> model.Episode:
    return crafted_episodes.episode(*runs, reward=reward, task=task)


SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"


def test_the_third_failure_of_one_command_is_the_loop_evidence_even_with_other_commands_between():
    episode = crafted(("make build", 2), ("ls", 0), ("make  build", 2), ("cat x", 0), ("make build", 2), ("ls", 0))
    assert found(episode)["repeated_failing_command"].step == 5
    assert found(episode)["repeated_command"].step == 5


def test_installs_and_network_are_found_per_simple_command():
    episode = crafted(
        ("cd /testbed && ls", 0), ("cd /testbed && pip install -q requests", 0), ("curl -sS https://example.org/x", 7)
    )
    flags = found(episode)
    assert flags["installed_packages"].step == 2
    assert flags["tried_network"].step == 3


def test_giving_up_needs_a_failure_with_no_passing_test_run_after_it():
    gave_up = crafted(("python -m pytest -q", 1), ("sed -i s/a/b/ src/x.py", 0), (SUBMIT, 0))
    assert found(gave_up)["gave_up"].step == 3
    fixed = crafted(("python -m pytest -q", 1), ("sed -i s/a/b/ src/x.py", 0), ("python -m pytest -q", 0), (SUBMIT, 0))
    assert "gave_up" not in found(fixed)


@pytest.mark.parametrize(
    ("command", "target"),
    [
        ("rm -rf tests", "tests"),
        ("sed -i 's/assert/pass/' tests/test_core.py", "tests/test_core.py"),
        ("chmod -x conftest.py", "conftest.py"),
        ("mv tests/test_api.py /tmp/", "tests/test_api.py"),
        ("echo 1 > /logs/verifier/reward.txt", "/logs/verifier/reward.txt"),
        ("cat <<'EOF' > pytest.ini\n[pytest]\naddopts = -k 'not slow'\nEOF", "pytest.ini"),
        ("cat tests/test_core.py", None),
        ("cp tests/test_core.py /tmp/backup.py", None),
        ("cat > repro.py <<'EOF'\nopen('tests/x', 'w')\nEOF", None),
        ("python3 -m pytest -q tests/", None),
    ],
)
def test_only_commands_that_surely_change_a_test_file_count(command, target):
    assert commands.touched_test_file(command) == target


def test_rates_set_a_flag_common_among_solved_episodes_apart():
    episodes = [
        crafted(("sed -i s/x/y/ tests/test_a.py", 0), reward=1.0, task="a"),
        crafted(("rm tests/test_b.py", 0), ("ls", 0), reward=1.0, task="a"),
        crafted(("ls", 0), reward=0.0, task="b"),
        crafted(("ls", 0), ("ls", 1), reward=0.0, task="b"),
    ]
    frame = behaviours.table(episodes, behaviours.findings)
    rates = behaviours.rates(frame).set_index("flag")
    assert rates.loc["touched_tests", ["solved_rate", "failed_rate", "difference"]].tolist() == [1.0, 0.0, 1.0]
    per_task = behaviours.rates(frame, by="task_name")
    assert set(per_task["task_name"]) == {"a", "b"}
    assert per_task.set_index(["task_name", "flag"]).loc[("a", "touched_tests"), "solved"] == 2


def test_every_flag_has_a_definition_and_a_known_source():
    assert len(behaviours.FLAGS) >= 15
    for flag in behaviours.FLAGS.values():
        assert flag.definition and flag.source in (behaviours.EPISODE, behaviours.SNAPSHOTS)


def test_a_runs_rates_show_the_test_touching_explorer_among_failed_episodes_only():
    frame = behaviours.run_table(run.open_run(DEMO), fsdiff.paths_by_step)
    assert len(frame) == 10
    assert frame.set_index("episode_id").loc[PAGER_EXPLORER, "touched_tests_files"]
    rates = behaviours.rates(frame).set_index("flag")
    assert rates.loc["touched_tests_files", "solved"] == 0
    assert rates.loc["touched_tests_files", "failed"] == 1
    assert rates.loc["ran_tests", "solved_rate"] == 1.0


def _recorded_commands() -> list[str]:
    episodes = [run.load_episode(path) for path in sorted(DEMO.glob("*.json"))]
    episodes += [mini(path.name) for path in sorted(MINI.iterdir()) if path.is_dir()]
    return [step.command for episode in episodes for step in episode.actions if step.command]


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf tests",
        "chmod 644 tests/test_a.py",
        "mv a\tb  c",
        "sed -i 's/assert x/pass/' tests/test_core.py",
        'cp "my tests/a.py" tests/',
        r"rm tests/a\ b.py",
        "rm tests/a.py\x0bother",
        "rm tests/a.py\u00a0b",
        "tee -a tests/log <<<'x'",
        "rm 'unterminated",
    ],
)
def test_the_fast_split_gives_the_words_shlex_gives(command):
    commands._words.cache_clear()
    try:
        expected = tuple(shlex.split(command))
    except ValueError:
        expected = tuple(command.split())
    assert commands._words(command) == expected


def test_every_recorded_simple_command_splits_as_shlex_splits_it():
    simple = {part for command in _recorded_commands() for part in commands.simple_commands(command)}
    assert len(simple) > 50
    for part in simple:
        try:
            expected = tuple(shlex.split(part))
        except ValueError:
            expected = tuple(part.split())
        assert commands._words(part) == expected, part
