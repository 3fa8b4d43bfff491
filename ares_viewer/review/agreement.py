"""How far reviewers agree: Cohen's kappa (two raters), Fleiss' kappa (more), Krippendorff's alpha (scores).

Pure functions over the ratings, so each is checked against the published worked examples (tests/test_agreement.py).
Krippendorff's alpha comes from the ``krippendorff`` package; the two kappas are a few lines each.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal

import krippendorff
import numpy as np


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters who each rated the same items (nominal categories).

    Returns NaN when there is nothing to compare, or when both raters always gave one same category (chance
    agreement is then 1 and kappa undefined).
    """
    if len(first) != len(second):
        raise ValueError(f"two raters rate the same items: {len(first)} != {len(second)}")
    n = len(first)
    if n == 0:
        return math.nan
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    counts_a, counts_b = collections.Counter(first), collections.Counter(second)
    expected = sum(counts_a[c] * counts_b[c] for c in counts_a) / (n * n)
    return math.nan if expected == 1 else (observed - expected) / (1 - expected)


def fleiss_kappa(items: Sequence[Sequence[Hashable]]) -> float:
    """Fleiss' kappa: each item's ratings (the same number of raters per item, at least two).

    Returns NaN when there are no items or when every rating is one category.
    """
    if not items:
        return math.nan
    raters = len(items[0])
    if raters < 2 or any(len(item) != raters for item in items):
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of ratings on every item")
    totals: collections.Counter = collections.Counter()
    agreement = 0.0
    for item in items:
        counts = collections.Counter(item)
        totals.update(counts)
        agreement += (sum(c * c for c in counts.values()) - raters) / (raters * (raters - 1))
    observed = agreement / len(items)
    expected = sum((c / (len(items) * raters)) ** 2 for c in totals.values())
    return math.nan if expected == 1 else (observed - expected) / (1 - expected)


def krippendorff_alpha(units: Sequence[Mapping[str, float]],
                       level: Literal["nominal", "ordinal", "interval", "ratio"] = "interval") -> float:
    """Krippendorff's alpha over units (each: rater -> value; raters may be missing on a unit).

    Returns NaN when fewer than two values can be paired.
    """
    raters = sorted({rater for unit in units for rater in unit})
    data = np.full((len(raters), len(units)), np.nan)
    for column, unit in enumerate(units):
        for rater, value in unit.items():
            data[raters.index(rater), column] = value
    pairable = (np.sum(~np.isnan(data), axis=0) >= 2).sum()
    if len(raters) < 2 or pairable == 0 or len(np.unique(data[~np.isnan(data)])) < 2:
        return math.nan
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def nominal(units: Sequence[Mapping[str, Hashable]]) -> tuple[str, float]:
    """Agreement on a choice over units rated by several raters: ``(method, value)``.

    Cohen's kappa when exactly two raters rated every unit, Fleiss' kappa when every unit has the same number (> 2)
    of ratings, else Krippendorff's nominal alpha (which allows missing ratings).
    """
    rated = [u for u in units if len(u) >= 2]
    raters = {r for u in rated for r in u}
    if not rated:
        return "none", math.nan
    if len(raters) == 2 and all(len(u) == 2 for u in rated):
        first, second = sorted(raters)
        return "cohen_kappa", cohen_kappa([u[first] for u in rated], [u[second] for u in rated])
    if len({len(u) for u in rated}) == 1:
        return "fleiss_kappa", fleiss_kappa([list(u.values()) for u in rated])
    codes = {value: i for i, value in enumerate(sorted({v for u in rated for v in u.values()}, key=repr))}
    return "krippendorff_alpha_nominal", krippendorff_alpha(
        [{r: codes[v] for r, v in u.items()} for u in rated], "nominal"
    )
