"""Inspect AI logs (``inspect eval``): ``.eval`` zip logs and ``.json`` logs, one episode per sample and epoch.

Read as written by inspect-ai 0.3.x (tested with ``INSPECT_VERSIONS``, the range the ``test`` extra installs);
the format is not frozen, so everything is read defensively and what is missing is left out, never guessed.

- A ``.eval`` log is a zip: ``header.json`` (or, while running, ``_journal/start.json``) with the ``eval`` spec,
  one ``samples/{id}_epoch_{n}.json`` per sample, and ``summaries.json`` (or ``_journal/summaries/*.json``) with
  one ``EvalSampleSummary`` per sample. Its records are the zip's members (``zipped.Member``): a sample is
  decompressed only when it is parsed, and an index row is its sample parsed (the summaries are not read: their
  ``turn_count`` counts Inspect's turns, not the agent's actions, and their usage includes the scorers' calls).
- A ``.json`` log is the whole ``EvalLog``: ``{version, status, eval, samples, ...}``.

A sample maps so: each model call of the agent (a ``model`` event outside the scorers' span; without events, each
assistant message) is a step. Its
context is the event's ``input`` (``input_refs`` into ``events_data`` in newer logs; attachments resolved), its
response the output's message (``reasoning`` content is the step's reasoning), its output the results of its tool
calls (the ``tool`` events', else the ``tool`` messages). The first scorer's ``value`` is the reward, read as
Inspect's ``value_to_float`` reads it (``C`` 1, ``P`` 0.5, ``I``/``N`` 0, yes/true 1, no/false 0, numbers as
numbers, other text 0; a list or dict value no reward); its explanation is
``metadata["evaluation"]["rationale"]`` (the "why"), every scorer's score is in ``metadata["scores"]``. ``error``
makes it errored, ``limit`` truncated.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict, cast

import orjson

from ares_viewer import model
from ares_viewer.base import jsondecode, locations
from ares_viewer.formats import base, chat, failures, zipped
from ares_viewer.formats.adapters import atif
from ares_viewer.model import EpisodeRow

NAME = "inspect_ai"
INSPECT_VERSIONS = ">=0.3.100,<0.4"
"""The inspect-ai versions whose logs this adapter is tested with (the ``test`` extra installs one)."""
_SAMPLES = "samples/"
_HEADERS = ("header.json", "_journal/start.json")
_SUMMARIES = "summaries.json"
_ATTACHMENT = "attachment://"
# How a tool call failed, by the type of Inspect's ``ToolCallError``: ``parsing`` is a call refused before it ran
# (its arguments did not fit the tool); any other type is an exception of the tool.
_FAILURES = {"timeout": failures.TIMED_OUT, "parsing": "parsing error"}
_VALUES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0, "yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


# The records of an Inspect log: the keys this module reads, each value ``object`` because the file is untrusted
# (a value is used once an ``isinstance`` check or a reader of ``chat`` has said what it is). TypedDicts cost
# nothing at run time: the decoded dicts are read as they are (a sample's attachments resolved, as before).
class EvalSpec(TypedDict, total=False):
    """A log's ``eval``."""

    task: object
    task_id: object
    run_id: object
    eval_id: object
    model: object


class EvalMetric(TypedDict, total=False):
    """One of an ``EvalScore``'s ``metrics``."""

    value: object


class EvalScore(TypedDict, total=False):
    """One of ``results.scores``: a scorer's metrics over the samples."""

    name: object
    metrics: object  # name -> ``EvalMetric``
    scored_samples: object


class EvalResults(TypedDict, total=False):
    """A log's ``results`` (absent while running or when cancelled)."""

    scores: object  # a list of ``EvalScore``
    total_samples: object


class EvalLog(TypedDict, total=False):
    """A ``.json`` log (the whole ``EvalLog``), or a ``.eval`` log's ``header.json``."""

    version: object
    status: object
    eval: object  # an ``EvalSpec``
    samples: object  # a list of ``Sample``
    results: object  # an ``EvalResults``


