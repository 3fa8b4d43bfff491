"""The Episode page's step keys (``step_keys.js``, as ``step_list.keys_html`` sends it) in Chromium, on a page of
their own: the page stands in for Streamlit's, with the step panes' marker and, when a test draws it, the Next
button's container. A key pressed before Streamlit has drawn the buttons (a page just opened) must not be lost; a key
pressed where there are no step panes must be left to the page."""

from __future__ import annotations

import pytest

from ares_viewer_app.views.episode import step_list

pytestmark = pytest.mark.browser

URL = "http://keys.test/episode?step=3"

# The Next button as Streamlit draws it (a container of class st-key-<key>); its click does what the page's does:
# the URL names the next step. Each click is counted.
DRAW_NEXT = """() => {
  const box = document.createElement("div");
  box.className = "st-key-episode_next";
  const button = document.createElement("button");
  button.textContent = "Next";
  button.addEventListener("click", () => {
    window.__clicks = (window.__clicks || 0) + 1;
    history.pushState(null, "", "?step=4");
  });
  box.appendChild(button);
  document.body.appendChild(box);
}"""


def open_keys_page(page, body: str) -> None:
    page.route("http://keys.test/**", lambda route: route.fulfill(
        content_type="text/html", body=f"<!doctype html><html><body>{body}{step_list.keys_html()}</body></html>"))
    page.goto(URL)
    page.wait_for_function("window.__aresViewerKeys === true")
    # A listener added after the key script's: it sees whether the script took the key.
    page.evaluate("document.addEventListener('keydown', (e) => { window.__taken = e.defaultPrevented; })")


def test_a_key_pressed_before_its_button_is_drawn_presses_it_once_drawn(page):
    open_keys_page(page, '<div data-ares-step="3"></div>')
    page.keyboard.press("j")
    assert page.evaluate("window.__taken") is True
    page.wait_for_timeout(300)  # the button comes later, as on a page whose widgets are still being drawn
    page.evaluate(DRAW_NEXT)
    page.wait_for_function("new URLSearchParams(location.search).get('step') === '4'")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__clicks") == 1  # pressed once, not again


def test_a_key_where_there_are_no_step_panes_is_left_to_the_page(page):
    open_keys_page(page, "<p>Another page</p>")
    page.keyboard.press("j")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__taken") is False
    assert page.evaluate("window.__clicks") is None


def test_a_key_waits_until_the_slider_shows_the_step_the_url_names(page):
    # The slider still shows step 2 (it draws later than the step panes' marker): a press now would send 2 with it.
    open_keys_page(page, '<div data-ares-step="3"></div><div class="st-key-episode-slider">'
                         '<input type="range" min="0" max="9" value="2"></div>')
    page.evaluate(DRAW_NEXT)
    page.keyboard.press("j")
    page.wait_for_timeout(400)
    assert page.evaluate("window.__clicks") is None  # held while the slider is behind
    page.evaluate("document.querySelector('input[type=range]').value = '3'")
    page.wait_for_function("new URLSearchParams(location.search).get('step') === '4'")
    assert page.evaluate("window.__clicks") == 1
