"""The Episode page's text blocks (a text exactly as it is, with a copy button) and its row of labelled
figures, as light HTML."""

from __future__ import annotations

import html

import streamlit as st

# A text block (``text_block``): monospace, wrapped, on a faint background that suits light and dark themes.
_TEXT_STYLE = ("white-space:pre-wrap;overflow-wrap:anywhere;margin:0;padding:0.75rem 2.5rem 0.75rem 1rem;"
               "border-radius:0.5rem;background:rgba(128,128,128,0.1);font-size:0.85rem;line-height:1.5;"
               "font-family:'Source Code Pro',ui-monospace,monospace")
_COPY_STYLE = ("position:absolute;top:0.35rem;right:0.35rem;border:none;background:transparent;cursor:pointer;"
               "opacity:0.6;font-size:0.8rem;color:inherit")
# Lines of a diff coloured by their first character (file headers left plain).
_DIFF_COLOURS = {"+": "#1a7f37", "-": "#cf222e", "@": "#8250df"}


def text_block_html(text: str, language: str | None = None) -> str:
    """The HTML of :func:`text_block`: ``text`` escaped, every character kept."""
    if language == "diff":
        lines = []
        for line in text.split("\n"):
            colour = None if line.startswith(("+++", "---")) else _DIFF_COLOURS.get(line[:1])
            escaped = html.escape(line)
            lines.append(f'<span style="color:{colour}">{escaped}</span>' if colour else escaped)
        body = "\n".join(lines)
    else:
        body = html.escape(text)
    kind = html.escape(language or "text", quote=True)
    return (f'<div class="ares-text" style="position:relative"><button type="button" data-ares-copy title="Copy" '
            f'style="{_COPY_STYLE}">Copy</button><pre data-language="{kind}" style="{_TEXT_STYLE}">{body}</pre></div>')


def figures_html(figures: list[tuple[str, str]]) -> str:
    """The HTML of :func:`figures`: each label and value escaped."""
    cells = "".join(
        f'<div data-ares-figure="{html.escape(label, quote=True)}" style="flex:1 1 0;min-width:7rem">'
        f'<div style="font-size:0.875rem;opacity:0.75">{html.escape(label)}</div>'
        f'<div style="font-size:2.25rem;line-height:1.3">{html.escape(value)}</div></div>'
        for label, value in figures)
    return f'<div class="ares-figures" style="display:flex;flex-wrap:wrap;gap:1rem">{cells}</div>'


def figures(figures: list[tuple[str, str]]) -> None:
    """A row of labelled figures (label above, value large), as ``st.metric`` in columns shows them but as one
    light element: six metrics took the Episode page six columns and their own script to load (#33)."""
    st.html(figures_html(figures))


def text_block(text: str, *, language: str | None = None) -> None:
    """A text exactly as it is (a file's or a model's): monospace, wrapped, escaped, with a copy button (which the
    Episode page's key script works). ``st.code`` shows the same, but its syntax highlighter took a quarter of the
    browser's time on an Episode page (#33); a diff's added and removed lines are coloured here."""
    st.html(text_block_html(text, language))
