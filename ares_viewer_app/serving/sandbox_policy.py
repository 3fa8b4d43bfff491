"""Whether this app server may offer sandboxes (a sandbox runs arbitrary commands on this machine's engine)."""

from __future__ import annotations

from collections.abc import Mapping

from ares_viewer.base import settings

SANDBOX_ENV = settings.SANDBOX.name


def sandbox_enabled(server_address: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the app may offer sandboxes: always on a loopback address, elsewhere only when
    ``ARES_VIEWER_SANDBOX=1`` says so."""
    chosen = settings.SANDBOX.get(environ)
    if chosen is not None:
        return chosen
    # An empty address makes Streamlit listen on every interface: not local.
    address = (server_address or "").strip().strip("[]")
    return address in {"localhost", "::1"} or address.startswith("127.")