class ContentPart(TypedDict, total=False):
    """One part of a message's content: ``text``, ``reasoning`` (perhaps redacted) or another type."""

    type: object
    text: object
    reasoning: object
    summary: object
    redacted: object


class ToolCallRecord(TypedDict, total=False):
    """One of a message's ``tool_calls``."""

    id: object
    function: object  # the tool's name
    arguments: object


class ErrorRecord(TypedDict, total=False):
    """A ``ToolCallError`` (``type``, ``message``) or a sample's ``EvalError`` (``message``, ``traceback``)."""

    type: object
    message: object
    traceback: object


class ChatMessage(TypedDict, total=False):
    """An Inspect ``ChatMessage``."""

    role: object
    content: object  # text, or a list of ``ContentPart``
    error: object  # an ``ErrorRecord``
    tool_calls: object  # a list of ``ToolCallRecord``
    tool_call_id: object
    function: object


class Usage(TypedDict, total=False):
    """A model output's ``usage``."""

    input_tokens: object
    output_tokens: object
    input_tokens_cache_read: object
    total_cost: object


class Choice(TypedDict, total=False):
    """One of a model output's ``choices``."""

    message: object  # a ``ChatMessage``
    stop_reason: object


class ModelOutput(TypedDict, total=False):
    """A model event's ``output``."""

    choices: object  # a list of ``Choice``
    usage: object  # a ``Usage``
    time: object


class Event(TypedDict, total=False):
    """One of a sample's ``events``: a ``span_begin``, ``model`` or ``tool`` event (the keys of the three)."""

    event: object
    id: object
    type: object  # a span's
    parent_id: object  # a span's
    span_id: object
    timestamp: object
    input: object  # a model event's messages
    input_refs: object  # a model event's ``[start, end)`` ranges into ``events_data.messages``
    output: object  # a model event's ``ModelOutput``
    result: object  # a tool event's
    error: object  # a tool event's ``ErrorRecord``
    working_time: object
    failed: object


class EventsData(TypedDict, total=False):
    """A sample's ``events_data``: what newer logs' events refer to."""

    messages: object


class Score(TypedDict, total=False):
    """One of a sample's ``scores``."""

    value: object
    answer: object
    explanation: object
    metadata: object


class Sample(TypedDict, total=False):
    """One sample (one epoch of it): a ``.eval`` log's ``samples/{id}_epoch_{n}.json``, or one of a JSON log's
    ``samples``."""

    id: object
    epoch: object
    uuid: object
    input: object
    target: object
    messages: object  # a list of ``ChatMessage``
    events: object  # a list of ``Event``
    events_data: object  # an ``EventsData``
    attachments: object
    scores: object  # scorer name -> ``Score``
    model_usage: object
    total_time: object
    working_time: object
    metadata: object
    error: object  # an ``ErrorRecord``, or text
    limit: object
    started_at: object
    completed_at: object


def _each(value: object) -> Iterable[Any]:
    """A list the log holds (``value or ()``), iterated as Python iterates it: a value of another type raises, and
    the record is an error, as when the values were read untyped. Its items are still to be checked."""
    return cast("Iterable[Any]", value or ())


def sniff(doc: object) -> bool:
    """A member of a zip holding Inspect's members, or a JSON log (``eval`` plus ``samples`` or ``version``)."""
    if isinstance(doc, zipped.Member):
        names = doc.archive.names()
        return any(h in names for h in _HEADERS) and any(n.startswith(_SAMPLES) or n == _SUMMARIES for n in names)
    return (isinstance(doc, chat.MAPPINGS) and isinstance(doc.get("eval"), chat.MAPPINGS)
            and ("samples" in doc or "version" in doc))


def misnamed(path: str) -> str | None:
    """Why a ``.eval`` file that is no Inspect log is an error."""
    if path.lower().endswith(".eval"):
        return "named like an Inspect log (.eval) but not one: no zip with header.json and samples/"
    return None


def _json(member: zipped.Member) -> object:
    try:
        return orjson.loads(member.read())
    except orjson.JSONDecodeError as exc:
        raise chat.FormatError(f"{member.name}: not readable JSON ({exc})") from None


