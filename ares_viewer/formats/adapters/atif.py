"""ATIF trajectories (Agent Trajectory Interchange Format, harbor RFC 0001), plain or in a harbor trial folder.

A trajectory is ``{schema_version: "ATIF-v1.x", session_id?, trajectory_id?, agent: {name, version, model_name?},
steps: [...], notes?, final_metrics?, extra?}``; each step is ``{step_id (1, 2, ...), timestamp? (ISO 8601),
source: "system" | "user" | "agent", message (text, or content parts), reasoning_content?, tool_calls?:
[{tool_call_id, function_name, arguments}], observation?: {results: [{source_call_id?, content}]}, metrics?:
{prompt_tokens, completion_tokens, cached_tokens, cost_usd, completion_token_ids?, logprobs?}, model_name?, extra?}``.

Each agent step is one model call: its context is every message before it (system steps first become the system
prompt; user steps are user messages; earlier agent steps their answer and its results), its answer the step's
message, reasoning and tool calls, its result the observation's contents. ATIF records no reward and no outcome:
a harbor trial's ``result.json`` gives them (:mod:`ares_viewer.formats.sidecars.harbor`);
a plain file is ``completed`` when
its producer wrote ``final_metrics``, else ``incomplete``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
import posixpath
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, TypeGuard, cast

from ares_viewer import model
from ares_viewer.base import agent_text, jsondecode, locations
from ares_viewer.formats import base, chat, failures
from ares_viewer.model import EpisodeRow

NAME = "atif"
_TRAJECTORY = "trajectory.json"


# The records of an ATIF trajectory (harbor RFC 0001): the keys this module reads, each value ``object`` because
# the file is untrusted (a value is used once an ``isinstance`` check or a reader of ``chat`` has said what it
# is). TypedDicts cost nothing at run time: the decoded dicts are read as they are.
class ToolCallRecord(TypedDict, total=False):
    """One of a step's ``tool_calls``."""

    tool_call_id: object
    function_name: object
    arguments: object  # a JSON string, or the arguments decoded


class ObservationResult(TypedDict, total=False):
    """One of an observation's ``results``."""

    source_call_id: object
    content: object  # text, or content parts
    subagent_trajectory_ref: object  # a list of ``{trajectory_id?, trajectory_path?}``


class Observation(TypedDict, total=False):
    """A step's ``observation``."""

    results: object  # a list of ``ObservationResult``


class Metrics(TypedDict, total=False):
    """A step's ``metrics``."""

    prompt_tokens: object
    completion_tokens: object
    cached_tokens: object
    cost_usd: object
    logprobs: object
    completion_token_ids: object


class FinalMetrics(TypedDict, total=False):
    """The trajectory's ``final_metrics``, written when its producer finished."""

    total_cost_usd: object
    total_prompt_tokens: object
    total_completion_tokens: object


class StepRecord(TypedDict, total=False):
    """One of ``steps``."""

    step_id: object
    timestamp: object  # ISO 8601
    source: object  # "system", "user" or "agent"
    message: object
    reasoning_content: object
    tool_calls: object  # a list of ``ToolCallRecord``
    observation: object  # an ``Observation``
    metrics: object  # a ``Metrics``
    model_name: object
    reasoning_effort: object
    llm_call_count: object
    is_copied_context: object
    extra: object


class Trajectory(TypedDict, total=False):
    """The whole file, or a sub-agent's trajectory embedded in it (``subagent_trajectories``)."""

    schema_version: object
    session_id: object
    trajectory_id: object
    agent: object  # ``{name, version, model_name?}``
    steps: object  # a list of ``StepRecord``
    notes: object
    final_metrics: object  # a ``FinalMetrics``
    extra: object
    subagent_trajectories: object  # a list of ``Trajectory``
    continued_trajectory_ref: object


def sniff(doc: object) -> TypeGuard[Trajectory]:
    """True for an ATIF trajectory: an ``ATIF-…`` schema version, an agent and a list of steps."""
    return (isinstance(doc, Mapping) and str(doc.get("schema_version", "")).startswith("ATIF")
            and "steps" in doc and "agent" in doc)


