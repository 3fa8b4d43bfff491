"""harbor trial results: the reward, outcome and times of the ATIF trajectory in the same trial folder.

harbor (the runner ARES's tasks use) writes one folder per trial::

    <job>/<trial>/config.json          the trial's configuration
    <job>/<trial>/result.json          the TrialResult, written when the trial ends
    <job>/<trial>/agent/trajectory.json  the agent's ATIF trajectory (agents that write ATIF)
    <job>/<trial>/verifier/reward.txt  the verifier's reward (also in result.json)
    <job>/<trial>/verifier/test-stdout.txt  the verifier's test output (its last ``TEST_OUTPUT_BYTES`` are read
                                       when an episode opens, for the failing tests it names)

``result.json`` (harbor's ``TrialResult``): ``id``, ``task_name``, ``trial_name``, ``trial_uri``, ``task_id``,
``source``, ``task_checksum``, ``config``, ``agent_info: {name, version, model_info: {name, provider}}``,
``agent_result: {n_input_tokens, n_cache_tokens, n_output_tokens, cost_usd, metadata}``,
``verifier_result: {rewards: {name: number}}`` (the verifier's ``reward.txt`` as ``{"reward": value}``, or the
keys of its ``reward.json``), ``exception_info: {exception_type, exception_message, exception_traceback,
occurred_at}``, ``started_at``, ``finished_at`` (ISO 8601) and per-phase times (``environment_setup``,
``agent_setup``, ``agent_execution``, ``verifier``: ``{started_at, finished_at}``).

The run reads it like an evaluation report, by content, and joins it to the trajectory of its folder, so the
trajectory file is never rewritten and a result written after the trajectory is picked up on reopening. Only a
file named ``result.json`` is a trial's result (``is_result``): another JSON of the same shape in the folder (a
copy, a result of another trial, a file the agent wrote) is ignored, never taken over it.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, TypeGuard, cast

from ares_viewer import model
from ares_viewer.base import jsondecode, locations
from ares_viewer.formats import base, chat
from ares_viewer.formats.adapters import atif

NAME = "harbor"  # the format of a trial listed from its result alone (``trial_episode``)
RESULT = "result.json"
TEST_OUTPUT = "verifier/test-stdout.txt"
TEST_OUTPUT_BYTES = 256 * 1024
EXPLAINED = model.EXPLAINED  # a trial's failing tests as its verifier's output names them (``with_test_output``)


def is_result(path: str) -> bool:
    """Whether ``path`` names a trial's result: harbor writes it as ``<trial>/result.json`` and nothing else."""
    return pathlib.PurePosixPath(path.split("://", 1)[-1].replace("\\", "/")).name == RESULT


# The records of a ``result.json`` (harbor's ``TrialResult``): the keys this module reads, each value ``object``
# because the file is untrusted (a value is used once an ``isinstance`` check or a reader of ``chat`` has said what
# it is). TypedDicts cost nothing at run time: the decoded dicts are read as they are. What ``read`` returns (the
# trial the index keeps as JSON) is the library's own, a plain dict.
class ExceptionInfo(TypedDict, total=False):
    """``exception_info``: why the trial stopped, when it raised."""

    exception_type: object
    exception_message: object
    exception_traceback: object
    occurred_at: object


class ModelInfo(TypedDict, total=False):
    """``agent_info.model_info``."""

    name: object
    provider: object


class AgentInfo(TypedDict, total=False):
    """``agent_info``."""

    name: object
    version: object
    model_info: object  # a ``ModelInfo``


class AgentResult(TypedDict, total=False):
    """``agent_result``: the agent's totals."""

    n_input_tokens: object
    n_cache_tokens: object
    n_output_tokens: object
    cost_usd: object
    metadata: object


class VerifierResult(TypedDict, total=False):
    """``verifier_result``."""

    rewards: object  # name -> number (``reward.txt`` as ``{"reward": value}``, or ``reward.json``'s keys)


class TrialResult(TypedDict, total=False):
    """The whole ``result.json``."""

    id: object
    task_name: object
    trial_name: object
    trial_uri: object
    task_id: object
    source: object
    config: object
    agent_info: object  # an ``AgentInfo``
    agent_result: object  # an ``AgentResult``
    verifier_result: object  # a ``VerifierResult``
    exception_info: object  # an ``ExceptionInfo``
    started_at: object
    finished_at: object


