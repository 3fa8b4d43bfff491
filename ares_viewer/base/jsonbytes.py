"""Where a piece of text may sit in a JSON file's raw bytes: every way a JSON writer may spell it.

A JSON string holds a character as itself (UTF-8) or escaped: ``\\"``, ``\\\\``, ``\\/``, ``\\n`` and the other
short escapes, or ``\\uXXXX`` (hex digits in either case; a character beyond the Basic Multilingual Plane as a
surrogate pair). ``pattern(text)`` is a bytes regular expression matching each of those spellings of ``text``
(and of every text ``re.IGNORECASE`` equates with it, unless ``case``). Searching a file's raw bytes with it finds
every place where a string of the file holds ``text``, and possibly more (a spelling outside any string), never
less. ``"`` and ``\\`` are matched unescaped too: an object a reader turns back into text (a tool call's
arguments) holds them as JSON syntax.

A string may hold JSON a reader decodes again (a tool call's arguments): there an escape's backslash is itself
escaped (``\\\\\\"`` for a quote, ``\\\\u00e9``), so every escape is matched after a run of backslashes of any
length. (An escape whose backslash, ``u`` or hex digits are themselves written as ``\\u`` escapes of ASCII
characters is not: ``ESCAPED_ASCII`` finds the bytes that may hold one, to be read without a byte test.)
"""

from __future__ import annotations

import contextlib
import functools
import re

# An escape's backslash, after any more backslashes (``\\+`` spelled so that ``re`` still skips fast to where a
# match may start: a pattern that opens with a repeat loses that).
_ESCAPE = rb"\\\\*"
_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


@functools.cache
def _every_char() -> str:
    return "".join(map(chr, range(0x110000)))


@functools.lru_cache(maxsize=1024)
def same_ignoring_case(char: str) -> tuple[str, ...]:
    """Every character ``re.IGNORECASE`` matches with ``char`` (itself included), found by asking ``re`` itself:
    its case folding has cases of its own (``k`` matches the Kelvin sign, ``s`` the long s)."""
    return tuple(re.findall(re.escape(char), _every_char(), re.IGNORECASE))


def _hex(code: int) -> bytes:
    digits = b"%04x" % code
    return _ESCAPE + b"u" + b"".join(b"[%s%s]" % (d.lower(), d.upper()) if d.isalpha() else d
                               for d in (digits[i:i + 1] for i in range(4)))


def _escaped(char: str) -> bytes:
    code = ord(char)
    if code <= 0xFFFF:
        return _hex(code)
    code -= 0x10000
    return _hex(0xD800 + (code >> 10)) + _hex(0xDC00 + (code & 0x3FF))


def _spellings(char: str) -> list[bytes]:
    forms = [_escaped(char)]
    with contextlib.suppress(UnicodeEncodeError):  # a lone surrogate is only ever written escaped
        forms.append(re.escape(char.encode("utf-8")))
    if char in _SHORT:
        forms.append(_ESCAPE + re.escape(_SHORT[char][1:].encode()))
    return forms


# A \u escape of an ASCII digit, letter or other character from ``@`` on (``\``, ``_``, brackets): what JSON
# writers leave as it is (they escape control characters, quotes, and ``<``, ``>``, ``&`` for HTML), so bytes with
# none of these are spelled the way ``pattern`` expects, in keys too.
ESCAPED_ASCII = re.compile(rb"\\u00(?:3[0-9]|[4-7][0-9a-fA-F])")


def pattern(text: str, *, case: bool = False) -> re.Pattern[bytes]:
    """A bytes pattern matching every spelling of ``text`` in a JSON string (see the module's docstring)."""
    pieces = []
    for char in text:
        chars = (char,) if case else same_ignoring_case(char)
        forms = [form for c in chars for form in _spellings(c)]
        longest_first: list[bytes] = sorted(set(forms), key=lambda f: (-len(f), f))
        pieces.append(b"(?:" + b"|".join(longest_first) + b")")
    return re.compile(b"".join(pieces))
