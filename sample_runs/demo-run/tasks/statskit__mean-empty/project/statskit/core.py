"""Descriptive statistics for small samples."""


def mean(values):
    """Arithmetic mean of ``values`` (any iterable of numbers)."""
    return sum(values) / len(values)


def median(values):
    """Middle value of ``values``; the mean of the two middle values for an even count."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median requires at least one data point")
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
