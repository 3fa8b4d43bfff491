"""mini-swe-agent trajectories (``*.traj.json``), the 2.x tool-calling form and the older 1.x text form.

A trajectory is ``{trajectory_format?, info, messages}``: the whole chat, system message first. Each
assistant message is one model call; the messages after it up to the next assistant message are its
observations. A call runs every command of its ``extra.actions`` (several tool calls, or several commands
of a text response) and writes one observation per command, in order: each command is a step of its own
with its own output and return code; the call's response, cost, tokens and model time are on its first
step only, and every step of a call answers the same context. Files written through the Responses API
(mini-swe-agent's ``*ResponseModel`` classes) hold ``{"object": "response", "output": [...]}`` objects
for the assistant turns and ``function_call_output`` items for the results; ``_view`` reads them as the
chat messages they stand for, and names whatever it could not read (``Episode.skipped``).
Quirks kept here: 2.x carries the commands in ``extra.actions`` and
the raw output and return code in the observation's ``extra``; 1.x has one bash block per response
and ``<returncode>``/``<output>`` user messages (read with ``agent_text``); 2.x ends with an ``exit``
message holding ``exit_status`` and ``submission``; per-call costs exist only in newer files (older
ones record the episode's total alone); ``exit_status`` names why the run ended.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from collections.abc import Mapping
from typing import Any, NamedTuple, TypedDict, TypeGuard, TypeVar, cast

import msgspec
from msgspec import UNSET

from ares_viewer import model
from ares_viewer.base import agent_text, jsondecode, locations
from ares_viewer.formats import base, chat, failures, reasoning
from ares_viewer.formats.adapters import _mini_bytes
from ares_viewer.model import EpisodeRow

NAME = "mini-swe-agent"

_SUFFIX = ".traj.json"
_TRUNCATED = ("LimitsExceeded", "TimeExceeded", "CostLimitExceeded", "StepLimitExceeded")
_T = TypeVar("_T", int, float)
_LIMITS = {"LimitsExceeded": "step or cost limit", "TimeExceeded": "time limit", "CostLimitExceeded": "cost limit",
           "StepLimitExceeded": "step limit"}


FormatError = chat.FormatError


# The records of a trajectory that are mini-swe-agent's own: the keys this module reads, each value ``object``
# because the file is untrusted (used once an ``isinstance`` check or a reader of ``chat`` has said what it is).
# The chat messages themselves are read by ``chat``. TypedDicts cost nothing at run time.
class Trajectory(TypedDict, total=False):
    """The whole file (or one line of a JSON Lines file)."""

    trajectory_format: object
    info: object  # an ``Info``
    messages: object  # the chat, system message first


class Info(TypedDict, total=False):
    """``info``: why the run ended, what it submitted, its model's totals."""

    exit_status: object
    submission: object
    traceback: object
    model_stats: object  # a ``ModelStats``
    mini_version: object


class ModelStats(TypedDict, total=False):
    """``info.model_stats``."""

    instance_cost: object
    api_calls: object


class Extra(TypedDict, total=False):
    """A message's ``extra``: the response of an assistant message, the commands it ran, a result's raw output and
    return code, a format error's rejected response, the exit message's status (2.x)."""

    response: object  # a ``ModelResponse``
    actions: object  # a list of ``{"command", "tool_call_id"}``
    returncode: object
    raw_output: object
    exception_info: object
    interrupt_type: object
    model_response: object
    timestamp: object
    cost: object
    exit_status: object
    submission: object
    traceback: object


class ModelResponse(TypedDict, total=False):
    """``extra.response``: the chat completion as LiteLLM returned it."""

    usage: object  # a ``ResponseUsage``
    created: object
    choices: object


class ResponseUsage(TypedDict, total=False):
    """A response's usage, in OpenAI's names or Anthropic's, with LiteLLM's cost (1.x)."""

    prompt_tokens: object
    completion_tokens: object
    input_tokens: object
    output_tokens: object
    prompt_tokens_details: object
    cost: object


def sniff(doc: object) -> TypeGuard[Trajectory]:
    """True for a mini-swe-agent trajectory: messages plus its format tag or its ``info`` block."""
    if not isinstance(doc, Mapping) or "messages" not in doc:
        return False
    if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return True
    info = doc.get("info")
    return isinstance(info, Mapping) and any(k in info for k in ("exit_status", "model_stats", "mini_version"))


def misnamed(path: str) -> str | None:
    """Why a ``*.traj.json`` file that holds no trajectory is an error (None for other names)."""
    if _name(path).endswith(_SUFFIX):
        return "named like a mini-swe-agent trajectory but not one: no 'messages' and 'info'"
    return None


def _name(path: str) -> str:
    return locations.Location.of(path).name


def _messages(doc: object) -> list[object]:
    return chat.list_field(doc, "messages", per="at the top level", items="chat messages")


def _document(doc: object) -> tuple[Trajectory, list[object]]:
    """The trajectory and its messages; FormatError when it is not a JSON object with a list of ``messages``."""
    messages = _messages(doc)
    return cast(Trajectory, doc), messages


def _info(doc: Trajectory, warnings: list[str]) -> Info:
    info = doc.get("info")
    if info is None:
        return {}
    if not isinstance(info, Mapping):
        warnings.append(f"info is a {type(info).__name__}, not an object; ignored")
        return {}
    return cast(Info, info)


