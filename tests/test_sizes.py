"""Sizes in bytes, written the same way by every view and message."""

from __future__ import annotations

import pytest

from ares_viewer.base import sizes


@pytest.mark.parametrize(("n", "shown"), [(0, "0 bytes"), (1, "1 byte"), (369, "369 bytes"), (4491, "4,491 bytes"),
                                          (10 * 1024, "10 kB"), (2_500_000, "2.4 MB"), (30 * 1024**2, "30 MB"),
                                          (2 * 1024**3, "2 GB")])
def test_sizes_read_as_bytes_then_units(n, shown):
    assert sizes.text(n) == shown
