"""ARES episode trajectories (``{episode_id}.json`` from ``JsonTrajectoryCollector``).

Format quirks stay here: the FIRST record that is not an action, cumulative observations, the
pending request of a truncated LAST record, ``-1`` token counts, end-status fields of newer
writers, wrong types from hand-edited or foreign writers. Everything else sees ``model.Episode``.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any, TypedDict, TypeGuard, cast

import orjson

from ares_viewer import model
from ares_viewer.base import agent_text, jsondecode
from ares_viewer.formats import base, chat, decoding, failures, reasoning
from ares_viewer.model import EpisodeRow, verifier

NAME = "ares"

_TOP_KEYS = ("episode_id", "task_name", "start_time", "end_time", "total_reward", "num_steps", "truncated", "steps")
_END_STATUS_KEYS = ("end_status", "status", "episode_status", "end_reason", "termination_reason")
# Words a writer may use for why an episode ended, mapped onto outcomes.
_END_STATUS_WORDS: tuple[tuple[tuple[str, ...], model.Outcome], ...] = (
    (("error", "exception", "fail", "crash"), model.Outcome.ERRORED),
    (("cancel",), model.Outcome.CANCELLED),
    (("abort", "close", "exit", "kill"), model.Outcome.ABORTED),
    (("abandon", "reset", "interrupt"), model.Outcome.INTERRUPTED),
    (("truncat", "limit"), model.Outcome.TRUNCATED),
    (("complete", "finish", "normal", "done", "success", "submitted"), model.Outcome.COMPLETED),
    (("incomplete", "running", "active", "progress"), model.Outcome.INCOMPLETE),
)
# ARES names each file after its episode: a UUID4.
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_REQUEST_SETTINGS = ("max_output_tokens", "temperature", "top_p", "top_k", "stream", "tool_choice", "service_tier",
                     "stop_sequences", "metadata")


FormatError = chat.FormatError


# The records of an ARES file as ``JsonTrajectoryCollector`` writes them: the keys this module reads, each value
# ``object`` because the file is untrusted (a value is used once an ``isinstance`` check or a reader of ``chat`` has
# said what it is). TypedDicts cost nothing at run time: the decoded dicts are read as they are.
class Usage(TypedDict, total=False):
    """A response's token counts (``-1``: not reported)."""

    prompt_tokens: object
    generated_tokens: object
    cached_prompt_tokens: object


class Response(TypedDict, total=False):
    """An ``LLMResponse``: the model's answer, a step's ``action``."""

    data: object  # a list of content items (text, thinking blocks, tool calls)
    usage: object  # a ``Usage``
    cost: object
    created_at: object
    id: object
    model: object
    stop_reason: object
    finish_reason: object
    status: object


class Request(TypedDict, total=False):
    """An ``LLMRequest``: the context the model is asked with next, a step's ``observation``."""

    messages: object  # a list of chat messages (or ``RAW_CONTEXT`` on the fast path)
    system_prompt: object
    tools: object


class StepRecord(TypedDict, total=False):
    """One record of ``steps``: ``FIRST`` (the first request), then one per action, ``MID`` or ``LAST``."""

    step_index: object
    step_type: object
    observation: object  # a ``Request``, None on a submitted ``LAST``
    action: object  # a ``Response``, None on ``FIRST``
    reward: object
    discount: object
    timestamp: object


class EpisodeDoc(TypedDict, total=False):
    """The whole file: the episode's header and its ``steps``, with what newer writers add (``end_status`` and
    the other keys of ``_END_STATUS_KEYS``, ``error``, ``verifier``, ``final_command``)."""

    episode_id: object
    task_name: object
    start_time: object
    end_time: object
    total_reward: object
    num_steps: object
    truncated: object
    steps: object
    error: object
    verifier: object
    final_command: object


def sniff(doc: object) -> TypeGuard[EpisodeDoc]:
    """True when a decoded document is an ARES episode (or meant to be one)."""
    return isinstance(doc, Mapping) and "steps" in doc and ("episode_id" in doc or "task_name" in doc)


def misnamed(path: str) -> str | None:
    """Why a file named like an episode (``{uuid}.json``) that holds none is an error (None for other names)."""
    if _UUID.match(pathlib.PurePath(path).name.removesuffix(".json")):
        return "named like an episode but not one: no 'steps' and 'episode_id'"
    return None


