"""The app's entry file in a checkout: ``streamlit run app/main.py`` (the app itself is ``ares_viewer_app``).

``streamlit run`` first imports the file to find an app to serve (``app``: Streamlit's server with the app's page
naming its server, ``ares_viewer_app.serving.served``); then each session runs it as the script.
"""

import streamlit as st

from ares_viewer_app import main
from ares_viewer_app.serving import served

if __name__ == "__main__":  # a session's run of the script
    main.run()
elif served.imported_to_serve(__name__, __file__):
    app = st.App(__file__, middleware=served.middleware(), lifespan=served.warmed)
