"""Every ``ARES_VIEWER_*`` environment variable, declared once: its name, default, type and meaning.

Each :class:`Setting` below is read when it is asked for (``settings.CACHE.get()``), never at import, so a test or
a notebook may set a variable late. A value that does not parse raises :class:`SettingError` naming the variable
and the value. ``ares-viewer settings`` prints them all with their values and where each came from;
``docs/settings.md`` lists them (a test checks the list is complete).

Readers keep their own meaning of an unset value (the cache folder, the review database beside it): a setting
whose default is None means "not set", and the docstring says what happens then.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from ares_viewer.base import locations

T = TypeVar("T")

ENVIRONMENT = "environment"
DEFAULT = "default"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
GIB = 1024 * 1024 * 1024


class SettingError(ValueError):
    """An environment variable holds a value its setting cannot use; the message names both."""


def text(raw: str) -> str:
    """Any text (a path, a URL, a name)."""
    return raw


def number(raw: str) -> float:
    """A number (``2.5``, ``1e9``)."""
    try:
        return float(raw)
    except ValueError:
        raise ValueError("is not a number") from None


def integer(raw: str) -> int:
    """A whole number; ``1e9`` is accepted and rounded down."""
    return int(number(raw))


def count(raw: str) -> int:
    """A whole number above zero."""
    try:
        value = integer(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError("is not a whole number above zero")
    return value


def seconds(raw: str) -> float:
    """A number of seconds, zero or more."""
    value = number(raw)
    if not value >= 0:
        raise ValueError("is not a number of seconds, zero or more")
    return value


def flag(raw: str) -> bool:
    """On (``1``, ``true``, ``yes``, ``on``) or off (``0``, ``false``, ``no``, ``off``)."""
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ValueError("is neither on (1, true, yes, on) nor off (0, false, no, off)")


@dataclasses.dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable: read at call time, an empty or blank value counts as unset.

    Attributes:
        name: The variable (``ARES_VIEWER_...``).
        default: The value when the variable is unset (None: "not set", the reader decides).
        parse: Turns the (stripped) text into a value; raises ``ValueError`` with the reason when it cannot.
        doc: What it changes, for ``ares-viewer settings`` and ``docs/settings.md``.
    """

    name: str
    default: T
    parse: Callable[[str], Any]
    doc: str

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's text, stripped, or None when it is unset or blank."""
        value = (os.environ if environ is None else environ).get(self.name, "").strip()
        return value or None

    def get(self, environ: Mapping[str, str] | None = None) -> T:
        """The value: the variable parsed, or the default when it is unset.

        Raises:
            SettingError: the variable's text does not parse.
        """
        raw = self.raw(environ)
        if raw is None:
            return self.default
        try:
            return self.parse(raw)
        except ValueError as exc:
            raise SettingError(f"{self.name}={raw!r} {exc}") from None

    def source(self, environ: Mapping[str, str] | None = None) -> str:
        """``environment`` when the variable is set, else ``default``."""
        return ENVIRONMENT if self.raw(environ) is not None else DEFAULT


SETTINGS: dict[str, Setting[Any]] = {}


def _declare(name: str, default: T, parse: Callable[[str], Any], doc: str) -> Setting[T]:
    SETTINGS[name] = Setting(name, default, parse, doc)
    return SETTINGS[name]


# The table: one entry per variable, in the order `ares-viewer settings` and docs/settings.md list them.
# fmt: off
# Where things live.
CACHE: Setting[str | None] = _declare("ARES_VIEWER_CACHE", None, text,
    "The folder for per-user state (run indexes, snapshot mirrors, review notes, model.toml); unset: "
    "$XDG_CACHE_HOME/ares-viewer, else ~/.cache/ares-viewer.")
REVIEW_DB: Setting[str | None] = _declare("ARES_VIEWER_REVIEW_DB", None, text,
    "The review database (notes, tags, labels); unset: review.sqlite in the cache folder.")
