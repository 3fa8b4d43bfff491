"""The app's pages, declared in one place: ``PAGES``, a table of one row per page.

A row names the page's title, URL path and icon, its package (``views/<module>/``, its script ``<module>.py``) and the
URL parameters the page owns (its own settings: in the URL on that page only, left out of links to other pages and
of the URL on them).
``main.run`` builds the sidebar (``st.navigation``) from the table; ``state`` takes the page-owned parameters from it.
Adding a page is one folder ``views/<page>/`` and one row here (``docs/app.md``, "Adding a page").

Paths are absolute, so links work whichever entry file Streamlit runs (the packaged ``main.py`` or a
checkout's ``app/main.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

VIEWS = pathlib.Path(__file__).resolve().parent.parent / "views"


@dataclasses.dataclass(frozen=True)
class Page:
    """One page of the app: a row of ``PAGES``."""

    title: str
    url_path: str
    icon: str
    module: str
    """The page's package: its script is ``<folder>/<module>/<module>.py``."""
    keys: tuple[str, ...] = ()
    """The URL parameters the page owns, each left out of the URL while it has its default."""
    repeated: tuple[str, ...] = ()
    """Those of ``keys`` given more than once (``in=a&in=b``), read as a list."""
    default: bool = False
    """The page served at ``/`` (its ``url_path`` is only reserved: Streamlit serves a default page at the root)."""
    aliases: tuple[str, ...] = ()
    """Hidden URL paths that open the page with the URL's parameters."""
    folder: pathlib.Path = VIEWS

    @property
    def script(self) -> str:
        """The page's script, as ``st.Page``, ``st.page_link`` and ``st.switch_page`` take it."""
        return str(self.folder / self.module / f"{self.module}.py")


PAGES: tuple[Page, ...] = (
    # ``task``, ``outcome``, ``label`` (repeated), ``reward`` (``LOW..HIGH``), ``contains``, ``sort`` (a column),
    # ``desc=1``, ``page`` (of the table, from 1), ``reason`` (the failure reason picked), ``flag`` (behaviour
    # flags, repeated).
    Page("Run overview", "run_overview", ":material/monitoring:", "overview",
         keys=("task", "outcome", "label", "reward", "contains", "sort", "desc", "page", "reason", "flag"),
         repeated=("task", "outcome", "label", "flag"), default=True, aliases=("overview", "home")),
    # ``find`` (find in the episode), ``hit`` (the hit shown, from 1), ``tpage`` (the transcript's page of steps).
    Page("Episode", "episode", ":material/timeline:", "episode", keys=("find", "hit", "tpage")),
    Page("Files", "files", ":material/folder_open:", "files"),
    Page("Compare", "compare", ":material/compare_arrows:", "compare"),
    # ``by`` (the column this run is split by) and ``side`` (its two values, repeated), ``show`` (the tasks
    # listed), ``pick`` (the task picked).
    Page("Compare runs", "compare_runs", ":material/difference:", "compare_runs",
         keys=("by", "side", "show", "pick"), repeated=("side",)),
    Page("Groups", "groups", ":material/group_work:", "groups"),
    Page("Behaviours", "behaviours", ":material/flag:", "behaviours"),
    Page("Lost tasks", "lost", ":material/trending_down:", "lost"),
    # ``q`` the query, ``regex=1``, ``case=1``, ``in`` the fields searched (repeated), ``limit`` the most hits.
    Page("Search", "search", ":material/search:", "search", keys=("q", "regex", "case", "in", "limit"),
         repeated=("in",)),
    Page("Sandbox", "sandbox", ":material/deployed_code:", "sandbox"),
    Page("Review", "review", ":material/rate_review:", "review"),
    Page("Queues", "queues", ":material/checklist:", "queues"),
    Page("Activations", "activations", ":material/neurology:", "activations"),
)


@functools.cache
def owners(table: tuple[Page, ...] = PAGES) -> dict[str, Page]:
    """Each URL parameter a page of ``table`` owns, with its page.

    Raises:
        ValueError: two pages own one parameter, or a row's ``repeated`` names one its ``keys`` do not.
    """
    owned: dict[str, Page] = {}
    for page in table:
        if not set(page.repeated) <= set(page.keys):
            raise ValueError(f"page {page.url_path!r}: repeated {page.repeated} are not all among its keys")
        for key in page.keys:
            if key in owned:
                raise ValueError(f"pages {owned[key].url_path!r} and {page.url_path!r} both own the URL key {key!r}")
            owned[key] = page
    return owned


@functools.cache
def repeated(table: tuple[Page, ...] = PAGES) -> tuple[str, ...]:
    """The URL parameters the pages of ``table`` own that are given more than once."""
    return tuple(key for page in table for key in page.repeated)


def path(name: str) -> str:
    """The script of the page ``name`` (``"episode"``, ``"files"``, ...)."""
    return str(VIEWS / name / f"{name}.py")


def url_path(name: str) -> str:
    """The URL path of the page ``name`` (its module: ``"episode"``, ...), as a link names it."""
    return next(page.url_path for page in PAGES if page.module == name)
