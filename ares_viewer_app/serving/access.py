"""Which run locations the app opens: any on a local server; on an exposed one, only runs under the runs folder.

A server bound to a loopback address (``127.x``, ``localhost``, ``::1``: what ``ares-viewer app`` does unless
``--address`` says otherwise) serves only its own machine, and its ``run`` parameter may name any folder, file,
glob or fsspec URL. A server bound to any other address (or to none, which means every interface) is exposed:
there ``run`` must name a run under the runs folder (``ARES_VIEWER_RUNS``), checked after resolving symlinks and
``..``, so a visitor cannot make the server read the rest of its disk (and the app's loaders walk such a run with
``within``, so a symlinked file in it that resolves outside the folder is left out: ``sources.listing``). fsspec
URLs (which reach other hosts) and globs are refused there unless ``ARES_VIEWER_ALLOW_URLS=1``; even then a glob
must start under the runs folder and a ``file://`` URL is refused. The run the server was started on
(``ares-viewer app LOCATION``, i.e. ``ARES_VIEWER_RUN``) is always allowed: its operator chose it.

Nothing here imports Streamlit: the pages pass the server's address in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ares_viewer.base import locations, settings
from ares_viewer.runs import sources

ALLOW_URLS_ENV = settings.ALLOW_URLS.name
_LOCAL_PROTOCOLS = {"file", "local"}


class RefusedLocationError(PermissionError):
    """The server does not open this location; the message says why and what it does open."""


def is_local(address: str | None) -> bool:
    """Whether a server bound to ``address`` serves only its own machine (an empty address means every
    interface: not local)."""
    address = (address or "").strip().strip("[]")
    return address in {"localhost", "::1"} or address.startswith("127.")


def urls_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether an exposed server opens fsspec URLs and globs (``ARES_VIEWER_ALLOW_URLS=1``)."""
    return settings.ALLOW_URLS.get(environ)


def _has_glob(location: str) -> bool:
    return any(ch in location for ch in "*?[")


def check(location: str, *, root: str, address: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The location to open for a ``run`` parameter, or ``RefusedLocationError`` on an exposed server.

    A relative path is taken relative to the runs folder there (and relative to the working directory on a
    local server, as a shell would).
    """
    environ = os.environ if environ is None else environ
    if is_local(address) or (location and location == settings.RUN.get(environ)):
        return location
    refuse = f"This server is reachable from other machines, so it opens only the runs under {root}"
    switch = f"({ALLOW_URLS_ENV}=1 in the server's environment allows them)"
    if not locations.is_local(location):
        if not urls_allowed(environ):
            raise RefusedLocationError(f"{refuse}; URLs are off {switch}.")
        if locations.Location.of(location).protocols() & _LOCAL_PROTOCOLS:
            raise RefusedLocationError(f"{refuse}; name a run folder instead of a local file URL.")
        return location
    path = os.path.normpath(os.path.join(root, os.path.expanduser(location)))
    if _has_glob(location):
        if not urls_allowed(environ):
            raise RefusedLocationError(f"{refuse}; globs are off {switch}.")
        literal = path[:min(path.index(ch) for ch in "*?[" if ch in path)]
        if ".." in location.split(os.sep) or not sources.inside(os.path.dirname(literal) or os.sep, root):
            raise RefusedLocationError(f"{refuse}; this glob reaches outside it.")
        return path
    if not sources.inside(path, root):
        raise RefusedLocationError(f"{refuse}; {location} is outside it.")
    return path
