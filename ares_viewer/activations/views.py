"""What a reviewer looks at in a capture, as numpy arrays and pandas frames (figures: ``figures``).

Views speak in trajectory steps, like the rest of the viewer: trajectory step ``k`` (``k >= 1``) is the action
the model produced at capture step ``k - 1``. Hook names are TransformerLens's (``blocks.3.attn.hook_pattern``,
``blocks.3.hook_resid_post``, ``hook_embed``, ``ln_final.hook_scale``); a hook's "layer" is its block number,
``embed`` for hooks before the blocks and ``final`` for those after.

Statistics:
- a hook's **norm** at a step: the L2 norm over its last axis, averaged over every other axis (batch,
  positions, heads), so norms compare across hooks of different shapes;
- a head's **attention entropy**: the entropy (nats) of its attention pattern at one query position (the last
  one by default: the position whose next token the model was choosing). With ARES's default KV cache a
  step's pattern holds only that query;
- a step's **vector** for a hook: the activation at the last position (batch 0), the one that produced the
  next token; aligned steps of two episodes compare by the cosine of their vectors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ares_viewer.activations import capture as capture_mod
from ares_viewer.activations import hooks, prompt
from ares_viewer.analysis import align

if TYPE_CHECKING:
    from ares_viewer.activations import linking

_BLOCK = re.compile(r"^blocks\.(\d+)\.(.+)$")
PATTERN = "attn.hook_pattern"
RESIDUAL = "hook_resid_post"


def split_hook(name: str) -> tuple[str, str]:
    """``(layer, hook)`` of a hook name: ``("3", "attn.hook_pattern")``, ``("embed", "hook_embed")``,
    ``("final", "ln_final.hook_scale")``."""
    match = _BLOCK.match(name)
    if match:
        return match.group(1), match.group(2)
    return ("final" if name.startswith(("ln_final", "unembed")) else "embed"), name


def _layer_order(layer: str) -> tuple[int, int]:
    if layer == "embed":
        return (0, 0)
    if layer == "final":
        return (2, 0)
    return (1, int(layer))


def is_pattern(name: str, shape: tuple[int, ...]) -> bool:
    """Whether a hook holds attention patterns a view can read: ``[batch, head, query, key]`` with at least one
    batch, head and query (a file may record any shape)."""
    return split_hook(name)[1] == PATTERN and len(shape) == 4 and all(shape[:3])


def _capture_step(capture: capture_mod.Capture, step: int) -> int:
    """Capture step of trajectory step ``step`` (``step - 1``), checked."""
    if step - 1 not in capture.steps:
        raise IndexError(f"{capture.folder} has no activations for step {step} (model call {step - 1}); "
                         f"steps with activations: {[i + 1 for i in capture.steps]}")
    return step - 1


def norm(array: np.ndarray) -> float:
    """L2 norm over the last axis, averaged over the others (NaN for an empty array)."""
    if array.size == 0:
        return float("nan")
    if array.ndim == 0:
        return float(abs(array))
    values = np.asarray(array, dtype=np.float64).reshape(-1, array.shape[-1])
    return float(np.linalg.norm(values, axis=-1).mean())


def entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy (nats) along the last axis of probability rows (zeros contribute nothing)."""
    p = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(p), 0.0)
    return terms.sum(axis=-1)


# ----- one step ---------------------------------------------------------------------------------


def step_summary(capture: capture_mod.Capture, step: int) -> pd.DataFrame:
    """Layers x hooks at trajectory step ``step``: each hook's norm (rows ``embed``, ``0``..``n-1``, ``final``;
    columns in forward order, ``hooks.suffix_order``)."""
    i = _capture_step(capture, step)
    # One hook at a time: only the array being measured is held, however many hooks the file has.
    cells = {split_hook(name): norm(array) for name, array in capture.file(i).each(list(capture.hooks(i)))}
    frame = pd.Series(cells, dtype=float).unstack() if cells else pd.DataFrame()
    if not frame.empty:
        frame = frame.loc[sorted(frame.index, key=_layer_order), hooks.suffix_order(cells_order(cells))]
        frame.index.name, frame.columns.name = "layer", "hook"
    return frame


def cells_order(cells: dict[tuple[str, str], float]) -> list[str]:
    """The hook names (without ``blocks.N.``) of ``(layer, hook)`` cells, in the order first met."""
    return list(dict.fromkeys(hook for _, hook in cells))


def attention_entropy(capture: capture_mod.Capture, step: int, query: int = -1) -> pd.DataFrame:
    """Layers x heads: each head's attention entropy (nats) at trajectory step ``step``, query position ``query``.

    Also ``frame.attrs["max_entropy"]``: the entropy of uniform attention over the keys (log of their count).
    """
    i = _capture_step(capture, step)
    rows: dict[int, np.ndarray] = {}
    keys = 0
    for name, info in capture.hooks(i).items():
        if is_pattern(name, info.shape):  # [batch, head, query, key]
            pattern = capture.array(i, name)
            rows[int(split_hook(name)[0])] = entropy(pattern[0, :, query, :])
            keys = pattern.shape[-1]
    frame = pd.DataFrame.from_dict(rows, orient="index").sort_index() if rows else pd.DataFrame()
    frame.index.name, frame.columns.name = "layer", "head"
    frame.attrs["max_entropy"] = float(np.log(keys)) if keys else float("nan")
    return frame


