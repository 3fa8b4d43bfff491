"""The app's pages, a package per page (``views/<page>/``): its script ``<page>.py``, which ``st.navigation`` runs
(see ``ares_viewer_app.routing.pages``), and the parts only that page uses, which its script imports.

No other page imports a page's parts: a part two pages use lives in ``ares_viewer_app.panels``.
"""
