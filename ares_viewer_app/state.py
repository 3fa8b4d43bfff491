"""App-wide view state, mirrored in the URL so every view is a deep link.

The URL's query parameters name the view (``run``, ``episode``, ``step``, ``other``, ``other_in``, ``other_run``,
``file``, ``old``, ``view``, ``failed``, ``diff``, ``row``, ``q``);
the session keeps a copy, because moving between pages in the sidebar drops the parameters.
Reads come from the session; every change goes to both, so a reload or a shared link restores it.
"""

from __future__ import annotations

import streamlit as st

from ares_viewer_app import escape

# ``file`` and ``old`` belong to the Files page: the file shown, and the step it is compared against ("base" for
# the base image); ``step`` is the new side there too. ``view`` is the page's way of showing what it shows: on the
# episode page ``view=transcript`` reads every step; on the Files page ``diff``, ``side``, ``old``, ``new`` or
# ``history`` (each page ignores the other's values). ``failed=1`` lists the episode's failed steps only;
# ``diff=other`` diffs the response against the same step of the episode ``other`` (else the previous step).
# ``row`` is the Compare page's picked row of the alignment (from 1, as the page numbers rows); ``other_in`` the
# run its episode B (``other``) comes from when that is not ``run`` (a counterfactual's folder beside its parent);
# ``q`` the Search page's query.
KEYS = ("run", "episode", "step", "other", "other_in", "other_run", "file", "old", "view", "failed", "diff", "row",
        "q")
# What names paths, steps or partners of one episode, meaningless in another: the Files page's file and old side,
# the episode it is compared with (``other``, from ``other_in``) and the Compare page's row of that pair.
OF_THE_EPISODE = ("file", "old", "other", "other_in", "row")
_PREFIX = "app."


def sync_from_url() -> None:
    """Adopt what the URL names (a deep link, a reload, a link to a step); then put the rest back in it."""
    for key in KEYS:
        if key in st.query_params:
            st.session_state[_PREFIX + key] = st.query_params[key]
    for key, value in params().items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


def get(key: str) -> str | None:
    """The current value of a view parameter."""
    return st.session_state.get(_PREFIX + key)


def get_int(key: str, default: int) -> int:
    """A view parameter read as an integer (``default`` when missing or malformed)."""
    try:
        return int(get(key))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def number_problem(key: str, first: int, last: int, *, noun: str = "step", holder: str = "this episode") -> str | None:
    """What is wrong with the number the URL names in ``key``, as markdown; None when it names none, or one from
    ``first`` to ``last``. Every page words a bad step or row number this way: "“abc” is not a step number; this
    episode has steps 0 to 12." or "This episode has no step 99: its steps are 0 to 12."."""
    named = get(key)
    if named is None:
        return None
    try:
        k = int(named)
    except ValueError:
        return f"“{escape.line(named)}” is not a {noun} number; {holder} has {noun}s {first} to {last}."
    if first <= k <= last:
        return None
    return f"{holder[:1].upper()}{holder[1:]} has no {noun} {k}: its {noun}s are {first} to {last}."


def update(**values: str | int | None) -> None:
    """Change view parameters (None removes one), in the session and in the URL. Another episode drops the
    parameters that belong to the one before (``OF_THE_EPISODE``) unless the change names them too."""
    values = _with_episode(values)
    for key, value in values.items():
        if key not in KEYS:
            raise KeyError(f"unknown view parameter {key!r}")
        if value is None:
            st.session_state.pop(_PREFIX + key, None)
            if key in st.query_params:
                del st.query_params[key]
        else:
            st.session_state[_PREFIX + key] = str(value)
            st.query_params[key] = str(value)


def _with_episode(values: dict[str, str | int | None]) -> dict[str, str | int | None]:
    """``values``, plus the parameters ``OF_THE_EPISODE`` dropped when they replace the episode named so far with
    another (unless given). Named with no episode, they belong to the one a page starts on."""
    if values.get("episode") is not None and get("episode") not in (None, str(values["episode"])):
        return {**dict.fromkeys(OF_THE_EPISODE), **values}
    return values


def params(**overrides: str | int | None) -> dict[str, str]:
    """The view parameters as a link carries them, with some changed (None drops one; another episode drops the
    parameters of the one before, as :func:`update` does)."""
    overrides = _with_episode(overrides)
    values = {key: get(key) for key in KEYS}
    values.update({k: None if v is None else str(v) for k, v in overrides.items()})
    return {k: v for k, v in values.items() if v is not None}
