"""One colour per outcome, the same in every figure, HTML table and app badge: failures warm, success green.

The shades are dark enough to read as text on white (``render``'s HTML) and to stand out as markers (``plots``).
Streamlit's badges take only colour names, so each outcome also has the nearest of those. Keyed by the
``Outcome`` values (``render``, which ``records`` imports, reads this module: it cannot import ``records`` back);
tests/test_plots.py checks every outcome has its colour.
"""

from __future__ import annotations

_PALETTE: dict[str, tuple[str, str]] = {
    "completed": ("#1a7f37", "green"),
    "truncated": ("#9a6700", "orange"),
    "errored": ("#cf222e", "red"),
    "aborted": ("#8250df", "violet"),
    "interrupted": ("#6e7781", "gray"),
    "cancelled": ("#6e7781", "gray"),
    "incomplete": ("#57606a", "gray"),
}
# ``outcome value -> hex colour``, in the order figures list outcomes.
OUTCOME_COLOURS: dict[str, str] = {outcome: hex_colour for outcome, (hex_colour, _) in _PALETTE.items()}
# ``outcome value -> colour name`` (Streamlit's badge colours).
OUTCOME_COLOUR_NAMES: dict[str, str] = {outcome: name for outcome, (_, name) in _PALETTE.items()}
# An outcome no adapter produces (a value read from an untrusted file).
UNKNOWN_COLOUR, UNKNOWN_COLOUR_NAME = "#57606a", "gray"


def outcome_colour(outcome: str) -> str:
    """The hex colour of an outcome (grey for one that is not an ``Outcome``)."""
    return OUTCOME_COLOURS.get(outcome, UNKNOWN_COLOUR)


def outcome_colour_name(outcome: str) -> str:
    """The colour name of an outcome, for places that take only names (grey for one that is not an ``Outcome``)."""
    return OUTCOME_COLOUR_NAMES.get(outcome, UNKNOWN_COLOUR_NAME)
