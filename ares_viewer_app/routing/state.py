"""App-wide view state, mirrored in the URL so every view is a deep link.

The URL's query parameters name the view (``run``, ``episode``, ``step``, ``other``, ``other_in``, ``other_run``,
``file``, ``old``, ``view``, ``failed``, ``diff``, ``row``) and a page's own settings (``PAGE_KEYS``, each owned by
one page of the page table ``pages.PAGES``: the Search page's query and options, the run overview's filters and
sorting, the Episode page's find and transcript page);
the session keeps a copy, because moving between pages in the sidebar drops the parameters.
Reads come from the session; every change goes to both, so a reload or a shared link restores it. A page's own
settings show in the URL on that page only (a link to another page never carries them) and come back with it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

import streamlit as st

from ares_viewer_app.routing import pages
from ares_viewer_app.text import escape

# ``file`` and ``old`` belong to the Files page: the file shown, and the step it is compared against ("base" for
# the base image); ``step`` is the new side there too. ``view`` is the page's way of showing what it shows: on the
# episode page ``view=transcript`` reads every step; on the Files page ``diff``, ``side``, ``old``, ``new`` or
# ``history`` (each page ignores the other's values). ``failed=1`` lists the episode's failed steps only;
# ``diff=other`` diffs the response against the same step of the episode ``other`` (else the previous step).
# ``row`` is the Compare page's picked row of the alignment (from 1, as the page numbers rows); ``other_in`` the
# run its episode B (``other``) comes from when that is not ``run`` (a counterfactual's folder beside its parent);
KEYS = ("run", "episode", "step", "other", "other_in", "other_run", "file", "old", "view", "failed", "diff", "row")
# Settings of one page, in its URL only, each left out while it has its default: the keys the rows of the page
# table (``pages.PAGES``) own, where each is described. ``main.run`` may run the app with another table
# (``sync_from_url`` keeps it for the session); these are the app's own.
PAGE_KEYS = tuple(pages.owners())
# What names paths, steps or partners of one episode, meaningless in another: the Files page's file and old side,
# the episode it is compared with (``other``, from ``other_in``), the Compare page's row of that pair, the find's
# hit and the transcript's page.
OF_THE_EPISODE = ("file", "old", "other", "other_in", "row", "hit", "tpage")
_PREFIX = "app."
_TABLE = "app:pages"  # the session's page table, as ``sync_from_url`` was given it

Value = str | list[str]


def sync_from_url(table: tuple[pages.Page, ...] = pages.PAGES) -> None:
    """Adopt what the URL names (a deep link, a reload, a link to a step); then put the rest back in it.
    ``table`` is the app's page table: its rows' keys are the page settings of this session."""
    st.session_state[_TABLE] = table
    for key in (*KEYS, *_page_keys()):
        if key in st.query_params:
            st.session_state[_PREFIX + key] = st.query_params.get_all(key) if _repeated(key) else st.query_params[key]
    for key, value in params().items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


def _page_keys() -> dict[str, pages.Page]:
    """The page settings of this session (``PAGE_KEYS`` unless the app runs with another page table), by owner."""
    return pages.owners(st.session_state.get(_TABLE, pages.PAGES))


def _repeated(key: str) -> bool:
    """Whether the parameter ``key`` is given more than once (a page's ``repeated`` key), read as a list."""
    return key in pages.repeated(st.session_state.get(_TABLE, pages.PAGES))


def _raw(key: str) -> Value | None:
    return st.session_state.get(_PREFIX + key)


def get(key: str) -> str | None:
    """The current value of a view parameter that holds one value (a repeated one, a page's ``repeated``, is None here:
    its widget reads it through :func:`bind`)."""
    value = _raw(key)
    return value if isinstance(value, str) else None


def get_list(key: str) -> list[str]:
    """The current values of a repeated view parameter (a page's ``repeated``); a single value reads as a list of
    one."""
    value = _raw(key)
    return [] if value is None else [value] if isinstance(value, str) else [str(v) for v in value]


def number_range(raw: str, example: str = "0..1") -> tuple[float, float]:
    """A ``LOW..HIGH`` view parameter (the overview's ``reward``) as two numbers, low first.

    Raises:
        ValueError: it is not two numbers, or the low end is above the high end; the message says which.
    """
    try:
        low, high = (float(x) for x in raw.split(".."))
    except ValueError:
        raise ValueError(f"it is two numbers, LOW..HIGH, such as {example}") from None
    if not low <= high:
        raise ValueError("the low end is above the high end")
    return low, high


def get_int(key: str, default: int) -> int:
    """A view parameter read as an integer (``default`` when missing or malformed)."""
    value = get(key)
    try:
        return default if value is None else int(value)
    except ValueError:
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


def update(changes: Mapping[str, str | int | list[str] | None] | None = None, /, *, url: bool = True,
           **values: str | int | list[str] | None) -> None:
    """Change view parameters (None removes one; a list is a repeated parameter), in the session and in the URL
    (each change of the URL is a step in the browser's history; ``url=False`` leaves the URL to a ``switch_page``
    that follows). Another episode drops the parameters that belong to the one before (``OF_THE_EPISODE``) unless
    the change names them too. ``changes`` holds parameters named at run time (``update({key: value})``)."""
    values = _with_episode({**(changes or {}), **values})
    for key, value in values.items():
        if key not in KEYS and key not in _page_keys():
            raise KeyError(f"unknown view parameter {key!r}")
        if value is None:
            st.session_state.pop(_PREFIX + key, None)
            if url and key in st.query_params:
                del st.query_params[key]
        else:
            value = [str(v) for v in value] if isinstance(value, list) else str(value)
            st.session_state[_PREFIX + key] = value
            if url:
                st.query_params[key] = value


def bind(widget: str, key: str, default, parse=lambda value: value, choices=None, unknown="not in this run"
         ) -> str | None:
    """Give a page's widget the value its URL parameter ``key`` names, before the widget is drawn: when the URL
    changed it (a link, a reload, back) or when Streamlit forgot the widget while another page showed.

    Args:
        widget: the widget's key; pair ``bind`` with ``synced`` (``store`` as its ``on_change``).
        key: the parameter.
        default: the widget's value when the URL leaves the parameter out.
        parse: the parameter to the widget's value; raises ``ValueError`` for one the page cannot use.
        choices: a repeated parameter's values the page offers; others are dropped, with ``unknown`` as why.

    Returns:
        What was left out of the URL and why (markdown for the page to show), or None.
    """
    raw = _raw(key)
    if raw is not None and (st.query_params.get_all(key) if _repeated(key) else st.query_params.get(key)) != raw:
        st.query_params[key] = raw  # back on the page from another one: its settings return to the URL
    if widget in st.session_state and st.session_state.get(widget + ".synced") == raw:
        return None
    problem = None
    if choices is not None and raw is not None:
        dropped = [v for v in raw if v not in choices]
        if dropped:
            raw = [v for v in raw if v in choices] or None
            update({key: raw})
            problem = f"Left out {', '.join(escape.code(f'{key}={v}') for v in dropped)} of the link: {unknown}."
    try:
        value = default if raw is None else parse(raw)
    except ValueError as exc:
        value, raw = default, None
        problem = f"Left out {escape.code(f'{key}={_raw(key)}')} of the link: {escape.line(exc)}."
        update({key: None})
    st.session_state[widget] = value
    st.session_state[widget + ".synced"] = raw
    return problem


def on_off(raw: str) -> bool:
    """A switch's parameter (``1`` on, ``0`` off) as the switch's value, for ``bind``."""
    if raw not in ("0", "1"):
        raise ValueError("it is 1 (on) or 0 (off)")
    return raw == "1"


def whole(most: int, why: str, raw: str) -> int:
    """A whole number from 1 to ``most`` as a widget's value, for ``bind`` (``why`` says what it is when not)."""
    try:
        number = int(raw)
    except ValueError:
        number = 0
    if not 1 <= number <= most:
        raise ValueError(why)
    return number


def flag(on: bool) -> str | None:
    """A switch's value as its parameter, for ``store``: ``1`` when on, left out when off (the default)."""
    return "1" if on else None


def store(widget: str, key: str, write) -> None:
    """A widget's ``on_change``: its value into the parameter ``key`` (``write`` gives None for the default)."""
    value = write(st.session_state[widget])
    update({key: value})
    st.session_state[widget + ".synced"] = get(key)


def synced(widget: str, key: str, write=lambda value: value or None) -> dict:
    """A widget's keyword arguments that write its value into the parameter ``key`` when it changes (``key``,
    ``on_change``, ``args``): pair with ``bind``; ``write`` gives None for the default."""
    return {"key": widget, "on_change": store, "args": (widget, key, write)}


def _with_episode(values: dict) -> dict:
    """``values``, plus the parameters ``OF_THE_EPISODE`` dropped when they replace the episode named so far with
    another (unless given). Named with no episode, they belong to the one a page starts on."""
    if values.get("episode") is not None and get("episode") not in (None, str(values["episode"])):
        return {**dict.fromkeys(OF_THE_EPISODE), **values}
    return values


def params(**overrides: str | int | None) -> dict[str, str]:
    """The view parameters as a link carries them, with some changed (None drops one; another episode drops the
    parameters of the one before, as :func:`update` does); a page's own settings (``PAGE_KEYS``) stay behind."""
    overrides = _with_episode(overrides)
    values = {key: get(key) for key in KEYS}
    values.update({k: None if v is None else str(v) for k, v in overrides.items()})
    return {k: v for k, v in values.items() if v is not None}


def link(page: str, **overrides: str | int | None) -> str:
    """A link to the page ``page`` (its module: ``"episode"``, ...) with the view parameters ``params(**overrides)``
    gives, relative (so it works under any base URL): for an ``<a href>`` in HTML, which the browser follows in the
    same tab, as a new session that reads the view from the URL."""
    return f"{pages.url_path(page)}?{urllib.parse.urlencode(params(**overrides))}"
