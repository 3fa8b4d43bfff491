"""Text blocks (a text exactly as it is, with a copy button; a long one collapsed to its head and tail until "Show
all") and a row of labelled figures, as light HTML: the Episode page's and Compare's."""

from __future__ import annotations

import html

import streamlit as st

# A text longer than this (characters or lines) is shown as its head and tail until "Show all".
COLLAPSE_CHARS = 3_000
COLLAPSE_LINES = 40
HEAD_LINES, HEAD_CHARS = 20, 1_500
TAIL_LINES, TAIL_CHARS = 10, 800
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


# The text blocks' copy buttons, worked by one listener per browser page (``copy_buttons``).
_COPY_SCRIPT = """<script>
(() => {
if (window.__aresViewerCopy) return;
window.__aresViewerCopy = true;
// A text block's copy button (text_block) copies the block's text exactly as the file holds it.
// (Where the clipboard API refuses, as on a page served over plain HTTP to another host, a selection is copied.)
const copied = (button) => {
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
};
const copyBySelection = (text, button) => {
  const area = document.createElement("textarea");
  area.value = text;
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  if (document.execCommand("copy")) copied(button);
  area.remove();
};
document.addEventListener("click", (event) => {
  const button = event.target.closest?.("[data-ares-copy]");
  const text = button?.parentElement?.querySelector("pre")?.textContent;
  if (text === undefined) return;
  if (!navigator.clipboard) return copyBySelection(text, button);
  navigator.clipboard.writeText(text).then(() => copied(button), () => copyBySelection(text, button));
});
})();
</script>"""


def copy_buttons() -> None:
    """The script that works the text blocks' copy buttons (once per browser page; a page with text blocks calls
    it)."""
    st.html(_COPY_SCRIPT, unsafe_allow_javascript=True)


def figures_html(figures: list[tuple[str, str]], *, helps: dict[str, str] | None = None,
                 grow: dict[str, float] | None = None) -> str:
    """The HTML of :func:`figures`: each label and value escaped. ``helps``: a figure's help by its label, shown when
    the pointer rests on the figure (its label dotted-underlined); ``grow``: a figure's share of the row's width by
    its label (1 unless given), for a value wider than a number."""
    helps, grow = helps or {}, grow or {}
    cells = []
    for label, value in figures:
        name = html.escape(label, quote=True)
        helped = helps.get(label)
        title = f' title="{html.escape(helped, quote=True)}"' if helped else ""
        hint = ";text-decoration:underline dotted;cursor:help" if helped else ""
        cells.append(f'<div data-ares-figure="{name}"{title} style="flex:{grow.get(label, 1):g} 1 0;min-width:7rem">'
                     f'<div style="font-size:0.875rem;opacity:0.75{hint}">{html.escape(label)}</div>'
                     f'<div style="font-size:2.25rem;line-height:1.3">{html.escape(value)}</div></div>')
    return f'<div class="ares-figures" style="display:flex;flex-wrap:wrap;gap:1rem">{"".join(cells)}</div>'


def figures(figures: list[tuple[str, str]], *, helps: dict[str, str] | None = None,
            grow: dict[str, float] | None = None) -> None:
    """A row of labelled figures (label above, value large), as ``st.metric`` in columns shows them but as one
    light element: six metrics took the Episode page six columns and their own script to load (#33), seven took
    the Overview a third of the browser's main-thread time (#46). ``helps`` and ``grow``: :func:`figures_html`."""
    st.html(figures_html(figures, helps=helps, grow=grow))


def text_block(text: str, *, language: str | None = None) -> None:
    """A text exactly as it is (a file's or a model's): monospace, wrapped, escaped, with a copy button (which the
    Episode page's key script works). ``st.code`` shows the same, but its syntax highlighter took a quarter of the
    browser's time on an Episode page (#33); a diff's added and removed lines are coloured here."""
    st.html(text_block_html(text, language))


def head_and_tail(text: str) -> str:
    """A long text as its first and last lines with how much is hidden between them; a short one whole."""
    lines = text.splitlines(keepends=True)
    if len(text) <= COLLAPSE_CHARS and len(lines) <= COLLAPSE_LINES:
        return text
    head = "".join(lines[:HEAD_LINES])[:HEAD_CHARS]
    tail = "".join(lines[-TAIL_LINES:])[-TAIL_CHARS:]
    tail = tail[max(0, len(head) + len(tail) - len(text)):]  # never show a character twice
    hidden = text[len(head): len(text) - len(tail)]
    return (f"{head.rstrip(chr(10))}\n[… {len(hidden):,} characters, {hidden.count(chr(10)):,} lines hidden: "
            f"“Show all” shows them …]\n{tail}")


def _show_all(key: str) -> None:
    st.session_state[key] = True


def long_text(text: str | None, key: str, *, language: str | None = None, empty: str = "(empty)",
              page: str = "episode") -> None:
    """A text block (:func:`text_block`), collapsed to head and tail when long, with a "Show all" button then: only
    what is shown is sent to the browser. ``page`` names the page's keys (``<page>.show_all.<key>``)."""
    text = text or ""
    asked = f"{page}.all.{key}"
    shown = text if st.session_state.get(asked) else head_and_tail(text)
    text_block(shown or empty, language=language)
    if shown != text:
        st.button(f"Show all {len(text):,} characters", key=f"{page}.show_all.{key}", on_click=_show_all,
                  args=(asked,), type="tertiary", icon=":material/unfold_more:")
