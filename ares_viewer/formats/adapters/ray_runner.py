"""Ray runner trajectories: JSON or JSONL dumps of ``Trajectory(timesteps, reset_kwargs, error_info, episode_id,
trace_last_response_flow_id[, are_evaluation])``.

Each timestep holds the chats the agent produced at that step (each a full message list ending with
the model's answer), its reward, whether the episode was done, and the tool schemas it offered. How
these are written is not fixed upstream, so this adapter reads them tolerantly. Quirks kept here:
the step's context is its main chat (the last one) without the trailing answer; ``error_info`` (a
string or a dict in any of several spellings) becomes the errored outcome; the evaluation dict is
kept in ``metadata["evaluation"]``; the task's name is looked up in ``reset_kwargs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypedDict, TypeGuard, cast

from ares_viewer import model
from ares_viewer.base import locations
from ares_viewer.formats import base, chat, reasoning
from ares_viewer.model import EpisodeRow

NAME = "ray"

_TASK_KEYS = ("task_name", "task_id", "instance_id", "task", "problem_id", "env_id", "name", "id")
_ERROR_TYPE_KEYS = ("type", "exception_type", "error_type", "exception", "exc_type")
_ERROR_MESSAGE_KEYS = ("message", "error_message", "error", "msg", "exception_message", "detail")


FormatError = chat.FormatError


# The records of a dumped ``Trajectory``: the keys this module reads, each value ``object`` because the file is
# untrusted (a value is used once an ``isinstance`` check or a reader of ``chat`` has said what it is). TypedDicts
# cost nothing at run time: the decoded dicts are read as they are. ``reset_kwargs`` and ``error_info`` have no
# fixed keys (several spellings are looked for), and the chat messages stay ``chat``'s to read.
class Timestep(TypedDict, total=False):
    """One of ``timesteps``: the chats the agent produced at that step and what the environment said."""

    chats: object  # a list of chats (each a list of messages), or one chat written flat
    reward: object
    done: object
    timestamp: object
    info: object
    metrics: object
    available_tool_schemas: object  # a list of ``ToolSchema``


class ToolSchema(TypedDict, total=False):
    """One of ``available_tool_schemas``: ``{function: {name}}`` or ``{name}``."""

    function: object
    name: object


class Trajectory(TypedDict, total=False):
    """The whole dump (a file's, or a line's)."""

    timesteps: object  # a list of ``Timestep``
    reset_kwargs: object
    error_info: object
    error: object
    episode_id: object
    trace_last_response_flow_id: object
    are_evaluation: object
    total_cost: object


def sniff(doc: object) -> TypeGuard[Trajectory]:
    """True for a dumped Trajectory: it has ``timesteps`` (a list; an object is a broken one). A sidecar file that
    only counts them (a number) is no trajectory."""
    return isinstance(doc, Mapping) and isinstance(doc.get("timesteps"), list | Mapping)


def _timesteps(doc: object) -> tuple[Trajectory, list[object]]:
    """The trajectory and its timesteps; FormatError when it is not a JSON object with a list of ``timesteps``."""
    timesteps = chat.list_field(doc, "timesteps", per="per trajectory", items="timesteps")
    return cast(Trajectory, doc), timesteps


def episode_id(doc: object, path: str, record: int | None = None) -> str:
    """The trajectory's ``episode_id``; without one, the file's name (and its line or item number)."""
    trajectory, _ = _timesteps(doc)
    value = trajectory.get("episode_id")
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
        return str(value)
    stem = locations.Location.of(path).name.split(".")[0]
    return stem if record is None else f"{stem}#{record}"


def task_name(doc: Trajectory) -> str:
    kwargs = doc.get("reset_kwargs")
    if isinstance(kwargs, Mapping):
        for key in _TASK_KEYS:
            value = kwargs.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                return str(value)
        # A task record nested one level down: reset_kwargs = {"task": {"id": ...}}.
        for value in kwargs.values():
            if isinstance(value, Mapping):
                for key in _TASK_KEYS:
                    if isinstance(value.get(key), str) and value[key]:
                        return value[key]
    return ""


def error_of(raw: object) -> dict[str, str] | None:
    """``error_info`` as ``{type, message}`` (None when the episode ended without one)."""
    if raw is None or raw == "" or raw == {}:
        return None
    if not isinstance(raw, Mapping):
        return {"type": "", "message": chat.text(raw)}
    kind = next((str(raw[k]) for k in _ERROR_TYPE_KEYS if raw.get(k)), "")
    message = next((chat.text(raw[k]) for k in _ERROR_MESSAGE_KEYS if raw.get(k)), "")
    if not message and isinstance(raw.get("traceback"), str):
        lines = [line for line in raw["traceback"].strip().splitlines() if line.strip()]
        message = lines[-1] if lines else ""
    return {"type": kind, "message": message or "error_info recorded without a message"}


def _main_chat(timestep: Timestep, where: str, warnings: list[str]) -> tuple[list[Any], list[list[Any]]]:
    """The chat that produced the step's action (the last one), and the step's other chats in order."""
    chats = timestep.get("chats")
    if chats is None:
        return [], []
    if not isinstance(chats, list):
        warnings.append(f"{where}: chats are a {type(chats).__name__}, not a list; ignored")
        return [], []
    if chats and all(isinstance(c, Mapping) for c in chats):
        chats = [chats]  # one chat written flat instead of a list of chats
    usable = [c for c in chats if isinstance(c, list)]
    return (usable[-1] if usable else []), usable[:-1]


def _split_answer(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """The context the model answered and its answer: the chat up to and after its last assistant message."""
    for position in range(len(messages) - 1, -1, -1):
        if isinstance(messages[position], Mapping) and messages[position].get("role") == "assistant":
            start = position
            while start > 0 and isinstance(messages[start - 1], Mapping) and \
                    messages[start - 1].get("role") == "assistant":
                start -= 1
            return messages[:start], messages[start: position + 1]
    return messages, []


def _tool_names(timesteps: list[object]) -> list[str]:
    for timestep in timesteps:
        schemas = cast(Timestep, timestep).get("available_tool_schemas") if isinstance(timestep, Mapping) else None
        if isinstance(schemas, list) and schemas:
            names = []
            for schema in schemas:
                if isinstance(schema, Mapping):
                    function = cast(ToolSchema, schema).get("function")
                    fn = cast(ToolSchema, function if isinstance(function, Mapping) else schema)
                    names.append(str(fn.get("name", "")))
            return names
    return []


class _Walk(NamedTuple):
    """What the timesteps' main chats say, in order (``_walk``)."""

    contexts: chat.ContextBuilder
    system_prompt: str | None
    answered: list[int | None]
    """Per timestep, the model call whose context it answered (an index into the links), or None."""
    answers: list[list[Any]]
    results: list[Mapping[str, Any] | None]
    """Per timestep, the message that carried its action's result (found in the next call's context)."""
    extras: list[dict[str, Any]]


