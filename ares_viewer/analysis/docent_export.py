"""Episodes as Docent agent runs (the ``docent`` package's ``AgentRun``), one JSON object per line.

An episode is one ``AgentRun``. Its transcripts are the model's conversation: one for the whole episode, or, where
the context was rewritten (a summary, a trimmed history), one per distinct context, each starting with the exact
messages the model answered at the action that began it. An action is an assistant message (its answer, with its
reasoning as a ``reasoning`` content part where the file records it) whose tool calls are the calls the model
made, or, for a command in the answer's text, one ``bash`` call with ``{"command": ...}``; its results are tool
messages tied to those calls, the return code and how the command failed in their ``metadata``. The run's
``metadata`` holds the episode id, task, outcome, reward (also as Docent's ``scores``), format, the ending in words
(``analysis.ending.of(episode).explanation``, as every surface words it) and the file it was read from. It lives in
the analysis layer for that: the ending is analysis's; the step helpers it shares with the ATIF export are
``formats.export.steps``.

``write`` streams a run to a ``.jsonl`` file (one episode in memory at a time, never into the run's folder);
``send`` adds such a file to a Docent collection through Docent's SDK, in batches.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pathlib
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import orjson

from ares_viewer import model
from ares_viewer.analysis import ending
from ares_viewer.base import atomic, locations, settings
from ares_viewer.formats.export.steps import arguments, call_ids, clean, iso, jsonable, results

ROLES = frozenset({"system", "user", "assistant", "tool"})
DEFAULT_KEY_ENV = "DOCENT_API_KEY"  # the variable Docent's own SDK reads its key from
BATCH = 100  # agent runs per request when sending


class ExportError(ValueError):
    """An export that cannot be done: where it would write, or how it would send."""


class RunLike(Protocol):
    """What an export reads of a run (``ares_viewer.Run`` is one)."""

    location: str

    @property
    def episode_ids(self) -> list[str]: ...

    def episode(self, episode_id: str) -> model.Episode: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    """What an export did.

    Attributes:
        path: the file written.
        runs: agent runs written (one per episode read).
        errors: one line per episode that could not be read (skipped; the others are written).
        sent: agent runs added to Docent (None when nothing was configured to send).
        collection: the Docent collection they were added to.
    """

    path: str
    runs: int
    errors: tuple[str, ...] = ()
    sent: int | None = None
    collection: str | None = None


# ----- one episode ------------------------------------------------------------------------------------------------


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "function": name, "arguments": args, "type": "function"}


def _message(message: model.Message, n: int) -> dict[str, Any]:
    """A context message as Docent's: its own role where Docent has it, else ``user`` with the role in metadata."""
    role = message.role if message.role in ROLES else "user"
    out: dict[str, Any] = {"role": role, "content": message.content}
    if role != message.role:
        out["metadata"] = {"role": message.role}
    if role == "assistant" and message.tool_calls:
        out["tool_calls"] = [_call(c.call_id or f"call_context_{n}_{i}", c.name or "tool", arguments(c.arguments))
                             for i, c in enumerate(message.tool_calls)]
    if role == "tool":
        out.update(clean({"tool_call_id": message.tool_call_id, "function": message.name}))
    return out


def _action(episode: model.Episode, step: model.Step) -> list[dict[str, Any]]:
    """Action ``step`` as an assistant message and the tool messages holding its results."""
    ids = call_ids(step)
    calls = [_call(i, c.name or "tool", arguments(c.arguments)) for i, c in zip(ids, step.tool_calls, strict=True)]
    if not calls and step.command is not None:  # a command in the answer's text: one bash call
        ids = [f"call_{step.index}"]
        calls = [_call(ids[0], "bash", {"command": step.command})]
    content: str | list[dict[str, Any]] = step.response
    if step.reasoning:
        content = [{"type": "reasoning", "reasoning": step.reasoning}, {"type": "text", "text": step.response}]
    named = episode.metadata.get("model")
    assistant = clean({
        "role": "assistant", "content": content, "tool_calls": calls or None,
        "model": named if isinstance(named, str) else None,
        "metadata": jsonable(clean({
            "step": step.index, "command": step.command, "returncode": step.returncode, "reward": step.reward,
            "timestamp": iso(step.timestamp), "prompt_tokens": step.usage.prompt_tokens,
            "completion_tokens": step.usage.generated_tokens, "cost_usd": step.cost, "model_time": step.model_time,
            "context_rewritten": step.context_rewritten or None})),
    })
    names = {c["id"]: c["function"] for c in calls}
    found = results(episode, step.index, ids)
    # One result is the command's own: its return code and failure go with it. Several results (one per call)
    # share the step's single return code, which says nothing about each, so they carry none.
    told = clean({"step": step.index, "returncode": step.returncode, "failure": step.failure,
                  "output_elided": step.output_elided or None, "format_error": step.format_error or None,
                  "command_time": step.command_time}) if len(found) == 1 else {"step": step.index}
    tools = [clean({"role": "tool", "content": text, "tool_call_id": call_id, "function": names.get(call_id or ""),
                    "metadata": jsonable(told)}) for call_id, text in found]
    return [assistant, *tools]


