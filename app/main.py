"""ares-viewer's Streamlit app: ``streamlit run app/main.py``.

The entrypoint sets up what every page shares (the view state from the URL, the run picker) and
hands over to the page the URL names: / (the run overview, the default page), /episode, /compare, /groups
(rollouts of one prompt side by side), /search,
/sandbox or /review (notes and labels on steps).
The page modules live in ``app/views/``: a folder named ``pages/`` beside the entrypoint makes
AppTest drop the sidebar on reruns (Streamlit's legacy multipage mode kicks in).
"""

from __future__ import annotations

import pathlib
import sys

# Pages import their shared modules (state, loaders, widgets) by name, also under AppTest.
_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import review_panel  # noqa: E402
import state  # noqa: E402
import streamlit as st  # noqa: E402
import widgets  # noqa: E402

st.set_page_config(page_title="ares-viewer", page_icon=":material/troubleshoot:", layout="wide")

PAGES = [
    st.Page("views/overview.py", title="Run overview", icon=":material/monitoring:", url_path="overview",
            default=True),
    st.Page("views/episode.py", title="Episode", icon=":material/timeline:", url_path="episode"),
    st.Page("views/files.py", title="Files", icon=":material/folder_open:", url_path="files"),
    st.Page("views/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("views/groups.py", title="Groups", icon=":material/group_work:", url_path="groups"),
    st.Page("views/search.py", title="Search", icon=":material/search:", url_path="search"),
    st.Page("views/sandbox.py", title="Sandbox", icon=":material/deployed_code:", url_path="sandbox"),
    st.Page("views/review.py", title="Review", icon=":material/rate_review:", url_path="review"),
]

state.sync_from_url()
review_panel.retry_failed_open()
page = st.navigation(PAGES)
widgets.run_picker()
page.run()