def episode_id(doc: object, path: str, record: int | None = None) -> str:
    """The episode's id: its ``episode_id``, else the file's name."""
    episode = doc.get("episode_id") if isinstance(doc, Mapping) else None
    return episode if isinstance(episode, str) and episode else pathlib.PurePath(path).stem


def _outcome(doc: EpisodeDoc, records: list[object], truncated: bool) -> model.Outcome:
    for key in _END_STATUS_KEYS:
        status = doc.get(key)
        if isinstance(status, Mapping):
            status = status.get("status", status.get("kind", status.get("type")))
        if isinstance(status, str) and status.strip():
            word = status.strip().lower()
            for needles, outcome in _END_STATUS_WORDS:
                if any(n in word for n in needles):
                    if outcome is model.Outcome.COMPLETED and truncated:
                        return model.Outcome.TRUNCATED
                    return outcome
    last = records[-1] if records else None
    has_last = isinstance(last, Mapping) and last.get("step_type") == "LAST"
    if not has_last:
        return model.Outcome.INCOMPLETE
    return model.Outcome.TRUNCATED if truncated else model.Outcome.COMPLETED


def _response(raw: object, where: str, warnings: list[str]) -> tuple[str, tuple[model.ToolCall, ...], model.Usage,
                                                                    float | None, dict[str, Any]]:
    """Text, tool calls, usage, cost and extra fields of an LLM response object."""
    if not isinstance(raw, Mapping):
        if raw is not None:
            warnings.append(f"{where}: action is a {type(raw).__name__}, not a response object; ignored")
        return "", (), model.Usage(), None, {}
    response = cast(Response, raw)
    data = response.get("data")
    text, calls = _answer(data)
    usage_raw = cast(Usage, jsondecode.object_at(response, "usage"))
    usage = model.Usage(
        prompt_tokens=chat.count(usage_raw.get("prompt_tokens")),
        generated_tokens=chat.count(usage_raw.get("generated_tokens")),
        cached_prompt_tokens=chat.count(usage_raw.get("cached_prompt_tokens")),
    )
    cost = chat.number(response.get("cost"), f"{where}: cost", warnings)
    extra = {k: raw[k] for k in ("id", "model", "stop_reason", "finish_reason", "status") if raw.get(k) is not None}
    extra["reasoning"] = reasoning.from_items(data)
    return text, calls, usage, cost, extra


def _answer(data: object) -> tuple[str, tuple[model.ToolCall, ...]]:
    """A response's text (its content items, thinking blocks left out) and its tool calls, from its ``data``."""
    texts: list[str] = []
    calls: list[model.ToolCall] = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, Mapping):
            continue
        if "content" in item:
            content = item.get("content")
            if isinstance(content, list):  # Anthropic blocks: thinking is reasoning, not the answer
                content = [b for b in content if not (isinstance(b, Mapping) and "thinking" in str(b.get("type")))]
            texts.append(chat.text(content))
        elif "name" in item and ("input" in item or "arguments" in item):
            calls.extend(chat.tool_calls([item]))
    return "\n".join(texts), tuple(calls)


@dataclasses.dataclass(frozen=True, slots=True)
class _Header:
    """The episode-level fields, read the same way for the index row and the full episode."""

    episode_id: str
    task_name: str
    start_time: float | None
    end_time: float | None
    truncated: bool
    total_reward: float | None
    outcome: model.Outcome


def _final_command(raw: object, index: int) -> agent_text.ParsedResult | None:
    """The result of the last action from the recorder's ``final_command`` key (None when absent or another step's)."""
    if not isinstance(raw, Mapping) or raw.get("step_index") != index:
        return None
    returncode, output = raw.get("returncode"), raw.get("output")
    if not isinstance(returncode, int) or isinstance(returncode, bool) or not isinstance(output, str):
        return None
    submitted = agent_text.submitted_text(output) is not None
    return agent_text.ParsedResult(returncode=returncode, output=output, elided_chars=0, format_error=False,
                                 timed_out=False, submitted=submitted)


def _records(doc: object) -> tuple[EpisodeDoc, list[object]]:
    """The document and its step records; FormatError when it is not a JSON object with a list of ``steps``."""
    records = chat.list_field(doc, "steps", per="at the top level", items="step records")
    return cast(EpisodeDoc, doc), records