def _segments(episode: model.Episode) -> list[list[model.Step]]:
    """The actions, cut where the context was rewritten: one list per distinct context."""
    segments: list[list[model.Step]] = []
    for step in episode.actions:
        if not segments or step.context_rewritten:
            segments.append([])
        segments[-1].append(step)
    return segments


def transcripts(episode: model.Episode) -> list[dict[str, Any]]:
    """The episode's transcripts as Docent ``Transcript`` dicts: one, or one per distinct context."""
    system = [] if episode.system_prompt is None else [{"role": "system", "content": episode.system_prompt}]
    segments = _segments(episode)
    if not segments:  # no action: the first request alone
        first = [_message(m, n) for n, m in enumerate(episode.observation(0) or [])]
        return [{"name": "context 1", "messages": system + first, "metadata": {"steps": []}}]
    out = []
    for number, segment in enumerate(segments, start=1):
        start = segment[0]
        context = episode.context(start.index)
        if not context and start.index == 1:
            context = episode.observation(0) or []
        own = bool(context) and (context[0].role, context[0].content) == ("system", episode.system_prompt)
        messages = ([] if own else system) + [_message(m, n) for n, m in enumerate(context)]
        for step in segment:
            messages.extend(_action(episode, step))
        out.append({"name": f"context {number}", "messages": messages, "metadata": {
            "steps": [s.index for s in segment], "context_rewritten": start.context_rewritten}})
    return out


def to_agent_run(episode: model.Episode) -> dict[str, Any]:
    """The episode as a Docent ``AgentRun`` dict (``AgentRun.model_validate`` takes it)."""
    reward = jsonable(episode.total_reward)
    return {
        "name": episode.episode_id,
        "description": episode.task_name,
        "transcripts": transcripts(episode),
        "metadata": {  # the reward stays null when unknown (never 0), and Docent's scores then hold none
            "episode_id": episode.episode_id, "task": episode.task_name, "outcome": str(episode.outcome),
            "reward": reward, "scores": {} if reward is None else {"reward": reward},
            "ending": ending.of(episode).explanation, "format": episode.format, **jsonable(clean({
                "truncated": episode.truncated, "error": episode.error, "num_actions": episode.num_actions,
                "source_path": episode.path, "start_time": iso(episode.start_time),
                "end_time": iso(episode.end_time)}))},
    }


# ----- a run ------------------------------------------------------------------------------------------------------


def _run_folder(location: str) -> pathlib.Path | None:
    """The local folder a run lies in (a glob's folder before its first wildcard), None for a URL."""
    if not locations.is_local(location):
        return None
    path = os.path.expanduser(location)
    wild = [path.index(c) for c in "*?[" if c in path]
    if wild:
        path = os.path.dirname(path[: min(wild)])
    resolved = pathlib.Path(path or ".").resolve()
    return resolved if resolved.is_dir() else resolved.parent


def _agent_runs(run: RunLike, ids: Iterable[str], errors: list[str]) -> Iterator[dict[str, Any]]:
    for episode_id in ids:
        try:
            yield to_agent_run(run.episode(episode_id))
        except (KeyError, OSError, ValueError) as exc:
            errors.append(f"{episode_id}: {exc}")