def _steps(doc: object) -> tuple[Trajectory, list[object]]:
    """The trajectory and its steps; FormatError when it is not a JSON object with a list of ``steps``."""
    steps = chat.list_field(doc, "steps", per="per trajectory", items="steps")
    return cast(Trajectory, doc), steps


def trial_folder(path: str) -> str | None:
    """The harbor trial folder of ``<trial>/agent/trajectory.json`` (None for any other path)."""
    pure = locations.Location.of(path).pure(backslashes=True)
    if pure.name == _TRAJECTORY and pure.parent.name == "agent":
        return str(pure.parent.parent)
    return None


def trial_id(folder: str) -> str:
    """The episode id of the harbor trial in ``folder``: ``{job}/{trial}``."""
    pure = pathlib.PurePosixPath(folder)
    return f"{pure.parent.name}/{pure.name}" if pure.parent.name else pure.name


def episode_id(doc: object, path: str, record: int | None = None) -> str | None:
    """A harbor trial's ``{job}/{trial}``; else the ``session_id`` (or ``trajectory_id``), else the file's name;
    None for a trajectory with sub-agents embedded (the record holds several episodes: ``parse`` names them)."""
    identifier = _own_id(doc, path, record)
    return None if isinstance(doc, Mapping) and doc.get("subagent_trajectories") else identifier


