"""The app server's reaper of idle sandboxes: one background thread per server that removes the containers this
server created once they have been idle for ``IDLE_TIMEOUT_S``, also when nobody opens the Sandbox page.

It lives in a module of its own, not in the page's script: a thread started from the script would keep that
page run's globals (the run it showed, its parsed episodes) alive for as long as the server runs.
"""

from __future__ import annotations

import logging
import threading
import time

import streamlit as st

from ares_viewer import sandbox

IDLE_TIMEOUT_S = 30 * 60
REAP_EVERY_S = 60
_LOGGER = logging.getLogger(__name__)


@st.cache_resource(show_spinner=False)
def server_sessions() -> set[str]:
    """The sandbox sessions this server created: the only ones its reaper touches."""
    return set()


def reap_now(client) -> None:
    """Remove this server's idle sandboxes now (engine errors are the caller's)."""
    sandbox.reap_idle(IDLE_TIMEOUT_S, client, sessions=set(server_sessions()))


@st.cache_resource(show_spinner=False)
def start(_client) -> threading.Thread:
    """The server's reaper thread, started on the first call (``_client``: the engine client it uses)."""

    def loop() -> None:
        while True:
            time.sleep(REAP_EVERY_S)
            try:
                reap_now(_client)
            except Exception:  # the engine may come and go; the next round tries again
                _LOGGER.debug("idle reaping failed", exc_info=True)

    thread = threading.Thread(target=loop, name="ares-viewer-sandbox-reaper", daemon=True)
    thread.start()
    return thread
