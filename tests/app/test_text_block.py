"""The Episode page's text blocks and figures (``blocks.text_block``, ``blocks.figures``): shown exactly, as text."""

from __future__ import annotations

import page_text

from ares_viewer_app.panels import blocks


class _Page:
    """What ``page_text.blocks`` reads: the page's ``st.html`` elements."""

    def __init__(self, *bodies: str):
        self.bodies = bodies

    def get(self, kind: str):
        return [type("Html", (), {"value": body})() for body in self.bodies] if kind == "html" else []


def test_hostile_text_is_shown_as_text_and_every_character_kept():
    text = '<img src=x onerror="alert(1)"> </pre><script>fetch("http://127.0.0.1:1")</script>\n  & &amp; "q" \'s\'\n'
    html = blocks.text_block_html(text)
    assert "<img" not in html and "<script" not in html and "</pre><script" not in html
    assert page_text.blocks(_Page(html)) == [page_text.TextBlock(text, "text")]


def test_a_diff_colours_added_and_removed_lines_and_keeps_its_text():
    diff = "--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-old <b>\n+new & improved\n context\n"
    html = blocks.text_block_html(diff, language="diff")
    assert '<span style="color:#cf222e">-old &lt;b&gt;</span>' in html
    assert '<span style="color:#1a7f37">+new &amp; improved</span>' in html
    assert '<span style="color:#1a7f37">+++ b/f.py' not in html  # file headers stay plain
    assert page_text.blocks(_Page(html)) == [page_text.TextBlock(diff, "diff")]


def test_a_row_of_figures_shows_each_label_and_value_as_text():
    shown = [("Reward", "–"), ("Cost", "$0.2392"), ("<b>label</b>", '<img src=x onerror="1">')]
    html = blocks.figures_html(shown)
    assert "<b>" not in html and "<img" not in html
    assert page_text.figures(_Page(html)) == dict(shown)