@functools.lru_cache(maxsize=256)
def _instance(path: str) -> str:
    """The task: the file's name without ``.traj.json`` (mini-swe-agent names files by instance id)."""
    names = _names(path)
    name = names[-1] if names else ""
    return name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else pathlib.PurePosixPath(name).stem


def episode_id(doc: object, path: str, record: int | None = None) -> str:
    """``{folder}/{instance}``: the instance id alone repeats across runs of the same benchmark."""
    _messages(doc)
    base = _base_id(path)
    return base if record is None else f"{base}#{record}"


@functools.lru_cache(maxsize=256)
def _base_id(path: str) -> str:
    """The id a file's path gives its trajectories (the lines of a JSON Lines file share it)."""
    names = _names(path)
    instance = _instance(path)
    folder = names[-2] if len(names) > 1 else ""
    if folder == instance:  # run-batch writes {output}/{instance}/{instance}.traj.json
        folder = names[-3] if len(names) > 2 else ""
    return f"{folder}/{instance}" if folder else instance


def _names(path: str) -> list[str]:
    """The names along a path without its protocol, as ``PurePosixPath`` reads them (empty and ``.`` parts left
    out), without building one: an index reads a million files' paths."""
    return [name for name in locations.Location.of(path).path.split("/") if name not in ("", ".")]


def _extra(message: object) -> Extra:
    # A decoded message is a dict: checked first, as the quicker test (summaries read millions).
    extra = message.get("extra") if type(message) is dict or isinstance(message, Mapping) else None
    return cast(Extra, extra) if type(extra) is dict or isinstance(extra, Mapping) else {}


def _role(message: object) -> str | None:
    return message.get("role") if type(message) is dict or isinstance(message, Mapping) else None


def _content(message: object) -> object:
    """A message's ``content`` (None for an item that is no object: such an item has no role either)."""
    return message.get("content") if type(message) is dict or isinstance(message, Mapping) else None


def _view(messages: list[object]) -> tuple[list[object], list[str]]:
    """The messages as chat messages (what the rest of this module reads), and the items it could not read.

    Responses API files: a ``{"object": "response", "output": [...]}`` turn is the assistant message of its
    ``message`` items' text, its ``function_call`` items as tool calls and its ``reasoning`` items' summaries;
    its ``usage`` and ``created_at`` stand where a chat completion's response keeps them. A
    ``function_call_output`` item is the tool message of its ``call_id`` and ``output``. Any other message
    without a role, and any other output item, is skipped and named (``messages[3] (type 'x')``).
    """
    if all(type(m) is dict and "role" in m for m in messages):  # chat messages: the common case, unchanged
        return messages, []
    view: list[object] = []
    skipped: list[str] = []
    for i, message in enumerate(messages):
        if isinstance(message, Mapping) and "role" in message:
            view.append(message)
        elif isinstance(message, Mapping) and message.get("object") == "response":
            view.append(_from_response(message, f"messages[{i}]", skipped))
        elif isinstance(message, Mapping) and message.get("type") == "function_call_output":
            view.append({"role": "tool", "content": message.get("output"), "tool_call_id": message.get("call_id"),
                         "extra": _extra(message)})
        else:
            kind = message.get("type") if isinstance(message, Mapping) else None
            skipped.append(f"messages[{i}] ({f'type {kind!r}' if kind is not None else _what(message)})")
            view.append(message)
    return view, skipped


def _what(value: object) -> str:
    if value is None:
        return "null"
    return "no role" if isinstance(value, Mapping) else f"{type(value).__name__}, not an object"


def _from_response(response: Mapping[str, Any], where: str, skipped: list[str]) -> dict[str, Any]:
    """The assistant message a Responses API turn stands for (see ``_view``)."""
    texts: list[str] = []
    calls: list[object] = []
    thoughts: list[str] = []
    output = response.get("output")
    if not isinstance(output, list):
        found = "missing" if output is None else f"{type(output).__name__}, not a list"
        skipped.append(f"{where}.output ({found})")
        output = []
    for j, item in enumerate(output):
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "message":
            texts.append(chat.text(item.get("content")))
        elif kind == "function_call":
            calls.append(item)
        elif kind == "reasoning":
            summary = item.get("summary")
            thoughts.extend(chat.text(s.get("text")) for s in (summary if isinstance(summary, list) else ())
                            if isinstance(s, Mapping))
        else:
            skipped.append(f"{where}.output[{j}] ({f'type {kind!r}' if kind is not None else _what(item)})")
    extra = dict(_extra(response))
    if "response" not in extra:
        extra["response"] = {"usage": response.get("usage"), "created": response.get("created_at")}
    message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(t for t in texts if t),
                               "tool_calls": calls, "extra": extra}
    if any(thoughts):
        message["reasoning_content"] = "\n\n".join(t for t in thoughts if t)
    return message


def _exit(doc: Trajectory, messages: list[object], info: Info) -> tuple[str, str]:
    """The exit status and the submission, from ``info`` or else from the last message's ``extra``."""
    last = _extra(messages[-1]) if messages else {}
    status = info.get("exit_status") or last.get("exit_status") or ""
    submission = info.get("submission") or last.get("submission") or ""
    return str(status), submission if isinstance(submission, str) else str(submission)


