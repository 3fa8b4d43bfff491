"""The verifier's run as an episode file records it under ``verifier``: one type for the writers and the reader.

The recorder and counterfactuals write it (``to_json``); the ending reads it back (``from_json``). Files are
untrusted: ``from_json`` keeps what has the right type and drops the rest, so a record with a bad field still
reads. The keys written are the ones files have always held: ``step_index``, ``commands`` (each ``step_index``,
``command``, ``returncode``, ``output``, ``output_chars``/``output_cut`` when cut, ``duration_s``, ``error``),
``output``, ``returncode``, ``reward_file`` (``{path, content}``), ``reward``, ``error`` (``{type, message, cause,
traceback}``), ``snapshot``, ``changed_paths``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ares_viewer.model.errors import describe_error
from ares_viewer.model.row import EpisodeRow


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_number(value: Any) -> float | None:
    """A reward or duration as the record holds it: a float when ``value`` is a number (not a bool), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# The lines a test runner prints for each failing test: pytest's short summary (``FAILED path::test - message``,
# ``ERROR ...``) and verbose lines (``path::test FAILED``), unittest's ``FAIL: test (module.Class)``, and a test
# script's own ``FAILED test_name: message`` (a harbor task's ``tests/test.sh`` that checks by hand).
_FAILING = re.compile(r"^(?:(?:FAILED|ERROR) (\S+::\S+)|(\S+::\S+) (?:FAILED|ERROR)\b"
                      r"|(?:FAIL|ERROR): (\w+ \([\w.]+\))|FAILED (test\w*):)", re.M)
# How a test the verifier's output names as failing failed, in the words of the ending and the run's ``why``.
FAILED = "failed in the verifier's run"
# Where the failing tests were read from when the output came with the episode (no file of its own).
OUTPUT_SOURCE = "the verifier's test output"


def failing_tests(output: str | None) -> tuple[str, ...]:
    """The tests a test runner's output names as failing (pytest or unittest), in order, each once."""
    found = [next(g for g in m.groups() if g) for m in _FAILING.finditer(output or "")]
    return tuple(dict.fromkeys(found))