def timestamp(value: object) -> float | None:
    """Unix seconds of an ISO 8601 time (``Z`` or an offset; naive times are UTC), None when unreadable."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _calls(raw: object) -> tuple[model.ToolCall, ...]:
    calls = []
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, Mapping):
            continue
        call = cast(ToolCallRecord, item)
        arguments = call.get("arguments", {})
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("tool_call_id")
        calls.append(model.ToolCall(call_id=None if call_id is None else str(call_id),
                                    name=str(call.get("function_name", "")), arguments=arguments))
    return tuple(calls)


def _results(step: StepRecord) -> list[tuple[str | None, str]]:
    observation = step.get("observation")
    results = cast(Observation, observation).get("results") if isinstance(observation, Mapping) else None
    found = []
    for item in results if isinstance(results, list) else ():
        if isinstance(item, Mapping):
            result = cast(ObservationResult, item)
            source = result.get("source_call_id")
            found.append((None if source is None else str(source), chat.text(result.get("content"))))
    return found


def _said(body: str) -> tuple[chat.CommandResult, str | None]:
    """What one observation result says about its command, read from that result alone, and how the command
    failed to finish (``failures``), if it did. A result in mini-swe-agent's text protocol (``<returncode>``,
    ``<output>``) or its tool-calling JSON (``{"returncode", "output"}``) gives its return code and output;
    any other content is the output. A command that timed out or raised shows the exception's text, with what
    it printed before, as the mini-swe-agent adapter shows it."""
    returncode: int | None = None
    output: str | None = body
    elided = 0
    if "<returncode>" in body:
        parsed = agent_text.parse_result(body)
        returncode, output, elided = parsed.returncode, parsed.output, parsed.elided_chars
        if returncode is None and "</exception>" in body:  # a long exception pushes it past where it is looked for
            returncode = agent_text.returncode(body[body.find("</exception>"):])
    elif body.startswith("{") and '"returncode"' in body:
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        if isinstance(decoded, Mapping) and isinstance(decoded.get("output"), str):
            returncode, output = chat.integer(decoded.get("returncode")), decoded["output"]
    failure = failures.classify(body, returncode)
    if failure is not None:
        shown = (failures.exception_text(body) or body.strip(), (output or "").strip())
        output = "\n\n".join(p for p in dict.fromkeys(shown) if p)
    return chat.CommandResult(returncode, output, elided, body, False), failure


def _task(doc: Trajectory, steps: list[object], fallback: str) -> str:
    extra = jsondecode.object_at(doc, "extra")
    for key in ("task_name", "task_id", "instance_id", "task"):
        if isinstance(extra.get(key), str) and extra[key]:
            return extra[key]
    for item in steps:
        step = cast(StepRecord, item)
        if isinstance(item, Mapping) and step.get("source") == "user" and not step.get("is_copied_context"):
            line = chat.text(step.get("message")).strip().split("\n", 1)[0]
            if line:
                return line[:80]
    return fallback


def summarize(doc: object, path: str, record: int | None = None) -> list[EpisodeRow]:
    """The trajectory's index rows (``parse``'s summaries: ATIF files hold no cumulative contexts to skip); a
    trajectory continued in another file names it in the column ``continued_in`` (``runs.index.joins`` joins
    the two rows as ``continued`` joins the two episodes)."""
    rows = [EpisodeRow(**{**episode.summary(), "warnings": list(episode.warnings)})
            for episode in parse(doc, path, record)]
    following = continuation_path(path, _steps(doc)[0].get("continued_trajectory_ref"))
    if following is not None:
        rows[0] = model.with_columns(rows[0], {"continued_in": following})
    return rows


def continuation_path(path: str, ref: object) -> str | None:
    """Where the trajectory at ``path`` continues (``continued_trajectory_ref``, relative to its folder unless
    absolute), or None."""
    if not isinstance(ref, str) or not ref.strip():
        return None
    if "://" in ref or ref.startswith("/"):
        return ref
    head = path.replace("\\", "/").rpartition("/")[0]
    if "://" in head:
        return f"{head}/{ref}"
    return posixpath.normpath(f"{head}/{ref}" if head else ref)


def continued(episode: model.Episode, following: model.Episode) -> model.Episode:
    """``episode`` joined to the trajectory that continues it: its actions follow, numbered on; the first call
    of the continuation starts a new context (a rewrite: it was summarized or cut); the outcome and end are the
    continuation's; the totals are the two episodes' sums."""
    actions, calls, pool = len(episode.steps) - 1, len(episode.links), len(episode.messages)
    steps = [dataclasses.replace(s, kind=model.StepKind.MID) if s.kind == model.StepKind.LAST else s
             for s in episode.steps]
    for step in following.steps[1:]:
        index = None if step.context_index is None else step.context_index + calls
        steps.append(dataclasses.replace(step, index=step.index + actions, context_index=index,
                                         context_rewritten=step.context_rewritten or index == calls))
    links = [*episode.links, *(dataclasses.replace(link, added=tuple(i + pool for i in link.added),
                                                   rewritten=link.rewritten or n == 0)
                               for n, link in enumerate(following.links))]
    totals = {name: _sum(getattr(episode, attribute), getattr(following, attribute)) for name, attribute in
              (("cost", "total_cost"), ("prompt_tokens", "prompt_tokens"), ("generated_tokens", "generated_tokens"))}
    continuations = [*episode.metadata.get("continuations", []), following.path]
    metadata = {**episode.metadata, "totals": totals, "continuations": continuations}
    if following.metadata.get("error"):
        metadata["error"] = following.metadata["error"]
    return dataclasses.replace(
        episode, steps=tuple(steps), links=tuple(links), messages=(*episode.messages, *following.messages),
        metadata=metadata,
        outcome=following.outcome, end_time=following.end_time if following.end_time is not None
        else episode.end_time, warnings=(*episode.warnings, *following.warnings))


def _sum(first: float | None, second: float | None) -> float | None:
    """Two parts' figure: their sum, either when the other is unknown, None when both are."""
    known = [value for value in (first, second) if value is not None]
    return sum(known) if known else None


def with_continuations(episode: model.Episode, read: Callable[[str], bytes], limit: int = 100) -> model.Episode:
    """``episode`` joined to each trajectory that continues it, in turn (``continued_trajectory_ref``), read by
    ``read``; a continuation that cannot be read is a warning, and ends the chain."""
    at, ref = episode.path, episode.metadata.get("continued_trajectory_ref")
    seen = {at}
    for _ in range(limit):
        following = continuation_path(at, ref)
        if following is None or following in seen:
            break
        seen.add(following)
        try:
            doc = json.loads(read(following))
            part = parse(doc, following)[0]
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            return dataclasses.replace(episode, warnings=(
                *episode.warnings, f"continued in {following}, which cannot be read ({reason})"))
        episode = continued(episode, part)
        at, ref = following, doc.get("continued_trajectory_ref")
    return episode



