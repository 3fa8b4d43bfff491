"""Tinker rollout summaries: ``{log_path}/iteration_NNNNNN/{train|eval_<label>}_rollout_summaries.jsonl``.

One JSON object per line, one line per rollout (trajectory). A group (``group_idx``) holds several
rollouts of the same prompt. Quirks kept here: traces are optional (without them a step has
rewards and token counts but no messages), message content may be a list of typed parts,
``reward_data`` holds display strings such as ``"1.000"``, the iteration and split may only be
readable from the file's path, and a response cut off at the token limit (``stop_reason``
``"length"``) ends the rollout truncated.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, TypedDict, TypeGuard, cast

from ares_viewer import model
from ares_viewer.base import jsondecode, locations
from ares_viewer.formats import base, chat, reasoning
from ares_viewer.model import EpisodeRow

NAME = "tinker"

_FILE = re.compile(r"^(?P<base>.+)_rollout_summaries\.jsonl?$")
_ITERATION_DIR = re.compile(r"^iteration_(?P<n>\d+)$")
_LENGTH_STOPS = ("length", "max_tokens", "max_length")
_TASK_CHARS = 80


FormatError = chat.FormatError


# The records of a rollout-summaries line: the keys this module reads, each value ``object`` because the file is
# untrusted (a value is used once an ``isinstance`` check or a reader of ``chat`` has said what it is). TypedDicts
# cost nothing at run time: the decoded dicts are read as they are. The chat messages stay ``chat``'s to read.
class Trace(TypedDict, total=False):
    """A step's ``trace``: what the policy saw and said."""

    prompt: object  # ``{messages}``, a list of messages, or a string
    policy_response: object  # as ``prompt``
    reward_data: object  # display strings of numbers ("1.000") and the rest
    env_state: object
    extra: object


class Tokens(TypedDict, total=False):
    """Tinker's ``TokensWithLogprobs``, at a step or under its ``ac``."""

    tokens: object
    maybe_logprobs: object


class StepRecord(Tokens, total=False):
    """One of ``steps``: one action of the rollout."""

    ob_len: object
    ac_len: object
    reward: object
    episode_done: object
    stop_reason: object
    metrics: object
    logs: object
    trace: object  # a ``Trace``
    ac: object  # ``Tokens``


class Rollout(TypedDict, total=False):
    """One line: one rollout (trajectory) of a group."""

    steps: object  # a list of ``StepRecord``
    group_idx: object
    traj_idx: object
    iteration: object
    split: object
    tags: object
    total_reward: object
    final_reward: object
    sampling_client_step: object


def sniff(doc: object) -> TypeGuard[Rollout]:
    """True for a rollout-summary record: steps plus a group or trajectory index."""
    return isinstance(doc, Mapping) and "steps" in doc and ("group_idx" in doc or "traj_idx" in doc)


def misnamed(path: str) -> str | None:
    """Why a file named like rollout summaries that holds none is an error (None for other names)."""
    if _FILE.match(_name(path)):
        return "named like Tinker rollout summaries but not one: no 'steps' and 'group_idx'"
    return None


def _name(path: str) -> str:
    return locations.Location.of(path).name


@functools.lru_cache(maxsize=1024)
def _location(path: str) -> tuple[str, int | None, str]:
    """The log folder's name, the iteration its folder names, and the file's base name (train, eval_<label>).

    Kept per path: every rollout of a file asks it (its pure path's parsing was a third of a rollout's id)."""
    pure = locations.Location.of(path).pure()
    match = _FILE.match(pure.name)
    base = match.group("base") if match else pure.stem
    iteration_dir = _ITERATION_DIR.match(pure.parent.name)
    if iteration_dir:
        return pure.parent.parent.name or "tinker", int(iteration_dir.group("n")), base
    return pure.parent.name or "tinker", None, base



