"""User text in Streamlit's markdown, shown as text: no images, links, badges, icons, colours or maths from it.

Streamlit renders markdown in ``st.markdown``, ``st.caption``, ``st.info``/``warning``/``error``/``success``,
``st.write`` of a string, and in widget labels, help texts, metric values and radio options (images and links
included). Anything there that comes from a file or a user (task names, ids, paths, commands, outputs, error
messages, notes, labels, authors, run locations) goes through one of these; ``st.text``, ``st.code``,
``st.json``, select box options and tables show text as it is and need none.

- ``md``: any text, lines kept; every ASCII punctuation mark is backslash-escaped (so ``![x](url)``, ``]``,
  ``:red[``, ``:material/…:`` and ``$`` stay literal), and a URL-looking word (``http:``, ``www.``, ``a@b``) gets
  an invisible word joiner so GitHub-flavoured markdown does not turn it into a link.
- ``line``: ``md`` of one line (line breaks become spaces): labels, badges, captions.
- ``code``: an inline code span of one line, fenced with more backticks than any run of them in the text.
- ``badge``: a coloured badge whose text cannot end it early.
"""

from __future__ import annotations

import re

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation mark: CommonMark escapes each
# Where GFM's autolink-literal pass would start a link: a scheme's colon, "www.", an e-mail's "@".
_LINK_START = re.compile(r"(?i)(?<=https)(?=:)|(?<=http)(?=:)|(?<=ftp)(?=:)|(?<=mailto)(?=:)|(?<=www)(?=\.)|(?=@)")
_WORD_JOINER = "\u2060"
_BACKTICKS = re.compile(r"`+")


def _text(value: object) -> str:
    return "" if value is None else str(value)


def md(value: object) -> str:
    """Text as markdown that shows exactly this text (line breaks kept)."""
    text = _LINK_START.sub(_WORD_JOINER, _text(value))
    return "  \n".join(_PUNCTUATION.sub(r"\\\1", part) for part in text.split("\n"))


def line(value: object) -> str:
    """Text as one line of markdown that shows exactly this text (line breaks become spaces)."""
    return md(" ".join(_text(value).splitlines()))


def code(value: object) -> str:
    """Text as an inline code span on one line (its backticks cannot close the span)."""
    text = " ".join(_text(value).splitlines())
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    # A space inside the fence keeps a backtick at either end of the text apart from it (CommonMark drops one
    # space at each end of a code span, so the text shows as it is).
    pad = " " if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def badge(colour: str, value: object) -> str:
    """A coloured badge (``:colour-badge[...]``) showing exactly this text on one line."""
    return f":{colour}-badge[{line(value)}]"