def parse(doc: object, path: str, record: int | None = None) -> list[model.Episode]:
    """The trajectory as an ``Episode``: a FIRST record for the messages before the first agent step, then one
    step per agent step; then each embedded sub-agent trajectory (``subagent_trajectories``) as an episode of
    its own, ``{id}/{trajectory_id}``, linked both ways (``metadata["subagent_episodes"]`` and
    ``["parent_episode"]``; a step whose result refers to one names it in ``extra["subagents"]``).

    Raises:
        FormatError: when the document cannot be a trajectory (e.g. ``steps`` is not a list).
    """
    identifier = _own_id(doc, path, record)
    trajectory, _ = _steps(doc)
    subagents = [cast(Trajectory, s) for s in chat.list_field(trajectory, "subagent_trajectories",
                                                              per="per trajectory", items="trajectories")
                 if isinstance(s, Mapping)] if trajectory.get("subagent_trajectories") is not None else []
    ids = {str(s.get("trajectory_id")): f"{identifier}/{s.get('trajectory_id')}" for s in subagents}
    episode = _episode(trajectory, path, identifier, ids)
    if ids:
        episode = dataclasses.replace(episode, metadata={**episode.metadata, "subagent_episodes": list(ids.values())})
    episodes = [episode]
    for sub in subagents:
        child = _episode(sub, path, ids[str(sub.get("trajectory_id"))], {})
        episodes.append(dataclasses.replace(child, metadata={**child.metadata, "parent_episode": identifier}))
    return episodes


def _own_id(doc: object, path: str, record: int | None) -> str:
    trajectory, _ = _steps(doc)
    trial = trial_folder(path)
    if trial is not None:
        base = trial_id(trial)
    else:
        named = (trajectory.get("session_id"), trajectory.get("trajectory_id"))
        base = next((str(v) for v in named if isinstance(v, str | int) and str(v)), None) \
            or locations.Location.of(path).name.split(".")[0]
    return base if record is None else f"{base}#{record}"


def _subagents(step: StepRecord, ids: Mapping[str, str]) -> list[str]:
    """The episodes of the sub-agents a step's results refer to (``subagent_trajectory_ref``: an embedded one by
    ``trajectory_id``, an external file by ``trajectory_path``)."""
    results = cast(Observation, jsondecode.object_at(step, "observation")).get("results")
    found = []
    for result in results or () if isinstance(results, list) else ():
        refs = cast(ObservationResult, result).get("subagent_trajectory_ref") if isinstance(result, Mapping) \
            else None
        for ref in refs if isinstance(refs, list) else ():
            if isinstance(ref, Mapping):
                key = str(ref.get("trajectory_id"))
                found.append(ids.get(key) or str(ref.get("trajectory_path") or key))
    return found


@dataclasses.dataclass
class _Reading:
    """What reading a trajectory's steps in order builds: the episode's steps, its context (``pool``, the
    system prompt's parts, one link per model call) and where the last model call and the last time were."""

    ids: Mapping[str, str]  # the embedded sub-agents' episodes, by ``trajectory_id``
    warnings: list[str] = dataclasses.field(default_factory=list)
    system_parts: list[str] = dataclasses.field(default_factory=list)
    pool: list[model.Message] = dataclasses.field(default_factory=list)
    links: list[model.ContextLink] = dataclasses.field(default_factory=list)
    steps: list[model.Step] = dataclasses.field(default_factory=lambda: [model.Step(index=0,
                                                                                     kind=model.StepKind.FIRST)])
    previous_time: float | None = None  # the last agent step's time: the episode ends there
    previous_len: int = 0  # the context's length at the last model call
    first_time: float | None = None
    copied: int = 0  # steps marked ``is_copied_context``

    def link_what_came_since_the_last_call(self) -> None:
        self.links.append(model.ContextLink(kept=self.previous_len,
                                            added=tuple(range(self.previous_len, len(self.pool))), rewritten=False))