def _records_of(doc: object) -> tuple[Rollout, list[object]]:
    """The rollout and its steps; FormatError when it is not a JSON object with a list of ``steps``."""
    steps = chat.list_field(doc, "steps", per="per line", items="steps")
    return cast(Rollout, doc), steps


def _ids(doc: Rollout, path: str, record: int | None) -> tuple[str, str | None, int | None, str]:
    """Episode id, group id, iteration and split of one rollout."""
    run, folder_iteration, base = _location(path)
    iteration = chat.integer(doc.get("iteration"))
    iteration = folder_iteration if iteration is None else iteration
    given = jsondecode.string_at(doc, "split")
    split = given if given is not None else base
    group, traj = chat.integer(doc.get("group_idx")), chat.integer(doc.get("traj_idx"))
    prefix = f"{run}/it{iteration if iteration is not None else '?'}/{base}"
    if group is None or traj is None:
        return f"{prefix}/line{record or 0}", None, iteration, split
    return f"{prefix}/g{group}/t{traj}", f"{prefix}/g{group}", iteration, split


def episode_id(doc: object, path: str, record: int | None = None) -> str:
    """The id ``parse`` gives this rollout: ``{log folder}/it{iteration}/{file base}/g{group}/t{traj}``."""
    rollout, _ = _records_of(doc)
    return _ids(rollout, path, record)[0]


def _trace(step: object) -> Trace:
    trace = cast(StepRecord, step).get("trace") if isinstance(step, Mapping) else None
    return cast(Trace, trace) if isinstance(trace, Mapping) else Trace()


def _conversation(part: object) -> list[Any] | None:
    """The messages of a trace's prompt or policy response (None when it records none)."""
    if isinstance(part, Mapping):
        messages = part.get("messages")
        return messages if isinstance(messages, list) else None
    if isinstance(part, list):
        return part
    if isinstance(part, str):
        return [{"role": "user", "content": part}]
    return None