def _header(archive: zipped.Archive) -> EvalLog:
    def read() -> EvalLog:
        names = archive.names()
        for name in _HEADERS:
            if name in names:
                found = _json(zipped.Member(archive, name, 0))
                return cast(EvalLog, found) if isinstance(found, chat.MAPPINGS) else EvalLog()
        return EvalLog()

    return cast(EvalLog, archive.memo((NAME, "header"), read))


def _sample_key(name: str) -> tuple[str, int] | None:
    """(sample id, epoch) of a ``samples/{id}_epoch_{n}.json`` member; None for other members."""
    if not name.startswith(_SAMPLES) or not name.endswith(".json"):
        return None
    sample, _, epoch = name[len(_SAMPLES):-len(".json")].rpartition("_epoch_")
    return (sample, int(epoch)) if sample and epoch.isdigit() else None


def _key_id(path: str, sample: str, epoch: int) -> str:
    return f"{_stem(path)}/{sample}/epoch{epoch}"


@functools.lru_cache(maxsize=64)
def _stem(path: str) -> str:
    """A log's file name without its suffix (asked once per sample: a log's samples share it)."""
    return locations.Location.of(path).name.rsplit(".", 1)[0]


def episode_id(doc: object, path: str, record: int | None = None) -> str | None:
    """``{log file stem}/{sample id}/epoch{n}``; "" for a log member that is no sample; None for a JSON log
    (several episodes: ``parse`` finds the one)."""
    if isinstance(doc, zipped.Member):  # every member's id worked out once per archive (opening one sample asks all)
        return doc.archive.memo((NAME, "ids", path), lambda: _member_ids(doc.archive, path)).get(doc.name, "")
    return None


def _member_ids(archive: zipped.Archive, path: str) -> dict[str, str]:
    """The episode id of each sample member of the archive, by member name."""
    stem = _stem(path)
    return {name: f"{stem}/{key[0]}/epoch{key[1]}" for name in archive.names()
            if (key := _sample_key(name)) is not None}


def score_value(value: object) -> float | None:
    """A score's value as a reward, as Inspect's ``value_to_float`` reads it; None for a list or a dict."""
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        found = _VALUES.get(value, _VALUES.get(value.lower()))
        if found is not None:
            return found
        try:
            return float(value)
        except ValueError:
            return 0.0
    return None


def _eval(doc: object) -> EvalSpec:
    spec = cast(EvalLog, doc).get("eval") if isinstance(doc, chat.MAPPINGS) else None
    return cast(EvalSpec, spec) if isinstance(spec, chat.MAPPINGS) else EvalSpec()


def _first_score(scores: object) -> tuple[str, Score] | None:
    if isinstance(scores, chat.MAPPINGS):
        for name, score in scores.items():
            if isinstance(score, chat.MAPPINGS):
                return str(name), cast(Score, score)
    return None


def _outcome(sample: Sample) -> model.Outcome:
    if sample.get("error"):
        return model.Outcome.ERRORED
    if sample.get("limit"):
        return model.Outcome.TRUNCATED
    return model.Outcome.COMPLETED


def summarize(doc: object, path: str, record: int | None = None) -> list[EpisodeRow]:
    """The rows of the episodes ``parse`` reads from the record: a ``.eval`` log's row is its sample parsed, never
    its summary (``summaries.json`` counts turns, not the agent's actions, and a whole sample's usage, the
    scorers' calls included), so a row and its Episode page say the same. The sample's message pool is left out (a
    row needs its context links, not their messages)."""
    return [EpisodeRow(**{**e.summary(), "warnings": list(e.warnings)})
            for e in _episodes(doc, path, record, messages=False)]


def parse(doc: object, path: str, record: int | None = None) -> list[model.Episode]:
    """The episodes of one record: a sample member of a ``.eval`` log (none for its other members), or every
    sample of a JSON log.

    Raises:
        FormatError: when the record cannot be a sample (or a JSON log's samples are not a list).
    """
    return _episodes(doc, path, record, messages=True)


