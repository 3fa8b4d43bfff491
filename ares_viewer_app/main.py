"""The app's entry file: ``ares-viewer app`` runs it (in a checkout, ``streamlit run app/main.py`` runs it too).

It sets up what every page shares (the view state from the URL, the run picker) and hands over to the page the
URL names: / (the run overview, the default page; /overview opens it too), /episode, /files, /compare, /compare_runs
(two runs task by task), /groups (rollouts of one prompt side by side), /search, /sandbox, /review (notes and labels
on steps) or /activations (a model's activations and per-token logprobs beside the steps).
The pages are the rows of ``pages.PAGES``; each is a package of ``views/``: a folder named ``pages/`` beside the
entry file makes AppTest drop the sidebar on reruns (Streamlit's legacy multipage mode kicks in).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import streamlit as st

from ares_viewer_app.routing import pages
from ares_viewer_app.serving import served

ICON = str(pathlib.Path(__file__).resolve().parent / "icon.svg")


def run(table: tuple[pages.Page, ...] = pages.PAGES) -> None:
    """One run of the app's script: the page config, the shared state and sidebar, then the page.

    ``table`` is the page table the sidebar and the URL's page settings come from (``pages.PAGES``, the app's own;
    an entry file may pass it with more rows: ``main.run((*pages.PAGES, pages.Page(...)))``).
    """
    # Imported here, once Streamlit's runtime exists: ``streamlit run`` imports this file before it starts the
    # runtime, and a cached function defined then warns that it found none.
    from ares_viewer_app.panels import choosers, review_panel
    from ares_viewer_app.routing import state

    # The package's own icon, inlined into the page: a ":material/...:" icon would be fetched from a font host.
    st.set_page_config(page_title="ares-viewer", page_icon=ICON, layout="wide")
    state.sync_from_url(table)
    review_panel.retry_failed_open()
    # expanded: every page in the sidebar (collapsed, Streamlit hides all but the first 10 of more than 12 pages
    # behind "View more", which hid Review, Queues and Activations once the table grew to 13 rows).
    page = st.navigation(navigation(table, state.params), expanded=True)
    choosers.run_picker()
    page.run()


def navigation(table: tuple[pages.Page, ...], params: Callable[[], dict[str, str]]) -> list[st.Page]:
    """The sidebar's pages, one per row of ``table``, in its order; plus each row's ``aliases``: hidden pages that
    switch to it with the view parameters ``params`` gives. The default page is served at /; its ``url_path`` is
    only reserved (Streamlit serves a default page at the root alone), so /overview and /home are aliases."""
    listed = []
    for row in table:
        page = st.Page(row.script, title=row.title, icon=row.icon, url_path=row.url_path, default=row.default)
        listed.append(page)
        listed += [st.Page(_opener(page, params), title=row.title, url_path=alias, visibility="hidden")
                   for alias in row.aliases]
    return listed


def _opener(page: st.Page, params: Callable[[], dict[str, str]]) -> Callable[[], None]:
    def open_page() -> None:
        st.switch_page(page, query_params=params())

    return open_page


if __name__ == "__main__":  # a session's run of the script
    run()
elif served.imported_to_serve(__name__, __file__):  # ``streamlit run`` imports it to find its app
    app = st.App(__file__, middleware=served.middleware(), lifespan=served.warmed)
