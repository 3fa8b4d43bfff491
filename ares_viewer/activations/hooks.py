"""Hook names in the order a forward pass runs them, and norms scaled so that every hook can be read.

**Forward order.** A TransformerLens ``HookedTransformer`` runs its hooks in this order: the embedding hooks
(``hook_tokens``, ``hook_embed``, ``hook_pos_embed``, ...), then each block ``blocks.0`` .. ``blocks.N`` in turn
(``BLOCK_ORDER``: ``hook_resid_pre``, the attention's inputs and ``ln1``, ``attn.hook_q`` .. ``attn.hook_result``,
``hook_attn_out``, ``hook_resid_mid``, ``ln2``, the MLP, ``hook_resid_post``), then ``ln_final`` and
``unembed.hook_out`` (``FINAL_ORDER``). ``forward_key`` sorts names by that rule; a name the tables do not know
keeps its place among the unknown ones of its section (the order the caller lists them, such as the file's) and
comes after the known ones of that section.

**Scales** of a frame of norms (``scaled``): ``"hook"`` divides each hook's column by its own largest value
(each hook's layers read on their own scale: the unembedding's large norm no longer turns every other hook one
colour), ``"log"`` is log10 of every value (one scale, orders of magnitude apart), ``"raw"`` the values as
they are. The raw values stay what a figure's hover and labels show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

EMBED_ORDER = ("hook_tokens", "hook_embed", "hook_pos_embed", "hook_shortformer_pos_embed")
BLOCK_ORDER = (
    "hook_resid_pre", "hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input", "ln1.hook_scale",
    "ln1.hook_normalized", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q", "attn.hook_rot_k",
    "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z", "attn.hook_result", "hook_attn_out",
    "hook_resid_mid", "hook_mlp_in", "ln2.hook_scale", "ln2.hook_normalized", "mlp.hook_pre",
    "mlp.hook_pre_linear", "mlp.hook_post", "hook_mlp_out", "hook_resid_post",
)
FINAL_ORDER = ("ln_final.hook_scale", "ln_final.hook_normalized", "unembed.hook_in", "unembed.hook_out")
SCALES = ("hook", "log", "raw")

_BLOCK = re.compile(r"^blocks\.(\d+)\.(.+)$")
_RANK = {name: rank for table in (EMBED_ORDER, BLOCK_ORDER, FINAL_ORDER) for rank, name in enumerate(table)}


def section(name: str) -> tuple[int, int]:
    """``(0, 0)`` for a hook before the blocks, ``(1, n)`` for one of block ``n``, ``(2, 0)`` after them."""
    match = _BLOCK.match(name)
    if match:
        return 1, int(match.group(1))
    return (2, 0) if name.startswith(("ln_final", "unembed")) else (0, 0)


def _suffix(name: str) -> str:
    match = _BLOCK.match(name)
    return match.group(2) if match else name


def forward_key(name: str, first_seen: int = 0) -> tuple[int, int, int, int]:
    """Sort key of a full hook name in forward order; ``first_seen``: its place among the names the tables do not
    know (they come after the known ones of their section, in that order)."""
    major, block = section(name)
    rank = _RANK.get(_suffix(name))
    return (major, block, 0, rank) if rank is not None else (major, block, 1, first_seen)


def forward_order(names: Iterable[str]) -> list[str]:
    """Full hook names (``blocks.0.attn.hook_pattern``, ``hook_embed``, ...) in forward order."""
    listed = list(dict.fromkeys(names))
    return sorted(listed, key=lambda n: forward_key(n, listed.index(n)))


def suffix_order(suffixes: Iterable[str]) -> list[str]:
    """Hook names without their ``blocks.N.`` prefix (a layers x hooks frame's columns) in forward order: the
    embedding hooks, the blocks' in their order, then ``ln_final`` and ``unembed``."""
    listed = list(dict.fromkeys(suffixes))
    return sorted(listed, key=lambda s: _suffix_key(s, listed.index(s)))


def _suffix_key(suffix: str, first_seen: int) -> tuple[int, int, int, int]:
    if suffix in BLOCK_ORDER:
        return forward_key(f"blocks.0.{suffix}", first_seen)
    major = section(suffix)[0]
    if major == 0 and suffix not in EMBED_ORDER:  # not an embedding hook the table knows: a block's, unknown
        return (1, 0, 1, first_seen)
    return forward_key(suffix, first_seen)


def scaled(frame: pd.DataFrame, scale: str = "hook") -> pd.DataFrame:
    """A frame of norms (layers x hooks) on one of ``SCALES``, for colour (see the module's docstring).

    ``"hook"``: each column divided by its largest absolute value (a column of zeros stays 0, NaN stays NaN);
    ``"log"``: log10 (zero or negative values become NaN: they have no logarithm); ``"raw"``: unchanged.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale!r}")
    values = frame.astype(float)
    if scale == "raw" or values.empty:
        return values
    if scale == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            return values.where(values > 0).apply(np.log10)
    peak = values.abs().max(axis=0).replace(0.0, 1.0)
    return values / peak
