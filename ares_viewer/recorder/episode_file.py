"""One episode's ``{episode_id}.json``, in the layout of ARES's ``JsonTrajectoryCollector``, rewritten atomically.

The file is what ``json.dump(doc, f, indent=2)`` writes for the collector's document (key order
``episode_id, task_name, start_time, end_time, total_reward, num_steps, truncated, steps``; ``NaN`` and
``Infinity`` allowed; non-ASCII escaped), followed by the recorder's extra keys, which other readers ignore.
It is rewritten after every step through a temporary file and a rename, so a reader (or a crash) only ever
sees a whole document. Each step record is serialized once, when it is added: rewriting costs a copy of the
text, not a new serialization of every observation. Pure Python: no ARES, no Docker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import traceback
from collections.abc import Mapping
from typing import Any

from ares_viewer.base import atomic

# The collector's top-level keys, in its order.
HEADER_KEYS = ("episode_id", "task_name", "start_time", "end_time", "total_reward", "num_steps", "truncated")
# Stand-in for the steps array while the rest of the document is serialized (never a real key's value).
_STEPS_PLACEHOLDER = "\x00ares-viewer-steps\x00"
_INDENT = "  "

# end_status values (the ares adapter maps them onto outcomes; docs/recording.md says when each is written).
RUNNING = "running"
COMPLETED = "completed"
TRUNCATED = "truncated"
ERRORED = "errored"
CANCELLED = "cancelled"
INTERRUPTED = "interrupted"
ABANDONED = "abandoned"  # reset() while an episode was still running
ABORTED = "aborted"  # the recorder was closed while an episode was still running
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
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc) or repr(exc)}
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None:
        error["cause"] = {"type": type(cause).__name__, "message": str(cause) or repr(cause)}
    error["traceback"] = "".join(traceback.format_exception(exc))[-8000:]
    return error


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
