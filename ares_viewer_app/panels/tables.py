"""Tables as every page shows them: ``st.dataframe`` with an empty cell drawn as the app's unknown mark.

Streamlit writes "None" in a cell whose value is missing (None, NaN, ``pd.NA``), which a reader may take for a
word of the file or for zero. Every table of the app goes through :func:`table`, which draws such a cell as
``readable.UNKNOWN`` (the dash the figures and the CLI write), and keeps the column's type: a numeric column still
sorts by its numbers, with the unknown cells together at its end (docs/formats.md, "Totals").
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ares_viewer_app.text import readable


def table(data: Any, *, where: Any = None, **options: Any) -> Any:
    """``st.dataframe(data, **options)`` (or ``where.dataframe``: a column or an ``st.empty``) with missing cells
    shown as ``readable.UNKNOWN``; returns what Streamlit returns (the selection, when ``on_select`` is set)."""
    return (where or st).dataframe(data, placeholder=readable.UNKNOWN, **options)