def write(run: RunLike, out: str | os.PathLike[str], *, episodes: Iterable[str] | None = None) -> Written:
    """Write the run's episodes (or ``episodes``, by id) to ``out`` as Docent agent runs, one JSON object a line.

    One episode is in memory at a time. The file appears whole or not at all (written beside it, then renamed).
    An episode that cannot be read is skipped and named in ``Written.errors``.

    Raises:
        ExportError: ``out`` lies in the run's folder (an export never writes there).
    """
    target = pathlib.Path(out).expanduser().resolve()
    folder = _run_folder(run.location)
    if folder is not None and target.is_relative_to(folder):
        raise ExportError(f"{out}: an export is never written into the run's folder ({folder}); pick another place")
    target.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    count = 0
    with atomic.written(target) as staged, staged.open("wb") as handle:  # renamed in whole when every run is out
        for record in _agent_runs(run, run.episode_ids if episodes is None else episodes, errors):
            handle.write(orjson.dumps(record) + b"\n")
            count += 1
    return Written(path=str(target), runs=count, errors=tuple(errors))


def read(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The agent-run dicts of an export file, one at a time."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                yield orjson.loads(line)


@dataclasses.dataclass(frozen=True, slots=True)
class Server:
    """Where exports are sent: the Docent API's URL, its key and the collection (None: a new one)."""

    url: str
    api_key: str = dataclasses.field(repr=False)
    collection: str | None = None


def configured(environ: Mapping[str, str] | None = None) -> Server | None:
    """The Docent server the settings name (``ARES_VIEWER_DOCENT_URL``, the key in the variable
    ``ARES_VIEWER_DOCENT_API_KEY_ENV`` names, ``ARES_VIEWER_DOCENT_COLLECTION``), or None when no URL is set.

    Raises:
        ExportError: a URL is set but its key variable is empty.
    """
    env = os.environ if environ is None else environ
    url = settings.DOCENT_URL.get(env)
    if url is None:
        return None
    key_env = settings.DOCENT_API_KEY_ENV.get(env) or DEFAULT_KEY_ENV
    key = env.get(key_env)
    if not key:
        raise ExportError(f"{settings.DOCENT_URL.name} is set but ${key_env} holds no Docent API key")
    return Server(url=url, api_key=key, collection=settings.DOCENT_COLLECTION.get(env))


def send(path: str | os.PathLike[str], server: Server, *, name: str | None = None,
         batch: int = BATCH) -> tuple[str, int]:
    """Add the agent runs of export file ``path`` to a collection on ``server`` through Docent's SDK, ``batch`` at a
    time; returns the collection's id and how many were sent.

    Raises:
        ExportError: Docent's SDK is not installed (``pip install docent``), or the server refused or did not
            answer (the message says how many agent runs were sent before).
    """
    try:
        agent_run = importlib.import_module("docent.data_models").AgentRun
        factory = importlib.import_module("docent").Docent
    except (ImportError, AttributeError) as exc:
        raise ExportError(f"sending to {server.url} needs Docent's SDK with its dependencies (pip install docent): "
                          f"{exc}") from exc
    sent = 0
    try:  # the SDK's HTTP failures are OSErrors (requests'), its refusals ValueErrors or RuntimeErrors
        client = factory(api_url=server.url, api_key=server.api_key, log_stream=sys.stderr)
        collection = server.collection or client.create_collection(name=name or pathlib.Path(path).stem)
        pending: list[Any] = []
        for record in read(path):
            pending.append(agent_run.model_validate(record))
            if len(pending) >= batch:
                client.add_agent_runs(collection, pending)
                sent, pending = sent + len(pending), []
        if pending:
            client.add_agent_runs(collection, pending)
            sent += len(pending)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ExportError(f"Docent at {server.url} after {sent} agent run(s) sent: {exc}") from exc
    return collection, sent


def export(run: RunLike, out: str | os.PathLike[str], *, episodes: Iterable[str] | None = None,
           server: Server | None = None) -> Written:
    """Write the run to ``out`` as Docent agent runs (``write``) and, when ``server`` is given or the settings name
    one (``configured``), add them to Docent (``send``). The file is written first, whatever happens to the sending.

    >>> ares_viewer.export.docent(ares_viewer.open_run("sample_runs/demo-run"), "demo.docent.jsonl")

    Raises:
        ExportError: ``out`` lies in the run's folder; or, after the file is written, the settings name a server
            but no key, or Docent's SDK is missing.
    """
    written = write(run, out, episodes=episodes)
    server = server or configured()
    if server is None:
        return written
    collection, sent = send(written.path, server, name=locations.Location.of(run.location).name or None)
    return dataclasses.replace(written, sent=sent, collection=collection)


# ``ares_viewer.export.docent(run, "out.jsonl")`` in a notebook (``ares_viewer.export`` is this module).
docent = export
