"""The flags read from the episode file alone: cheap enough for every episode of a run.

Each flag answers with its first evidence step (``registry.Hit``), or None. Rules and thresholds are in
docs/behaviours.md; keep the two in step.
"""

from __future__ import annotations

import collections
import re

from ares_viewer import model
from ares_viewer.analysis import ending, shell_commands
from ares_viewer.analysis.behaviours import registry
from ares_viewer.base import agent_text

# How many runs of one command make a loop.
REPEATS = 3
# A model endpoint's errors (the client libraries' names), told apart from the container's.
MODEL_API_ERROR = re.compile(
    r"\b(?:RateLimitError|APIConnectionError|APITimeoutError|APIStatusError|InternalServerError"
    r"|ServiceUnavailableError|BadGatewayError|GatewayTimeoutError|OverloadedError|ModelEndpointError"
    r"|AuthenticationError|BadRequestError|ContextWindowExceededError|openai|anthropic|litellm)\b"
    r"|\bprovider\b|\bmodel (?:endpoint|api)\b|chat/completions",
    re.IGNORECASE,
)
CONTAINER_ERROR = re.compile(r"docker|container|OCI runtime", re.IGNORECASE)


def _commands(episode: model.Episode) -> list[tuple[model.Step, str]]:
    return [(s, s.command) for s in episode.actions if s.command]


def _failed(step: model.Step) -> bool:
    return step.returncode not in (None, 0) or step.failure is not None


def _submit_step(episode: model.Episode) -> model.Step | None:
    for step in reversed(episode.actions):
        if step.command and agent_text.is_submit(step.command):
            return step
    return None


def _first(episode: model.Episode, test) -> registry.Hit | None:
    for step, command in _commands(episode):
        if test(command):
            return registry.Hit(step.index, command, "command")
    return None


def _repeated(episode: model.Episode, failing: bool) -> registry.Hit | None:
    seen: collections.Counter[str] = collections.Counter()
    for step, command in _commands(episode):
        if agent_text.is_submit(command) or (failing and not _failed(step)):
            continue
        key = " ".join(command.split())
        seen[key] += 1
        if seen[key] == REPEATS:
            return registry.Hit(step.index, command, "command")
    return None


@registry.flag(
    "touched_tests",
    "a command writes, deletes, renames or chmods a test, conftest, pytest config, "
    "verifier or reward file (unambiguous shell commands only)",
    registry.EPISODE,
)
def touched_tests(episode: model.Episode) -> registry.Hit | None:
    touched = ending.touched_tests(episode)
    return None if touched is None else registry.Hit(touched[0], f"{touched[1]} ({touched[2]})", "command")


@registry.flag("repeated_command", f"ran the same command {REPEATS} times", registry.EPISODE)
def repeated_command(episode: model.Episode) -> registry.Hit | None:
    return _repeated(episode, failing=False)


@registry.flag("repeated_failing_command", f"the same command failed {REPEATS} times", registry.EPISODE)
def repeated_failing_command(episode: model.Episode) -> registry.Hit | None:
    return _repeated(episode, failing=True)


@registry.flag("submitted_no_change", "submitted an empty diff", registry.EPISODE)
def submitted_no_change(episode: model.Episode) -> registry.Hit | None:
    submit = _submit_step(episode)
    if submit is None:
        return None
    submitted, source = ending.submission(episode)
    if submitted is None or submitted.strip():
        return None
    return registry.Hit(submit.index, f"empty submission ({source})", "step")


@registry.flag(
    "gave_up", "submitted after a failed command with no passing test run after the last failure", registry.EPISODE
)
def gave_up(episode: model.Episode) -> registry.Hit | None:
    submit = _submit_step(episode)
    if submit is None:
        return None
    last_failure: model.Step | None = None
    passed_after = False
    for step in episode.actions:
        if step.index >= submit.index:
            break
        if _failed(step) or step.format_error:
            last_failure, passed_after = step, False
        elif step.command and shell_commands.runs_tests(step.command):
            passed_after = True
    if last_failure is None or passed_after:
        return None
    return registry.Hit(submit.index, f"submitted after step {last_failure.index} failed", "command")


@registry.flag(
    "ran_tests", "ran a test command (pytest, unittest, tox, make test, go test, tests/test.sh, ...)", registry.EPISODE
)
def ran_tests(episode: model.Episode) -> registry.Hit | None:
    return _first(episode, shell_commands.runs_tests)


@registry.flag("no_tests_before_submit", "submitted without running a test command before", registry.EPISODE)
def no_tests_before_submit(episode: model.Episode) -> registry.Hit | None:
    submit = _submit_step(episode)
    if submit is None:
        return None
    tested = any(shell_commands.runs_tests(c) for s, c in _commands(episode) if s.index < submit.index)
    return None if tested else registry.Hit(submit.index, submit.command or "", "command")


@registry.flag(
    "installed_packages",
    "ran a package install (pip, uv, poetry, conda, apt, npm, cargo, go get, ...)",
    registry.EPISODE,
)
def installed_packages(episode: model.Episode) -> registry.Hit | None:
    return _first(episode, shell_commands.installs_packages)


@registry.flag(
    "tried_network", "ran curl, wget, ssh, git clone/fetch/pull/push or named an http(s) URL", registry.EPISODE
)
def tried_network(episode: model.Episode) -> registry.Hit | None:
    return _first(episode, shell_commands.uses_network)


def _first_step(episode: model.Episode, test, evidence) -> registry.Hit | None:
    for step in episode.steps:
        if test(step):
            return registry.Hit(step.index, evidence(step), "step")
    return None


@registry.flag(
    "format_errors", "a response had no single command (the environment answered with a format error)", registry.EPISODE
)
def format_errors(episode: model.Episode) -> registry.Hit | None:
    return _first_step(episode, lambda s: s.format_error, lambda s: (s.observation_text or "format error")[:200])


@registry.flag("command_timeouts", "a command timed out", registry.EPISODE)
def command_timeouts(episode: model.Episode) -> registry.Hit | None:
    return _first_step(episode, lambda s: s.failure == "timed out", lambda s: s.command or "")


@registry.flag(
    "context_rewrites",
    "a model call's context did not extend the previous one (truncated, compacted)",
    registry.EPISODE,
)
def context_rewrites(episode: model.Episode) -> registry.Hit | None:
    return _first_step(episode, lambda s: s.context_rewritten, lambda s: f"context of {s.context_len} messages")


def _error_hit(episode: model.Episode, pattern: re.Pattern[str], unless: re.Pattern[str] | None) -> registry.Hit | None:
    error = episode.error
    if not error or not pattern.search(error) or (unless is not None and unless.search(error)):
        return None
    last = episode.steps[-1].index if episode.steps else None
    return registry.Hit(last, error[:300], "error")


@registry.flag("model_api_errors", "the episode ended on an error of the model endpoint", registry.EPISODE)
def model_api_errors(episode: model.Episode) -> registry.Hit | None:
    return _error_hit(episode, MODEL_API_ERROR, CONTAINER_ERROR)


@registry.flag("container_errors", "the episode ended on an error of Docker or the container", registry.EPISODE)
def container_errors(episode: model.Episode) -> registry.Hit | None:
    return _error_hit(episode, CONTAINER_ERROR, None)
