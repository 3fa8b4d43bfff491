"""Deprecated helpers from the v1 views. Nothing imports them any more."""


def pages(n, size):  # pragma: no cover
    return (n + size - 1) // size