def _outcome(status: str, submission: str, messages: list[object], info: Info) -> tuple[
        model.Outcome, dict[str, str] | None]:
    """The outcome an exit status names, and the error it records."""
    if not status:
        return model.Outcome.INCOMPLETE, None
    if status == "Submitted":
        return model.Outcome.COMPLETED, None
    if status in _TRUNCATED:
        return model.Outcome.TRUNCATED, None
    # An exception ended the run: its text is the exit message (2.x) or the last user message (1.x).
    message = ""
    if messages and _role(messages[-1]) in ("exit", "user"):
        message = chat.text(_content(messages[-1])).strip()
    saved = info.get("traceback")
    if not message and isinstance(saved, str):
        lines = [line for line in saved.strip().splitlines() if line.strip()]
        message = lines[-1] if lines else ""
    if message == submission.strip():
        message = message or status
    # The traceback mini-swe-agent saved: ``info.traceback`` (1.x), the exit message's ``extra.traceback`` (2.x).
    trace = saved or (_extra(messages[-1]).get("traceback") if messages else None)
    found = {"type": status, "message": message[:2000]}
    return model.Outcome.ERRORED, {**found, "traceback": trace} if isinstance(trace, str) and trace else found


def _calls(messages: list[object]) -> list[int]:
    """Positions of the model calls: the assistant messages, and the format errors that stand for a call.

    2.x drops a response it cannot parse and adds only the format error, whose ``extra`` keeps the rejected
    response (``model_response``, or the raw ``response``) and its cost; 1.x adds both messages.
    """
    return _calls_of([_role(m) for m in messages], [_extra(m) for m in messages])


def _calls_of(roles: list[str | None], extras: list[Extra]) -> list[int]:
    """``_calls`` from the messages' roles and extras. A format error that follows no assistant message stands
    for the rejected model call."""
    return [i for i, role in enumerate(roles)
            if role == "assistant" or (role in ("user", "tool") and extras[i].get("interrupt_type") == "FormatError"
                                       and (i == 0 or roles[i - 1] != "assistant"))]


def _response(extra: Extra) -> ModelResponse:
    response = extra.get("response")
    return cast(ModelResponse, response) if isinstance(response, Mapping) else {}


def _time(message: object) -> float | None:
    """When a message was written: ``extra.timestamp`` (2.x), else its response's ``created`` (1.x)."""
    return _time_of(_role(message), _extra(message))


def _time_of(role: str | None, extra: Extra) -> float | None:
    found = chat.number(extra.get("timestamp"), "timestamp", [])
    if found is None and role == "assistant":
        found = chat.number(_response(extra).get("created"), "created", [])
    return found


def _cost(extra: Extra, where: str, warnings: list[str]) -> float | None:
    """A call's cost: ``extra.cost`` (2.x), else the cost LiteLLM put in the response's usage (1.x)."""
    cost = chat.number(extra.get("cost"), f"{where}: cost", warnings)
    if cost is None:
        usage = _response(extra).get("usage")
        cost = chat.number(usage.get("cost"), f"{where}: usage.cost", warnings) if isinstance(usage, Mapping) else None
    return cost


def _call_range(messages: list[object], calls: list[int], n: int) -> tuple[int, int]:
    """The messages holding call ``n``'s results: after its response, up to the next call."""
    position = calls[n]
    end = calls[n + 1] if n + 1 < len(calls) else len(messages)
    return (position if _role(messages[position]) != "assistant" else position + 1), end


def _times(messages: list[object], position: int, first: int, end: int) -> tuple[float | None, float | None]:
    """Model time and command time of the call at ``position``: from the latest earlier time to its response,
    and from its response to its first result."""
    answered = _time(messages[position])
    if answered is None or _role(messages[position]) != "assistant":
        return None, None
    before = next((t for t in (_time(m) for m in reversed(messages[:position])) if t is not None), None)
    results = [t for t in (_time(m) for m in messages[first:end] if _role(m) in ("tool", "user")) if t is not None]
    model_time = answered - before if before is not None and answered >= before else None
    command_time = results[0] - answered if results and results[0] >= answered else None
    return model_time, command_time


def _usage(extra: Extra) -> model.Usage:
    usage = cast(ResponseUsage, jsondecode.object_at(_response(extra), "usage"))
    prompt, generated = _tokens(usage)
    details = jsondecode.object_at(usage, "prompt_tokens_details")
    return model.Usage(prompt_tokens=prompt, generated_tokens=generated,
                       cached_prompt_tokens=chat.count(details.get("cached_tokens")))


def _tokens(usage: ResponseUsage) -> tuple[int | None, int | None]:
    """A call's prompt and generated tokens, from its response's usage (OpenAI's or Anthropic's names)."""
    return (chat.count(usage.get("prompt_tokens", usage.get("input_tokens"))),
            chat.count(usage.get("completion_tokens", usage.get("output_tokens"))))


