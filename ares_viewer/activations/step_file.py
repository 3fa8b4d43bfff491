"""One ``step_NNNN.pt`` of a capture, read lazily: its hook names and shapes first, an array when a view asks.

Every file is first checked by the restricted reader (``ptfile``): its pickle may name only tensors and dicts,
and its storages must fit in the file. The data are then read by ``torch.load(weights_only=True, mmap=True)``
when torch is installed (``reader="torch"``), else by the restricted reader itself (``reader="numpy"``);
``reader="auto"`` picks torch when it can be imported. Both give the same numpy arrays (bfloat16 as float32).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from ares_viewer.activations import ptfile

READERS = ("auto", "torch", "numpy")
_T = TypeVar("_T")


def torch_available() -> bool:
    """Whether torch can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def resolve_reader(reader: str) -> str:
    """``"torch"`` or ``"numpy"``: the reader ``reader`` names (``"auto"``: torch when installed)."""
    if reader not in READERS:
        raise ValueError(f"reader must be one of {READERS}, not {reader!r}")
    if reader == "auto":
        return "torch" if torch_available() else "numpy"
    return reader


@dataclasses.dataclass(frozen=True, slots=True)
class HookInfo:
    """What a hook's tensor is, known from the pickle alone."""

    name: str
    shape: tuple[int, ...]
    dtype: str


class StepFile:
    """A step's ``.pt`` file; nothing is read until asked, and each part is read once.

    Args:
        path: the file.
        reader: ``"auto"``, ``"torch"`` or ``"numpy"`` (see the module's docstring).
    """

    def __init__(self, path: str | os.PathLike, reader: str = "auto") -> None:
        self.path = os.fspath(path)
        self.reader = resolve_reader(reader)
        self._lock = threading.Lock()
        self._file: ptfile.PtFile | None = None
        self._torch: dict[str, Any] | None = None

    def _checked(self) -> ptfile.PtFile:
        with self._lock:
            if self._file is None:
                self._file = ptfile.PtFile(self.path)
            return self._file

    def hooks(self) -> dict[str, HookInfo]:
        """Every tensor of the file by name, with its shape and dtype (reads the pickle only)."""
        return {name: HookInfo(name, ref.shape, ref.dtype) for name, ref in self._checked().tensors().items()}

    def array(self, name: str) -> np.ndarray:
        """One hook's tensor as a numpy array.

        Raises:
            KeyError: the file has no such hook.
            ptfile.PtFileError: the file is damaged or unsafe.
        """
        return self.arrays([name])[name]

    def arrays(self, names: list[str]) -> dict[str, np.ndarray]:
        """Several hooks at once: a storage they share (q, k and v of a fused projection) is read once.

        Nothing read is kept once returned (memory stays bounded by what the caller holds), except torch's
        memory map of the file. A view over many hooks should use :meth:`each` instead: one array at a time.
        """
        return dict(self.each(names))

    def each(self, names: list[str]) -> Iterator[tuple[str, np.ndarray]]:
        """Hooks one at a time, ``(name, array)``: only the array being looked at is held (and the storages read
        so far, which the file's bounds keep near its size).

        Raises:
            KeyError: the file has no such hook.
            ptfile.PtFileError: the file is damaged or unsafe (torch's own errors on it included).
        """
        checked = self._checked()
        refs = checked.tensors()
        missing = [name for name in names if name not in refs]
        if missing:
            raise KeyError(f"{self.path} has no hook {missing[0]!r}")
        if self.reader == "torch":
            loaded = self._torch_tensors()
            for name in names:
                yield name, _guarded(self.path, functools.partial(_tensor_array, loaded, name))
            return
        storages: dict[str, np.ndarray] = {}
        for name in names:
            yield name, checked.read(refs[name], storages)

    def _torch_tensors(self) -> dict[str, Any]:
        import torch  # optional: the restricted reader covers machines without it

        with self._lock:
            if self._torch is None:
                loaded = _guarded(self.path, lambda: _torch_load(torch, self.path))
                self._torch = ptfile.leaves(loaded, torch.Tensor)
            return self._torch


def _torch_load(torch: Any, path: str) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # a file torch cannot map (an old layout): read it whole
        return torch.load(path, map_location="cpu", weights_only=True)


def _guarded(path: str, read: Callable[[], _T]) -> _T:
    """``read()``, with whatever torch raises on a bad file (it has passed the restricted checks) as the file's
    ``PtFileError``."""
    try:
        return read()
    except MemoryError as exc:
        raise ptfile.PtFileError(f"{path}: torch ran out of memory reading it") from exc
    except Exception as exc:
        raise ptfile.PtFileError(f"{path}: torch cannot read it ({type(exc).__name__}: {exc})") from exc


def _tensor_array(tensors: Any, name: str) -> np.ndarray:
    """One tensor of a loaded file as a numpy array."""
    return _to_numpy(tensors[name])


def _to_numpy(tensor: Any) -> np.ndarray:
    import torch

    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return np.array(tensor.numpy(), copy=True)