SHARED_INDEX: Setting[str | None] = _declare("ARES_VIEWER_SHARED_INDEX", None, text,
    "A folder or fsspec URL where index shards are shared (a Ray cluster's, a team's); unset: the local cache.")

# How much a listing reads.
WALK_MAX_ENTRIES: Setting[int] = _declare("ARES_VIEWER_WALK_MAX_ENTRIES", 500_000, count,
    "Files and folders one listing of a run looks at; past it the listing stops and says so.")
WALK_MAX_DEPTH: Setting[int] = _declare("ARES_VIEWER_WALK_MAX_DEPTH", 12, count,
    "Folders below the run's location a listing goes into (runs nest episodes 1-3 folders deep).")
MAX_FILE_MB: Setting[int] = _declare("ARES_VIEWER_MAX_FILE_MB", 512, count,
    "Megabytes of one episode file read at most; a larger file is an error naming its size.")
SNAPSHOT_MAX_BYTES: Setting[int] = _declare("ARES_VIEWER_SNAPSHOT_MAX_BYTES", 2 * GIB, integer,
    "Bytes of file content one snapshot read (an archive, many files at once) may materialize.")

# The containers ares-viewer starts (container.ResourceLimits documents each figure).
MEM_LIMIT: Setting[str] = _declare("ARES_VIEWER_MEM_LIMIT", "1g", text,
    "A container's memory limit, in the engine's notation (swap is the same).")
NANO_CPUS: Setting[int] = _declare("ARES_VIEWER_NANO_CPUS", 1_000_000_000, integer,
    "A container's CPU limit, in billionths of a CPU.")
PIDS_LIMIT: Setting[int] = _declare("ARES_VIEWER_PIDS_LIMIT", 256, integer,
    "The most processes a container may run at once.")
COMMAND_OUTPUT_BYTES: Setting[int] = _declare("ARES_VIEWER_COMMAND_OUTPUT_BYTES", 8_000_000, integer,
    "Bytes of one command's output kept (the first and the last half).")
CAPTURE_TIMEOUT_S: Setting[float] = _declare("ARES_VIEWER_CAPTURE_TIMEOUT_S", 600.0, number,
    "Seconds one read out of a container may take.")
CAPTURE_MAX_BYTES: Setting[int] = _declare("ARES_VIEWER_CAPTURE_MAX_BYTES", 2 * GIB, integer,
    "Bytes one read out of a container may bring back.")
RESTORE_TIMEOUT_S: Setting[float] = _declare("ARES_VIEWER_RESTORE_TIMEOUT_S", 600.0, number,
    "Seconds putting a snapshot's files into a container may take.")
RESTORE_MAX_BYTES: Setting[int] = _declare("ARES_VIEWER_RESTORE_MAX_BYTES", 2 * GIB, integer,
    "Bytes of file content one restore may write.")
ENGINE_TIMEOUT_S: Setting[float] = _declare("ARES_VIEWER_ENGINE_TIMEOUT_S", 60.0, number,
    "Seconds the Docker client waits for the engine to answer one call.")

# The model endpoint counterfactuals ask (model.toml's settings; these override the file's one by one and are
# checked together with it, so they are read as text here).
MODEL_URL: Setting[str | None] = _declare("ARES_VIEWER_MODEL_URL", None, text,
    "The OpenAI-compatible endpoint (http://host:port/v1) counterfactuals ask.")
MODEL: Setting[str | None] = _declare("ARES_VIEWER_MODEL", None, text, "The endpoint's model id.")
MODEL_API_KEY_ENV: Setting[str | None] = _declare("ARES_VIEWER_MODEL_API_KEY_ENV", None, text,
    "The name of the environment variable holding the endpoint's API key (the key itself is never configured).")
MODEL_TIMEOUT_S: Setting[str | None] = _declare("ARES_VIEWER_MODEL_TIMEOUT_S", None, text,
    "Seconds one request to the endpoint may take (unset: 120).")
