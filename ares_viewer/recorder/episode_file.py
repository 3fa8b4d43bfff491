"""One episode's ``{episode_id}.json``, in the layout of ARES's ``JsonTrajectoryCollector``, rewritten atomically.

The file is what ``json.dump(doc, f, indent=2)`` writes for the collector's document (key order
``episode_id, task_name, start_time, end_time, total_reward, num_steps, truncated, steps``; ``NaN`` and
``Infinity`` allowed; non-ASCII escaped), followed by the recorder's extra keys, which other readers ignore.
It is rewritten after every step through a temporary file and a rename, so a reader (or a crash) only ever
sees a whole document. Each step record is serialized once, when it is added: rewriting costs a copy of the
text, not a new serialization of every observation. Pure Python: no ARES, no Docker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import os
import pathlib
import signal
import traceback
from collections.abc import Mapping
from typing import Any

from ares_viewer import model
from ares_viewer.base import atomic
from ares_viewer.model import errors

# The collector's top-level keys, in its order.
HEADER_KEYS = ("episode_id", "task_name", "start_time", "end_time", "total_reward", "num_steps", "truncated")
# Stand-in for the steps array while the rest of the document is serialized (never a real key's value).
_STEPS_PLACEHOLDER = "\x00ares-viewer-steps\x00"
_INDENT = "  "



class EndStatus(enum.StrEnum):
    """An episode file's ``end_status``, written by the recorder and by counterfactuals.

    The endings an episode can have are ``model.Outcome``'s own values (the ares adapter reads them back as
    outcomes); ``running`` and ``abandoned`` are the recorder's alone. docs/recording.md says when each is written.
    """

    RUNNING = "running"
    COMPLETED = model.Outcome.COMPLETED.value
    TRUNCATED = model.Outcome.TRUNCATED.value
    ERRORED = model.Outcome.ERRORED.value
    CANCELLED = model.Outcome.CANCELLED.value
    INTERRUPTED = model.Outcome.INTERRUPTED.value
    ABANDONED = "abandoned"  # reset() while an episode was still running
    ABORTED = model.Outcome.ABORTED.value  # the recorder was closed while an episode was still running


def status_of(exc: BaseException) -> EndStatus:
    """How an episode that ``exc`` ended is recorded, by the recorder and by counterfactuals alike.

    Ctrl-C (``KeyboardInterrupt``, or the cancellation ``asyncio.run`` turns it into) is ``interrupted``; any other
    exception that is not an ``Exception`` (a cancelled task, ``SystemExit``, ``GeneratorExit``: the work was
    stopped from outside, it did not fail) is ``cancelled``; every ``Exception`` is ``errored``.
    """
    if isinstance(exc, KeyboardInterrupt) or (isinstance(exc, asyncio.CancelledError) and _interrupted()):
        return EndStatus.INTERRUPTED
    if isinstance(exc, Exception):
        return EndStatus.ERRORED
    return EndStatus.CANCELLED


def _interrupted() -> bool:
    """True when Ctrl-C reached ``asyncio.run``, which turns it into a cancellation of the main task."""
    handler = signal.getsignal(signal.SIGINT)
    runner = getattr(getattr(handler, "func", handler), "__self__", None)
    return isinstance(runner, asyncio.Runner) and getattr(runner, "_interrupt_count", 0) > 0

# Command outputs kept in the extra keys (``final_command``, the verifier's) are cut at this many characters.
MAX_OUTPUT_CHARS = 200_000


def to_jsonable(value: Any) -> Any:
    """A deep, JSON-ready copy of an ARES object (``LLMRequest``, ``LLMResponse``, messages, ``Usage``).

    Dataclasses become dicts in field order (as ``dataclasses.asdict`` writes them), pydantic models their
    ``model_dump()``, mappings and sequences are copied: the result shares nothing with ``value``, which
    matters for ``LLMRequest.messages``, the agent's own list that keeps growing after a step returns.
    Anything else that is not a JSON scalar becomes its ``repr``.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return to_jsonable(dump())
    item = getattr(value, "item", None)  # numpy scalars (dm_env allows them for rewards and discounts)
    if callable(item):
        try:
            return to_jsonable(item())
        except (TypeError, ValueError):
            pass
    return repr(value)


def cut_output(text: str) -> dict[str, Any]:
    """A command's output as the extra keys hold it: ``output``, and ``output_chars``/``output_cut`` when cut."""
    if len(text) <= MAX_OUTPUT_CHARS:
        return {"output": text}
    return {"output": text[:MAX_OUTPUT_CHARS], "output_chars": len(text), "output_cut": True}


def error_record(exc: BaseException) -> dict[str, Any]:
    """An exception as the ``error`` key holds it: type, message, its cause (ARES wraps agent failures), traceback."""
    error = _error_link(exc)
    inner, seen = error, {id(exc)}
    cause = _cause_of(exc)
    # the whole chain, so a reader can name the root cause (``model.RecordedError``), as deep as a reader reads it
    while cause is not None and id(cause) not in seen and len(seen) <= errors.MAX_CAUSES:
        seen.add(id(cause))
        inner["cause"] = _error_link(cause)
        inner, cause = inner["cause"], _cause_of(cause)
    error["traceback"] = "".join(traceback.format_exception(exc))[-8000:]
    return error


def _error_link(exc: BaseException) -> dict[str, Any]:
    """One error of a chain: its type and message."""
    return {"type": type(exc).__name__, "message": str(exc) or repr(exc)}


def _cause_of(exc: BaseException) -> BaseException | None:
    """The exception ``exc`` was raised from, or while handling, as Python's traceback names it."""
    return exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


def step_record(
    step_index: int,
    step_type: str,
    observation: Any,
    action: Any,
    reward: Any,
    discount: Any,
    timestamp: float,
) -> dict[str, Any]:
    """One step record as the collector writes it (FIRST: no action, reward and discount null)."""
    return {
        "step_index": step_index,
        "step_type": step_type,
        "observation": observation,
        "action": action,
        "reward": reward,
        "discount": discount,
        "timestamp": timestamp,
    }


class EpisodeFile:
    """The document of one episode, held as serialized step records plus a header, written on demand."""

    def __init__(self, path: str | os.PathLike[str], episode_id: str, task_name: str | None, start_time: float):
        self.path = pathlib.Path(path)
        self.header: dict[str, Any] = {
            "episode_id": episode_id,
            "task_name": task_name,
            "start_time": start_time,
            "end_time": None,
            "total_reward": None,
            "num_steps": 0,
            "truncated": False,
        }
        # The recorder's own keys, after the collector's (end_status, error, recording, ...).
        self.extra: dict[str, Any] = {}
        self._steps: list[str] = []
        self.last_record: dict[str, Any] | None = None

    @property
    def num_steps(self) -> int:
        return len(self._steps)

    def add_step(self, record: Mapping[str, Any]) -> None:
        """Append a step record (serialized now, once)."""
        text = json.dumps(record, indent=2)
        # Nested two levels deep (document > steps > record): every line after the first moves right.
        self._steps.append(text.replace("\n", "\n" + _INDENT * 2))
        self.last_record = dict(record)
        self.header["num_steps"] = len(self._steps)

    def replace_last_step(self, record: Mapping[str, Any]) -> None:
        """Replace the last step record (e.g. with the reward a verifier gave after it was written)."""
        if self._steps:
            self._steps.pop()
        self.add_step(record)

    def render(self) -> str:
        """The whole document, exactly as ``json.dumps(document, indent=2)`` writes it."""
        doc = {**self.header, "steps": _STEPS_PLACEHOLDER, **self.extra}
        text = json.dumps(doc, indent=2)
        if self._steps:
            inner = ("[\n" + _INDENT * 2 + (",\n" + _INDENT * 2).join(self._steps) + "\n" + _INDENT + "]")
        else:
            inner = "[]"
        return text.replace(json.dumps(_STEPS_PLACEHOLDER), inner, 1)

    def document(self) -> dict[str, Any]:
        """The document as Python data (for tests and callers that want it; parses the rendered text)."""
        return json.loads(self.render())

    def write(self) -> pathlib.Path:
        """Replace the file with the current document: a temporary file in the same folder, then a rename
        (``atomic.write_bytes``: what a writer killed before its rename left there goes first)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return atomic.write_bytes(self.path, self.render().encode("ascii"))