def _header(doc: EpisodeDoc, records: list[object], path: str, warnings: list[str]) -> _Header:
    episode_id = doc.get("episode_id")
    if not isinstance(episode_id, str) or not episode_id:
        episode_id = pathlib.PurePath(path).stem
        warnings.append(f"no episode_id; using the file name {episode_id!r}")
    task_name = doc.get("task_name")
    if not isinstance(task_name, str):
        task_name = "" if task_name is None else str(task_name)
    last = cast(StepRecord, records[-1]) if records and isinstance(records[-1], Mapping) else StepRecord()
    ends_with_last = last.get("step_type") == "LAST"
    truncated_raw = doc.get("truncated")
    if isinstance(truncated_raw, bool):
        truncated = truncated_raw
    else:
        # Without the flag, a LAST record that still discounts is the step limit's.
        truncated = ends_with_last and last.get("discount") == 1.0
        if truncated_raw is not None:
            warnings.append(f"truncated is {truncated_raw!r}, not true/false; inferred {truncated}")
    total_reward = chat.number(doc.get("total_reward"), "total_reward", warnings)
    if total_reward is None and ends_with_last:
        total_reward = chat.number(last.get("reward"), "the last step's reward", [])
    num_steps = doc.get("num_steps")
    if isinstance(num_steps, int) and num_steps != len(records):
        warnings.append(f"num_steps says {num_steps} but the file holds {len(records)} step records")
    return _Header(
        episode_id=episode_id,
        task_name=task_name,
        start_time=chat.number(doc.get("start_time"), "start_time", warnings),
        end_time=chat.number(doc.get("end_time"), "end_time", warnings),
        truncated=truncated,
        total_reward=total_reward,
        outcome=_outcome(doc, records, truncated),
    )


# The index's fast path. In the layout ``json.dumps(doc, indent=2)`` gives (ARES's writer), a raw newline is always
# structure (strings escape theirs), so each step's context list is found by its indentation alone and can be
# compared and read as bytes: the cumulative contexts, nearly all of a file, are never decoded.
_CONTEXT_OPEN = b'\n      "observation": {\n        "messages": ['
_CONTEXT_CLOSE = b"\n        ]"
_ELEMENT = b"\n          {"  # a message object of a context list starts here
# What a set-aside context list is replaced with in the rest of the document (a JSON string).
RAW_CONTEXT = "\x00raw context"
_RAW_CONTEXT_JSON = b'"\\u0000raw context"'
# How far into a file its first context list must open for the fast path: a step's observation comes a few hundred
# bytes in (after the episode's few scalar fields and the first step's index and type). Another format's file
# written with indent=2 (a mini-swe-agent trajectory) is not searched to its end for one it never holds; an ARES file
# with more before its steps is read the ordinary way.
_FIRST_CONTEXT_WITHIN = 1 << 14


class RawContext:
    """One step's context as the bytes of its message list (everything between the brackets), kept as a place in
    the file's bytes: a copy of each list would copy the file again, in fresh memory."""

    __slots__ = ("data", "end", "start")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.data, self.start, self.end = data, start, end

    @property
    def body(self) -> memoryview:
        return memoryview(self.data)[self.start:self.end]

    def extends(self, previous: RawContext) -> bool:
        """True when this context keeps every message of ``previous`` unchanged (byte for byte) and in order."""
        n = previous.end - previous.start
        if self.end - self.start < n or not self.data.startswith(previous.body, self.start):
            return False
        return self.end - self.start == n or self.data[self.start + n:self.start + n + 1] == b","

    def last(self) -> object:
        """The last message, decoded.

        Raises:
            FormatError: when the list's last element is not a message object in the expected layout.
        """
        start = self.data.rfind(_ELEMENT, self.start, self.end)
        try:
            return orjson.loads(memoryview(self.data)[start + 1:self.end]) if start >= 0 else None
        except orjson.JSONDecodeError as exc:
            raise FormatError(f"a context list is not in the indent=2 layout ({exc})") from None

    def decoded(self) -> list[object]:
        """Every message, decoded (the list with its brackets).

        Raises:
            FormatError: when the list does not decode.
        """
        return _loads(memoryview(self.data)[self.start - 1:self.end + len(_CONTEXT_CLOSE)])

    def after(self, previous: RawContext) -> list[object]:
        """The messages after those of ``previous``, decoded (this context ``extends`` it).

        Raises:
            FormatError: when they do not decode.
        """
        start = self.start + previous.end - previous.start + 1  # past the comma that ends the kept messages
        return _loads(b"[" + self.data[start:self.end] + b"]") if start < self.end else []


