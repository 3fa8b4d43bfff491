"""The middleware that names the server in the app's HTML page (``ares_viewer_app.serving.served``): what it rewrites
and what it passes on untouched, on a stand-in app (pure ASGI logic; the real server is in
``tests/browser/test_served_browser.py``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip

from ares_viewer_app.serving import served

PAGE = b'<!doctype html><html><head><meta charset="UTF-8"><title>Streamlit</title></head><body><div id="root"></div>'


def _answer(body: bytes, content_type: bytes = b"text/html", *, chunks: int = 1, status: int = 200,
            extra: tuple[tuple[bytes, bytes], ...] = ()):
    """A stand-in app answering every request with ``body`` (in ``chunks`` parts); records the request's headers."""
    seen = {}

    async def app(scope, receive, send):
        seen["headers"] = dict(scope.get("headers", []))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                                (b"etag", b'"abc"'), *extra]})
        size = -(-len(body) // chunks)
        parts = [body[i:i + size] for i in range(0, len(body), size)] or [b""]
        for n, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": n < len(parts) - 1})

    return app, seen


def _get(app, path: str, *, method: str = "GET", base: str = "", kind: str = "http"):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    scope = {"type": kind, "method": method, "path": path,
             "headers": [(b"accept-encoding", b"gzip, deflate"), (b"host", b"127.0.0.1")]}
    # On a thread of its own: a browser test's Playwright may hold an event loop on this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, served.NamedServer(app, base=base)(scope, receive, send)).result()
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start, dict(start["headers"]), body


def test_the_page_at_a_path_names_the_server_first_in_its_head_with_a_true_length():
    app, seen = _answer(PAGE, chunks=3)
    _, headers, body = _get(app, "/episode")
    assert body.startswith(b'<!doctype html><html><head><script>window.__streamlit=')
    assert b'BACKEND_BASE_URL:location.origin+"/"' in body
    assert body.replace(served.script(""), b"") == PAGE  # nothing else changed
    assert headers[b"content-length"] == str(len(body)).encode()
    assert b"etag" not in headers  # the validator named the file as stored, not this page
    assert b"accept-encoding" not in seen["headers"]  # asked plain, so it can be rewritten


def test_under_a_base_path_the_page_names_it_and_other_paths_are_not_the_apps():
    app, _ = _answer(PAGE)
    _, _, body = _get(app, "/viewer/episode", base="viewer")
    assert b'BACKEND_BASE_URL:location.origin+"/viewer/"' in body
    _, _, body = _get(app, "/viewer", base="viewer")
    assert served.script("viewer") in body
    _, _, elsewhere = _get(app, "/other/episode", base="viewer")
    assert elsewhere == PAGE


def test_scripts_api_components_media_and_the_websocket_pass_untouched():
    for path in ("/static/js/index.js", "/_stcore/health", "/component/ares/index.html", "/media/a.html",
                 "/app/static/x.html"):
        app, seen = _answer(PAGE)
        _, headers, body = _get(app, path)
        assert body == PAGE and headers[b"etag"] == b'"abc"', path
        assert seen["headers"][b"accept-encoding"] == b"gzip, deflate", path
    for method in ("HEAD", "POST"):
        app, _ = _answer(PAGE)
        assert _get(app, "/episode", method=method)[2] == PAGE
    app, seen = _answer(PAGE)  # the websocket's scope, at a page's path
    assert _get(app, "/episode", kind="websocket")[2] == PAGE
    assert seen["headers"][b"accept-encoding"] == b"gzip, deflate"


def test_answers_that_are_not_the_page_pass_as_they_came():
    cases = [
        _answer(b'{"ok": true}', b"application/json"),  # not HTML
        _answer(gzip.compress(PAGE), extra=((b"content-encoding", b"gzip"),)),  # compressed all the same
        _answer(b"<html><head></head>missing</html>", status=404),  # not a 200
    ]
    for app, _ in cases:
        _, headers, body = _get(app, "/episode")
        assert served.script("") not in body
        assert headers[b"etag"] == b'"abc"'
    big = b"<html><head></head>" + b"x" * (served.MAX_PAGE_BYTES + 10)
    app, _ = _answer(big, chunks=5)
    assert _get(app, "/episode")[2] == big  # over the bound: sent on whole, unchanged


def test_the_script_cannot_be_closed_by_a_base_path():
    assert b"</script><" not in served.script("a</script><script>alert(1)")[:-len(b"</script>")]


def test_only_an_import_by_the_files_stem_serves():
    assert served.imported_to_serve("main", "/x/app/main.py")
    assert not served.imported_to_serve("__main__", "/x/app/main.py")
    assert not served.imported_to_serve("ares_viewer_app.main", "/x/ares_viewer_app/main.py")