def _observation(messages: list[object], final: bool, action: int = 0, actions: int = 1, submitter: int = 0
                 ) -> tuple[chat.CommandResult, dict[str, Any], str | None]:
    """What the result of a call's ``action``-th command (0-based, of ``actions``) says about it, the step's extra
    fields from it, and how the command failed to finish (``failures``), if it did. A call's results follow the
    order of its commands.

    ``final`` marks the last step of a finished run: 1.x appends the exit text (the submission, or an
    exception's message) as a user message there, which is no format error; 2.x ends on an ``exit`` message
    whose content is the submission, the output of the command that submitted (``submitter``: mini-swe-agent
    writes no result of a call whose command submitted, the others' included).
    """
    results = [m for m in messages if _role(m) in ("tool", "user")]
    if len(results) <= action:
        done = [m for m in messages if _role(m) == "exit" and _extra(m).get("exit_status") == "Submitted"]
        if done and not results and action == submitter:
            body = chat.text(_content(done[0]))
            # The environment submits only on return code 0.
            return chat.CommandResult(0, body, 0, body, False), {}, None
        return chat.NO_RESULT, {}, None
    first = results[action]
    body = chat.text(_content(first))
    extra = _extra(first)
    parsed = agent_text.parse_result(body)
    returncode = _code(extra, body)
    raw_output = extra.get("raw_output")
    output = raw_output if isinstance(raw_output, str) else parsed.output
    elided = 0 if isinstance(raw_output, str) else parsed.elided_chars
    ended = final and first is messages[-1] and parsed.returncode is None
    if ended:
        output = body
    format_error = extra.get("interrupt_type") == "FormatError" or (
        "returncode" not in extra and parsed.format_error and _role(first) == "user" and not ended)
    details: dict[str, Any] = {}
    if extra.get("exception_info"):
        details["exception_info"] = extra["exception_info"]
    failure = None if format_error else failures.classify(body, returncode, extra)
    if failure == failures.TIMED_OUT:
        details["timed_out"] = True
    if failure is not None:
        # What went wrong is the step's output, with whatever the command printed before it.
        raw = output or ""
        output = "\n\n".join(p for p in (failures.exception_text(body, extra) or body.strip(), raw.strip()) if p)
    if len(results) > actions and not action:
        details["observations"] = len(results)
    return chat.CommandResult(returncode, output, elided, body, bool(format_error)), details, failure


def _code(extra: Extra, body: str) -> int | None:
    """A result's return code: ``extra.returncode`` (2.x) when it is an integer, else the one its text holds."""
    code = chat.integer(extra.get("returncode"))
    return agent_text.returncode(body) if code is None else code


def _actions(extra: Extra) -> list[object]:
    """A call's commands as mini-swe-agent parsed them (``extra.actions``; none in 1.x files)."""
    actions = extra.get("actions")
    return actions if isinstance(actions, list) else []


def _returncodes(roles: list[str | None], extras: list[Extra], messages: list[object], first: int, end: int,
                 actions: int) -> list[int | None]:
    """The return codes ``_observation`` gives the ``actions`` commands of the call whose results are
    ``messages[first:end]`` (whose roles and extras these are), one per result read: ``extra.returncode`` when it
    is an integer, else the one its text holds; 0 for an exit message that submitted, when there is no result."""
    codes = [_code(extras[i], chat.text(_content(messages[i]))) for i in range(first, end)
             if roles[i] in ("tool", "user")][:actions]
    if not codes and any(roles[i] == "exit" and extras[i].get("exit_status") == "Submitted" for i in range(first, end)):
        return [0]
    return codes


def summarize(doc: object, path: str, record: int | None = None) -> list[EpisodeRow]:
    """The trajectory's index row in one pass over its messages (the index's fast path).

    Raises:
        FormatError: when the document cannot be a trajectory.
    """
    trajectory, written = _document(doc)
    messages, skipped = _view(written)
    warnings: list[str] = []
    info = _info(trajectory, warnings)
    status, submission = _exit(trajectory, messages, info)
    outcome, error = _outcome(status, submission, messages, info)
    roles = [_role(m) for m in messages]
    extras = [_extra(m) for m in messages]
    calls = _calls_of(roles, extras)
    prompt = generated = nonzero = actions = 0
    cost = 0.0
    known = [False, False, False]  # whether a call records prompt tokens, generated tokens, a cost
    times = []
    for n, position in enumerate(calls):
        extra = extras[position]
        tokens = _tokens(cast(ResponseUsage, jsondecode.object_at(_response(extra), "usage")))
        prompt += tokens[0] or 0
        generated += tokens[1] or 0
        step_cost = _cost(extra, "cost", [])
        cost += step_cost if step_cost and step_cost > 0 else 0.0
        known = [known[0] or tokens[0] is not None, known[1] or tokens[1] is not None,
                 known[2] or step_cost is not None]
        first, end = _call_range(messages, calls, n)
        count = max(1, len(_actions(extra)))
        actions += count
        nonzero += sum(code not in (None, 0) for code in _returncodes(roles, extras, messages, first, end, count))
    for role, extra in zip(roles, extras, strict=True):
        timestamp = _time_of(role, extra)
        if timestamp is not None:
            times.append(timestamp)
    total = _total_cost(info)
    totals = _Totals(actions, _known(prompt, known[0], calls), _known(generated, known[1], calls),
                     _known(cost if cost or total is None else total, known[2] or total is not None, calls),
                     nonzero, times)
    return [_row(path, record, (status, outcome, error), totals, [*warnings, *model.read_in_part(skipped)])]


def _known(summed: _T, recorded: bool, calls: list[int]) -> _T | None:
    """``summed`` over the model calls, as ``chat.call_total`` takes an episode's total: unknown (None, never 0)
    when there are calls and none records the figure (``recorded`` False)."""
    return chat.call_total(summed if recorded else None, len(calls), summed)