def _loads(data: bytes | memoryview) -> list[object]:
    try:
        found = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"a context list is not in the indent=2 layout ({exc})") from None
    if not isinstance(found, list):
        raise FormatError("a context list is not a list")
    return found


def split_contexts(data: bytes) -> tuple[bytes, list[RawContext]] | None:
    """The document with every step's context list replaced by ``RAW_CONTEXT``, and those lists (places in
    ``data``) in order; None when the file is not in ARES's indent=2 layout (then it is read the ordinary way)."""
    if not data.startswith(b'{\n  "') or data.find(_CONTEXT_OPEN, 0, _FIRST_CONTEXT_WITHIN) < 0:
        return None
    pieces: list[bytes] = []
    contexts: list[RawContext] = []
    position = 0
    while (start := data.find(_CONTEXT_OPEN, position)) >= 0:
        body_start = start + len(_CONTEXT_OPEN)
        if data[body_start:body_start + 1] != b"\n":
            position = body_start  # an empty list, ``[]``: left as it is
            continue
        # A context usually repeats the previous one first: compared in place, only the new messages are searched.
        previous = contexts[-1] if contexts else None
        repeated = previous.end - previous.start if previous and data.startswith(previous.body, body_start) else 0
        end = data.find(_CONTEXT_CLOSE, body_start + repeated)
        if end < 0:
            return None  # cut short: the ordinary path reports it
        pieces += (data[position:body_start - 1], _RAW_CONTEXT_JSON)
        contexts.append(RawContext(data, body_start, end))
        position = end + len(_CONTEXT_CLOSE)
    if not contexts:
        return None
    pieces.append(data[position:])
    return b"".join(pieces), contexts


def _extends(current: object, previous: object) -> bool:
    """True when a context keeps the previous one whole (for lists: at the boundary, see ``summarize``)."""
    if isinstance(current, RawContext) and isinstance(previous, RawContext):
        return current.extends(previous)
    if isinstance(current, list) and isinstance(previous, list):
        return len(current) >= len(previous) and current[len(previous) - 1] == previous[-1]
    if isinstance(current, list) and not current:
        return False  # every message was dropped
    raise FormatError("a step's context list is in a different layout from the others")