def _episodes(doc: object, path: str, record: int | None, *, messages: bool) -> list[model.Episode]:
    """``parse``'s episodes, with their message pools when ``messages`` (else empty: ``summarize``)."""
    if isinstance(doc, zipped.Member):
        key = _sample_key(doc.name)
        if key is None:
            return []
        sample = _json(doc)
        if not isinstance(sample, chat.MAPPINGS):
            raise chat.FormatError(f"{doc.name}: a JSON {type(sample).__name__}, not a sample")
        return [_sample_episode(cast(Sample, sample), _eval(_header(doc.archive)), path, key, messages=messages,
                                own=True)]
    samples = cast(EvalLog, doc).get("samples") or []  # ``sniff`` said it is a mapping
    if not isinstance(samples, list):
        raise chat.FormatError(f"'samples' is a {type(samples).__name__}, expected a list of samples")
    read = [cast(Sample, s) for s in samples if isinstance(s, chat.MAPPINGS)]
    return [_sample_episode(s, _eval(doc), path, (str(s.get("id")), chat.integer(s.get("epoch")) or 1),
                            messages=messages) for s in read]


def log_metrics(path: str, data: bytes, max_member_bytes: int) -> list[dict[str, Any]]:
    """Inspect's own metrics of one log, as it computed them when it wrote the log: one dict per scorer and metric
    of its ``results.scores`` (``header.json`` of a ``.eval`` log, the top level of a ``.json`` log), with the log's
    file name, task, model, how many samples the scorer scored of how many, and ``source``: the file and field the
    value comes from. [] for a log without results (still running, or cancelled) or a file that is no readable
    Inspect log (its errors are the run's, from indexing)."""
    name = locations.Location.of(path).name
    doc: object
    try:
        if zipped.is_zip(data):
            doc, where = _header(zipped.Archive(data, max_member_bytes)), f"{name}: header.json"
        else:
            doc, where = orjson.loads(data), name
    except (ValueError, RecursionError):
        return []
    results = cast(EvalResults, jsondecode.object_at(doc, "results") if isinstance(doc, chat.MAPPINGS) else {})
    scores = results.get("scores")
    spec = _eval(doc)
    found = []
    for n, item in enumerate(scores if isinstance(scores, list) else ()):
        score = cast(EvalScore, item)
        metrics = score.get("metrics") if isinstance(item, chat.MAPPINGS) else None
        for metric, entry in (metrics.items() if isinstance(metrics, chat.MAPPINGS) else ()):
            value = cast(EvalMetric, entry).get("value") if isinstance(entry, chat.MAPPINGS) else None
            found.append({
                "log": name, "task": spec.get("task"), "model": spec.get("model"), "scorer": score.get("name"),
                "metric": str(metric), "value": value if isinstance(value, int | float) else None,
                "scored": chat.count(score.get("scored_samples")), "samples": chat.count(results.get("total_samples")),
                "source": f"{where} results.scores[{n}].metrics.{metric}.value"})
    return found


def _resolve(value: object, attachments: Mapping[str, object]) -> object:
    """``value`` with ``attachment://`` references replaced by the attachments' text."""
    kind = type(value)  # the decoder's own types first: an ABC check costs more than the rest of a visit
    if kind is str or isinstance(value, str):
        text = cast(str, value)
        if text.startswith(_ATTACHMENT):
            found = attachments.get(text[len(_ATTACHMENT):])
            return found if isinstance(found, str) else value
        return value
    if kind is list or isinstance(value, list):
        return [_resolve(v, attachments) for v in cast(list[object], value)]
    if kind is dict or isinstance(value, chat.MAPPINGS):
        return {k: _resolve(v, attachments) for k, v in cast(Mapping[str, object], value).items()}
    return value


