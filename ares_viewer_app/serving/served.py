"""The server ``streamlit run`` starts for the app: Streamlit's own, with the app's page naming its server.

Streamlit's browser code finds its server by asking for ``_stcore/health`` under the page's own path first: a
link to ``/episode`` asks ``/episode/_stcore/health``, gets a 404, waits 100 ms and only then asks
``/_stcore/health``. Every page but the run overview (at ``/``) paid that on its first load: about 0.12 s of a
one-element page's 0.34 s (``benchmarks/bench_targets``: the floor at a path against the floor at ``/``).

The same browser code reads ``window.__streamlit.BACKEND_BASE_URL`` (how a host page names the server of an
app it embeds) before it looks. ``NamedServer`` writes that setting into the app's HTML page, as the first
script of its head: the page's own origin and the server's ``server.baseUrlPath``, so the browser asks the one
place the server answers. Nothing else is changed: other responses (scripts, styles, the components' own
pages, media, the websocket) pass through untouched, and the page is the same for every request (no request
text is written into it).

``streamlit run`` imports the entry file (``main.py`` here, a checkout's ``app/main.py``) to find an app to
serve: it looks for an assignment ``app = st.App(...)`` in the file's text. The entry files make it only when
imported so (``imported_to_serve``), with ``NamedServer`` in front (``middleware``) and what the first page
imports imported as the server starts (``warmed``); each session's run of the script runs the pages as before.
A Streamlit without ``st.App`` runs the script alone, as it always did.

Importing this module does not import Streamlit.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Paths under the server's base that are never the app's HTML page: Streamlit's API and websocket, its scripts and
# styles, the components' own pages, media and the app's static files.
_NOT_THE_PAGE = ("_stcore/", "static/", "component/", "media/", "app/static/")
# Streamlit's page is about 1.5 KB; a larger HTML answer is passed on as it came.
MAX_PAGE_BYTES = 256 * 1024


def imported_to_serve(name: str, file: str) -> bool:
    """Whether a module of this ``__name__`` and ``__file__`` is an entry file ``streamlit run`` imported to find
    the app it serves (it imports the file by its stem, as a top-level module), rather than a session's run of the
    script (``__main__``) or an import from the package."""
    return name == pathlib.Path(file).stem


# What the run overview (the page a session opens first) imports on its first visit, imported as the server starts
# instead: Parquet's reader (a big run's kept answers), Plotly's figures, the flags and the overview's charts. On a
# run of a million rollouts these took 0.1 to 0.2 s of a fresh server's first overview.
_FIRST_PAGE = ("pyarrow.parquet", "plotly.graph_objects", "ares_viewer.analysis.aggregate_plots",
               "ares_viewer.analysis.behaviours", "ares_viewer_app.panels.flag_panel")


def warm() -> None:
    """Import what the first page needs."""
    for name in _FIRST_PAGE:
        importlib.import_module(name)


@contextlib.asynccontextmanager
async def warmed(_app: Any) -> AsyncIterator[None]:
    """The entry files' ``st.App`` lifespan: ``warm`` once Streamlit's runtime has started (a cached function
    defined before it warns that it found none), before the server answers its first request."""
    warm()
    yield


def base_path() -> str:
    """The server's ``server.baseUrlPath`` without its slashes ("" when it is served at the root)."""
    from streamlit import config

    return str(config.get_option("server.baseUrlPath") or "").strip("/")


def script(base: str) -> bytes:
    """The script that names the server to Streamlit's browser code: ``location.origin`` + ``/base/``."""
    path = json.dumps(f"/{base}/" if base else "/").replace("<", "\\u003c")
    return (b"<script>window.__streamlit=Object.assign({},window.__streamlit,"
            b"{BACKEND_BASE_URL:location.origin+" + path.encode() + b"});</script>")


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    return next((value for key, value in headers if key.lower() == name), None)


class NamedServer:
    """ASGI middleware: Streamlit's HTML page gets ``script(base_path())`` as the first element of its head."""

    def __init__(self, app: ASGIApp, base: str | None = None) -> None:
        self.app = app
        self._base = base_path() if base is None else base

    def _is_page_request(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] != "GET":
            return False
        base, path = self._base, str(scope.get("path", "")).lstrip("/")
        if base:
            if path != base and not path.startswith(base + "/"):
                return False
            path = path[len(base):].lstrip("/")
        return not path.startswith(_NOT_THE_PAGE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._is_page_request(scope):
            await self.app(scope, receive, send)
            return
        # Asked plain: the page is rewritten whole, so it must not come compressed.
        scope = dict(scope, headers=[(k, v) for k, v in scope.get("headers", []) if k.lower() != b"accept-encoding"])
        start: Message = {}
        body: list[bytes] = []
        size = 0
        passing = False

        async def rewrite(message: Message) -> None:
            nonlocal passing, size
            if passing:
                await send(message)
                return
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                html = (_header(headers, b"content-type") or b"").startswith(b"text/html")
                if not html or _header(headers, b"content-encoding") or message.get("status", 200) != 200:
                    passing = True
                    await send(message)
                    return
                start.update(message)
                return
            body.append(message.get("body", b""))
            size += len(body[-1])
            if size > MAX_PAGE_BYTES:  # not Streamlit's page: sent on as it came
                passing = True
                await send(start)
                await send({"type": "http.response.body", "body": b"".join(body), "more_body": True})
                if not message.get("more_body"):
                    await send({"type": "http.response.body", "body": b""})
                return
            if message.get("more_body"):
                return
            page = b"".join(body)
            if b"<head>" in page:
                page = page.replace(b"<head>", b"<head>" + script(self._base), 1)
            # Its length changed; its validators named the file as stored.
            headers = [(k, v) for k, v in start.get("headers", [])
                       if k.lower() not in (b"content-length", b"etag", b"last-modified")]
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, rewrite)


def middleware() -> list[Any]:
    """What the entry files give ``st.App``: ``NamedServer`` in front of Streamlit's own server."""
    from starlette.middleware import Middleware

    return [Middleware(NamedServer)]