def summarize(doc: object, path: str, record: int | None = None, *,
              contexts: list[RawContext] | None = None) -> list[EpisodeRow]:
    """The episode's index row, read without building the episode (the index's fast path).

    Agrees with ``parse(doc, path)[0].summary()``; it only skips what the row does not need. Context
    rewrites are detected at the boundary (a shorter context, or a changed last message of the
    previous one) instead of message by message. ``contexts``: the context lists ``split_contexts`` set
    aside, in order (compared byte for byte, so wholly).

    Raises:
        FormatError: when the document cannot be an episode, or ``contexts`` do not match its placeholders.
    """
    raw = iter(contexts or ())
    doc, records = _records(doc)
    warnings: list[str] = []
    head = _header(doc, records, path, warnings)
    actions = nonzero = rewrites = 0
    prompt: int | None = None  # None until a model call records it (``chat.call_total``)
    generated: int | None = None
    cost: float | None = None
    previous: list[object] | RawContext = []
    first_time = last_time = None
    for position, item in enumerate(records):
        if not isinstance(item, dict):  # decoded JSON: dicts (an ABC's check costs more)
            warnings.append(f"step {position} is a {type(item).__name__}, not a step record; skipped")
            continue
        step = cast(StepRecord, item)
        timestamp = step.get("timestamp")
        if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
            first_time = timestamp if first_time is None else first_time
            last_time = timestamp
        is_action = step.get("step_type") != "FIRST" and not (position == 0 and step.get("step_type") is None)
        if is_action:
            actions += 1
            action = step.get("action")
            if isinstance(action, dict):
                response = cast(Response, action)
                usage = response.get("usage")
                counts = cast(Usage, usage) if isinstance(usage, dict) else Usage()
                prompt = chat.plus(prompt, chat.count(counts.get("prompt_tokens")))
                generated = chat.plus(generated, chat.count(counts.get("generated_tokens")))
                step_cost = chat.number(response.get("cost"), "cost", [])
                cost = chat.plus(cost, None if step_cost is None else max(step_cost, 0.0))
        observation = step.get("observation")
        messages = cast(Request, observation).get("messages") if isinstance(observation, dict) else None
        if contexts is not None and messages == RAW_CONTEXT:
            messages = next(raw, None)
            if messages is None:
                raise FormatError("more context placeholders than context lists")
        if not isinstance(messages, list | RawContext):
            continue
        if previous and not _extends(messages, previous):
            rewrites += 1
        if is_action and messages:
            nonzero += _failed_command(messages)
        previous = messages
    if next(raw, None) is not None:
        raise FormatError("more context lists than steps with a context")
    end = head.end_time if head.end_time is not None else last_time
    return [verifier.explain(EpisodeRow(
        episode_id=head.episode_id,
        task_name=head.task_name,
        outcome=head.outcome.value,
        total_reward=head.total_reward,
        num_actions=actions,
        start_time=head.start_time,
        end_time=head.end_time,
        duration_s=end - head.start_time if end is not None and head.start_time is not None else None,
        total_cost=chat.call_total(cost, actions, 0.0),
        prompt_tokens=chat.call_total(prompt, actions, 0),
        generated_tokens=chat.call_total(generated, actions, 0),
        truncated=head.truncated,
        error=model.describe_error(doc.get("error")),
        nonzero_returncodes=nonzero,
        context_rewrites=rewrites,
        path=path,
        format=NAME,
        warnings=warnings,
    ), model.VerifierRecord.from_json(doc.get("verifier")))]


def _failed_command(context: list[object] | RawContext) -> bool:
    """Whether an action's command returned a known code other than 0: its result is the last message of the
    context that follows it."""
    result = context.last() if isinstance(context, RawContext) else context[-1]
    if isinstance(result, dict) and result.get("role") in ("user", "tool"):
        return agent_text.returncode(chat.text(result.get("content"))) not in (None, 0)
    return False


def summarize_bytes(path: str, data: bytes) -> list[EpisodeRow] | None:
    """The row of a file in ARES's writer layout, its context lists compared as bytes and never decoded (the
    index's fast path); None for any other file, or anything unexpected in one, which is then read the ordinary
    way (so errors and warnings are always the ordinary path's)."""
    found = _skeleton(path, data)
    try:
        return None if found is None else summarize(found[0], path, contexts=found[1])
    except ValueError:
        return None


def _skeleton(path: str, data: bytes) -> tuple[EpisodeDoc, list[RawContext]] | None:
    """The document of a file in ARES's writer layout with its context lists set aside (``split_contexts``),
    decoded, and those lists; None for any other file or anything unexpected in one."""
    split = split_contexts(data)
    if split is None:
        return None
    skeleton, contexts = split
    try:
        records, errors = decoding.decode(path, skeleton)
    except (jsondecode.DecodeError, ValueError):
        return None
    if errors or len(records) != 1 or records[0].warnings or not sniff(records[0].value):
        return None
    return records[0].value, contexts


@dataclasses.dataclass(slots=True)
class CommandStep:
    """One step's commands' side: the fields of the ``model.Step`` that ``parse`` gives which are read from its
    command and result (the rest is not read). ``context_len`` and ``context_rewritten`` are those of the context
    its action answered."""

    index: int
    kind: model.StepKind
    command: str | None
    returncode: int | None
    output: str | None
    observation_text: str | None
    format_error: bool
    failure: str | None
    context_len: int
    context_rewritten: bool


@dataclasses.dataclass(slots=True)
class CommandSide:
    """An ARES episode's commands' side (``command_side``): its id, its top-level keys but the header's
    (``metadata``, as ``Episode.metadata`` without the request's settings and tools) and its steps, the actions
    (every step but FIRST, as ``Episode.actions``) kept apart once."""

    episode_id: str
    path: str
    metadata: dict[str, Any]
    steps: tuple[CommandStep, ...]
    actions: tuple[CommandStep, ...]

    @property
    def error(self) -> str | None:
        """``Episode.error``: the error that ended the episode in one line, if the file records one."""
        return model.describe_error(self.metadata.get("error"))