def _walk(timesteps: list[object], warnings: list[str], *, messages: bool) -> _Walk:
    """The contexts, answers and results of the timesteps (``messages``: build the contexts' messages too)."""
    contexts = chat.ContextBuilder(messages=messages)
    system_prompt: str | None = None
    answered: list[int | None] = []
    answers: list[list[Any]] = []
    results: list[Mapping[str, Any] | None] = []
    extras: list[dict[str, Any]] = []
    for position, item in enumerate(timesteps):
        where = f"timestep {position}"
        if not isinstance(item, Mapping):
            warnings.append(f"{where} is a {type(item).__name__}, not a timestep; read as empty")
        timestep = cast(Timestep, item) if isinstance(item, Mapping) else Timestep()
        chats, others = _main_chat(timestep, where, warnings)
        system, chats = chat.split_system(chats)
        system_prompt = system_prompt if system_prompt is not None else system
        context, answer = _split_answer(chats)
        # The step's other chats (sub-calls, retries) are kept whole, to read beside the main one.
        extra: dict[str, Any] = {"chats": len(others) + 1, "other_chats": others} if others else {}
        if context:
            result = contexts.add(context)
            if answered and answered[-1] is not None:
                results[-1] = result
            answered.append(len(contexts.links) - 1)
        else:
            answered.append(None)
        answers.append(answer)
        results.append(None)
        extra.update({k: v for k in ("info", "metrics") if (v := timestep.get(k))})
        extras.append(extra)
    return _Walk(contexts, system_prompt, answered, answers, results, extras)


def _error_entry(doc: Trajectory, error: dict[str, str] | None) -> object:
    """What ``metadata["error"]`` holds: the error ``error_info`` records, else a top-level ``error`` kept as is."""
    return error if error else doc.get("error")


