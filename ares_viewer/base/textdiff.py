"""Line diffs of prompts, responses, commands and outputs: unified text for terminals, HTML for pages.

Built on ``difflib``. Inputs are clipped before diffing, because a diff of two 30 MB contexts is
neither readable nor cheap; the clip is reported in the output rather than hidden. ``exact_hunks`` (a patch's
hunks) clips nothing: its caller bounds the texts (``fsdiff.patch`` leaves files over ``MAX_DIFF_BYTES`` out).
"""

from __future__ import annotations

import dataclasses
import difflib
import html

# Past this many characters a side is clipped before diffing (the diff would be unreadable anyway).
MAX_CHARS = 60_000
_STYLES = {
    "+": "background:#e6ffec;color:#116329",
    "-": "background:#ffebe9;color:#82071e",
    "@": "color:#8250df",
    " ": "color:#24292f",
}
_PRE = (
    "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;line-height:1.45;"
    "white-space:pre-wrap;word-break:break-word;margin:0;padding:6px;border:1px solid #d0d7de;border-radius:6px"
)


@dataclasses.dataclass(frozen=True, slots=True)
class DiffStats:
    """How much two texts differ."""

    added: int
    removed: int
    ratio: float

    @property
    def identical(self) -> bool:
        return self.added == 0 and self.removed == 0


def _clip(text: str | None, limit: int) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters not compared]"


def _lines(text: str | None, limit: int) -> list[str]:
    return _clip(text, limit).splitlines()


def unified(a: str | None, b: str | None, *, a_name: str = "before", b_name: str = "after", context: int = 3,
            limit: int = MAX_CHARS) -> str:
    """A unified diff of two texts (empty string when they are equal).

    Args:
        a, b: the texts; ``None`` counts as empty.
        a_name, b_name: the labels of the two sides in the ``---``/``+++`` header.
        context: lines of unchanged context around each change.
        limit: characters of each side that are compared.
    """
    lines = difflib.unified_diff(_lines(a, limit), _lines(b, limit), fromfile=a_name, tofile=b_name, n=context,
                                 lineterm="")
    return "\n".join(lines)


def exact_hunks(old: str, new: str, context: int = 3) -> str:
    """Unified-diff hunks of two texts, exact to the byte, as a patch needs them (``fsdiff.patch``): nothing
    clipped, lines split at ``\\n`` only, and a last line without one marked ``\\ No newline at end of file``."""
    def split(text: str) -> list[str]:
        parts = text.split("\n")
        return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])

    def span(start: int, stop: int) -> str:
        length = stop - start
        return f"{start + 1}" if length == 1 else f"{start if length == 0 else start + 1},{length}"

    def emit(sign: str, line: str) -> str:
        return f"{sign}{line}" if line.endswith("\n") else f"{sign}{line}\n\\ No newline at end of file\n"

    a, b = split(old), split(new)
    out = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(context):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        out.append(f"@@ -{span(i1, i2)} +{span(j1, j2)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out += [emit(" ", line) for line in a[a1:a2]]
                continue
            out += [emit("-", line) for line in a[a1:a2]]
            out += [emit("+", line) for line in b[b1:b2]]
    return "".join(out)


def stats(a: str | None, b: str | None, *, limit: int = MAX_CHARS) -> DiffStats:
    """Lines added and removed going from ``a`` to ``b``, and their similarity ratio (1.0 = equal)."""
    a_lines, b_lines = _lines(a, limit), _lines(b, limit)
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    added = removed = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return DiffStats(added=added, removed=removed, ratio=matcher.ratio())


def to_html(a: str | None, b: str | None, *, a_name: str = "before", b_name: str = "after", context: int = 3,
            limit: int = MAX_CHARS) -> str:
    """The unified diff as a self-contained HTML block (inline styles, no scripts).

    Equal texts give a short "identical" note instead of an empty box.
    """
    text = unified(a, b, a_name=a_name, b_name=b_name, context=context, limit=limit)
    if not text:
        names = f"{html.escape(a_name)} and {html.escape(b_name)}"
        return f"<div style='color:#57606a;font-size:13px'>{names} are identical</div>"
    rows = []
    for line in text.splitlines():
        kind = line[:1] if line[:1] in _STYLES else " "
        if line.startswith(("+++", "---")):
            kind = "@"
        rows.append(f"<span style='display:block;{_STYLES[kind]}'>{html.escape(line) or '&nbsp;'}</span>")
    return f"<pre style='{_PRE}'>{''.join(rows)}</pre>"


_CELL = "padding:0 6px;vertical-align:top;white-space:pre-wrap;word-break:break-word"
_NUMBER = "padding:0 6px;vertical-align:top;text-align:right;color:#8c959f;user-select:none;width:1%"
_SIDE_STYLES = {"-": "background:#ffebe9;color:#82071e", "+": "background:#e6ffec;color:#116329", " ": "", "": ""}


def side_by_side_html(a: str | None, b: str | None, *, a_name: str = "before", b_name: str = "after",
                      context: int = 3, limit: int = MAX_CHARS, max_rows: int = 4000) -> str:
    """The two texts in two columns with line numbers, changed lines highlighted (inline styles, no scripts).

    Like the unified diff, only the changed regions and ``context`` unchanged lines around them are shown.

    Args:
        a, b: the texts; ``None`` counts as empty.
        a_name, b_name: the column headings.
        context: lines of unchanged context around each change.
        limit: characters of each side that are compared.
        max_rows: rows shown at most; the rest is counted in a closing note.
    """
    a_lines, b_lines = _lines(a, limit), _lines(b, limit)
    if a_lines == b_lines:
        names = f"{html.escape(a_name)} and {html.escape(b_name)}"
        return f"<div style='color:#57606a;font-size:13px'>{names} are identical</div>"

    def cell(number: int | None, text: str | None, kind: str) -> str:
        style = _SIDE_STYLES[kind] if text is not None else "background:#f6f8fa"
        shown = "&nbsp;" if not text else html.escape(text)
        return (f"<td style='{_NUMBER};{style}'>{number or ''}</td>"
                f"<td style='{_CELL};{style}'>{shown}</td>")

    rows: list[str] = []
    hidden = 0
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        header = f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"
        pairs: list[str] = [f"<tr><td colspan='4' style='{_CELL};{_STYLES['@']}'>{header}</td></tr>"]
        for tag, i1, i2, j1, j2 in group:
            for offset in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + offset, j1 + offset
                left = a_lines[i] if i < i2 else None
                right = b_lines[j] if j < j2 else None
                kinds = (" ", " ") if tag == "equal" else ("-", "+")
                pairs.append(f"<tr>{cell(i + 1 if left is not None else None, left, kinds[0])}"
                             f"{cell(j + 1 if right is not None else None, right, kinds[1])}</tr>")
        room = max_rows - len(rows)
        hidden += max(0, len(pairs) - room)
        rows.extend(pairs[: max(0, room)])
    note = (f"<div style='color:#9a6700;font-size:13px'>{hidden:,} more row(s) not shown</div>" if hidden else "")
    head = (f"<tr><th colspan='2' style='{_CELL};text-align:left'>{html.escape(a_name)}</th>"
            f"<th colspan='2' style='{_CELL};text-align:left'>{html.escape(b_name)}</th></tr>")
    table_style = ("border-collapse:collapse;width:100%;table-layout:auto;border:1px solid #d0d7de;"
                   "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;line-height:1.45")
    return f"<table style='{table_style}'>{head}{''.join(rows)}</table>{note}"