def command_side(path: str, data: bytes) -> CommandSide | None:
    """The commands' side of a file in ARES's writer layout: each step's index, kind, command (response text and
    tool calls), result (return code, output, format error, failure) and the length and rewrite of the context it
    answered, the episode's id and top-level keys (``metadata``). No message pool, system prompt, usage, cost,
    reasoning, rewards or times, and no ``model.Step`` built: what reads only those fields (the behaviour flag
    index: ``analysis.behaviours.ares_flags``) reads what ``parse`` would give. Its context lists are compared as
    bytes (``summarize_bytes``), only the messages each adds decoded.

    None for any other file, or anything unexpected in one (read it whole then).
    """
    found = _skeleton(path, data)
    if found is None:
        return None
    try:
        return _command_side(found[0], path, found[1])
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
        return None  # what ``parse`` fails on too: it tells why


_NO_LINK = (0, False)


def _command_side(doc: object, path: str, contexts: list[RawContext]) -> CommandSide:
    """``command_side`` of a decoded skeleton (``parse_episode``'s walk, its commands' side only).

    Raises:
        FormatError: when the document cannot be an episode, or ``contexts`` do not match its placeholders.
    """
    raw = iter(contexts)
    doc, records = _records(doc)
    final = doc.get("final_command")
    built = _Contexts()
    links = built.links
    steps: list[CommandStep] = []
    for position, item in enumerate(records):
        if not isinstance(item, dict):  # decoded JSON: dicts
            continue
        record = cast(StepRecord, item)
        index = record.get("step_index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else position
        step_type = record.get("step_type")
        kind = _KINDS.get(step_type) if isinstance(step_type, str) else None
        kind = _kind(step_type, position, "", []) if kind is None else kind
        answered = len(links) - 1 if links and kind is not model.StepKind.FIRST else None
        action = record.get("action")
        text, calls = _answer(action.get("data")) if isinstance(action, dict) else ("", ())
        command = agent_text.parse_response(text).command if text else None
        result = built.observe(record.get("observation"), raw)
        result_text = chat.text(result.get("content")) if result is not None and answered is not None else None
        outcome = _command_outcome(result, result_text)
        if outcome is None and kind is model.StepKind.LAST and (command is not None or calls):
            outcome = _final_command(final, index)
        said, failure = _said(outcome, result_text, {})
        if command is None and calls:
            command = chat.shell_command(calls)
        count, rewritten = links[answered] if answered is not None else _NO_LINK
        if said is None:
            steps.append(CommandStep(index, kind, command, None, None, None, False, failure, count, rewritten))
        else:
            steps.append(CommandStep(index, kind, command, said.returncode, said.output, said.text,
                                     said.format_error, failure, count, rewritten))
    if next(raw, None) is not None:
        raise FormatError("more context lists than steps with a context")
    metadata: dict[str, Any] = {k: v for k, v in doc.items() if k not in _TOP_KEYS}
    return CommandSide(episode_id(doc, path), path, metadata, tuple(steps),
                       tuple(s for s in steps if s.kind is not model.StepKind.FIRST))


class _Contexts:
    """``chat.ContextBuilder``'s links and results over contexts that may be ``RawContext``: a context that
    extends the previous one byte for byte keeps all of its messages (only the new ones are decoded); any other
    is decoded whole and compared as ``chat.kept`` compares. No message pool: each link is the context's length
    and whether it rewrote the previous one (``ContextLink``'s ``kept + len(added)`` and ``rewritten``)."""

    def __init__(self) -> None:
        self.links: list[tuple[int, bool]] = []
        self._previous: list[object] | RawContext = []
        self._count = 0  # messages in the previous context

    def observe(self, observation: object, raw: Iterator[RawContext]) -> Mapping[str, Any] | None:
        """A record's observation added (as ``_observe`` adds it); the message carrying the previous action's
        result, or None.

        Raises:
            FormatError: when a placeholder has no context list left.
        """
        if not isinstance(observation, dict):
            return None
        messages = observation.get("messages")
        if messages == RAW_CONTEXT:
            messages = next(raw, None)
            if messages is None:
                raise FormatError("more context placeholders than context lists")
        return self._add(messages if isinstance(messages, list | RawContext) else [])

    def _add(self, messages: list[object] | RawContext) -> Mapping[str, Any] | None:
        previous = self._previous
        if isinstance(messages, RawContext) and isinstance(previous, RawContext) and messages.extends(previous):
            same, added = self._count, messages.after(previous)
            count = same + len(added)
        else:
            current = messages.decoded() if isinstance(messages, RawContext) else messages
            same = chat.kept(previous.decoded() if isinstance(previous, RawContext) else previous, current)
            added, count = current[same:], len(current)
        self.links.append((count, same < self._count))
        self._previous, self._count = messages, count
        return chat.result_message(added)


def parse(doc: object, path: str, record: int | None = None) -> list[model.Episode]:
    """The episode of a decoded ARES document (a file holds one)."""
    return [parse_episode(doc, path)]


def parse_episode(doc: object, path: str) -> model.Episode:
    """Build an ``Episode`` from a decoded ARES document.

    Raises:
        FormatError: when the document cannot be an episode (e.g. ``steps`` is not a list).
    """
    doc, records = _records(doc)
    warnings: list[str] = []
    head = _header(doc, records, path, warnings)

    contexts = chat.ContextBuilder()
    request = _Request()
    steps: list[model.Step] = []
    previous_time: float | None = None
    for position, item in enumerate(records):
        where = f"step {position}"
        if not isinstance(item, Mapping):
            warnings.append(f"{where} is a {type(item).__name__}, not a step record; skipped")
            continue
        record = cast(StepRecord, item)
        index = record.get("step_index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else position
        kind = _kind(record.get("step_type"), position, where, warnings)
        timestamp = chat.number(record.get("timestamp"), f"{where}: timestamp", warnings)
        dt = timestamp - previous_time if timestamp is not None and previous_time is not None else None
        previous_time = timestamp if timestamp is not None else previous_time

        # Action k answered the context of the latest observation before this record.
        answered_index = len(contexts.links) - 1 if contexts.links and kind is not model.StepKind.FIRST else None
        text, calls, usage, cost, extra = _response(record.get("action"), where, warnings)
        result = _observe(record.get("observation"), contexts, request, where, warnings)

        thinking = extra.pop("reasoning", "")
        result_text = chat.text(result.get("content")) if result is not None and answered_index is not None else None
        outcome = _command_outcome(result, result_text)
        if outcome is None and kind is model.StepKind.LAST and (
                agent_text.parse_response(text).command is not None or calls):
            # A submitted episode's last output reaches no observation; ares-viewer's recorder keeps it.
            outcome = _final_command(doc.get("final_command"), index)
        said, failure = _said(outcome, result_text, extra)
        model_time, command_time = _split_times(record, timestamp, dt)
        steps.append(
            model.Step(
                index=index,
                kind=kind,
                reward=chat.number(record.get("reward"), f"{where}: reward", warnings),
                discount=chat.number(record.get("discount"), f"{where}: discount", warnings),
                timestamp=timestamp,
                dt=dt,
                usage=usage,
                cost=cost,
                **base.step_fields(text, calls, said, answered_index, contexts.links, tool_command=chat.shell_command,
                                   extra=extra),
                reasoning=thinking,
                model_time=model_time if model_time is None or model_time >= 0 else None,
                command_time=command_time,
                failure=failure,
            )
        )

    metadata: dict[str, Any] = {k: v for k, v in doc.items() if k not in _TOP_KEYS}
    if request.settings:
        metadata["request"] = request.settings
    if request.tools:
        metadata["tools"] = request.tools
    return base.episode(
        NAME, path, episode_id=head.episode_id, task_name=head.task_name, outcome=head.outcome,
        total_reward=head.total_reward, truncated=head.truncated, times=(head.start_time, head.end_time),
        system_prompt=request.system_prompt, steps=steps, messages=contexts.pool, links=contexts.links,
        metadata=metadata, warnings=warnings,
    )


_KINDS = {kind.value: kind for kind in model.StepKind}


def _kind(raw: object, position: int, where: str, warnings: list[str]) -> model.StepKind:
    """A record's ``step_type``; one that is none of FIRST/MID/LAST is read by its position, with a warning."""
    try:
        return model.StepKind(raw if isinstance(raw, str) else "")  # not a string: not a kind
    except ValueError:
        kind = model.StepKind.FIRST if position == 0 else model.StepKind.MID
        warnings.append(f"{where}: step_type {raw!r} is not FIRST/MID/LAST; read as {kind.value}")
        return kind


@dataclasses.dataclass
class _Request:
    """What the episode's requests say once: the system prompt (the first one given), the request settings and
    the tools' names (the first observation that has settings)."""

    system_prompt: str | None = None
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    tools: list[str] = dataclasses.field(default_factory=list)

    def read(self, observation: Request) -> None:
        prompt = observation.get("system_prompt")
        if self.system_prompt is None and isinstance(prompt, str):
            self.system_prompt = prompt
        if not self.settings:
            self.settings = {k: observation.get(k) for k in _REQUEST_SETTINGS if observation.get(k) is not None}
            raw_tools = observation.get("tools")
            if isinstance(raw_tools, list):
                self.tools = [str(t.get("name")) for t in raw_tools if isinstance(t, Mapping)]


def _observe(observation: object, contexts: chat.ContextBuilder, request: _Request, where: str,
             warnings: list[str]) -> Mapping[str, Any] | None:
    """Add a record's observation (the next request) to the contexts and ``request``; the last message of its
    context, the result of the action before (None when the record has no observation)."""
    if isinstance(observation, Mapping):
        messages = observation.get("messages")
        if not isinstance(messages, list):
            warnings.append(f"{where}: observation messages are a {type(messages).__name__}, not a list")
            messages = []
        result = contexts.add(messages)
        request.read(cast(Request, observation))
        return result
    if observation is not None:
        warnings.append(f"{where}: observation is a {type(observation).__name__}, not a request; ignored")
    return None


def _command_outcome(result: Mapping[str, Any] | None,
                     result_text: str | None) -> agent_text.ParsedResult | None:
    """What an action's result says of its command (None when it has no result): mini-swe-agent's text protocol,
    or a tool-calling agent's tool message."""
    outcome = agent_text.parse_result(result_text) if result_text is not None else None
    if outcome is not None and outcome.returncode is None and result is not None and result.get("role") == "tool":
        # A tool-calling agent's result: the tool message is the command's output.
        returncode, output, _, _, _ = chat.command_result(result)
        outcome = dataclasses.replace(outcome, returncode=returncode, output=output, format_error=False)
    return outcome


def _said(outcome: agent_text.ParsedResult | None, result_text: str | None, extra: dict[str, Any]
          ) -> tuple[chat.CommandResult | None, str | None]:
    """The command's result as the step shows it, and how it failed to finish, if it did (a timeout is also
    ``extra["timed_out"]``): the exception's text then leads its output."""
    failure = failures.classify(result_text, outcome.returncode, None) if outcome is not None else None
    if failure is not None and outcome is not None:
        if failure == failures.TIMED_OUT:
            extra["timed_out"] = True
        shown = "\n\n".join(p for p in (failures.exception_text(result_text) or (result_text or "").strip(),
                                         (outcome.output or "").strip()) if p)
        outcome = dataclasses.replace(outcome, output=shown)
    said = chat.CommandResult(outcome.returncode, outcome.output, outcome.elided_chars, result_text,
                              outcome.format_error) if outcome is not None else None
    return said, failure


def _split_times(record: StepRecord, timestamp: float | None, dt: float | None
                 ) -> tuple[float | None, float | None]:
    """A step's model and command seconds: its response's creation time splits it, model time before it,
    command time after it (None and None when the record does not say)."""
    action = cast(Response, jsondecode.object_at(record, "action"))
    created = action.get("created_at")
    answered_at = created if isinstance(created, int | float) else None
    if answered_at is not None and timestamp is not None and dt is not None and timestamp >= answered_at:
        return answered_at - (timestamp - dt), timestamp - answered_at
    return None, None


# What ``formats.registry`` reads this format through (``base.Adapter``'s defaults fill the rest).
ADAPTER = base.Adapter(NAME, sniff=sniff, summarize=summarize, parse=parse,
                       episode_id=episode_id, misnamed=misnamed, summarize_bytes=summarize_bytes)