def summarize(doc: object, path: str, record: int | None = None) -> list[EpisodeRow]:
    """The trajectory's index row: ``parse``'s summary, read without building its steps and messages (the same
    walk through the contexts, the same readers of each value, the same warnings in the same order).

    Raises:
        FormatError: when the document cannot be a trajectory.
    """
    doc, timesteps = _timesteps(doc)
    warnings: list[str] = []
    walk = _walk(timesteps, warnings, messages=False)
    links = walk.contexts.links
    done = False
    rewards: list[float] = []
    times: list[float] = []
    nonzero = rewrites = 0
    for position, item in enumerate(timesteps):
        where = f"timestep {position}"
        timestep = cast(Timestep, item) if isinstance(item, Mapping) else Timestep()
        for m in walk.answers[position]:  # as ``parse`` reads them: a call that cannot be read fails alike
            if isinstance(m, Mapping):
                chat.tool_calls(m.get("tool_calls"))
        reward = chat.number(timestep.get("reward"), f"{where}: reward", warnings)
        if reward is not None:
            rewards.append(reward)
        done = timestep.get("done") is True
        timestamp = chat.number(timestep.get("timestamp"), f"{where}: timestamp", warnings)
        if timestamp is not None:
            times.append(timestamp)
        result = walk.results[position]
        nonzero += result is not None and chat.command_result(result).returncode not in (None, 0)
        call = walk.answered[position]
        rewrites += call is not None and links[call].rewritten
    error = error_of(doc.get("error_info"))
    outcome = model.Outcome.ERRORED if error else model.Outcome.COMPLETED if done else model.Outcome.INCOMPLETE
    cost = doc.get("total_cost")  # the total ``parse`` keeps in the metadata
    return [EpisodeRow(
        episode_id=episode_id(doc, path, record), task_name=task_name(doc), outcome=outcome.value,
        total_reward=sum(rewards) if rewards else None, num_actions=len(timesteps),
        start_time=times[0] if times else None, end_time=times[-1] if times else None,
        duration_s=times[-1] - times[0] if times else None,
        total_cost=_cost(doc, cost, len(timesteps)),
        prompt_tokens=None if timesteps else 0, generated_tokens=None if timesteps else 0,  # none recorded
        truncated=False, error=model.describe_error(_error_entry(doc, error)),
        nonzero_returncodes=nonzero, context_rewrites=rewrites, path=path, format=NAME, warnings=warnings,
    )]


def _cost(doc: Trajectory, cost: object, steps: int) -> float | None:
    """The row's ``total_cost``, as ``Episode.total_cost`` reads the one ``parse`` keeps in the metadata: the
    file's total, unknown when it is null or when the trajectory has timesteps and records none, 0 without any."""
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        return float(cost)
    return None if steps or (cost is None and "total_cost" in doc) else 0.0


def parse(doc: object, path: str, record: int | None = None) -> list[model.Episode]:
    """A trajectory as an ``Episode``: a FIRST record for the first context, then one step per timestep.

    Raises:
        FormatError: when the document cannot be a trajectory (e.g. ``timesteps`` is not a list).
    """
    doc, timesteps = _timesteps(doc)
    warnings: list[str] = []
    walk = _walk(timesteps, warnings, messages=True)
    contexts, system_prompt, answered, answers, results, extras = walk

    steps = [model.Step(index=0, kind=model.StepKind.FIRST)]
    done = False
    rewards = []
    for position, item in enumerate(timesteps):
        where = f"timestep {position}"
        timestep = cast(Timestep, item) if isinstance(item, Mapping) else Timestep()
        said = [m for m in answers[position] if isinstance(m, Mapping)]
        text = "\n".join(chat.text(m.get("content")) for m in said)
        calls = tuple(c for m in said for c in chat.tool_calls(m.get("tool_calls")))
        reward = chat.number(timestep.get("reward"), f"{where}: reward", warnings)
        if reward is not None:
            rewards.append(reward)
        done = timestep.get("done") is True
        call = answered[position]
        steps.append(model.Step(
            index=position + 1,
            kind=model.StepKind.LAST if done and position == len(timesteps) - 1 else model.StepKind.MID,
            reward=reward,
            timestamp=chat.number(timestep.get("timestamp"), f"{where}: timestamp", warnings),
            **base.step_fields(text, calls, chat.command_result(results[position]), call, contexts.links,
                               extra=extras[position]),
            reasoning=reasoning.from_messages(said),
        ))

    error = error_of(doc.get("error_info"))
    if error:
        outcome = model.Outcome.ERRORED
    elif done:
        outcome = model.Outcome.COMPLETED
    else:
        outcome = model.Outcome.INCOMPLETE
    metadata: dict[str, Any] = {k: v for k, v in doc.items()
                                if k not in ("timesteps", "are_evaluation", "episode_id")}
    if error:
        metadata["error"] = _error_entry(doc, error)
    evaluation = doc.get("are_evaluation")
    if evaluation is not None:
        metadata["evaluation"] = evaluation
    tools = _tool_names(timesteps)
    if tools:
        metadata["tools"] = tools
    return [base.episode(
        NAME, path, episode_id=episode_id(doc, path, record), task_name=task_name(doc), outcome=outcome,
        total_reward=sum(rewards) if rewards else None, system_prompt=system_prompt, steps=steps,
        messages=contexts.pool, links=contexts.links, metadata=metadata, warnings=warnings,
    )]


# What ``formats.registry`` reads this format through (``base.Adapter``'s defaults fill the rest).
ADAPTER = base.Adapter(NAME, sniff=sniff, summarize=summarize, parse=parse, episode_id=episode_id)
