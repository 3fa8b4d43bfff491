"""Regular expressions that no text can make slow past a deadline: RE2, and a process for the costly matches.

RE2 (``google-re2``) matches in time linear in the text, so no expression backtracks the way ``re`` does on
``(a+)+$`` (2**n steps for n letters), and it lets go of the interpreter while it matches (other threads, other
visitors of the app, go on). Linear is not always quick: when RE2's automaton grows too large it falls back to
simulating it, at a cost of the text's length times the expression's size (``[ab]{500}c|a[ab]{500}c`` over 2 MB
of ``a``s and ``b``s takes tens of seconds). So a match whose worst case (length × program size) is over
``INLINE_COST`` and that must end by a deadline runs in a child process, killed at the deadline
(:class:`MatchTimeoutError`); every other match runs here, in place.

RE2's syntax is Python's without lookarounds, backreferences and possessive repeats (and ``\\Z`` is written
``\\z``): :func:`compile_expression` refuses them with a message saying so.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import re2

# Worst-case steps (characters × program size) matched in place: about a second when RE2 must simulate its
# automaton (some 5e7 steps a second), milliseconds otherwise.
INLINE_COST = 50_000_000
# A child process gets at least this long, however little of the budget is left (its start costs ~50 ms).
_FLOOR_S = 1.0
# A lone surrogate (a JSON file may hold one escaped): RE2 reads UTF-8, which cannot hold one. It is searched as
# U+FFFD, one character for one, so offsets stay those of the text.
_SURROGATE = re.compile("[\ud800-\udfff]")
# The child: the expression and options on the first line of its input, the text after it; the matches' spans
# (in characters) out, as JSON.
_CHILD = """
import json, sys, re2
spec = json.loads(sys.stdin.buffer.readline())
options = re2.Options()
options.case_sensitive = spec["case"]
options.log_errors = False
text = sys.stdin.buffer.read().decode("utf-8")
sys.stdout.write(json.dumps([m.span() for m in re2.compile(spec["expression"], options).finditer(text)]))
"""


class MatchTimeoutError(TimeoutError):
    """A match did not end by its deadline (its process was killed); the message says over how much text."""


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    """A match found by the child process: where it starts and ends in the text."""

    begin: int
    finish: int

    def start(self) -> int:
        return self.begin

    def end(self) -> int:
        return self.finish


class Expression:
    """A regular expression on RE2. ``deadline`` (``time.monotonic()`` seconds, None: none) bounds a costly
    match: it then runs in a child process killed at the deadline (``MatchTimeoutError``)."""

    def __init__(self, expression: str, case: bool) -> None:
        options = re2.Options()
        options.case_sensitive = case
        options.log_errors = False  # RE2 would print every refused expression on stderr
        self._regexp = re2.compile(expression, options)
        self._spec = json.dumps({"expression": expression, "case": case}).encode() + b"\n"
        self.deadline: float | None = None

    def finditer(self, text: str) -> Iterator[re2._Match | Span]:
        if not text.isascii() and _SURROGATE.search(text):
            text = _SURROGATE.sub("\ufffd", text)
        if self.deadline is None or len(text) * self._regexp.programsize <= INLINE_COST:
            return self._regexp.finditer(text)
        return iter(self._in_child(text, max(_FLOOR_S, self.deadline - time.monotonic())))

    def _in_child(self, text: str, seconds: float) -> list[Span]:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", _CHILD], input=self._spec + text.encode("utf-8"),
                                  capture_output=True, timeout=seconds, check=True)
        except subprocess.TimeoutExpired:
            raise MatchTimeoutError(f"the expression did not finish within the time budget over {len(text):,} "
                                    "characters") from None
        except (OSError, subprocess.CalledProcessError) as exc:
            raise MatchTimeoutError(f"the expression could not be matched over {len(text):,} characters "
                                    f"({exc})") from None
        return [Span(a, b) for a, b in json.loads(done.stdout)]


def _refusal(expression: str, reason: object) -> str:
    reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    message = f"invalid regular expression {expression!r}: {reason}"
    try:
        re.compile(expression)
    except re.error:
        return message
    return (message + " (searches use RE2 syntax, which runs in linear time: no lookarounds such as (?=...) or "
            "(?<!...), no backreferences such as \\1 or (?P=name), no possessive repeats such as a++; write \\Z "
            "as \\z)")


def compile_expression(expression: str, *, case: bool = False) -> Expression:
    """The RE2 expression of ``expression``, matching case exactly when ``case``.

    Raises:
        ValueError: for an invalid expression, or one RE2 does not take (lookarounds, backreferences): the message
            says what is wrong.
    """
    try:
        return Expression(expression, case)
    except re2.error as exc:
        raise ValueError(_refusal(expression, exc.args[0] if exc.args else exc)) from None