# What reading a sample looks at, with its attachments resolved up front: every top-level field but these (the
# attachments themselves, the store, the events and the pools of ``events_data``), and of the events of these kinds
# (``_calls``, ``_scoring``, the tool results) the keys read (``Event``) but a model event's ``input``. A call's input
# (its own messages, or ranges of ``events_data``'s messages) is the conversation so far, again at every call: its
# messages are resolved as they are converted, once each (``_Converted.given``). The keys no reading looks at are
# left as they are: a model event's ``call`` (the provider's raw request and response, which repeat its whole
# context) and ``tools`` (every tool's definition, at every call). Resolving the ``call`` cost two thirds of reading
# a real log's samples; the ``tools`` then cost 12% of the instructions of a row of a log ``eval()`` wrote.
_APART = frozenset({"attachments", "store", "events", "events_data"})
_READ_EVENTS = frozenset({"model", "tool", "span_begin"})
_RESOLVED_KEYS = frozenset(Event.__optional_keys__) - {"input", "input_refs"}


def _resolved(sample: Sample, attachments: Mapping[str, object], *, own: bool = False) -> Sample:
    """``sample`` with its attachments resolved wherever its reading looks (``_APART``, ``_READ_EVENTS``,
    ``_RESOLVED_KEYS``). ``own``: orjson decoded the sample for this reading alone, so it is resolved in its JSON
    text (``_resolved_text``) and updated in place; else (a JSON log's samples, which Python's reader may have
    decoded: a ``NaN`` stays NaN) a copy is resolved by a walk of its values (``_resolve``)."""
    events = sample.get("events")
    if own:
        read = [e for e in events if isinstance(e, dict) and e.get("event") in _READ_EVENTS
                ] if isinstance(events, list) else []
        top = {k: v for k, v in sample.items() if k not in _APART}
        parts = [{k: v for k, v in e.items() if k in _RESOLVED_KEYS} for e in read]
        found = _resolved_text([top, parts], attachments)
        if found is not None:
            sample.update(found[0])
            for event, part in zip(read, found[1], strict=True):
                event.update(part)
            return sample
    out: dict[str, Any] = {k: v if k in _APART else _resolve(v, attachments) for k, v in sample.items()}
    if isinstance(events, list):
        out["events"] = [{k: _resolve(v, attachments) if k in _RESOLVED_KEYS else v for k, v in e.items()}
                         if isinstance(e, chat.MAPPINGS) and e.get("event") in _READ_EVENTS else e for e in events]
    return cast(Sample, out)


# A reference as orjson writes it: a whole string (its escapes kept) that is no object's key (a key is followed by
# ``:``; orjson writes no blanks). Where it starts is checked apart (``_VALUE_AFTER``): a pattern that starts with a
# look behind is tried at every byte, one that starts with text only where the text is.
_REFERENCE = re.compile(rb'"attachment://((?:[^"\\]|\\.)*)"(?!:)')
# The bytes after which a value starts in orjson's text (a quote inside a string is escaped: after a backslash).
_VALUE_AFTER = frozenset(b"[,:")
# What resolving may add to a sample's text, at most, as a multiple of its size (plus this many bytes): a sample that
# repeats a large attachment in many places is resolved by ``_resolve`` instead, whose texts are shared, not copied.
_GROWTH, _GROWTH_FLOOR = 4, 1 << 24


def _resolved_text(value: object, attachments: Mapping[str, object]) -> Any:
    """``value`` (as orjson decoded it) with its ``attachment://`` references replaced by the attachments' texts,
    as ``_resolve`` replaces them: in its JSON text, by one encoding and one decoding in C rather than a visit of
    each value in Python (a third of a sample's reading). None when it does not apply: a value orjson cannot
    write, or texts that would grow past ``_GROWTH``."""
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return None
    if b"attachment://" not in text:
        return value
    most = len(text) * _GROWTH + _GROWTH_FLOOR
    encoded: dict[bytes, bytes | None] = {}
    pieces, done, size = [], 0, len(text)
    for match in _REFERENCE.finditer(text):
        if text[match.start() - 1] not in _VALUE_AFTER:  # never the first byte: the text is a list or an object
            continue
        key = match.group(1)
        if key not in encoded:
            found = attachments.get(orjson.loads(b'"' + key + b'"'))
            encoded[key] = orjson.dumps(found) if isinstance(found, str) else None
        replacement = encoded[key]
        if replacement is None:
            continue
        size += len(replacement) - (match.end() - match.start())
        if size > most:
            return None
        pieces += [text[done:match.start()], replacement]
        done = match.end()
    pieces.append(text[done:])
    try:
        return orjson.loads(b"".join(pieces))
    except orjson.JSONDecodeError:  # not expected: the pieces are orjson's own
        return None


