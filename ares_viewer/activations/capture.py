"""A folder of activations captured over one episode: what ARES's ``TrajectoryActivations.save(path)`` writes.

    <folder>/metadata.json     {"model_name", "num_steps", "step_metadata": [{...}, ...]}
    <folder>/step_0000.pt      torch.save of {hook name: tensor}, one file per model call
    <folder>/step_0001.pt      ...

Capture step ``i`` is the ``i``-th model call of the episode, the one that produced the action of trajectory
step ``i + 1`` (see ``linking``). ``step_metadata[i]`` holds whatever the caller recorded for that call; ARES
records nothing of its own there. ``tokens`` (when present) is the token strings of the sequence the model ran on
from its first position; the prompt's ids and their clipping are read by ``prompt``.
The recorder (``ares_viewer.recorder.activations``) writes it with ``token_ids``, ``prompt_length`` and ``logprobs``
(the response's tokens: ``tokens.capture_frame``).

Opening a capture reads ``metadata.json`` and lists the step files; a step's file is read when a view asks for
it (its hook names and shapes from the pickle alone, an array when one is wanted), and at most
``MAX_OPEN_STEPS`` step files stay open per capture.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ares_viewer.activations import ptfile, step_file
from ares_viewer.base import cache, jsondecode
from ares_viewer.runs import companions

METADATA = companions.CAPTURE_METADATA
MAX_METADATA_BYTES = 64 * 1024 * 1024
MAX_OPEN_STEPS = 16
_STEP_FILE = re.compile(r"^step_(\d{4,})\.pt$")


class CaptureError(ValueError):
    """A capture folder that cannot be read; the message names the file and the reason."""


Error = (CaptureError, ptfile.PtFileError)
"""Every error a capture raises for a bad file (catch these to show a per-file message)."""


def is_capture(folder: str | os.PathLike) -> bool:
    """Whether a folder looks like a saved ``TrajectoryActivations`` (a ``metadata.json`` beside it is enough)."""
    return os.path.isfile(os.path.join(folder, METADATA))


class Capture:
    """The activations of one episode, read lazily.

    Args:
        folder: the folder ``TrajectoryActivations.save`` wrote.
        reader: how tensors are read: ``"auto"`` (torch when installed), ``"torch"`` or ``"numpy"``
            (``step_file``); every file is checked by the restricted reader first either way.

    Raises:
        CaptureError: no readable ``metadata.json``.
    """

    def __init__(self, folder: str | os.PathLike, reader: str = "auto") -> None:
        self.folder = os.fspath(folder)
        self.reader = step_file.resolve_reader(reader)
        meta_path = os.path.join(self.folder, METADATA)
        try:
            with open(meta_path, "rb") as handle:
                data = handle.read(MAX_METADATA_BYTES + 1)
            if len(data) > MAX_METADATA_BYTES:
                raise CaptureError(f"{meta_path}: larger than {MAX_METADATA_BYTES:,} bytes")
            meta = jsondecode.decode(data).value  # nested too deep, NaN, bad UTF-8: a DecodeError, never a crash
        except FileNotFoundError as exc:
            raise CaptureError(f"{self.folder}: no {METADATA}; not a saved TrajectoryActivations") from exc
        except (OSError, ValueError) as exc:
            raise CaptureError(f"{meta_path}: cannot be read as JSON ({exc})") from exc
        if not isinstance(meta, Mapping):
            raise CaptureError(f"{meta_path}: holds a {type(meta).__name__}, not an object")
        self.metadata: Mapping[str, Any] = meta
        name = meta.get("model_name")
        self.model_name = str(name)[:200] if isinstance(name, str | int | float) and name else "unknown"
        step_meta = meta.get("step_metadata")
        self.step_metadata: list[Mapping[str, Any]] = [
            m if isinstance(m, Mapping) else {} for m in (step_meta if isinstance(step_meta, list) else [])]
        self.warnings: list[str] = []
        files: dict[int, str] = {}
        try:
            names = os.listdir(self.folder)
        except OSError as exc:
            raise CaptureError(f"{self.folder}: cannot be listed ({exc})") from exc
        for name in names:
            match = _STEP_FILE.match(name)
            if match:
                files[int(match.group(1))] = os.path.join(self.folder, name)
        self._files = dict(sorted(files.items()))
        declared = meta.get("num_steps")
        if isinstance(declared, int) and declared != len(self._files):
            self.warnings.append(f"{meta_path} says {declared} steps; the folder holds {len(self._files)} step files")
        missing = list(itertools.islice((i for i in range(max(self._files, default=-1) + 1) if i not in self._files),
                                        10))
        if missing:
            self.warnings.append(f"step files missing for capture steps {missing[:10]}")
        self._open: cache.BoundedCache[step_file.StepFile] = cache.BoundedCache(maxsize=MAX_OPEN_STEPS)

    # ----- steps --------------------------------------------------------------------------------

    @property
    def steps(self) -> list[int]:
        """The capture steps that have a file, in order."""
        return list(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def file(self, step: int) -> step_file.StepFile:
        """Step ``step``'s file (opened on first use; nothing is read yet)."""
        path = self._files.get(step)
        if path is None:
            raise IndexError(f"{self.folder} has no step_{step:04d}.pt (capture steps: {_ranges(self.steps)})")
        return self._open.get_or_compute(step, lambda: step_file.StepFile(path, self.reader))

    def path(self, step: int) -> str:
        """Step ``step``'s file."""
        return self._files.get(step, os.path.join(self.folder, f"step_{step:04d}.pt"))

    def hooks(self, step: int) -> dict[str, step_file.HookInfo]:
        """The hooks recorded at a step, with shapes and dtypes (reads that file's pickle only)."""
        return self.file(step).hooks()

    def array(self, step: int, hook: str) -> np.ndarray:
        """One hook's activation at one step, as numpy (bfloat16 as float32)."""
        return self.file(step).array(hook)

    def across(self, hook: str) -> list[np.ndarray | None]:
        """One hook at every step (None where a step did not record it)."""
        return [self.array(i, hook) if hook in self.hooks(i) else None for i in self.steps]

    # ----- what the caller recorded -------------------------------------------------------------

    def meta(self, step: int) -> Mapping[str, Any]:
        """What the caller recorded for a step (empty when nothing)."""
        return self.step_metadata[step] if 0 <= step < len(self.step_metadata) else {}

    def tokens(self, step: int) -> list[str] | None:
        """The token strings of the sequence the model ran on at a step, from its first position, when recorded."""
        return _strings(self.meta(step).get("tokens"))

    def __repr__(self) -> str:
        return f"Capture({self.folder!r}, model={self.model_name!r}, steps={len(self)}, reader={self.reader!r})"


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _ranges(steps: Sequence[int]) -> str:
    return f"{steps[0]}..{steps[-1]}" if steps else "none"

