"""ares-viewer's Streamlit app, shipped in the wheel beside the library.

``main.py`` is the entry file Streamlit runs (``ares-viewer app`` starts it through ``serving.server``). Its folders
are by role: ``views/<page>/`` a package per page (its script and the parts only it uses), ``panels/`` the parts two
or more pages use, and the plumbing: ``routing`` (the page table, the view in the URL), ``data`` (cached runs),
``serving`` (the server, what it may read, sandboxes) and ``text`` (escaping, values as shown).
``streamlit.toml`` holds the app's Streamlit settings. Importing this package does not import Streamlit: the CLI
uses ``serving.server`` without it.
"""