def _parts(content: object) -> tuple[str, str]:
    """A message's text and its reasoning."""
    if not isinstance(content, list):
        return chat.text(content), ""
    text, reasoning = [], []
    for item in content:
        if not isinstance(item, chat.MAPPINGS):
            continue
        part = cast(ContentPart, item)
        if part.get("type") == "reasoning":
            # Redacted reasoning holds the provider's encrypted blob: only its summary is readable.
            said = part.get("summary") if part.get("redacted") else part.get("reasoning") or part.get("summary")
            reasoning.append(str(said) if said else "(redacted reasoning)")
        elif part.get("type") == "text":
            text.append(str(part.get("text", "")))
        else:
            text.append(f"[{part.get('type')}]")
    return "".join(text), "\n\n".join(reasoning)


def _message(raw: object) -> dict[str, Any]:
    """An Inspect ChatMessage as the OpenAI-style dict ``chat`` reads (its own id left out)."""
    if not isinstance(raw, chat.MAPPINGS):
        return {"role": "unknown", "content": chat.text(raw)}
    said = cast(ChatMessage, raw)
    text, _ = _parts(said.get("content"))
    found = said.get("error")
    error = cast(ErrorRecord, found) if isinstance(found, chat.MAPPINGS) else None
    if error is not None and (reason := error.get("message")):
        text = f"{text}\n{error.get('type', 'error')}: {reason}".strip()
    message: dict[str, Any] = {"role": str(said.get("role", "unknown")), "content": text}
    records = [cast(ToolCallRecord, c) for c in _each(said.get("tool_calls")) if isinstance(c, chat.MAPPINGS)]
    calls = [{"id": c.get("id"), "function": {"name": str(c.get("function", "")), "arguments": c.get("arguments")}}
             for c in records]
    if calls:
        message["tool_calls"] = calls
    if (call_id := said.get("tool_call_id")) is not None:
        message["tool_call_id"] = call_id
    if function := said.get("function"):
        message["name"] = function
    return message


class _Converted:
    """Each Inspect message converted (``_message``) once per sample. Every model call's input repeats the
    conversation so far: the same message objects where the log shares them through ``events_data``, equal ones
    with the same ``id`` where each event holds its own copy; converting each call's whole input again made a
    sample's reading quadratic in its calls. The converted dicts are shared, so are only read. A model call's input
    is resolved here (``attachments``), a message at a time as it is converted (``_resolved`` leaves it)."""

    def __init__(self, attachments: Mapping[str, object] | None = None) -> None:
        self._attachments = attachments
        self._done: dict[tuple[str, object], tuple[object, dict[str, Any]]] = {}
        self._before: tuple[list[Any], list[Any]] = ([], [])  # the previous call's input, raw and converted

    def given(self, messages: Any) -> list[dict[str, Any]]:
        """A model call's input, converted: what extends the previous call's input is found by one comparison in C
        and only the rest is looked at."""
        messages = messages if isinstance(messages, list) else list(messages)
        same = chat.kept(self._before[0], messages)
        self._before = (messages, self._before[1][:same] + [self(m, resolve=True) for m in messages[same:]])
        return self._before[1]

    def __call__(self, raw: object, *, resolve: bool = False) -> dict[str, Any]:
        named = raw.get("id") if isinstance(raw, chat.MAPPINGS) else None
        key = ("id", named) if isinstance(named, str) else ("object", id(raw))  # the raw is kept: its id stays its
        found = self._done.get(key)
        if found is not None and (found[0] is raw or found[0] == raw):
            return found[1]
        message = _message(_resolve(raw, self._attachments) if resolve and self._attachments else raw)
        self._done[key] = (raw, message)
        return message


