"""How similar two steps' activations are, against a baseline that says whether a cosine is high.

A step's vector for a hook is ``views.step_vector``'s (the activation at the last position, batch 0). Two steps
compare by the cosine of their vectors, layer by layer. The **baseline** of a comparison is the cosine of the step
pairs it does *not* compare: for two episodes, every pair of steps (one of each) that the alignment did not pair;
for two steps of one episode, every other pair of distinct steps of that episode. Per layer: their ``mean``,
``min``, ``max`` and ``pairs`` (how many); a compared pair's cosine well above the baseline's range is similar
beyond what any two steps of these episodes share (the residual stream's common direction makes every cosine
high in some layers).

Each step's vectors are read once (one hook array at a time); at most ``MAX_STEPS`` steps of an episode enter
a baseline (the first ones), so a long episode costs a bounded read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ares_viewer.activations import capture as capture_mod
from ares_viewer.activations import views
from ares_viewer.analysis import align

if TYPE_CHECKING:
    from ares_viewer.activations import linking

MAX_STEPS = 200
BASELINE_COLUMNS = ["layer", "mean", "min", "max", "pairs"]


def vectors(linked: linking.Linked, hook: str, steps: Iterable[int] | None = None
            ) -> tuple[dict[int, dict[str, np.ndarray]], dict[str, str]]:
    """``{step: {layer: vector}}`` of one hook (without its ``blocks.N.``) at each step (the linked steps, at most
    ``MAX_STEPS``, by default), and the files that could not be read (file -> reason)."""
    capture = linked.capture
    wanted = list(steps if steps is not None else linked.steps())[:MAX_STEPS]
    out: dict[int, dict[str, np.ndarray]] = {}
    errors: dict[str, str] = {}
    for step in wanted:
        i = step - 1
        try:
            names = [n for n in capture.hooks(i) if views.split_hook(n)[1] == hook]
            out[step] = {views.split_hook(name)[0]: _last(array) for name, array in capture.file(i).each(names)}
        except capture_mod.Error as exc:
            errors[capture.path(i)] = str(exc)
    return out, errors


def _last(array: np.ndarray) -> np.ndarray:
    if array.ndim >= 3 and array.shape[0] and array.shape[1]:
        array = array[0, -1]
    return np.asarray(array, dtype=np.float64).ravel()


def _unit(rows: Sequence[np.ndarray]) -> np.ndarray | None:
    """Rows stacked and scaled to length 1 (a zero row: NaN); None when their sizes differ."""
    if not rows or len({r.shape for r in rows}) != 1:
        return None
    stacked = np.stack(rows)
    norms = np.linalg.norm(stacked, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norms > 0, stacked / np.where(norms > 0, norms, 1.0), np.nan)


def cosines(a: dict[int, dict[str, np.ndarray]], b: dict[int, dict[str, np.ndarray]], layer: str
            ) -> pd.DataFrame:
    """Steps of ``a`` x steps of ``b``: the cosine of their vectors at one layer (NaN where either lacks it)."""
    steps_a = [s for s in a if layer in a[s]]
    steps_b = [s for s in b if layer in b[s]]
    ua, ub = _unit([a[s][layer] for s in steps_a]), _unit([b[s][layer] for s in steps_b])
    if ua is None or ub is None:
        return pd.DataFrame(index=pd.Index(steps_a, name="step_a"), columns=pd.Index(steps_b, name="step_b"),
                            dtype=float)
    return pd.DataFrame(ua @ ub.T, index=pd.Index(steps_a, name="step_a"), columns=pd.Index(steps_b, name="step_b"))


def _summary(layer: str, values: Iterable[float]) -> dict:
    kept = np.array([v for v in values if not np.isnan(v)], dtype=np.float64)
    if not kept.size:
        return {"layer": layer, "mean": float("nan"), "min": float("nan"), "max": float("nan"), "pairs": 0}
    return {"layer": layer, "mean": float(kept.mean()), "min": float(kept.min()), "max": float(kept.max()),
            "pairs": int(kept.size)}


def _layers(*groups: dict[int, dict[str, np.ndarray]]) -> list[str]:
    found = {layer for group in groups for per_step in group.values() for layer in per_step}
    return sorted(found, key=views._layer_order)


def baseline(a: linking.Linked, b: linking.Linked, hook: str = views.RESIDUAL,
             pairs: Sequence[align.Pair] | None = None) -> pd.DataFrame:
    """Per layer: the cosine of the step pairs of two episodes that the alignment did *not* pair (``mean``,
    ``min``, ``max``, ``pairs``); ``frame.attrs["errors"]``: files left out."""
    pairs = align.align_episodes(a.episode, b.episode) if pairs is None else pairs
    aligned = {(p.a, p.b) for p in pairs if p.a is not None and p.b is not None}
    va, errors_a = vectors(a, hook)
    vb, errors_b = vectors(b, hook)
    rows = []
    for layer in _layers(va, vb):
        table = cosines(va, vb, layer)
        rows.append(_summary(layer, (float(table.loc[sa, sb]) for sa in table.index for sb in table.columns
                                     if (sa, sb) not in aligned)))
    frame = pd.DataFrame(rows, columns=BASELINE_COLUMNS)
    frame.attrs["errors"] = {**errors_a, **errors_b}
    return frame


def compare_steps(linked: linking.Linked, step_a: int, step_b: int, hook: str = views.RESIDUAL
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two steps of one episode: per layer their ``cosine``, ``norm_a``, ``norm_b``; and the baseline, the cosine
    of every other pair of distinct steps of the episode (``mean``, ``min``, ``max``, ``pairs``).
    ``frame.attrs["errors"]`` (of the first frame): files left out."""
    found, errors = vectors(linked, hook)
    for step in (step_a, step_b):
        if step not in found and step in linked.steps():
            found.update(vectors(linked, hook, [step])[0])
    rows, base = [], []
    for layer in _layers(found):
        table = cosines(found, found, layer)
        if step_a in table.index and step_b in table.columns:
            va, vb = found[step_a][layer], found[step_b][layer]
            rows.append({"step_a": step_a, "step_b": step_b, "layer": layer, "cosine": float(table.loc[step_a, step_b]),
                         "norm_a": float(np.linalg.norm(va)), "norm_b": float(np.linalg.norm(vb))})
        others = (float(table.loc[s, t]) for s, t in itertools.combinations(table.index, 2)
                  if {s, t} != {step_a, step_b})
        base.append(_summary(layer, others))
    frame = pd.DataFrame(rows, columns=["step_a", "step_b", "layer", "cosine", "norm_a", "norm_b"])
    frame.attrs["errors"] = errors
    return frame, pd.DataFrame(base, columns=BASELINE_COLUMNS)
