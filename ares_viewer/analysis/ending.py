"""How an episode ended, for a reader asking "why this reward": what was submitted, what the verifier said,
and the reward and outcome in words.

Formats keep these in different places: mini-swe-agent records the ``submission``; an ARES episode's submit
command prints the final diff after ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (the LAST step's output when
the recording has it, else the episode's ``final_command``); ares-viewer's recorder keeps the verifier's run
under ``verifier``; other trainers keep an ``evaluation`` or a SWE-bench ``verdict``. ``of(episode)`` reads
them all into one ``Ending``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from ares_viewer import model
from ares_viewer.analysis import shell_commands
from ares_viewer.base import agent_text
from ares_viewer.formats.sidecars import verdicts
from ares_viewer.runs.index import queries

# The verifier's recorded run and its commands: the model's one type, which the recorder and counterfactuals write.
Verifier = model.VerifierRecord
VerifierCommand = model.VerifierCommand


# How a failing test failed: a target test a fix had to make pass, a test the patch broke, or a test a verifier's run
# names as failing.
STILL_FAILING = "target test still failing"
BROKEN = "passed before, broken by the patch"
FAILED = model.verifier.FAILED


@dataclasses.dataclass(frozen=True, slots=True)
class FailingTest:
    """A test an episode failed: its name, how it failed (``STILL_FAILING``, ``BROKEN``, ``FAILED``) and the file
    that says so."""

    name: str
    how: str
    source: str


@dataclasses.dataclass(frozen=True, slots=True)
class Ending:
    """What an episode ended on: the one explanation of the episode every surface shows.

    Attributes:
        step: the index of the last action (None when the episode has none).
        submission: the submitted text (usually a diff); "" when the agent submitted nothing; None when the
            recording does not say what was submitted.
        submission_source: where ``submission`` was read from, in words.
        verifier: the verifier's recorded run, or None.
        reward: the episode's reward.
        explanation: the outcome and reward in words, with the reason when one is known.
        outcome: how the episode ended (``completed``, ``errored``, ...).
        blame: whose failure an unsolved, scored episode is (``model.blame``: ``agent`` or ``infrastructure``);
            None for a solved or unscored one.
        root_cause: the innermost error of the recorded chain, unabridged (None without an error).
        failing_tests: the tests it failed, each with how and the file that says so (a report's ``tests_status``,
            the verifier's output).
        flags: behaviour flags that qualify a success (``touched_tests``: the reward may not mean the task was
            solved), each ``name: evidence``; empty for an unsolved episode. Filled once ``analysis.behaviours`` is
            imported (``import ares_viewer.analysis.behaviours``; the app does).
        why: the one line the run's table shows for it (its ``why`` column, by the same rule); None when solved.
    """

    step: int | None
    submission: str | None
    submission_source: str
    verifier: Verifier | None
    reward: float | None
    explanation: str
    outcome: str = ""
    blame: str | None = None
    root_cause: str | None = None
    failing_tests: tuple[FailingTest, ...] = ()
    flags: tuple[str, ...] = ()
    why: str | None = None

    def tests_words(self) -> str:
        """The failing tests by how they failed, each kind with the file that says so; "" when none are known."""
        parts = []
        for how in (STILL_FAILING, BROKEN, FAILED):
            found = [t for t in self.failing_tests if t.how == how]
            if found:
                sources = ", ".join(dict.fromkeys(t.source for t in found))
                parts.append(f"{how}: {', '.join(t.name for t in found)} (from {sources})")
        return "; ".join(parts)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _submission(episode: model.Episode, last: model.Step | None) -> tuple[str | None, str]:
    meta = episode.metadata
    recorded = meta.get("submission")
    if isinstance(recorded, str):
        return recorded, "the agent's recorded submission"
    if last is not None:
        submitted = agent_text.submitted_text(last.output)
        if submitted is not None:
            return submitted, f"the output of the submit command (step {last.index})"
    final = meta.get("final_command")
    if isinstance(final, Mapping) and last is not None and final.get("step_index") == last.index:
        submitted = agent_text.submitted_text(_text(final.get("output")))
        if submitted is not None:
            return submitted, f"the output of the submit command (step {last.index})"
    return None, ""


# The tests a test runner's output names as failing (pytest or unittest), in order, each once.
failing_tests = model.verifier.failing_tests
_some = model.verifier.some


def _reason(episode: model.Episode, submission: str | None, verifier: Verifier | None) -> str:
    """Why the reward is what it is, when the recording tells (else "")."""
    meta = episode.metadata
    reward = episode.total_reward
    if episode.outcome is model.Outcome.ERRORED:
        return f"the episode failed before it was scored: {episode.error}" if episode.error else \
            "the episode failed before it was scored"
    if episode.truncated or episode.outcome is model.Outcome.TRUNCATED:
        limit = meta.get("limit")  # which limit, when the file says (Inspect: type, limit, reason)
        if isinstance(limit, Mapping) and limit.get("type"):
            said = f": {limit['reason']}" if limit.get("reason") else ""
            return f"the {limit['type']} limit ended the episode before it finished{said}"
        return "the step limit ended the episode before the agent submitted"
    if reward is None:
        return "nothing scored it"
    if verifier is not None and verifier.error:
        return f"the verifier failed: {verifier.error}"
    evaluation = meta.get("evaluation")
    if isinstance(evaluation, Mapping) and evaluation.get("rationale"):
        return str(evaluation["rationale"])
    verdict = meta.get("verdict")
    if isinstance(verdict, str) and verdict:
        tests = meta.get("verdict_tests")
        report = meta.get("verdict_report")
        return verdicts.says(verdict, tests if isinstance(tests, verdicts.Tests) else None,
                             report if isinstance(report, str) else "the evaluation report")
    if submission is not None and not submission.strip() and reward <= 0:
        return "the agent submitted no changes"
    # Only a recorded verifier run says what the tests did; a reward alone says only that it was given.
    trial = meta.get("harbor_trial")
    if verifier is None and isinstance(trial, Mapping):
        return (f"the verifier's reward is in {trial.get('result_path')} (verifier_result); the trial keeps no test "
                "output (verifier/test-stdout.txt) to say why")
    if verifier is None:
        return ("the reward came with the episode's last step; the recording holds no verifier run or evaluation "
                "to say why")
    if reward > 0:
        return "the verifier's tests passed"
    failing = failing_tests(verifier.output)
    source = f"read from {verifier.source}"
    if verifier.returncode not in (None, 0):
        named = f": {_some(failing)} failed ({source})" if failing else ""
        return f"the verifier's tests failed (exit code {verifier.returncode}){named}"
    if failing:
        return f"the verifier gave no reward above 0: {_some(failing)} failed ({source})"
    if verifier.returncode is None:
        return "the verifier gave no reward above 0; its exit code is not recorded"
    return "the verifier ran without an error, and gave no reward above 0"


def _failing(episode: model.Episode, verifier: Verifier | None) -> tuple[FailingTest, ...]:
    """The tests the episode failed: a report's ``tests_status`` first, else those its verifier's output names."""
    tests = episode.metadata.get("verdict_tests")
    if isinstance(tests, verdicts.Tests):
        return (*(FailingTest(t, STILL_FAILING, tests.report) for t in tests.still_failing),
                *(FailingTest(t, BROKEN, tests.report) for t in tests.broken))
    if verifier is None:
        return ()
    return tuple(FailingTest(t, FAILED, verifier.source) for t in failing_tests(verifier.output))


def _solved(reward: float | None) -> bool:
    return reward is not None and not math.isnan(reward) and reward > 0


def _why(episode: model.Episode, verifier: Verifier | None) -> str | None:
    """The run table's ``why`` of the episode (``runs.index.queries.WHY``, the same rule over the parsed episode):
    an unsolved one's reason is what a report says of it, else the failing tests its verifier's output names."""
    outcome, reward = episode.outcome.value, episode.total_reward
    if outcome not in ("completed", "truncated", "incomplete"):
        line = (episode.error or "").strip().split("\n", 1)[0] or "no message"
        return f"{outcome}: {line[:queries.WHY_CHARS]}"
    if outcome == "completed" and reward is None:
        return "finished without a reward (unscored)"
    if outcome == "truncated":
        return "truncated: hit its step or token limit"
    if outcome == "incomplete":
        return "incomplete: no final step (in progress or cut short)"
    if reward is not None and reward <= 0:  # NaN is neither solved nor unsolved here, as in SQL
        verdict, report = episode.metadata.get("verdict"), episode.metadata.get("verdict_report")
        if isinstance(verdict, str) and isinstance(report, str):
            tests = episode.metadata.get("verdict_tests")
            said = verdicts.says(verdict, tests if isinstance(tests, verdicts.Tests) else None, report)
            return queries.NOT_SOLVED_SAYS + said
        named = verifier.says() if verifier is not None else None
        return queries.NOT_SOLVED_SAYS + named if named else "completed, not solved (reward ≤ 0)"
    return None


def touched_tests(episode: model.Episode) -> tuple[int, str, str] | None:
    """The first action whose command surely writes, deletes, renames or chmods a test, conftest, pytest config,
    verifier or reward file: its step, the file and the command's first line; None if no command does. The
    behaviour flag ``touched_tests`` (``analysis.behaviours``) is this rule."""
    for step in episode.actions:
        command = step.command
        target = shell_commands.touched_test_file(command) if command else None
        if command and target is not None:
            return step.index, target, command.splitlines()[0][:200]
    return None


def _flags(episode: model.Episode) -> tuple[str, ...]:
    """The behaviour flags that qualify a success (a reward won by touching the tests may not mean a fix)."""
    touched = touched_tests(episode)
    return () if touched is None else (f"touched_tests: step {touched[0]}, {touched[1]} ({touched[2]})",)


def submission(episode: model.Episode) -> tuple[str | None, str]:
    """What ``episode`` submitted and where that was read: ``of(episode)``'s ``submission`` and
    ``submission_source``, without the rest of ``of`` (the verifier, the reason, the failing tests)."""
    actions = episode.actions
    return _submission(episode, actions[-1] if actions else None)


def of(episode: model.Episode) -> Ending:
    """How ``episode`` ended: its submission, its verifier's run and the reward explained."""
    actions = episode.actions
    last = actions[-1] if actions else None
    submission, source = _submission(episode, last)
    verifier = episode.verifier
    reward = episode.total_reward
    words = episode.outcome.value + ("" if reward is None else f", reward {reward:g}")
    reason = _reason(episode, submission, verifier)
    record = episode.error_record
    unscored = reward is None and episode.outcome is model.Outcome.COMPLETED
    solved = _solved(reward)
    blame = None if solved or unscored else (
        model.blame.Blame.INFRASTRUCTURE if model.blame.is_infrastructure(episode.error) else model.blame.Blame.AGENT)
    return Ending(step=None if last is None else last.index, submission=submission, submission_source=source,
                  verifier=verifier, reward=reward, explanation=f"{words}: {reason}" if reason else words,
                  outcome=episode.outcome.value, blame=None if blame is None else blame.value,
                  root_cause=record.root.one_line() or None if record is not None else None,
                  failing_tests=() if solved else _failing(episode, verifier),
                  flags=_flags(episode) if solved else (), why=_why(episode, verifier))