# Each outcome's value (``Outcome.value`` is a property: a lookup here costs a tenth of it, once per row).
_OUTCOMES = {outcome: outcome.value for outcome in model.Outcome}


class _Totals(NamedTuple):
    """What a trajectory's model calls add up to, for its index row (None: no call records it)."""

    actions: int
    prompt: int | None
    generated: int | None
    cost: float | None
    nonzero: int
    times: list[float]


def _row(path: str, record: int | None, ending: tuple[str, model.Outcome, dict[str, str] | None], totals: _Totals,
         warnings: list[str]) -> EpisodeRow:
    """A trajectory's index row (``summarize`` and ``summarize_bytes``); ``ending``: its exit status, outcome and
    error."""
    status, outcome, error = ending
    times = totals.times
    start, end_time = (times[0], times[-1]) if times else (None, None)
    base_id = _base_id(path)
    # A dict display, not ``EpisodeRow(...)`` and ``model.with_columns``: an index builds millions of rows.
    return cast(EpisodeRow, {
        "episode_id": base_id if record is None else f"{base_id}#{record}",
        "task_name": _instance(path),
        "outcome": _OUTCOMES[outcome],
        "total_reward": None,
        "num_actions": totals.actions,
        "start_time": start,
        "end_time": end_time,
        "duration_s": end_time - start if start is not None and end_time is not None else None,
        "total_cost": totals.cost,
        "prompt_tokens": totals.prompt,
        "generated_tokens": totals.generated,
        "truncated": outcome is model.Outcome.TRUNCATED,
        "error": None if error is None else model.describe_error(error),
        "nonzero_returncodes": totals.nonzero,
        "context_rewrites": 0,
        "path": path,
        "format": NAME,
        "warnings": warnings,
        "exit_status": status or None,
    })



def summarize_bytes(path: str, data: bytes) -> list[EpisodeRow] | None:
    """The rows ``summarize`` gives the file's trajectories, from msgspec's decoding of just the fields they read
    (``_mini_bytes``); None for a file that is not that plain shape (``_mini_bytes.records``), or not
    mini-swe-agent's, which is then read the ordinary way (so errors and warnings are always the ordinary path's)."""
    if not _mentions_trajectory(data):
        return None
    found = _mini_bytes.records(data)
    if found is None:
        return None
    rows = []
    try:
        for record, doc in found:
            row = _plain_row(doc, path, record)
            if row is None:
                return None
            rows.append(row)
    except (msgspec.MsgspecError, ValueError):  # a later line not read here, a content holding a 65-bit integer
        return None
    return rows


def _mentions_trajectory(data: bytes) -> bool:
    """A quick look at the bytes of the first line (the whole file when that line ends no object: a document
    written with indents): a file of another format is not decoded for nothing."""
    end = data.find(b"\n")
    first = data if end < 0 or not data[:end].rstrip().endswith(b"}") else data[:end]
    return b'"messages"' in first and (b'"info"' in first or b'"trajectory_format"' in first)


def _value(value: object) -> Any:
    """A field msgspec decoded as ``dict.get`` gives it: None when missing."""
    return None if value is UNSET else value


def _plain_row(doc: _mini_bytes.Trajectory, path: str, record: int | None) -> EpisodeRow | None:
    """``summarize`` of a trajectory decoded by ``_mini_bytes``; None when a message has no role (the Responses
    API's items, read the ordinary way). Its work in Python is a few comprehensions over the messages and a short
    loop over the model calls: as much CPU as msgspec's decoding of the line once took."""
    messages = doc.messages
    roles = [m.role for m in messages]
    if UNSET in roles:
        return None
    extras = [m.extra or _EMPTY_EXTRA for m in messages]  # null or missing: {}
    if "FormatError" in [e.interrupt_type for e in extras]:
        calls = [i for i, role in enumerate(roles)
                 if role == "assistant" or (role in ("user", "tool") and extras[i].interrupt_type == "FormatError"
                                            and (i == 0 or roles[i - 1] != "assistant"))]
    else:
        calls = [i for i, role in enumerate(roles) if role == "assistant"]
    info = doc.info if type(doc.info) is _mini_bytes.Info else None
    ending = _plain_ending(info, messages[-1] if messages else None, extras[-1] if messages else None)
    actions, prompt, generated, cost, nonzero = _plain_calls(messages, roles, extras, calls)
    stats = info.model_stats if info is not None else None
    total = (chat.number(_value(stats.instance_cost), "instance_cost", [])
             if type(stats) is _mini_bytes.ModelStats else None)
    known = _plain_known(extras, calls) if not (prompt and generated and cost) else (True, True, True)
    return _row(path, record, ending, _Totals(
        actions, _known(prompt, prompt > 0 or known[0], calls), _known(generated, generated > 0 or known[1], calls),
        _known(cost if cost or total is None else total, cost > 0 or known[2] or total is not None, calls),
        nonzero, _plain_times(roles, extras)), [])