MODEL_CONFIG: Setting[str | None] = _declare("ARES_VIEWER_MODEL_CONFIG", None, text,
    "The endpoint's TOML file; unset: model.toml in the cache folder.")

# The Docent server ``ares-viewer export --format docent`` sends agent runs to (docs/formats.md, Export).
DOCENT_URL: Setting[str | None] = _declare("ARES_VIEWER_DOCENT_URL", None, text,
    "The Docent API's URL that ``export --format docent`` adds agent runs to; unset: the export is only written to "
    "its file.")
DOCENT_API_KEY_ENV: Setting[str | None] = _declare("ARES_VIEWER_DOCENT_API_KEY_ENV", None, text,
    "The name of the environment variable holding the Docent API key (unset: DOCENT_API_KEY; the key itself is "
    "never configured).")
DOCENT_COLLECTION: Setting[str | None] = _declare("ARES_VIEWER_DOCENT_COLLECTION", None, text,
    "The Docent collection the agent runs are added to; unset: a new collection named after the run.")

# The app.
RUNS: Setting[str | None] = _declare("ARES_VIEWER_RUNS", None, text,
    "The folder whose subfolders the app's run picker lists; unset: the bundled sample runs, else the current "
    "folder.")
RUN: Setting[str | None] = _declare("ARES_VIEWER_RUN", None, text,
    "The run the app opens first (``ares-viewer app RUN`` sets it); always allowed, even on an exposed server.")
ALLOW_URLS: Setting[bool] = _declare("ARES_VIEWER_ALLOW_URLS", False, flag,
    "Whether an app server on a non-loopback address opens URLs and globs.")
SANDBOX: Setting[bool | None] = _declare("ARES_VIEWER_SANDBOX", None, flag,
    "Whether the app offers sandboxes (commands on this machine's Docker engine); unset: only on a loopback "
    "address.")
IDENTITY_HEADER: Setting[str | None] = _declare("ARES_VIEWER_IDENTITY_HEADER", None, text,
    "The HTTP header the signing-in proxy in front of the app sets to the visitor's account (X-Forwarded-User, "
    "...): notes, labels and decisions are then recorded under it, and no name can be typed.")
TRUST_TYPED_NAMES: Setting[bool] = _declare("ARES_VIEWER_TRUST_TYPED_NAMES", False, flag,
    "Whether an app server on a non-loopback address without ARES_VIEWER_IDENTITY_HEADER records notes, labels "
    "and decisions under the names reviewers type (the operator vouches for who reaches it); off: it saves none.")
SEARCH_SECONDS: Setting[float] = _declare("ARES_VIEWER_SEARCH_SECONDS", 10.0, seconds,
    "Seconds one run of the Search page searches before it offers to go on.")
# fmt: on


def _shown(value: Any) -> Any:
    return locations.Location.of(value).display() if isinstance(value, str) else value


def report(environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every setting with its value, where the value came from (``environment``/``default``), default and meaning
    (``ares-viewer settings``). A password in a URL is shown as ``***``.

    Raises:
        SettingError: a variable's text does not parse.
    """
    return [
        {
            "name": s.name,
            "value": _shown(s.get(environ)),
            "source": s.source(environ),
            "default": s.default,
            "doc": s.doc,
        }
        for s in SETTINGS.values()
    ]


def table(rows: list[dict[str, Any]]) -> list[str]:
    """:func:`report`'s rows as aligned text lines: name, value (``-`` when unset) and source."""
    width = max(len(row["name"]) for row in rows)
    shown = [("-" if row["value"] is None else str(row["value"])) for row in rows]
    value_width = min(max(len(value) for value in shown), 40)
    return [
        f"{row['name']:<{width}}  {value:<{value_width}}  {row['source']}"
        for row, value in zip(rows, shown, strict=True)
    ]
