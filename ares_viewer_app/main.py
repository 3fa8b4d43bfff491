"""The app's entry file: ``ares-viewer app`` runs it (in a checkout, ``streamlit run app/main.py`` runs it too).

It sets up what every page shares (the view state from the URL, the run picker) and hands over to the page the
URL names: / (the run overview, the default page; /overview opens it too), /episode, /files, /compare, /compare_runs
(two runs task by task), /groups (rollouts of one prompt side by side), /search, /sandbox, /review (notes and labels
on steps) or /activations (a model's activations and per-token logprobs beside the steps).
The page modules live in ``views/``: a folder named ``pages/`` beside the entry file makes AppTest drop the
sidebar on reruns (Streamlit's legacy multipage mode kicks in).
"""

from __future__ import annotations

import pathlib

import streamlit as st

from ares_viewer_app import served

ICON = str(pathlib.Path(__file__).resolve().parent / "icon.svg")


def run() -> None:
    """One run of the app's script: the page config, the shared state and sidebar, then the page."""
    # Imported here, once Streamlit's runtime exists: ``streamlit run`` imports this file before it starts the
    # runtime, and a cached function defined then warns that it found none.
    from ares_viewer_app import pages, review_panel, state, widgets

    # The package's own icon, inlined into the page: a ":material/...:" icon would be fetched from a font host.
    st.set_page_config(page_title="ares-viewer", page_icon=ICON, layout="wide")
    # The overview is served at /; its url_path is only reserved (Streamlit serves a default page at the root
    # alone), so /overview and /home are hidden pages that open it.
    overview = st.Page(pages.path("overview"), title="Run overview", icon=":material/monitoring:",
                       url_path="run_overview", default=True)

    def open_overview() -> None:
        st.switch_page(overview, query_params=state.params())

    navigation = [
        overview,
        st.Page(open_overview, title="Run overview", url_path="overview", visibility="hidden"),
        st.Page(open_overview, title="Run overview", url_path="home", visibility="hidden"),
        st.Page(pages.path("episode"), title="Episode", icon=":material/timeline:", url_path="episode"),
        st.Page(pages.path("files"), title="Files", icon=":material/folder_open:", url_path="files"),
        st.Page(pages.path("compare"), title="Compare", icon=":material/compare_arrows:", url_path="compare"),
        st.Page(pages.path("compare_runs"), title="Compare runs", icon=":material/difference:",
                url_path="compare_runs"),
        st.Page(pages.path("groups"), title="Groups", icon=":material/group_work:", url_path="groups"),
        st.Page(pages.path("behaviours"), title="Behaviours", icon=":material/flag:", url_path="behaviours"),
        st.Page(pages.path("search"), title="Search", icon=":material/search:", url_path="search"),
        st.Page(pages.path("sandbox"), title="Sandbox", icon=":material/deployed_code:", url_path="sandbox"),
        st.Page(pages.path("review"), title="Review", icon=":material/rate_review:", url_path="review"),
        st.Page(pages.path("queues"), title="Queues", icon=":material/checklist:", url_path="queues"),
        st.Page(pages.path("activations"), title="Activations", icon=":material/neurology:", url_path="activations"),
    ]
    state.sync_from_url()
    review_panel.retry_failed_open()
    page = st.navigation(navigation)
    widgets.run_picker()
    page.run()


if __name__ == "__main__":  # a session's run of the script
    run()
elif served.imported_to_serve(__name__, __file__):  # ``streamlit run`` imports it to find its app
    app = st.App(__file__, middleware=served.middleware(), lifespan=served.warmed)
