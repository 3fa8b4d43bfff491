"""The error an episode file records, with the chain of causes that led to it, and its one-line form.

The model imports nothing else of the library; every reader (adapters, the run's table, pages) shows an error
through :func:`describe_error`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# How deep a recorded chain of causes is read: a file may nest causes without end, a reader must not.
MAX_CAUSES = 16


@dataclasses.dataclass(frozen=True, slots=True)
class RecordedError:
    """The error an episode file records, with the chain of causes that led to it.

    ARES wraps what went wrong inside the agent in its own error ("RuntimeError: Code agent task failed"); the
    recorder keeps the chain (``cause``, each with its own ``cause``) and the traceback, so the root cause, the
    innermost error, can be named. Read from ``{type, message, cause?, traceback?}`` or a plain string.
    """

    type: str | None
    message: str | None
    cause: RecordedError | None = None
    traceback: str | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def from_json(cls, value: Any, _depth: int = 0) -> RecordedError | None:
        """The record a file holds (a dict or a string), or None when it records no error; never raises."""
        if isinstance(value, Mapping):
            kind, message = value.get("type"), value.get("message")
            cause = cls.from_json(value.get("cause"), _depth + 1) if _depth < MAX_CAUSES else None
            trace = value.get("traceback")
            found = cls(type=str(kind) if kind else None, message=str(message) if message else None, cause=cause,
                        traceback=trace if isinstance(trace, str) and trace else None)
            return found if found.type or found.message or found.cause else None
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value):
            return cls(type=None, message=str(value))
        return None

    def chain(self) -> list[RecordedError]:
        """This error and its causes, outermost first."""
        found: list[RecordedError] = []
        current: RecordedError | None = self
        while current is not None:
            found.append(current)
            current = current.cause
        return found

    @property
    def root(self) -> RecordedError:
        """The innermost error of the chain: what went wrong before every wrapper."""
        return self.chain()[-1]

    def one_line(self) -> str:
        """``Type: message`` of this error alone."""
        return ": ".join(p for p in (self.type, self.message) if p)

    def __str__(self) -> str:
        """The error in one line, naming the root cause when a wrapper hides it."""
        outer, root = self.one_line(), self.root.one_line()
        if self.cause is None or not root or root == outer:
            return outer
        return f"{outer or '(no message)'} (root cause: {root})"


def describe_error(err: Any) -> str | None:
    """An episode's recorded error (a string, or a dict with type, message and causes) in one line, root cause
    included when a wrapper hides it."""
    found = RecordedError.from_json(err)
    return str(found) or None if found is not None else None