def _plain_known(extras: list[_mini_bytes.Extra], calls: list[int]) -> tuple[bool, bool, bool]:
    """Whether any model call of a decoded trajectory records its prompt tokens, generated tokens, cost (read
    only when a sum is 0: it is unknown when none does)."""
    prompt = generated = cost = False
    for position in calls:
        extra = extras[position]
        response = extra.response
        usage = response.usage if type(response) is _Response else None
        if type(usage) is not _Usage:
            usage = None
        if usage is not None:
            prompt = prompt or chat.count(_value(
                usage.input_tokens if usage.prompt_tokens is UNSET else usage.prompt_tokens)) is not None
            generated = generated or chat.count(_value(
                usage.output_tokens if usage.completion_tokens is UNSET else usage.completion_tokens)) is not None
        cost = cost or _plain_cost(extra.cost, usage) is not None
    return prompt, generated, cost


_EMPTY_EXTRA = _mini_bytes.EMPTY_EXTRA


def _plain_times(roles: list[Any], extras: list[_mini_bytes.Extra]) -> list[float]:
    """The first and the last of the times ``_time_of`` reads of a decoded trajectory's messages (the row keeps
    no other): each looked for from its end of the messages."""
    n = len(extras)
    for i in range(n):
        first = _plain_time(roles[i], extras[i])
        if first is not None:
            break
    else:
        return []
    for j in range(n - 1, i, -1):
        last = _plain_time(roles[j], extras[j])
        if last is not None:
            return [first, last]
    return [first]


def _plain_time(role: Any, extra: _mini_bytes.Extra) -> float | None:
    """``_time_of`` a decoded message: a number at once, none for a message without a time that is no response."""
    stamp = extra.timestamp
    if type(stamp) is float or type(stamp) is int:
        return float(stamp)
    if stamp is UNSET and role != "assistant":
        return None
    return _time_of_plain(role, extra)


_Response, _Usage = _mini_bytes.Response, _mini_bytes.Usage


def _plain_calls(messages: list[_mini_bytes.Message], roles: list[Any], extras: list[_mini_bytes.Extra],
                 calls: list[int]) -> tuple[int, int, int, float, int]:
    """What ``summarize``'s loop over the model calls adds up, for a decoded trajectory: its actions, prompt and
    generated tokens, cost and nonzero return codes. The usual values (integer counts and codes, a number for a
    cost, one command answered by the next message) are read at once, the rest by ``chat``'s functions."""
    prompt = generated = nonzero = actions = 0
    cost = 0.0
    ends = calls[1:]
    if calls:
        ends.append(len(messages))
    for position, end in zip(calls, ends, strict=True):
        extra = extras[position]
        response = extra.response
        usage = response.usage if type(response) is _Response else None
        if type(usage) is _Usage:
            found = usage.prompt_tokens
            if type(found) is not int or found < 0:
                found = _plain_count(usage.input_tokens if found is UNSET else found)
            prompt += found
            found = usage.completion_tokens
            if type(found) is not int or found < 0:
                found = _plain_count(usage.output_tokens if found is UNSET else found)
            generated += found
        else:
            usage = None
        step_cost = extra.cost
        if type(step_cost) is not float:
            step_cost = _plain_cost(step_cost, usage)
        if step_cost and step_cost > 0:
            cost += step_cost
        first = position + 1 if roles[position] == "assistant" else position
        count = (len(extra.actions) or 1) if type(extra.actions) is list else 1
        actions += count
        code = extras[first].returncode if first < end else None
        if count == 1 and type(code) is int and roles[first] in ("tool", "user"):
            nonzero += code != 0
        else:
            nonzero += _plain_nonzero(messages, roles, extras, range(first, end), count)
    return actions, prompt, generated, cost, nonzero


def _plain_count(found: object) -> int:
    """A decoded token count as ``_tokens`` reads it (0 for unknown)."""
    return chat.count(found) or 0


def _plain_cost(cost: object, usage: _mini_bytes.Usage | None) -> float | None:
    """A call's cost as ``summarize`` reads it from its ``extra.cost``, else its usage's (a cost that is not a
    float)."""
    found = _number(cost, "cost")
    if found is None and usage is not None:
        found = _number(usage.cost, "usage.cost")
    return found


def _time_of_plain(role: Any, extra: _mini_bytes.Extra) -> float | None:
    """``_time_of`` a decoded message."""
    found = chat.number(_value(extra.timestamp), "timestamp", [])
    if found is None and role == "assistant" and isinstance(extra.response, _mini_bytes.Response):
        found = chat.number(_value(extra.response.created), "created", [])
    return found


def _plain_ending(info: _mini_bytes.Info | None, last: _mini_bytes.Message | None, extra: _mini_bytes.Extra | None
                  ) -> tuple[str, model.Outcome, dict[str, str] | None]:
    """``_exit`` and ``_outcome`` of a decoded trajectory: its exit status, outcome and error. The last message's
    content is decoded only for a run an exception ended."""
    status = (info is not None and _value(info.exit_status)) or (extra is not None and _value(extra.exit_status)) or ""
    found = (info is not None and _value(info.submission)) or (extra is not None and _value(extra.submission)) or ""
    status, submission = str(status), found if isinstance(found, str) else str(found)
    if not status or status == "Submitted" or status in _TRUNCATED:
        return status, *_outcome(status, submission, [], {})
    messages: list[object] = []
    if last is not None and extra is not None:
        messages = [{"role": _value(last.role), "content": _mini_bytes.decode_value(last.content),
                     "extra": {"traceback": _value(extra.traceback)}}]
    saved: Info = {"traceback": _value(info.traceback)} if info is not None else {}
    return status, *_outcome(status, submission, messages, saved)


