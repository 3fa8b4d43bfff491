"""``torch.save`` files of numpy arrays, written without torch (``hostile_pt``'s opcodes with real data), so the
library's views are tested on exact, known tensors on a machine with no torch."""

from __future__ import annotations

import json
import pathlib

import hostile_pt
import numpy as np


def save(path: pathlib.Path, arrays: dict[str, np.ndarray]) -> pathlib.Path:
    """What ``torch.save({name: torch.from_numpy(array)})`` writes, for float32 arrays (C order)."""
    entries, storages = {}, {}
    for i, (name, array) in enumerate(arrays.items()):
        data = np.ascontiguousarray(array, dtype="<f4")
        strides = tuple(s // 4 for s in data.strides)
        entries[name] = hostile_pt.tensor(str(i), max(data.size, 1), data.shape, strides)
        storages[str(i)] = data.tobytes() or b"\0\0\0\0"
    return hostile_pt.write(path, hostile_pt.pickle_of(entries), storages)


def capture(folder: pathlib.Path, steps: list[dict[str, np.ndarray]], step_metadata: list[dict] | None = None,
            **top) -> pathlib.Path:
    """A capture folder: ``metadata.json`` and one ``step_NNNN.pt`` per entry of ``steps``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, arrays in enumerate(steps):
        save(folder / f"step_{i:04d}.pt", arrays)
    meta = {"model_name": "numpy-tiny", "num_steps": len(steps),
            "step_metadata": step_metadata or [{} for _ in steps], **top}
    (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder
