"""Descriptive statistics."""

from statskit.core import mean, median

__all__ = ["mean", "median"]
