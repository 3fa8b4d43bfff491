"""Align the steps of two episodes by what they did, so a failed and a successful attempt read side by side.

A global sequence alignment (Needleman–Wunsch): every step of both episodes appears once, in order,
either paired with a step of the other episode or facing a gap. Pairs score by how similar their
commands are (``difflib.SequenceMatcher`` ratio, mapped to -1..1); a gap costs ``gap``. So an
extra ``ls`` in one attempt becomes a gap instead of shifting every later pair out of step.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ares_viewer import model

# Two gaps (-0.8) beat a pair only when the pair is under 10% alike (2 * 0.1 - 1): unrelated commands
# face gaps, while the same command with other arguments pairs up.
GAP = -0.4
# Below this similarity two paired steps count as doing different things.
DIVERGENCE_THRESHOLD = 0.6
# Commands are compared on their first characters: heredocs can be long, their start says what they do.
_COMPARE_CHARS = 400


@dataclasses.dataclass(frozen=True, slots=True)
class Pair:
    """One row of an alignment: positions in both sequences (None = gap) and their similarity (0..1)."""

    a: int | None
    b: int | None
    similarity: float

    @property
    def is_gap(self) -> bool:
        return self.a is None or self.b is None


def similarity(x: str | None, y: str | None) -> float:
    """How alike two commands are, 0..1 (``SequenceMatcher.ratio``; two missing commands are alike)."""
    x, y = (x or "")[:_COMPARE_CHARS], (y or "")[:_COMPARE_CHARS]
    if x == y:
        return 1.0
    if not x or not y:
        return 0.0
    return difflib.SequenceMatcher(None, x, y, autojunk=False).ratio()


def align(a: Sequence[str | None], b: Sequence[str | None], *, gap: float = GAP,
          score: Callable[[str | None, str | None], float] = similarity) -> list[Pair]:
    """The best global alignment of two sequences.

    Args:
        a, b: the sequences (commands, usually).
        gap: the score of placing an item against a gap (negative).
        score: similarity of two items, 0..1; a pair scores ``2 * similarity - 1``.

    Returns:
        The alignment, in order; every index of ``a`` and of ``b`` appears exactly once.
    """
    n, m = len(a), len(b)
    cache: dict[tuple[str | None, str | None], float] = {}

    def sim(i: int, j: int) -> float:
        key = (a[i], b[j])
        if key not in cache:
            cache[key] = score(a[i], b[j])
        return cache[key]

    # total[i][j]: best score aligning a[:i] with b[:j]; move[i][j]: 0 diagonal, 1 up (a gap in b), 2 left.
    total = [[0.0] * (m + 1) for _ in range(n + 1)]
    move = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        total[i][0], move[i][0] = i * gap, 1
    for j in range(1, m + 1):
        total[0][j], move[0][j] = j * gap, 2
    for i in range(1, n + 1):
        row, prev = total[i], total[i - 1]
        for j in range(1, m + 1):
            diagonal = prev[j - 1] + 2 * sim(i - 1, j - 1) - 1
            up = prev[j] + gap
            left = row[j - 1] + gap
            # Ties prefer the diagonal, so equal sequences align one to one.
            if diagonal >= up and diagonal >= left:
                row[j], move[i][j] = diagonal, 0
            elif up >= left:
                row[j], move[i][j] = up, 1
            else:
                row[j], move[i][j] = left, 2
    pairs: list[Pair] = []
    i, j = n, m
    while i or j:
        step = move[i][j]
        if step == 0:
            pairs.append(Pair(i - 1, j - 1, sim(i - 1, j - 1)))
            i, j = i - 1, j - 1
        elif step == 1:
            pairs.append(Pair(i - 1, None, 0.0))
            i -= 1
        else:
            pairs.append(Pair(None, j - 1, 0.0))
            j -= 1
    pairs.reverse()
    return pairs


def divergence(pairs: Sequence[Pair], threshold: float = DIVERGENCE_THRESHOLD, *, side: str | None = None
               ) -> int | None:
    """Position in ``pairs`` of the first row where the two sequences part ways (a gap or a weak pair).

    Args:
        pairs: An alignment.
        threshold: Paired steps less alike than this count as doing different things.
        side: ``"a"``: the first row where ``a`` does something ``b`` does not (an ``a`` step facing a gap or
            a weak pair), skipping rows where only ``b`` acts; ``"b"`` likewise. With a failed attempt as ``a``
            and a solved one as ``b``, ``side="a"`` is where the failure first did something of its own, which
            extra exploration by the solved attempt does not hide. None: either side.
    """
    for position, pair in enumerate(pairs):
        if (side == "a" and pair.a is None) or (side == "b" and pair.b is None):
            continue
        if pair.is_gap or pair.similarity < threshold:
            return position
    return None


def align_episodes(a: model.Episode, b: model.Episode, *, gap: float = GAP) -> list[Pair]:
    """Align two episodes' actions by their commands; ``Pair.a``/``Pair.b`` are step indices.

    A response without a single command is compared by its full text, so format errors still pair up.
    """
    a_steps, b_steps = a.actions, b.actions
    pairs = align([s.command or s.response for s in a_steps], [s.command or s.response for s in b_steps], gap=gap)
    return [
        Pair(None if p.a is None else a_steps[p.a].index, None if p.b is None else b_steps[p.b].index, p.similarity)
        for p in pairs
    ]