def _scoring(span: object, spans: Mapping[object, Event]) -> bool:
    """Whether a span lies inside the scorers' span (a model-graded scorer's calls are not the agent's steps)."""
    seen = set()
    while span in spans and span not in seen:
        seen.add(span)
        if spans[span].get("type") in ("scorers", "scorer"):
            return True
        span = spans[span].get("parent_id")
    return False


def _calls(sample: Sample) -> list[tuple[list[Any], ChatMessage, Event | None]]:
    """Each model call as (its input messages, its response message, its model event or None)."""
    events = [cast(Event, e) for e in _each(sample.get("events")) if isinstance(e, chat.MAPPINGS)]
    spans = {e.get("id"): e for e in events if e.get("event") == "span_begin"}
    events = [e for e in events if e.get("event") == "model" and not _scoring(e.get("span_id"), spans)]
    data = sample.get("events_data")
    pool = (cast(EventsData, data) or EventsData()).get("messages") if isinstance(data, chat.MAPPINGS) else []
    pool = pool if isinstance(pool, list) else []
    calls: list[tuple[list[Any], ChatMessage, Event | None]] = []
    for event in events:
        given: Any = event.get("input") or []  # a list of messages, still to be checked, as the refs' ranges
        for start, end in _each(event.get("input_refs")):
            given = [*given, *pool[start:end]]
        output = event.get("output")
        choices = cast(ModelOutput, output).get("choices") if isinstance(output, chat.MAPPINGS) else None
        if isinstance(choices, list) and choices and isinstance(choices[0], chat.MAPPINGS):
            calls.append((given, cast(ChatMessage, cast(Choice, choices[0]).get("message") or {}), event))
    if calls:
        return calls
    messages: Any = sample.get("messages") or []  # sliced as a list: a value of another type raises
    return [(messages[:n], cast(ChatMessage, m), None) for n, m in enumerate(messages)
            if isinstance(m, chat.MAPPINGS) and m.get("role") == "assistant"]