def _episode(doc: Trajectory, path: str, identifier: str, ids: Mapping[str, str]) -> model.Episode:
    """One trajectory (the file's, or a sub-agent's embedded in it) as an ``Episode``.

    A step marked ``is_copied_context`` (copied from an earlier trajectory, e.g. after a summary) is context
    only: its messages are in the context, it is no action and no model call of this episode. An agent step
    with ``llm_call_count: 0`` (a dispatch no model made) is an action but no model call: it answers no context.
    """
    _, raw_steps = _steps(doc)
    reading = _Reading(ids)
    agents = [s for s in raw_steps if isinstance(s, Mapping) and s.get("source") == "agent"
              and not s.get("is_copied_context")]
    for position, step in enumerate(raw_steps):
        _read_step(reading, step, f"step {position + 1}", last=agents[-1] if agents else None)
    if not reading.links:
        reading.links.append(model.ContextLink(kept=0, added=tuple(range(len(reading.pool))), rewritten=False))
    elif len(reading.pool) > reading.previous_len:  # the last call's results: the trajectory's final observation
        reading.link_what_came_since_the_last_call()
    finished = isinstance(doc.get("final_metrics"), Mapping)
    return base.episode(
        NAME, path, episode_id=identifier, task_name=_task(doc, raw_steps, identifier),
        outcome=model.Outcome.COMPLETED if finished else model.Outcome.INCOMPLETE,
        times=(reading.first_time, reading.previous_time),
        system_prompt="\n\n".join(reading.system_parts) if reading.system_parts else None, steps=reading.steps,
        messages=reading.pool, links=reading.links, metadata=_metadata(doc, reading.copied, reading.warnings),
        warnings=reading.warnings,
    )


def _read_step(reading: _Reading, raw: object, where: str, last: object) -> None:
    """Add one raw step to ``reading``: a system or user step to the context, an agent step as an action
    (``last`` is the trajectory's last agent step)."""
    if not isinstance(raw, Mapping):
        reading.warnings.append(f"{where} is a {type(raw).__name__}, not a step; skipped")
        return
    step = cast(StepRecord, raw)
    source = step.get("source")
    text = chat.text(step.get("message"))
    moment = timestamp(step.get("timestamp"))
    if step.get("timestamp") is not None and moment is None:
        reading.warnings.append(f"{where}: timestamp {step.get('timestamp')!r} is not ISO 8601; ignored")
    reading.first_time = reading.first_time if reading.first_time is not None else moment
    reading.copied += bool(step.get("is_copied_context"))
    if source == "system":
        if not reading.pool:  # leading system steps are the system prompt
            reading.system_parts.append(text)
        else:
            reading.pool.append(model.Message(role="system", content=text))
    elif source != "agent":
        if source != "user":
            reading.warnings.append(f"{where}: source {source!r} is not system/user/agent; read as user")
        reading.pool.append(model.Message(role="user", content=text))
    elif step.get("is_copied_context"):  # context only
        calls = _calls(step.get("tool_calls"))
        reading.pool.append(model.Message(role="assistant", content=text, tool_calls=calls))
        reading.pool.extend(_result_messages(_results(step)))
    else:
        _agent_step(reading, step, where, text, moment, kind=model.StepKind.LAST if step is last
                    else model.StepKind.MID)


