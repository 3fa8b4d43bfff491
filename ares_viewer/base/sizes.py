"""Sizes of files and contents as the product writes them, in every view and message: ``sizes.text(n)``.

>>> text(1), text(369), text(4491), text(30 * 1024 * 1024)
('1 byte', '369 bytes', '4,491 bytes', '30 MB')
"""

from __future__ import annotations

# Below this, the exact count of bytes; from it on, kB, MB, GB (of 1024).
_EXACT_BELOW = 10 * 1024
_UNITS = ((1024**3, "GB"), (1024**2, "MB"), (1024, "kB"))


def text(n: int) -> str:
    """``n`` bytes in words: exact up to 10 kB ("369 bytes", "4,491 bytes"), then in kB, MB or GB ("12 kB",
    "2.5 MB"); one decimal below ten of a unit."""
    if abs(n) < _EXACT_BELOW:
        return f"{n:,} byte{'' if n == 1 else 's'}"
    size, unit = next((size, unit) for size, unit in _UNITS if abs(n) >= size)
    value = n / size
    return f"{value:,.1f} {unit}".replace(".0 ", " ") if abs(value) < 10 else f"{value:,.0f} {unit}"