def _number(value: object, what: str) -> float | None:
    """``chat.number`` of a decoded field (None when missing), a number read at once."""
    if type(value) is float or type(value) is int:
        return float(value)
    return chat.number(_value(value), what, [])


def _plain_nonzero(messages: list[_mini_bytes.Message], roles: list[Any], extras: list[_mini_bytes.Extra],
                   results: range, count: int) -> int:
    """How many of ``_returncodes`` of a decoded trajectory's call are not 0: a result's content is decoded only
    when its ``extra`` holds no integer return code."""
    nonzero = read = 0
    for i in results:
        if read < count and roles[i] in ("tool", "user"):
            read += 1
            code = extras[i].returncode
            if type(code) is not int:  # ``chat.integer`` of an int is itself
                code = chat.integer(_value(code))
                if code is None:
                    code = agent_text.returncode(chat.text(_mini_bytes.decode_value(messages[i].content)))
            nonzero += code is not None and code != 0
    return nonzero


def _total_cost(info: Info) -> float | None:
    stats = cast(ModelStats, jsondecode.object_at(info, "model_stats"))
    return chat.number(stats.get("instance_cost"), "instance_cost", [])


def parse(doc: object, path: str, record: int | None = None) -> list[model.Episode]:
    """The trajectory as an ``Episode``: a FIRST record for the task, then one step per command each assistant
    message ran (one step for a message that ran none).

    Raises:
        FormatError: when the document cannot be a trajectory (e.g. ``messages`` is not a list).
    """
    document, written = _document(doc)
    messages, skipped = _view(written)
    warnings: list[str] = []
    info = _info(document, warnings)
    status, submission = _exit(document, messages, info)
    outcome, error = _outcome(status, submission, messages, info)
    system_prompt, rest = chat.split_system(messages)
    offset = len(messages) - len(rest)
    calls = [p - offset for p in _calls(messages)]

    # The history only grows: call n's context is every message before its assistant message.
    contexts_end = calls[-1] if calls else len(rest)
    pool = [_message(m, written[i + offset]) for i, m in enumerate(rest[:contexts_end])]
    trajectory = _Trajectory(rest, calls, status, _links(calls, len(pool)))
    steps = [model.Step(index=0, kind=model.StepKind.FIRST, timestamp=None)]
    previous_time = None
    for n in range(len(calls)):
        call = _read_call(trajectory, n, f"step {len(steps)}", previous_time, warnings)
        previous_time = call.timestamp if call.timestamp is not None else previous_time
        steps.extend(_call_steps(trajectory, call, len(steps)))

    metadata = _metadata(document, info, status, submission, [s.cost for s in steps])
    if error:
        metadata["error"] = error
    if outcome is model.Outcome.TRUNCATED:
        metadata["truncated_by"] = f"{_LIMITS.get(status, 'a limit')} ({status})"
    return [base.episode(
        NAME, path, episode_id=episode_id(doc, path, record), task_name=_instance(path), outcome=outcome,
        times=[t for t in (_time(m) for m in messages) if t is not None], system_prompt=system_prompt,
        steps=steps, messages=pool, links=trajectory.links, metadata=metadata, warnings=warnings, skipped=skipped,
    )]


def _links(calls: list[int], pool: int) -> list[model.ContextLink]:
    """One context link per model call: what the history gained since the call before (everything, in one link,
    when no call was made)."""
    links = []
    previous = 0
    for position in calls:
        links.append(model.ContextLink(kept=previous, added=tuple(range(previous, position)), rewritten=False))
        previous = position
    if not calls:
        links.append(model.ContextLink(kept=0, added=tuple(range(pool)), rewritten=False))
    return links


@dataclasses.dataclass(frozen=True)
class _Trajectory:
    """What every model call is read against: the messages after the system prompt, where each call's message
    sits in them, the run's exit status ("" while it runs) and the calls' context links."""

    rest: list[object]
    calls: list[int]
    status: str
    links: list[model.ContextLink]


@dataclasses.dataclass(frozen=True)
class _Call:
    """Model call ``n`` as read: its response (``message``, ``text``; ``rejected`` when mini-swe-agent could
    not parse it), the commands it ran, when it was made and what it cost."""

    n: int
    message: Mapping[str, Any]
    extra: Extra
    text: str
    rejected: bool
    actions: list[object]
    timestamp: float | None
    dt: float | None
    cost: float | None


def _read_call(trajectory: _Trajectory, n: int, where: str, previous_time: float | None,
               warnings: list[str]) -> _Call:
    """Model call ``n`` of ``trajectory`` (``where`` names its first step in warnings)."""
    message = trajectory.rest[trajectory.calls[n]]
    extra = _extra(message)
    rejected = _role(message) != "assistant"
    if rejected:  # a response mini-swe-agent could not parse: kept in the format error's extra
        answer, text = _rejected_response(extra)
    else:  # an assistant message: a mapping (only a mapping has a role)
        answer = cast(Mapping[str, Any], message)
        text = chat.text(answer.get("content"))
    timestamp = chat.number(extra.get("timestamp"), f"{where}: timestamp", warnings)
    if timestamp is None and not rejected:
        timestamp = _time(message)
    dt = timestamp - previous_time if timestamp is not None and previous_time is not None else None
    return _Call(n, answer, extra, text, rejected, _actions(extra), timestamp, dt, _cost(extra, where, warnings))