def task_text(prompt: object) -> str | None:
    """The start of a prompt's last user message (a step trace's ``prompt``), None when it has none."""
    for message in reversed(_conversation(prompt) or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            words = " ".join(chat.text(message.get("content")).split())
            if words:
                return words if len(words) <= _TASK_CHARS else words[: _TASK_CHARS - 1] + "…"
    return None


def _task(steps: list[object], doc: Rollout, group: int | None) -> str:
    """What the rollout attempted: the start of its first prompt's last user message."""
    text = task_text(_trace(steps[0]).get("prompt")) if steps else None
    if text is not None:
        return text
    tags = doc.get("tags")
    label = ", ".join(str(t) for t in tags) if isinstance(tags, list) and tags else "rollout"
    return f"{label} · group {group}" if group is not None else label


def _outcome(steps: list[object]) -> tuple[model.Outcome, bool]:
    last = cast(StepRecord, steps[-1]) if steps and isinstance(steps[-1], Mapping) else None
    if last is None or last.get("episode_done") is not True:
        return model.Outcome.INCOMPLETE, False
    if str(last.get("stop_reason", "")).lower() in _LENGTH_STOPS:
        return model.Outcome.TRUNCATED, True
    return model.Outcome.COMPLETED, False


def _total_reward(doc: Rollout, steps: list[object], warnings: list[str]) -> float | None:
    total = chat.number(doc.get("total_reward"), "total_reward", warnings)
    if total is not None:
        return total
    rewards = [chat.number(cast(StepRecord, s).get("reward"), "reward", []) for s in steps if isinstance(s, Mapping)]
    known = [r for r in rewards if r is not None]
    if not known:
        return None
    return sum(known) + (chat.number(doc.get("final_reward"), "final_reward", []) or 0.0)


def _display_number(value: object) -> object:
    """``reward_data`` values: display strings of numbers ("1.000") read as numbers, the rest as they are."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if isinstance(value, Mapping):
        return {k: _display_number(v) for k, v in value.items()}
    return value


def _extra_columns(doc: Rollout, group_id: str | None, iteration: int | None, split: str) -> dict:
    tags = doc.get("tags")
    return {
        "iteration": iteration,
        "split": split,
        "group": group_id,
        "group_idx": chat.integer(doc.get("group_idx")),
        "traj_idx": chat.integer(doc.get("traj_idx")),
        "tags": ", ".join(str(t) for t in tags) if isinstance(tags, list) else None,
        "sampling_client_step": chat.integer(doc.get("sampling_client_step")),
    }


def context_counts(prompts: list[object]) -> tuple[int, int]:
    """Commands that exited non-zero and context rewrites, from the steps' trace prompts in order."""
    nonzero = rewrites = 0
    previous: list[Any] | None = None
    for prompt in prompts:
        messages = _conversation(prompt)
        if messages is None:
            continue
        _, messages = chat.split_system(messages)
        if previous is not None:
            if len(messages) < len(previous) or (previous and messages[len(previous) - 1] != previous[-1]):
                rewrites += 1
            result = chat.result_message(messages[chat.kept(previous, messages):])
            code = chat.command_result(result)[0]
            nonzero += code not in (None, 0)
        previous = messages
    return nonzero, rewrites


def location(path: str) -> tuple[str, int | None, str]:
    """The log folder's name, the iteration its folder names, and the file's base name (train, eval_<label>)."""
    return _location(path)


def _token_data(step: StepRecord) -> dict[str, Any]:
    """The action's token data when the line records it (Tinker's ``TokensWithLogprobs``: ``tokens`` and
    ``maybe_logprobs``, at the step or under ``ac``), for per-token views."""
    found: dict[str, Any] = {}
    for source in (step.get("ac"), step):
        if isinstance(source, Mapping):
            tokens = cast(Tokens, source)
            for key in ("tokens", "maybe_logprobs"):
                if isinstance(value := tokens.get(key), list) and key not in found:
                    found[key] = value
    return found


def summarize(doc: object, path: str, record: int | None = None) -> list[EpisodeRow]:
    """The rollout's index row without building messages (the index's fast path).

    Agrees with ``parse(doc, path, record)[0].summary()`` on the common columns and adds
    ``iteration``, ``split``, ``group``, ``group_idx``, ``traj_idx``, ``tags`` and ``sampling_client_step``.

    Raises:
        FormatError: when the line cannot be a rollout.
    """
    doc, steps = _records_of(doc)
    warnings: list[str] = []
    episode, group_id, iteration, split = _ids(doc, path, record)
    outcome, truncated = _outcome(steps)
    prompt: int | None = None  # None until a step records it (``chat.call_total``)
    generated: int | None = None
    prompts = []
    for position, item in enumerate(steps):
        if not isinstance(item, Mapping):
            warnings.append(f"step {position} is a {type(item).__name__}, not a step; skipped")
            continue
        step = cast(StepRecord, item)
        prompt = chat.plus(prompt, chat.count(step.get("ob_len")))
        generated = chat.plus(generated, chat.count(step.get("ac_len")))
        prompts.append(_trace(step).get("prompt"))
    nonzero, rewrites = context_counts(prompts)
    row = EpisodeRow(
        episode_id=episode,
        task_name=_task(steps, doc, chat.integer(doc.get("group_idx"))),
        outcome=outcome.value,
        total_reward=_total_reward(doc, steps, warnings),
        num_actions=(actions := sum(1 for s in steps if isinstance(s, Mapping))),
        start_time=None,
        end_time=None,
        duration_s=None,
        total_cost=None if actions else 0.0,  # Tinker records tokens, never a cost: unknown
        prompt_tokens=chat.call_total(prompt, actions, 0),
        generated_tokens=chat.call_total(generated, actions, 0),
        truncated=truncated,
        error=None,
        nonzero_returncodes=nonzero,
        context_rewrites=rewrites,
        path=path,
        format=NAME,
        warnings=warnings,
    )
    return [model.with_columns(row, _extra_columns(doc, group_id, iteration, split))]


def parse(doc: object, path: str, record: int | None = None) -> list[model.Episode]:
    """The rollout of one line as an ``Episode``: a FIRST record, then one action per Tinker step.

    Raises:
        FormatError: when the line cannot be a rollout (e.g. ``steps`` is not a list).
    """
    doc, raw_steps = _records_of(doc)
    warnings: list[str] = []
    episode, group_id, iteration, split = _ids(doc, path, record)
    outcome, truncated = _outcome(raw_steps)
    steps_in: list[StepRecord] = []
    for position, item in enumerate(raw_steps):
        if isinstance(item, Mapping):
            steps_in.append(cast(StepRecord, item))
        else:
            warnings.append(f"step {position} is a {type(item).__name__}, not a step; skipped")

    # Model call j answered step j's prompt; the next prompt carries the result of its action.
    contexts = chat.ContextBuilder()
    call_of: list[int | None] = []
    results: list[Mapping[str, Any] | None] = []
    system_prompt: str | None = None
    for step in steps_in:
        messages = _conversation(_trace(step).get("prompt"))
        if messages is None:
            call_of.append(None)
            results.append(None)
            continue
        system, messages = chat.split_system(messages)
        system_prompt = system_prompt if system_prompt is not None else system
        result = contexts.add(messages)
        if call_of and call_of[-1] is not None:
            results[-1] = result
        call_of.append(len(contexts.links) - 1)
        results.append(None)

    steps = [model.Step(index=0, kind=model.StepKind.FIRST)]
    for j, step in enumerate(steps_in):
        where = f"step {j}"
        trace = _trace(step)
        response = _conversation(trace.get("policy_response")) or []
        said = [m for m in response if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"]
        text = "\n".join(chat.text(m.get("content")) for m in said)
        calls = tuple(c for m in said for c in chat.tool_calls(m.get("tool_calls")))
        extra: dict[str, Any] = {k: v for k in ("stop_reason", "metrics", "logs") if (v := step.get(k))}
        for key in ("reward_data", "env_state", "extra"):
            if (value := trace.get(key)) is not None:
                extra[key] = _display_number(value) if key == "reward_data" else value
        extra.update(_token_data(step))
        call = call_of[j]
        last = j == len(steps_in) - 1 and step.get("episode_done") is True
        steps.append(model.Step(
            index=j + 1,
            kind=model.StepKind.LAST if last else model.StepKind.MID,
            reward=chat.number(step.get("reward"), f"{where}: reward", warnings),
            reasoning=reasoning.from_messages(said),
            usage=model.Usage(prompt_tokens=chat.count(step.get("ob_len")),
                              generated_tokens=chat.count(step.get("ac_len"))),
            **base.step_fields(text, calls, chat.command_result(results[j]), call, contexts.links, extra=extra),
        ))
    metadata: dict[str, Any] = {k: v for k, v in doc.items() if k != "steps"}
    metadata.update(_extra_columns(doc, group_id, iteration, split))
    if truncated:
        metadata["truncated_by"] = "token limit (the last response stopped at its maximum length)"
    return [base.episode(
        NAME, path, episode_id=episode, task_name=_task(raw_steps, doc, chat.integer(doc.get("group_idx"))),
        outcome=outcome, total_reward=_total_reward(doc, raw_steps, warnings), truncated=truncated, times=(),
        system_prompt=system_prompt, steps=steps, messages=contexts.pool, links=contexts.links, metadata=metadata,
        warnings=warnings,
    )]


# What ``formats.registry`` reads this format through (``base.Adapter``'s defaults fill the rest).
ADAPTER = base.Adapter(NAME, sniff=sniff, summarize=summarize, parse=parse, episode_id=episode_id, misnamed=misnamed)
