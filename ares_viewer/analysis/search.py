"""Find text in the reasoning, thoughts, commands and outputs of a run's episodes, and in their task and system
prompts.

A search goes file by file in run order and parses only what may match. The raw bytes are searched first
(``jsonbytes``: every way JSON may spell the query, in either case unless asked): a file, or a line of a JSON
Lines file, whose bytes cannot hold the query is never parsed; the lines that can are parsed with their format's
ordinary reader and searched episode by episode, so the hits are exactly those of searching every episode.

The byte test asks for a plain query's *words* (split at whitespace, where a reader may join two strings of the
file with a newline or a space). A word a reader may write itself is not asked for (a number, which may be the
count in the marker of elided output, and the marker's words); records whose text a reader may glue together
from several strings with nothing between them, or write from a value that is not text, are always parsed
(message content or a tool call's arguments given as a list of parts, an object or a number), and so are records
holding a ``\\u`` escape of an ASCII letter or digit (a key, or an escape inside nested JSON, may be spelled so
where the byte test would not see it). A regular expression is tested for the plain characters its top-level
sequence requires. A query with no usable word parses every episode, each file once, a chunk of records at a
time.

A regular expression runs on RE2 (``linear_regex``), whose matching takes time linear in the text: no expression
can hold a search (or the app's server) the way a backtracking engine's ``(a+)+$`` does, and a costly match runs
in a process killed when the search's time budget ends (the field's episode is then named in
``Progress.errors``). RE2 refuses lookarounds, backreferences and possessive repeats with a message saying so.
Plain text runs on ``re`` (a literal needs no backtracking).

``Search`` streams hits with counts of the files and episodes searched so far, stops at a limit or a time
budget, and continues from where it stopped; ``hits`` is the simple generator over it.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from ares_viewer.analysis import linear_regex
from ares_viewer.base import jsonbytes
from ares_viewer.formats import decoding, zipped
from ares_viewer.runs import sources

if TYPE_CHECKING:
    from ares_viewer import model
    from ares_viewer.runs.run import Run

# Step fields, then the episode's prompts: ``task`` (what the agent was first asked: the first call's messages
# before any answer) and ``system`` (the system prompt). Prompt hits are at step 0, what the agent first saw.
STEP_FIELDS = ("reasoning", "thought", "command", "output")
PROMPT_FIELDS = ("task", "system")
FIELDS = STEP_FIELDS + PROMPT_FIELDS
_SNIPPET_CHARS = 80


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    """One match: where it is and the text around it.

    Attributes:
        episode_id: the episode.
        task_name: its task.
        step: the step index.
        field: ``reasoning``, ``thought``, ``command``, ``output``, ``task`` or ``system`` (those two at step 0).
        snippet: the matched text with up to 80 characters either side, on one line.
        start, end: the match's offsets inside the field's text.
        mark: the match's offsets inside ``snippet`` (for highlighting it).
    """

    episode_id: str
    task_name: str
    step: int
    field: str
    snippet: str
    start: int
    end: int
    mark: tuple[int, int] = (0, 0)

    def pieces(self) -> tuple[str, str, str]:
        """The snippet as (before, the match, after)."""
        a, b = self.mark
        return self.snippet[:a], self.snippet[a:b], self.snippet[b:]


class Pattern(Protocol):
    """What a compiled query offers: an ``re.Pattern`` (plain text) or an RE2 expression (a regular expression)."""

    def finditer(self, text: str) -> Iterator[Any]: ...


def compile_pattern(query: str, *, regex: bool = False, case: bool = False) -> Pattern:
    """The pattern a query stands for: plain text on ``re``, a regular expression on RE2 (linear time).

    Raises:
        ValueError: for an invalid regular expression, or one RE2 does not take (lookarounds, backreferences): the
            message says what is wrong.
    """
    if not regex:
        return re.compile(re.escape(query), 0 if case else re.IGNORECASE)
    return linear_regex.compile_expression(query, case=case)


def field_text(step: model.Step, field: str) -> str | None:
    if field == "output":
        return step.output if step.output is not None else step.observation_text
    return getattr(step, field)


def _one_line(text: str) -> str:
    return text.replace("\n", " ⏎ ")


def _snippet(text: str, start: int, end: int) -> tuple[str, tuple[int, int]]:
    left, right = max(0, start - _SNIPPET_CHARS), min(len(text), end + _SNIPPET_CHARS)
    before = ("…" if left else "") + _one_line(text[left:start])
    match = _one_line(text[start:end])
    after = _one_line(text[end:right]) + ("…" if right < len(text) else "")
    return before + match + after, (len(before), len(before) + len(match))


def prompt_text(episode: model.Episode, field: str) -> str | None:
    """An episode's ``task`` prompt (the first call's messages before any answer) or ``system`` prompt."""
    first = episode.context(1) if episode.num_actions else []
    if field == "system":
        system = [m.content for m in first if m.role in ("system", "developer")]
        return "\n\n".join(filter(None, [episode.system_prompt, *system])) or None
    task = []
    for message in first:
        if message.role == "assistant":
            break
        if message.role not in ("system", "developer"):
            task.append(message.content)
    return "\n\n".join(task) or None


def _matches(episode: model.Episode, step: int, field: str, text: str, pattern: Pattern) -> Iterator[Hit]:
    try:
        found = pattern.finditer(text)
    except linear_regex.MatchTimeoutError as exc:
        raise linear_regex.MatchTimeoutError(f"episode {episode.episode_id} step {step} {field}: {exc}") from None
    for match in found:
        if match.end() == match.start():
            continue  # an empty match (e.g. ``x*``) points at nothing a reader can see
        snippet, mark = _snippet(text, match.start(), match.end())
        yield Hit(episode.episode_id, episode.task_name, step, field, snippet, match.start(), match.end(), mark)


def episode_hits(episode: model.Episode, pattern: Pattern, fields: Iterable[str] = FIELDS) -> Iterator[Hit]:
    """Every match in one episode: its prompts first (at step 0), then step by step."""
    fields = tuple(fields)
    for field in PROMPT_FIELDS:
        if field in fields:
            text = prompt_text(episode, field)
            if text:
                yield from _matches(episode, 0, field, text, pattern)
    for step in episode.actions:
        for field in fields:
            if field in PROMPT_FIELDS:
                continue
            text = field_text(step, field)
            if text:
                yield from _matches(episode, step.index, field, text, pattern)


def group_by_episode(found: Iterable[Hit]) -> list[tuple[str, list[Hit]]]:
    """Hits grouped by episode, episodes in the order of their first hit."""
    groups: dict[str, list[Hit]] = {}
    for hit in found:
        groups.setdefault(hit.episode_id, []).append(hit)
    return list(groups.items())


# A word a reader may write itself rather than read off one string of the file: a number (the count of elided
# characters) or a piece of the marker of elided output; and a character that stands for unreadable bytes.
_MARKER_WORDS = ("[...", "characters", "elided", "...]")
# Records always parsed. Those whose text a reader may glue together from several strings with nothing between
# them, or write itself from a value that is not text: message content, a tool call's arguments (or input) or a
# command that is a list of parts, an object or another value that is not a string, and a message that is itself a
# list (one pattern for the keys: ``re`` scans once, faster than once a key). And, in bytes that hold a \u escape,
# those holding one of an ASCII letter or digit (``jsonbytes.ESCAPED_ASCII``): a key spelled that way escapes the
# keys above, and a nested escape spelled that way escapes ``jsonbytes.pattern``.
_KEYS = (b"content", b"message", b"arguments", b"input", b"command", b"text", b"thinking")
_ALWAYS_PARSED = (re.compile(rb'"(?:%s)"\s*:\s*[^\s"n]' % b"|".join(_KEYS)), re.compile(rb"\[\s*\["))
_U_ESCAPE = re.compile(rb"\\u")  # ``re`` finds it in a large file faster than ``in`` does


def _always_parsed(escapes: bool) -> tuple[re.Pattern[bytes], ...]:
    return (*_ALWAYS_PARSED, jsonbytes.ESCAPED_ASCII) if escapes else _ALWAYS_PARSED


_CHUNK_LINES = 256  # records parsed at a time: memory stays bounded by a chunk, not a file


def _usable(word: str) -> bool:
    folded = word.casefold()
    return not (word.isdigit() or "\ufffd" in word or any(folded in marker for marker in _MARKER_WORDS))


class ByteTest:
    """What a file's (or a JSON Lines record's) raw bytes must hold to hold a hit of a plain query: each usable
    word in one of its JSON spellings (longest word first)."""

    def __init__(self, words: list[str], *, case: bool) -> None:
        self.words = sorted(set(words), key=len, reverse=True)
        self.case = case
        self.patterns = [jsonbytes.pattern(w, case=case) for w in self.words]
        # Bytes that are all ASCII without a \u escape can spell a printable ASCII word only as itself (the other
        # case-folded forms are not ASCII): a literal search, on lowered bytes unless ``case``, is faster.
        plain = all(w.isascii() and w.isprintable() and not set(w) & set('"\\/') for w in self.words)
        self.literals = [re.compile(re.escape((w if case else w.lower()).encode())) for w in self.words] if plain \
            else None

    @classmethod
    def of(cls, query: str, *, regex: bool = False, case: bool = False) -> ByteTest | None:
        """The test for a query, or None when no byte test is sound (no usable word)."""
        if regex:
            found = _required_text(query)
            if found is None:
                return None
            query, ignoring_case = found
            case = case and not ignoring_case
        words = [w for w in query.split() if _usable(w)]
        return cls(words, case=case) if words else None

    def view(self, data: bytes, escapes: bool) -> tuple[bytes, list[re.Pattern[bytes]]]:
        """The bytes to search (the same length and lines as ``data``) and the patterns to search them with;
        ``escapes``: whether ``data`` holds a \\u escape."""
        if self.literals is not None and not escapes and data.isascii():
            return (data if self.case else data.lower()), self.literals
        return data, self.patterns


def _required_text(expression: str) -> tuple[str, bool] | None:
    """The literal text every match of a regular expression holds (its top-level runs of plain characters, joined
    by spaces: each is required, in order), and whether it sets its own ``(?i)``; None when ``re`` cannot say."""
    try:
        # the parser ``re`` itself compiles with (a private module, untyped: any failure means None)
        _parser = importlib.import_module("re._parser")

        parsed = _parser.parse(expression)
        runs: list[str] = []
        for op, value in parsed:  # a top-level sequence: a match holds each item in turn
            runs.append(chr(value) if op is _parser.LITERAL else " ")
        return "".join(runs), bool(parsed.state.flags & re.IGNORECASE)
    except Exception:
        return None


@dataclasses.dataclass
class Progress:
    """How far a search got.

    Attributes:
        files, episodes: what the run holds.
        files_searched: files searched to their end.
        reading: whether the search stopped inside a file (the next one after those searched), partly searched.
        episodes_searched: the episodes of the files searched to their end.
        episodes_parsed: the episodes that were parsed (in a file partly searched too).
        episodes_skipped: the episodes of the files searched to their end that were not parsed: their bytes could
            not hold the query.
        hits: hits found so far.
        stopped: ``"limit"`` or ``"time"`` when the last call stopped early (``Search.hits`` continues), None
            when the search reached the end of the run.
        errors: ``path: reason`` of files that could not be read.
        unfinished: where a regular expression's match did not end within the time budget (``episode ... step
            ... field: ...``); the rest of that episode was not searched.
    """

    files: int = 0
    episodes: int = 0
    files_searched: int = 0
    reading: bool = False
    episodes_searched: int = 0
    episodes_parsed: int = 0
    episodes_skipped: int = 0
    hits: int = 0
    stopped: str | None = None
    errors: list[str] = dataclasses.field(default_factory=list)
    unfinished: list[str] = dataclasses.field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.stopped is None and self.files_searched >= self.files

    def describe(self, hits: int, episodes_with_hits: int) -> str:
        """How many hits in how many episodes, and how far the search got (the app's and the CLI's words)."""
        line = f"{hits} hit(s) in {episodes_with_hits} episode(s)"
        if self.stopped == "limit":
            line += " (the limit: there may be more)"
        if self.done:
            where = f"searched all {self.files:,} file(s)"
        else:
            where = f"searched {self.files_searched:,} of {self.files:,} file(s)"
            if self.reading:
                where += " and part of the next"
        line += (f" · {where} ({self.episodes_searched:,} of {self.episodes:,} episodes; "
                 f"{self.episodes_parsed:,} parsed")
        if self.episodes_skipped:
            line += f", {self.episodes_skipped:,} not: their text cannot hold the query"
        line += ")"
        unread = self.files - self.files_searched - self.reading
        if not self.done and unread:
            line += f" · {unread:,} file(s) not searched yet"
        if self.errors:
            line += f" · {len(self.errors)} file(s) could not be read"
        if self.unfinished:
            line += (f" · {len(self.unfinished)} episode(s) searched in part: the expression took longer than the "
                     "time budget over a text")
        return line


class Search:
    """One search over a run, file by file in run order, that stops at a limit or a time budget and continues.

    Raises:
        ValueError: for an empty query, an unknown field, or an invalid regular expression.
    """

    def __init__(self, run: Run, query: str, *, regex: bool = False, case: bool = False,
                 fields: Iterable[str] = FIELDS) -> None:
        self.pattern = _checked(query, regex, case, fields)
        self.fields = tuple(fields)
        self.byte_test = ByteTest.of(query, regex=regex, case=case)
        self._run = run
        self._files = run.files()
        self.progress = Progress(files=len(self._files), episodes=sum(n for _, n in self._files))
        # Where the search stands: the episodes still to come (``None`` between two files, to look at the clock),
        # and the hits of the current episode not given yet. A suspended generator holds one file's bytes at most.
        self._episodes: Iterator[model.Episode | None] = self._walk()
        self._pending: Iterator[Hit] = iter(())

    @staticmethod
    def check(query: str, *, regex: bool = False, case: bool = False, fields: Iterable[str] = FIELDS) -> None:
        """Raise the ``ValueError`` a search for this would raise (before opening a run for it)."""
        _checked(query, regex, case, fields)

    def hits(self, *, limit: int | None = None, seconds: float | None = None,
             until: float | None = None) -> Iterator[Hit]:
        """Hits from where the last call stopped, until ``limit`` more were given or ``seconds`` passed (looked
        at between two episodes and between two files; each call gets at least one file or episode further).
        ``progress`` says how far it got and why it stopped.

        A regular expression's costly match (``linear_regex``) must end by ``until`` (a ``time.monotonic()``
        time; by default the end of ``seconds``, none without them): one that does not is stopped, named in
        ``progress.unfinished``, and the rest of its episode is not searched.
        """
        progress = self.progress
        progress.stopped = None
        deadline = None if seconds is None else time.monotonic() + seconds
        if isinstance(self.pattern, linear_regex.Expression):
            self.pattern.deadline = until if until is not None else deadline
        given = 0
        moved = False
        while True:
            try:
                hit = next(self._pending, None)
            except linear_regex.MatchTimeoutError as exc:
                progress.unfinished.append(f"{exc}; the rest of that episode was not searched")
                self._pending, progress.stopped = iter(()), "time"
                return
            if hit is not None:
                given += 1
                progress.hits += 1
                yield hit
                if limit is not None and given >= limit:
                    progress.stopped = "limit"
                    return
                continue
            if moved and deadline is not None and time.monotonic() >= deadline:
                progress.stopped = "time"
                return
            episode = next(self._episodes, False)
            if isinstance(episode, bool):
                return  # the end of the run (next's default)
            moved = True
            if episode is not None:
                self._pending = episode_hits(episode, self.pattern, self.fields)

    def _walk(self) -> Iterator[model.Episode | None]:
        progress = self.progress
        for path, count in self._files:
            progress.reading, parsed = True, progress.episodes_parsed
            yield from self._episodes_to_search(path)
            progress.reading = False
            progress.files_searched += 1
            progress.episodes_searched += count
            progress.episodes_skipped += max(0, count - (progress.episodes_parsed - parsed))
            yield None

    def _episodes_to_search(self, path: str) -> Iterator[model.Episode]:
        """The episodes of one file whose bytes may hold the query, parsed a chunk of records at a time."""
        try:
            data = sources.read_bytes(path)
        except (OSError, ValueError) as exc:
            self.progress.errors.append(f"{path}: {exc}")
            return
        lines = self._candidate_lines(data) if decoding.is_json_lines(data) else None
        # A zip's bytes are compressed: they say nothing of what its members hold.
        if self.byte_test is not None and lines is None and not zipped.is_zip(data) and not self._may_hold(data):
            return  # a whole document that cannot hold the query
        if lines is None:
            chunks: list[list[int] | None] = [None]
        else:
            chunks = [lines[i:i + _CHUNK_LINES] for i in range(0, len(lines), _CHUNK_LINES)]
        for chunk in chunks:
            for episode in self._run.file_episodes(path, data, chunk):
                self.progress.episodes_parsed += 1
                yield episode

    def _may_hold(self, data: bytes) -> bool:
        assert self.byte_test is not None
        escapes = _U_ESCAPE.search(data) is not None
        view, patterns = self.byte_test.view(data, escapes)
        return any(p.search(data) for p in _always_parsed(escapes)) or all(p.search(view) for p in patterns)

    def _candidate_lines(self, data: bytes) -> list[int]:
        """The 1-based numbers of the JSON Lines records whose bytes may hold the query (every line without a
        byte test)."""
        if self.byte_test is None:
            return list(range(1, data.count(b"\n") + 2))
        escapes = _U_ESCAPE.search(data) is not None
        view, (first, *others) = self.byte_test.view(data, escapes)
        found = set()
        for line, begin, end in _lines_at(data, [m.start() for m in first.finditer(view)]):
            if all(p.search(view, begin, end) for p in others):
                found.add(line)
        always = sorted(m.start() for pattern in _always_parsed(escapes) for m in pattern.finditer(data))
        found.update(line for line, _, _ in _lines_at(data, always))
        return sorted(found)


def _lines_at(data: bytes, offsets: list[int]) -> Iterator[tuple[int, int, int]]:
    """The lines holding these offsets (in order): number (from 1), where each begins and ends, each once."""
    line, at, end = 1, 0, -1
    for offset in offsets:
        if offset < end:
            continue  # the line of the previous offset
        line += data.count(b"\n", at, offset)
        at = offset
        found = data.find(b"\n", offset)
        end = len(data) if found < 0 else found
        yield line, data.rfind(b"\n", 0, offset) + 1, end


def _checked(query: str, regex: bool, case: bool, fields: Iterable[str]) -> Pattern:
    if not query:
        raise ValueError("empty query")
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}; choose from {FIELDS}")
    return compile_pattern(query, regex=regex, case=case)


def hits(run: Run, query: str, *, regex: bool = False, case: bool = False, fields: Iterable[str] = FIELDS,
         limit: int = 200, episode_ids: Iterable[str] | None = None) -> Iterator[Hit]:
    """Matches of ``query`` across a run, in run order, at most ``limit`` of them (see ``Search``, which also
    continues, keeps a time budget and counts what it searched).

    Args:
        run: the run to search.
        query: plain text, or a regular expression when ``regex``.
        regex: treat ``query`` as a regular expression.
        case: match case exactly.
        fields: which parts of a step to search.
        limit: stop after this many hits.
        episode_ids: search only these episodes, in this order, one by one (all of the run when None).

    Raises:
        ValueError: for an empty query, an unknown field, or an invalid regular expression.
    """
    fields = tuple(fields)
    if episode_ids is None:
        yield from Search(run, query, regex=regex, case=case, fields=fields).hits(limit=limit)
        return
    pattern = _checked(query, regex, case, fields)
    count = 0
    for episode_id in episode_ids:
        for hit in episode_hits(run.episode(episode_id), pattern, fields):
            if count >= limit:
                return
            yield hit
            count += 1