def _agent_step(reading: _Reading, step: StepRecord, where: str, text: str, moment: float | None,
                kind: model.StepKind) -> None:
    """An agent step as the episode's next action; a model call (unless ``llm_call_count: 0``) answering what
    the context gained since the last call. Its answer and results then join the context."""
    calls = _calls(step.get("tool_calls"))
    results = _results(step)
    model_call = step.get("llm_call_count") != 0
    call: int | None = None
    if model_call:
        reading.link_what_came_since_the_last_call()
        call = len(reading.links) - 1
    # Each result is read alone: the step's own is the first one's; the others are in ``extra.results``.
    read = [(source_call, *_said(content)) for source_call, content in results]
    said, failure = (read[0][1], read[0][2]) if read else (None, None)
    metrics = cast(Metrics, jsondecode.object_at(step, "metrics"))
    dt = moment - reading.previous_time if moment is not None and reading.previous_time is not None else None
    reading.previous_time = moment if moment is not None else reading.previous_time
    reading.steps.append(model.Step(
        index=len(reading.steps),
        kind=kind,
        timestamp=moment,
        dt=dt,
        usage=model.Usage(prompt_tokens=chat.count(metrics.get("prompt_tokens")),
                          generated_tokens=chat.count(metrics.get("completion_tokens")),
                          cached_prompt_tokens=chat.count(metrics.get("cached_tokens"))),
        cost=chat.number(metrics.get("cost_usd"), f"{where}: cost_usd", reading.warnings),
        **base.step_fields(text, calls, said, call, reading.links,
                           extra=_step_extra(step, metrics, calls, read, reading.ids)),
        reasoning=jsondecode.string_at(step, "reasoning_content") or "",
        failure=failure,
    ))
    if model_call:
        reading.previous_len = len(reading.pool)
    reading.pool.append(model.Message(role="assistant", content=text, tool_calls=calls))
    reading.pool.extend(_result_messages(results))


def _step_extra(step: StepRecord, metrics: Metrics, calls: tuple[model.ToolCall, ...],
                read: list[tuple[str | None, chat.CommandResult, str | None]],
                ids: Mapping[str, str]) -> dict[str, Any]:
    """An agent step's ``extra``: every result when there are several, ``model_call: False`` for a dispatch no
    model made, the sub-agents its results refer to, the step's own model fields and its token details."""
    extra: dict[str, Any] = {}
    if len(read) > 1:
        names = {c.call_id: chat.command((c,)) for c in calls}
        extra["results"] = [{"call_id": source_call, "command": names.get(source_call),
                             "returncode": result.returncode, "output": result.output, "failure": how}
                            for source_call, result, how in read]
    if step.get("llm_call_count") == 0:
        extra["model_call"] = False
    if subagents := _subagents(step, ids):
        extra["subagents"] = subagents
    for key in ("model_name", "reasoning_effort", "llm_call_count", "extra"):
        if (value := step.get(key)) is not None:
            extra[key] = value
    for key in ("logprobs", "completion_token_ids"):
        if isinstance(value := metrics.get(key), list):
            extra[key] = value
    return extra


def _metadata(doc: Trajectory, copied: int, warnings: list[str]) -> dict[str, Any]:
    """The trajectory's own fields (all but its steps and sub-agents), its agent's model, how many steps are
    copied context, and the producer's totals when it wrote ``final_metrics``."""
    agent = jsondecode.object_at(doc, "agent")
    metadata: dict[str, Any] = {k: v for k, v in doc.items() if k not in ("steps", "subagent_trajectories")}
    metadata["agent"] = dict(agent)
    if agent.get("model_name"):
        metadata["model"] = agent["model_name"]
    if copied:
        metadata["copied_context_steps"] = copied
    # The producer's totals count calls no step keeps (``Episode.recorded_total``).
    if isinstance(found := doc.get("final_metrics"), Mapping):
        final = cast(FinalMetrics, found)
        metadata["totals"] = {"cost": chat.number(final.get("total_cost_usd"), "total_cost_usd", warnings),
                              "prompt_tokens": chat.count(final.get("total_prompt_tokens")),
                              "generated_tokens": chat.count(final.get("total_completion_tokens"))}
    return metadata


def _result_messages(results: list[tuple[str | None, str]]) -> list[model.Message]:
    return [model.Message(role="tool", content=content, tool_call_id=source_call) if source_call
            else model.Message(role="user", content=content) for source_call, content in results]


# What ``formats.registry`` reads this format through (``base.Adapter``'s defaults fill the rest).
ADAPTER = base.Adapter(NAME, sniff=sniff, summarize=summarize, parse=parse, episode_id=episode_id)