def _rejected_response(extra: Extra) -> tuple[Mapping[str, Any], str]:
    """The message and text of a response mini-swe-agent could not parse, from its format error's extra."""
    answer = _response(extra).get("choices")
    answer = answer[0].get("message") if isinstance(answer, list) and answer and isinstance(
        answer[0], Mapping) else {}
    given = jsondecode.string_at(extra, "model_response")
    content = answer.get("content") if isinstance(answer, Mapping) else None
    return (answer if isinstance(answer, Mapping) else {}), (given if given is not None else chat.text(content))


def _call_steps(trajectory: _Trajectory, call: _Call, index: int) -> list[model.Step]:
    """The steps of one model call, numbered from ``index``: one per command it ran (one when it ran none). The
    first carries the response, its cost, tokens and times; the others only their command and its result."""
    rest, n = trajectory.rest, call.n
    calls_made = chat.tool_calls(call.message.get("tool_calls"))
    commands = [str(a.get("command")) if isinstance(a, Mapping) and a.get("command") is not None else None
                for a in call.actions]
    first, end = _call_range(rest, trajectory.calls, n)
    final = bool(trajectory.status) and end == len(rest)
    model_time, command_time = _times(rest, trajectory.calls[n], first, end)
    count = max(1, len(call.actions))
    submitter = next((a for a, c in enumerate(commands) if c and agent_text.is_submit(c)), 0)
    steps = []
    for a in range(count):
        said, details, failure = _observation(rest[first:end], final, a, count, submitter)
        if call.rejected:
            said = said._replace(output=said.text, format_error=True)
        command = commands[a] if a < len(commands) else None
        if count > 1:
            details["model_call"] = {"call": n + 1, "action": a + 1, "actions": count}
        if a == 0:
            fields = base.step_fields(call.text, calls_made if count == 1 else _own_call(calls_made, call.actions, 0),
                                      said, n, trajectory.links, command=command, tool_command=chat.shell_command,
                                      extra=details)
        else:  # the same response's next command: no response, cost or tokens of its own
            fields = base.step_fields("", _own_call(calls_made, call.actions, a), said, n, trajectory.links,
                                      command=command, tool_command=chat.shell_command, extra=details)
            fields["new_message_count"] = 0
        if call.rejected:
            fields["command"] = None  # mini-swe-agent ran nothing for a response it could not parse
        last = n == len(trajectory.calls) - 1 and a == count - 1 and trajectory.status
        steps.append(model.Step(
            index=index + a,
            kind=model.StepKind.LAST if last else model.StepKind.MID,
            timestamp=call.timestamp,
            dt=call.dt if a == 0 else None,
            usage=_usage(call.extra) if a == 0 else model.Usage(),
            cost=call.cost if a == 0 else None,
            **fields,
            reasoning=(reasoning.from_message(call.message) or reasoning.from_response(_response(call.extra)))
            if a == 0 else "",
            model_time=model_time if a == 0 else None,
            command_time=command_time if a == 0 else None,
            failure=failure,
        ))
    return steps


def _metadata(doc: Trajectory, info: Info, status: str, submission: str,
              step_costs: list[float | None]) -> dict[str, Any]:
    """The trajectory's own fields and its ``info`` (but the messages), its exit status and submission, its
    model call count, and the run's total cost when no step records one."""
    metadata: dict[str, Any] = {k: v for k, v in doc.items() if k not in ("messages", "info")}
    metadata.update({k: v for k, v in info.items() if k not in ("exit_status", "submission")})
    metadata["exit_status"] = status or None
    metadata["submission"] = submission
    stats = cast(ModelStats, jsondecode.object_at(info, "model_stats"))
    if "api_calls" in stats:
        metadata["api_calls"] = stats["api_calls"]
    if not any(c for c in step_costs if c and c > 0) and _total_cost(info) is not None:
        # Older files record only the run's total; the episode's total cost falls back to it.
        metadata["total_cost"] = _total_cost(info)
    return metadata


def _message(read: Any, written: Any) -> model.Message:
    """A pool message: as ``_view`` reads it, keeping the file's own message as its ``raw``."""
    message = chat.message_from_dict(read)
    return message if read is written or not isinstance(written, Mapping) else dataclasses.replace(message,
                                                                                                   raw=written)


def _own_call(calls: tuple[model.ToolCall, ...], actions: list[object], a: int) -> tuple[model.ToolCall, ...]:
    """The tool call of a call's ``a``-th command: the one its ``tool_call_id`` names, else the ``a``-th."""
    action = actions[a] if a < len(actions) else None
    wanted = action.get("tool_call_id") if isinstance(action, Mapping) else None
    found = [c for c in calls if wanted is not None and c.call_id == str(wanted)]
    return tuple(found[:1]) if found else calls[a:a + 1]


# What ``formats.registry`` reads this format through (``base.Adapter``'s defaults fill the rest).
ADAPTER = base.Adapter(NAME, sniff=sniff, summarize=summarize, parse=parse, episode_id=episode_id, misnamed=misnamed,
                       summarize_bytes=summarize_bytes)