def sniff(doc: object) -> TypeGuard[TrialResult]:
    """True for a harbor ``TrialResult``: a trial name with the result's other keys."""
    return (isinstance(doc, Mapping) and isinstance(doc.get("trial_name"), str) and "task_name" in doc
            and any(k in doc for k in ("verifier_result", "agent_info", "exception_info", "agent_result")))


def _reward(result: TrialResult) -> tuple[float | None, dict[str, Any]]:
    verifier = cast(VerifierResult, jsondecode.object_at(result, "verifier_result"))
    rewards = jsondecode.object_at(verifier, "rewards")
    numbers = {k: v for k, v in rewards.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    if "reward" in numbers:
        return float(numbers["reward"]), dict(rewards)
    if len(numbers) == 1:
        return float(next(iter(numbers.values()))), dict(rewards)
    return None, dict(rewards)


def read(doc: TrialResult, path: str) -> dict[str, Any]:
    """What a trial result says about its trajectory: folder, task, reward, outcome, error, times, model."""
    reward, rewards = _reward(doc)
    found = doc.get("exception_info")
    exception = cast(ExceptionInfo, found) if isinstance(found, Mapping) else None
    error = None
    if exception:
        error = {"type": str(exception.get("exception_type") or "exception"),
                 "message": str(exception.get("exception_message") or "")[:2000]}
    finished = atif.timestamp(doc.get("finished_at"))
    if error:
        outcome = model.Outcome.ERRORED
    elif finished is not None or doc.get("verifier_result") is not None:
        outcome = model.Outcome.COMPLETED
    else:
        outcome = model.Outcome.INCOMPLETE
    agent = cast(AgentInfo, jsondecode.object_at(doc, "agent_info"))
    info = cast(ModelInfo, jsondecode.object_at(agent, "model_info"))
    usage = cast(AgentResult, jsondecode.object_at(doc, "agent_result"))
    pure = locations.Location.of(path).pure(backslashes=True)
    return {
        "folder": str(pure.parent),
        "task_name": str(doc.get("task_name") or ""),
        "trial_name": doc.get("trial_name"),
        "reward": reward,
        "rewards": rewards,
        "outcome": outcome.value,
        "error": error,
        "start_time": atif.timestamp(doc.get("started_at")),
        "end_time": finished,
        "model": info.get("name"),
        "agent": {k: v for k in ("name", "version") if (v := agent.get(k)) is not None},
        "cost": chat.number(usage.get("cost_usd"), "cost_usd", []),
        "prompt_tokens": chat.count(usage.get("n_input_tokens")),
        "generated_tokens": chat.count(usage.get("n_output_tokens")),
        "result_path": path,
    }


def trial_episode(trial: Mapping[str, Any]) -> model.Episode:
    """The trial as an episode from its result alone (format ``harbor``, no steps): what the run lists for a
    trial whose agent wrote no ATIF trajectory (the oracle agent, an agent that failed to start), with its
    task, reward, outcome, error, times and cost; opened, it has the verifier's output too (``with_trial``)."""
    folder = str(trial["folder"])
    episode = base.episode(
        NAME, str(trial["result_path"]), episode_id=atif.trial_id(folder),
        task_name=str(trial["task_name"] or trial["trial_name"] or ""), outcome=model.Outcome(trial["outcome"]),
        steps=[model.Step(index=0, kind=model.StepKind.FIRST)], messages=[], links=[], metadata={}, warnings=[])
    return with_trial(episode, trial)


def folder_of(path: str, episode_format: str) -> str | None:
    """The trial folder a file of the run belongs to: ``<trial>/result.json`` (read as a ``harbor`` trial) and
    anything in ``<trial>/agent/`` (the ATIF trajectory, the agent's own log); None for any other file."""
    pure = locations.Location.of(path).pure(backslashes=True)
    if episode_format == NAME and pure.name == RESULT:
        return str(pure.parent)
    if pure.parent.name == "agent":
        return str(pure.parent.parent)
    return None


def trial_of(path: str, episode_format: str, trials: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The trial result (``read``'s, by trial folder) of an ATIF trajectory at ``path``, or of the trial's own
    ``result.json``; None for any other file."""
    if episode_format == atif.NAME:
        return trials.get(atif.trial_folder(path) or "")
    return trials.get(folder_of(path, episode_format) or "") if episode_format == NAME else None


def apply_to_row(row: dict[str, Any], trial: Mapping[str, Any]) -> None:
    """An ATIF trajectory's index row, with what its trial's result says (see ``with_trial``); ``harbor_result``
    names the result file."""
    row["harbor_result"] = pathlib.PurePosixPath(trial["result_path"]).name
    row.update(task_name=trial["task_name"] or row["task_name"], total_reward=trial["reward"],
               outcome=trial["outcome"], error=model.describe_error(trial["error"]) or row["error"])
    row["start_time"] = trial["start_time"] if trial["start_time"] is not None else row["start_time"]
    row["end_time"] = trial["end_time"] if trial["end_time"] is not None else row["end_time"]
    if row["start_time"] is not None and row["end_time"] is not None:
        row["duration_s"] = row["end_time"] - row["start_time"]
    for name, value in _totals(trial).items():
        column = "total_cost" if name == "cost" else name
        if not row[column]:  # a figure neither records is unknown, never 0
            row[column] = value if value or value is None else row[column]


def _totals(trial: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's totals harbor keeps in ``agent_result`` (cost, input and output tokens; a result read by an
    older version has the cost alone). An episode whose own figure is 0 or unknown takes them (``with_trial``,
    and ``apply_to_row`` alike); a figure that neither records is unknown (None), never 0."""
    return {name: trial.get(name) for name in ("cost", "prompt_tokens", "generated_tokens")}


def test_output_path(trial: Mapping[str, Any]) -> str:
    """Where the trial's verifier wrote its test output: ``verifier/test-stdout.txt`` beside ``result.json``."""
    result = str(trial["result_path"])
    return result[: len(result) - len(RESULT)] + TEST_OUTPUT


def _verifier(trial: Mapping[str, Any], test_output: tuple[str, int]) -> model.VerifierRecord:
    """The verifier's record of the trial: ``test_output`` (the tail of ``verifier/test-stdout.txt`` and the file's
    size) with the file it came from and the trial's reward."""
    text, size = test_output
    return model.VerifierRecord(output=text, output_chars=size if size > len(text) else None, reward=trial["reward"],
                                output_path=test_output_path(trial))


def with_test_output(trial: dict[str, Any], test_output: tuple[str, int] | None) -> dict[str, Any]:
    """The trial (``read``'s) with ``EXPLAINED``: the failing tests its verifier's output names, as its episode's
    ending says them once opened with the same ``test_output`` (``with_trial``); what the index keeps, so the run's
    ``why`` names them without reading the output again. harbor writes ``result.json`` after the verifier's output,
    so the output read with the result is the one the trial ended with."""
    said = _verifier(trial, test_output).says() if test_output is not None else None
    return {**trial, EXPLAINED: said} if said else trial


def with_trial(episode: model.Episode, trial: Mapping[str, Any],
               test_output: tuple[str, int] | None = None, agent_logs: Sequence[str] = ()) -> model.Episode:
    """An ATIF episode with its trial's task, reward (the verifier's), outcome, error and times; with
    ``test_output`` (the tail of ``verifier/test-stdout.txt`` and the file's size), the verifier's record too, so
    the ending names the failing tests the output names, with that file as their source; with ``agent_logs``,
    the agent's own logs in the trial (``agent/mini-swe-agent.trajectory.json``), which are no episodes of their
    own, in ``metadata["agent_logs"]``."""
    metadata = {**episode.metadata, "harbor_trial": {k: trial[k] for k in ("trial_name", "rewards", "agent",
                                                                             "model", "result_path")}}
    if agent_logs:
        metadata["agent_logs"] = list(agent_logs)
    if test_output is not None and "verifier" not in metadata:
        metadata["verifier"] = _verifier(trial, test_output).to_json()
    if trial["error"]:
        metadata["error"] = trial["error"]
    totals = dict(metadata.get("totals") or {})
    for name, value in _totals(trial).items():
        if not getattr(episode, "total_cost" if name == "cost" else name) and (value or value is None):
            totals[name] = value
    if totals:
        metadata["totals"] = totals
    if trial["model"] and "model" not in metadata:
        metadata["model"] = trial["model"]
    return dataclasses.replace(
        episode, task_name=trial["task_name"] or episode.task_name, total_reward=trial["reward"],
        outcome=model.Outcome(trial["outcome"]), metadata=metadata,
        start_time=trial["start_time"] if trial["start_time"] is not None else episode.start_time,
        end_time=trial["end_time"] if trial["end_time"] is not None else episode.end_time)