def head_attention(capture: capture_mod.Capture, step: int, layer: int, head: int, query: int = -1
                   ) -> pd.DataFrame:
    """Where one head looked at trajectory step ``step``: one row per key position with its weight, and the
    token at that position when the capture recorded it: decoded, recorded text or id (else None;
    ``prompt.sequence_labels``)."""
    i = _capture_step(capture, step)
    name = f"blocks.{layer}.{PATTERN}"
    if name not in capture.hooks(i):
        raise KeyError(f"step {step} recorded no {name}")
    pattern = capture.array(i, name)[0, head, query, :]
    tokens = prompt.sequence_labels(capture, i)
    positions = np.arange(pattern.shape[0])
    # Tokens run from the sequence's first position. The last forward pass may also attend to tokens the model
    # generated before it (not recorded): those positions have no label.
    labels = [tokens[p] if tokens is not None and p < len(tokens) else None for p in positions]
    return pd.DataFrame({"position": positions, "token": labels, "weight": pattern.astype(np.float64)})


# ----- one hook across the trajectory -------------------------------------------------------------


def across_steps(capture: capture_mod.Capture, hook: str = RESIDUAL, *, position: int | None = -1) -> pd.DataFrame:
    """Steps x layers for one hook (``hook`` without its ``blocks.N.`` prefix): the norm of its activation at a
    position (the last by default; None: averaged over positions) at every step that recorded it.

    The index is the trajectory step (capture step + 1); a layer a step did not record is NaN. A step whose file
    cannot be read has no row: ``frame.attrs["errors"]`` maps its file to the reason, and the others still show.
    """
    rows: dict[int, dict[str, float]] = {}
    errors: dict[str, str] = {}
    for i in capture.steps:
        row: dict[str, float] = {}
        try:
            for name, info in capture.hooks(i).items():
                layer, suffix = split_hook(name)
                if suffix != hook:
                    continue
                array = capture.array(i, name)
                if position is not None and len(info.shape) >= 3 and info.shape[1]:  # [batch, pos, ...]
                    array = array[:, position]
                row[layer] = norm(array)
        except capture_mod.Error as exc:
            errors[capture.path(i)] = str(exc)
            continue
        rows[i + 1] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    if not frame.empty:
        frame = frame[sorted(frame.columns, key=_layer_order)]
    frame.index.name, frame.columns.name = "step", "layer"
    frame.attrs["errors"] = errors
    return frame


def step_vector(capture: capture_mod.Capture, step: int, name: str) -> np.ndarray:
    """A full hook name's activation at the last position of batch 0, flattened (the step's vector)."""
    array = capture.array(_capture_step(capture, step), name)
    if array.ndim >= 3 and array.shape[0] and array.shape[1]:
        array = array[0, -1]
    return np.asarray(array, dtype=np.float64).ravel()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors (NaN when either is zero or their sizes differ)."""
    if a.shape != b.shape:
        return float("nan")
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / denominator) if denominator else float("nan")


# ----- two episodes ----------------------------------------------------------------------------------


def compare_aligned(a: linking.Linked, b: linking.Linked, hook: str = RESIDUAL,
                    pairs: Sequence[align.Pair] | None = None) -> pd.DataFrame:
    """The same hook in two episodes, step by aligned step (``align.align_episodes`` unless ``pairs`` is given).

    One row per aligned pair of steps that both have activations, and per layer: ``step_a``, ``step_b``,
    ``similarity`` (of their commands, from the alignment), ``layer``, ``cosine`` (of the two step vectors),
    ``norm_a``, ``norm_b``. A step facing a gap has no partner and no row; nor has a pair with a file that cannot
    be read (``frame.attrs["errors"]``: file -> reason).
    """
    pairs = align.align_episodes(a.episode, b.episode) if pairs is None else pairs
    rows = []
    errors: dict[str, str] = {}
    for pair in pairs:
        if pair.a is None or pair.b is None:
            continue
        if a.capture_step(pair.a) is None or b.capture_step(pair.b) is None:
            continue
        try:
            rows.extend(_compare_pair(a.capture, b.capture, pair, hook))
        except capture_mod.Error as exc:
            errors[str(exc).split(": ", 1)[0]] = str(exc)
    frame = pd.DataFrame(rows, columns=["step_a", "step_b", "similarity", "layer", "cosine", "norm_a", "norm_b"])
    frame.attrs["errors"] = errors
    return frame


def _compare_pair(a: capture_mod.Capture, b: capture_mod.Capture, pair: align.Pair, hook: str) -> list[dict]:
    rows: list[dict] = []
    if pair.a is None or pair.b is None:  # a gap: no partner (the caller skips these)
        return rows
    hooks_a, hooks_b = a.hooks(pair.a - 1), b.hooks(pair.b - 1)
    for name in hooks_a:
        layer, suffix = split_hook(name)
        if suffix != hook or name not in hooks_b:
            continue
        va, vb = step_vector(a, pair.a, name), step_vector(b, pair.b, name)
        rows.append({"step_a": pair.a, "step_b": pair.b, "similarity": pair.similarity, "layer": layer,
                     "cosine": cosine(va, vb), "norm_a": float(np.linalg.norm(va)),
                     "norm_b": float(np.linalg.norm(vb))})
    return rows