def _sample_episode(sample: Sample, spec: EvalSpec, path: str, key: tuple[str, int], *,
                    messages: bool = True, own: bool = False) -> model.Episode:
    """The sample's episode; ``own``: orjson decoded the sample for this reading alone (``_resolved``)."""
    attachments = jsondecode.object_at(sample, "attachments")
    if attachments:
        sample = _resolved(sample, attachments, own=own)
    warnings: list[str] = []
    tool_events = {e.get("id"): e for e in (cast(Event, r) for r in _each(sample.get("events"))
                                            if isinstance(r, chat.MAPPINGS)) if e.get("event") == "tool"}
    tool_messages = {m.get("tool_call_id"): m for m in (cast(ChatMessage, r) for r in _each(sample.get("messages"))
                                                        if isinstance(r, chat.MAPPINGS)) if m.get("role") == "tool"}
    contexts = chat.ContextBuilder(messages=messages)
    system_prompt = None
    steps = [model.Step(index=0, kind=model.StepKind.FIRST)]
    calls = _calls(sample)
    converted = _Converted(attachments)
    first = _first_score(sample.get("scores"))
    reward = score_value(first[1].get("value")) if first else None  # the last step's
    last: list[Any] = []
    for n, (given, response, event) in enumerate(calls, start=1):
        system, rest = chat.split_system(converted.given(given))
        system_prompt = system if system_prompt is None else system_prompt
        contexts.add(rest)
        said = converted(response)
        last = [*rest, said]
        _, reasoning = _parts(response.get("content"))
        tools = chat.tool_calls(said.get("tool_calls"))
        results, command_time, failure = [], 0.0, None
        for call in tools:
            tool = tool_events.get(call.call_id)
            if tool is not None:
                found = tool.get("error")
                error = cast(ErrorRecord, found) if isinstance(found, chat.MAPPINGS) else None
                results.append(chat.text(tool.get("result")) + (f"\n{error.get('message')}" if error else ""))
                command_time += chat.number(tool.get("working_time"), "tool working_time", warnings) or 0.0
                if error or tool.get("failed"):
                    failure = _FAILURES.get(str(error.get("type")) if error else "", failures.EXCEPTION)
            elif call.call_id in tool_messages:
                results.append(converted(tool_messages[call.call_id])["content"])
        body = "\n".join(results) if results else None
        result = chat.CommandResult(None, body, 0, body, False) if body is not None else None
        output = cast(ModelOutput, jsondecode.object_at(event, "output")) if event else ModelOutput()
        usage = cast(Usage, jsondecode.object_at(output, "usage"))
        choices: Any = output.get("choices")  # indexed as a list: a value of another type raises
        steps.append(model.Step(
            index=n, kind=model.StepKind.LAST if n == len(calls) else model.StepKind.MID,
            timestamp=atif.timestamp(event.get("timestamp")) if event else None,
            usage=model.Usage(prompt_tokens=chat.count(usage.get("input_tokens")),
                              generated_tokens=chat.count(usage.get("output_tokens")),
                              cached_prompt_tokens=chat.count(usage.get("input_tokens_cache_read"))),
            cost=chat.number(usage.get("total_cost"), f"model call {n}: total_cost", warnings),
            model_time=chat.number(output.get("time"), f"model call {n}: time", warnings),
            command_time=command_time if results else None,
            reasoning=reasoning, failure=failure, reward=reward if n == len(calls) else None,
            **base.step_fields(said["content"], tools, result, n - 1, contexts.links,
                               extra={"stop_reason": choices[0].get("stop_reason")} if choices else None),
        ))
    final = [converted(m) for m in _each(sample.get("messages"))]
    _, final = chat.split_system(final)
    if contexts.links and len(final) > len(last):
        contexts.add(final)  # the conversation after the last call: the last step's observation
    metadata = _metadata(sample, spec, key, first)
    if all(step.cost is None for step in steps):
        metadata["total_cost"] = None  # no model call records a cost (mock and local models): unknown, not $0
    start, end = atif.timestamp(sample.get("started_at")), atif.timestamp(sample.get("completed_at"))
    return base.episode(
        NAME, path, episode_id=_key_id(path, *key), task_name=f"{spec.get('task', '')}/{key[0]}",
        outcome=_outcome(sample), total_reward=reward, system_prompt=system_prompt, steps=steps,
        messages=contexts.pool, links=contexts.links, metadata=metadata, warnings=warnings,
        times=[t for t in (start, end) if t is not None] or None)


def _metadata(sample: Sample, spec: EvalSpec, key: tuple[str, int],
              first: tuple[str, Score] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "inspect": {"task": spec.get("task"), "task_id": spec.get("task_id"), "run_id": spec.get("run_id"),
                    "eval_id": spec.get("eval_id"), "sample_id": key[0], "epoch": key[1], "uuid": sample.get("uuid")},
        "model": spec.get("model"),
        "input": sample.get("input") if isinstance(sample.get("input"), str) else json.dumps(sample.get("input")),
        "target": sample.get("target"),
        "scores": sample.get("scores"),
        "model_usage": sample.get("model_usage"),
        "total_time": sample.get("total_time"),
        "working_time": sample.get("working_time"),
    }
    if given := sample.get("metadata"):
        metadata["sample_metadata"] = given
    if first is not None:
        name, score = first
        metadata["evaluation"] = {"scorer": name, "value": score.get("value"), "answer": score.get("answer"),
                                  "rationale": score.get("explanation"), "metadata": score.get("metadata")}
    error = sample.get("error")
    if error:
        record = cast(ErrorRecord, error) if isinstance(error, chat.MAPPINGS) else None
        metadata["error"] = record.get("message") if record is not None else str(error)
        if record is not None and (traceback := record.get("traceback")):
            metadata["traceback"] = traceback
    if limit := sample.get("limit"):
        metadata["limit"] = limit
    return metadata


# What ``formats.registry`` reads this format through (``base.Adapter``'s defaults fill the rest).
ADAPTER = base.Adapter(NAME, sniff=sniff, summarize=summarize, parse=parse, episode_id=episode_id, misnamed=misnamed)
