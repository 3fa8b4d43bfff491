"""Notes, labels and paths are shown as text in a real browser: Chromium fetches nothing they name.

A note whose text is a markdown image, a label that tries to close its badge and link out, and a path with
backticks are stored for a step; the Review page and the step view show them, while a local HTTP server
records every request it gets. Neither it nor Chromium's own request log sees one, and the page holds no
image or link to it.
"""

from __future__ import annotations

import http.server
import pathlib
import re
import threading
from typing import ClassVar

import pytest
from conftest import serve_app
from playwright.sync_api import expect

import ares_viewer
from ares_viewer import review

pytestmark = pytest.mark.browser

_JOINER = "\u2060"  # what the app puts inside URL-looking words so markdown does not link them


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self):
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def bait():
    """A tiny HTTP server on 127.0.0.1 that records every request; yields its base URL and the paths asked for."""
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.seen
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def server(runs_root, tmp_path_factory):
    """An app server with a review database of its own (the notes here must not show in other tests)."""
    base = tmp_path_factory.mktemp("user-text")
    with serve_app(runs_root, base / "cache", base / "review.sqlite", base) as url:
        yield url, base / "review.sqlite"


def test_hostile_notes_and_labels_are_shown_as_text_and_fetch_nothing(page, server, bait, runs_root, wait_idle):
    app_url, db = server
    url, requests = bait
    name = sorted(p.name for p in runs_root.iterdir() if p.is_dir() and any(p.rglob("*.json")))[0]
    run = ares_viewer.open_run(runs_root / name)
    episode_id = run.episodes.sort_values("num_actions")["episode_id"].iloc[-1]
    text = f"![x]({url}/pixel.png)"
    label = f"a]({url}/x)"
    path = f"`x` ![p]({url}/path.png)"
    review.open_store(db).add(run.location, episode_id, 1, author=f"[me]({url}/author)", label=label, text=text,
                              path=path)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if request.url.startswith(url) else None)

    def fetched_nothing() -> None:
        wait_idle(page)
        page.wait_for_timeout(1500)  # time for any image or prefetch to be asked for
        assert page.locator(f'img[src^="{url}"], a[href^="{url}"]').count() == 0

    # The Review page: the note's link (to its step, in the app) carries label and text as they are.
    page.goto(f"{app_url}/review?run={name}")
    expect(page.get_by_text("1 of 1 notes")).to_be_visible()
    link = page.get_by_role("link", name=re.compile(re.escape("— a](http")))
    expect(link).to_be_visible()
    assert f"{label}: {text}" in link.inner_text().replace(_JOINER, "")
    assert link.get_attribute("href").startswith("episode?")  # the app's own page, relative
    fetched_nothing()

    # The step view: the label whole inside its badge, then the text and the path as written.
    page.goto(f"{app_url}/episode?run={name}&episode={episode_id}&step=1")
    expect(page.locator('[data-testid="stCaptionContainer"]', has_text=re.compile(r"^step 1 \("))).to_be_visible()
    note = page.locator('[data-testid="stMarkdownContainer"]', has=page.locator(".stMarkdownBadge"),
                        has_text="![x](http").last
    expect(note).to_be_visible()
    assert note.locator(".stMarkdownBadge").first.inner_text().replace(_JOINER, "") == label
    shown = note.inner_text().replace(_JOINER, "")
    assert text in shown and path in shown
    fetched_nothing()
    assert asked == [] and requests == []


def test_the_bait_server_would_have_seen_a_fetch(page, bait, tmp_path):
    """The check above can fail: a page that does show the image makes the server see it."""
    url, requests = bait
    html = pathlib.Path(tmp_path / "bait.html")
    html.write_text(f'<img src="{url}/control.png">')
    page.goto(html.as_uri())
    page.wait_for_timeout(1000)
    assert "/control.png" in requests
    requests.clear()


def test_a_queues_schema_is_shown_as_text_in_widget_labels_and_options(page, server, bait, runs_root, wait_idle):
    """A label schema's field names and options are widget labels and radio options, which Streamlit renders as
    markdown: written as images, they are shown as text and fetch nothing."""
    from ares_viewer.review import queue_items, queues

    app_url, db = server
    url, requests = bait
    name = sorted(p.name for p in runs_root.iterdir() if p.is_dir() and any(p.rglob("*.json")))[0]
    run = ares_viewer.open_run(runs_root / name)
    field, option = f"![f]({url}/field.png)", f"![o]({url}/option.png)"
    schema = {"fields": [{"name": field, "kind": "single", "options": [option, "fine"]},
                         {"name": f"![s]({url}/score.png)", "kind": "score", "min": 0, "max": 5}]}
    with review.open_store(db) as store:
        queues.create(store, "hostile-schema", queue_items.episode_items(run, run.episode_ids[:1]), schema=schema,
                      author="lead", reviewers=["ada"])
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if request.url.startswith(url) else None)
    page.context.add_cookies([{"name": "ares_viewer_reviewer", "value": "ada", "url": app_url}])
    page.goto(f"{app_url}/queues?run={name}&queue=hostile-schema")
    wait_idle(page)
    page.get_by_role("button", name="Next item").click()
    form = page.locator('[data-testid="stForm"]', has=page.get_by_role("button", name="Save label"))
    expect(form).to_be_visible()
    shown = form.inner_text().replace(_JOINER, "")
    assert field in shown and option in shown
    wait_idle(page)
    page.wait_for_timeout(1500)
    assert page.locator(f'img[src^="{url}"], a[href^="{url}"]').count() == 0
    assert asked == [] and requests == []