def some(names: tuple[str, ...], n: int = 3) -> str:
    """The first ``n`` of ``names`` and how many more."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _output_json(output: str | None, output_chars: int | None) -> dict[str, Any]:
    if output is None:
        return {}
    return (
        {"output": output}
        if output_chars is None
        else {"output": output, "output_chars": output_chars, "output_cut": True}
    )


@dataclasses.dataclass(frozen=True, slots=True)
class VerifierCommand:
    """One command the verifier ran, with what it printed.

    Attributes:
        command: the shell command.
        returncode: its exit code (None when it raised).
        output: what it printed ("" when nothing was recorded).
        step_index: the step it ran after.
        duration_s: how long it took.
        output_chars: the output's full length when ``output`` was cut.
        error: what went wrong running it, in one line.
    """

    command: str
    returncode: int | None = None
    output: str = ""
    step_index: int | None = None
    duration_s: float | None = None
    output_chars: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "step_index": self.step_index,
            "command": self.command,
            "returncode": self.returncode,
            **_output_json(self.output, self.output_chars),
        }
        if self.duration_s is not None:
            doc["duration_s"] = self.duration_s
        if self.error is not None:
            doc["error"] = self.error
        return doc

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> VerifierCommand:
        error = raw.get("error")
        return cls(
            command=str(raw.get("command", "")),
            returncode=_int(raw.get("returncode")),
            output=_text(raw.get("output")) or "",
            step_index=_int(raw.get("step_index")),
            duration_s=as_number(raw.get("duration_s")),
            output_chars=_int(raw.get("output_chars")),
            error=describe_error(error) if error else None,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class VerifierRecord:
    """The verifier's run: its test script's output and exit code, the reward file, the reward, any error.

    Attributes:
        step_index: the step it ran after (the agent's last).
        commands: every command it ran.
        output: its test script's output.
        returncode: its test script's exit code.
        reward: the reward it gave.
        reward_file: the reward file's content.
        reward_path: where the reward file was read from.
        error_record: the failure, as the ``error`` key holds it (``type``, ``message``, ``cause``, ``traceback``);
            ``error`` is it in one line.
        output_chars: the output's full length when ``output`` was cut.
        snapshot: the folder of the container's snapshot after it, relative to the run.
        changed_paths: the paths it changed against the agent's last snapshot.
        output_path: the file ``output`` was read from, when it came from a file beside the episode (a harbor
            trial's ``verifier/test-stdout.txt``) rather than from the episode's own record.
    """

    step_index: int | None = None
    commands: tuple[VerifierCommand, ...] = ()
    output: str | None = None
    returncode: int | None = None
    reward: float | None = None
    reward_file: str | None = None
    reward_path: str | None = None
    error_record: Mapping[str, Any] | None = None
    output_chars: int | None = None
    snapshot: str | None = None
    changed_paths: tuple[str, ...] | None = None
    output_path: str | None = None

    @property
    def error(self) -> str | None:
        """The failure in one line (``type: message``), or None."""
        return describe_error(self.error_record) if self.error_record else None

    def to_json(self) -> dict[str, Any]:
        """The record as an episode file's ``verifier`` key holds it."""
        doc: dict[str, Any] = {
            "step_index": self.step_index,
            "commands": [c.to_json() for c in self.commands],
            "returncode": self.returncode,
            **_output_json(self.output, self.output_chars),
        }
        if self.reward_file is not None:
            doc["reward_file"] = {"path": self.reward_path, "content": self.reward_file}
        doc["reward"] = self.reward
        if self.error_record is not None:
            doc["error"] = dict(self.error_record)
        if self.snapshot is not None:
            doc["snapshot"] = self.snapshot
        if self.changed_paths is not None:
            doc["changed_paths"] = list(self.changed_paths)
        if self.output_path is not None:
            doc["output_path"] = self.output_path
        return doc

    @property
    def source(self) -> str:
        """Where ``output`` was read from, in words: its file, or the verifier's test output the episode records."""
        return self.output_path or OUTPUT_SOURCE

    def says(self) -> str | None:
        """The failing tests its output names, as the run's ``why`` and failure reasons say them after "completed,
        not solved: " (the first three, with their source); None when it names none."""
        failing = failing_tests(self.output)
        return f"{FAILED}: {some(failing)} (from {self.source})" if failing else None

    @classmethod
    def from_json(cls, raw: Any) -> VerifierRecord | None:
        """The record in an episode file's ``verifier`` key; None when it is not an object. A field of the wrong
        type reads as missing."""
        if not isinstance(raw, Mapping):
            return None
        commands = raw.get("commands")
        reward_file = raw.get("reward_file")
        error = raw.get("error")
        paths = raw.get("changed_paths")
        return cls(
            step_index=_int(raw.get("step_index")),
            commands=tuple(VerifierCommand.from_json(c) for c in commands if isinstance(c, Mapping))
            if isinstance(commands, list)
            else (),
            output=_text(raw.get("output")),
            returncode=_int(raw.get("returncode")),
            reward=as_number(raw.get("reward")),
            reward_file=_text(reward_file.get("content")) if isinstance(reward_file, Mapping) else _text(reward_file),
            reward_path=_text(reward_file.get("path")) if isinstance(reward_file, Mapping) else None,
            error_record=dict(error) if isinstance(error, Mapping) else ({"message": str(error)} if error else None),
            output_chars=_int(raw.get("output_chars")),
            snapshot=_text(raw.get("snapshot")),
            changed_paths=tuple(p for p in paths if isinstance(p, str)) if isinstance(paths, list) else None,
            output_path=_text(raw.get("output_path")),
        )



def explain(row: EpisodeRow, verifier: VerifierRecord | None) -> EpisodeRow:
    """An episode's row with its ``explained`` key: the failing tests the verifier's output names
    (``VerifierRecord.says``); no key when it names none (``Episode.summary`` and the adapters' ``summarize``)."""
    said = verifier.says() if verifier is not None else None
    if said:
        row["explained"] = said
    return row
