"""Align the steps of two episodes by what they did, so a failed and a successful attempt read side by side.

A global sequence alignment (Needleman–Wunsch): every step of both episodes appears once, in order,
either paired with a step of the other episode or facing a gap. Pairs score by how similar their
commands are (their normalized Indel similarity, ``rapidfuzz.fuzz.ratio``, mapped to -1..1; every pair of two
episodes is scored at once in C++, so two real 180-step attempts align in milliseconds); a gap costs ``gap``. So an
extra ``ls`` in one attempt becomes a gap instead of shifting every later pair out of step.
Where the files each step changed are known (from snapshots: ``fsdiff.files_by_step``), two steps that
changed the same files pair up too, whatever their commands: a ``sed`` fix and a heredoc rewrite of the
same file are the same move.

:func:`contrast` names what one attempt did that the other never did (ran the tests, edited a file).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rapidfuzz import fuzz, process

if TYPE_CHECKING:
    from ares_viewer import model

# Two gaps (-0.8) beat a pair only when the pair is under 10% alike (2 * 0.1 - 1): unrelated commands
# face gaps, while the same command with other arguments pairs up.
GAP = -0.4
# Below this similarity two paired steps count as doing different things.
DIVERGENCE_THRESHOLD = 0.6
# Commands are compared on their first characters: heredocs can be long, their start says what they do.
_COMPARE_CHARS = 400
# Two steps that changed exactly the same files are this alike (above DIVERGENCE_THRESHOLD: the same move);
# a partial overlap scales it by the share of files in common (Jaccard).
FILE_WEIGHT = 0.9


@dataclasses.dataclass(frozen=True, slots=True)
class Pair:
    """One row of an alignment: positions in both sequences (None = gap) and their similarity (0..1)."""

    a: int | None
    b: int | None
    similarity: float
    files: tuple[str, ...] = ()  # files both steps changed, when that is what pairs them

    @property
    def is_gap(self) -> bool:
        return self.a is None or self.b is None


def similarity(x: str | None, y: str | None) -> float:
    """How alike two commands are, 0..1: twice their longest common subsequence over their lengths summed, of
    their first 400 characters (``rapidfuzz.fuzz.ratio``; two missing commands are alike)."""
    return fuzz.ratio((x or "")[:_COMPARE_CHARS], (y or "")[:_COMPARE_CHARS]) / 100


def similarities(xs: Sequence[str | None], ys: Sequence[str | None]) -> list[list[float]]:
    """``similarity`` of every pair of ``xs`` and ``ys`` (rows: ``xs``), computed at once by rapidfuzz in C++."""
    if not xs or not ys:
        return [[] for _ in xs]
    clipped_x = [(x or "")[:_COMPARE_CHARS] for x in xs]
    clipped_y = [(y or "")[:_COMPARE_CHARS] for y in ys]
    return (process.cdist(clipped_x, clipped_y, scorer=fuzz.ratio) / 100).tolist()


def align(a: Sequence[Any], b: Sequence[Any], *, gap: float = GAP,
          score: Callable[[Any, Any], float] = similarity) -> list[Pair]:
    """The best global alignment of two sequences.

    Args:
        a, b: the sequences (commands, usually).
        gap: the score of placing an item against a gap (negative).
        score: similarity of two items, 0..1; a pair scores ``2 * similarity - 1``.

    Returns:
        The alignment, in order; every index of ``a`` and of ``b`` appears exactly once.
    """
    cache: dict[tuple[str | None, str | None], float] = {}

    def sim(x: Any, y: Any) -> float:
        key = (x, y)
        if key not in cache:
            cache[key] = score(x, y)
        return cache[key]

    return _best_path([[sim(x, y) for y in b] for x in a], len(a), len(b), gap)


def _best_path(matrix: Sequence[Sequence[float]], n: int, m: int, gap: float) -> list[Pair]:
    """The best global alignment of ``n`` items with ``m`` given their similarities (``matrix[i][j]``, 0..1)."""
    # total[i][j]: best score aligning a[:i] with b[:j]; move[i][j]: 0 diagonal, 1 up (a gap in b), 2 left.
    total = [[0.0] * (m + 1) for _ in range(n + 1)]
    move = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        total[i][0], move[i][0] = i * gap, 1
    for j in range(1, m + 1):
        total[0][j], move[0][j] = j * gap, 2
    for i in range(1, n + 1):
        row, prev, moves, scores = total[i], total[i - 1], move[i], matrix[i - 1]
        for j in range(1, m + 1):
            diagonal = prev[j - 1] + 2 * scores[j - 1] - 1
            up = prev[j] + gap
            left = row[j - 1] + gap
            # Ties prefer the diagonal, so equal sequences align one to one.
            if diagonal >= up and diagonal >= left:
                row[j], moves[j] = diagonal, 0
            elif up >= left:
                row[j], moves[j] = up, 1
            else:
                row[j], moves[j] = left, 2
    pairs: list[Pair] = []
    i, j = n, m
    while i or j:
        step = move[i][j]
        if step == 0:
            pairs.append(Pair(i - 1, j - 1, matrix[i - 1][j - 1]))
            i, j = i - 1, j - 1
        elif step == 1:
            pairs.append(Pair(i - 1, None, 0.0))
            i -= 1
        else:
            pairs.append(Pair(None, j - 1, 0.0))
            j -= 1
    pairs.reverse()
    return pairs


def divergence(pairs: Sequence[Pair], threshold: float = DIVERGENCE_THRESHOLD, *, side: str | None = None
               ) -> int | None:
    """Position in ``pairs`` of the first row where the two sequences part ways (a gap or a weak pair).

    Args:
        pairs: An alignment.
        threshold: Paired steps less alike than this count as doing different things.
        side: ``"a"``: the first row where ``a`` does something ``b`` does not (an ``a`` step facing a gap or
            a weak pair), skipping rows where only ``b`` acts; ``"b"`` likewise. With a failed attempt as ``a``
            and a solved one as ``b``, ``side="a"`` is where the failure first did something of its own, which
            extra exploration by the solved attempt does not hide. None: either side.
    """
    for position, pair in enumerate(pairs):
        if (side == "a" and pair.a is None) or (side == "b" and pair.b is None):
            continue
        if pair.is_gap or pair.similarity < threshold:
            return position
    return None


def file_similarity(x: frozenset[str], y: frozenset[str]) -> float:
    """How alike two steps are by the files they changed, 0..``FILE_WEIGHT`` (0 when either changed none)."""
    if not x or not y:
        return 0.0
    return FILE_WEIGHT * len(x & y) / len(x | y)


def align_episodes(a: model.Episode, b: model.Episode, *, gap: float = GAP,
                   files_a: Mapping[int, Collection[str]] | None = None,
                   files_b: Mapping[int, Collection[str]] | None = None) -> list[Pair]:
    """Align two episodes' actions by their commands, and by the files they changed where that is known.

    A response without a single command is compared by its full text, so format errors still pair up.

    Args:
        a, b: The episodes.
        gap: The score of a step facing a gap.
        files_a, files_b: Step index -> the files that step changed (``fsdiff.files_by_step``: path -> change kind,
            or just the paths); a pair's similarity is the better of its commands' and its files'
            (:func:`file_similarity`).

    Returns:
        The alignment; ``Pair.a``/``Pair.b`` are step indices, ``Pair.files`` the files both changed when that
        is what made them alike.
    """
    a_steps, b_steps = a.actions, b.actions
    none: frozenset[str] = frozenset()
    files_of_a = [frozenset((files_a or {}).get(s.index, none)) for s in a_steps]
    files_of_b = [frozenset((files_b or {}).get(s.index, none)) for s in b_steps]
    commands = similarities([s.command or s.response for s in a_steps], [s.command or s.response for s in b_steps])

    # where both steps changed files, their files' similarity when it is the higher
    scores = [row[:] for row in commands] if any(files_of_a) and any(files_of_b) else commands
    for i, fa in enumerate(files_of_a):
        for j, fb in enumerate(files_of_b) if fa else ():
            if fb:
                scores[i][j] = max(scores[i][j], file_similarity(fa, fb))
    pairs = _best_path(scores, len(a_steps), len(b_steps), gap)
    result = []
    for p in pairs:
        shared: tuple[str, ...] = ()
        if p.a is not None and p.b is not None:  # not a gap
            fa, fb = files_of_a[p.a], files_of_b[p.b]
            if file_similarity(fa, fb) > commands[p.a][p.b]:
                shared = tuple(sorted(fa & fb))
        result.append(Pair(None if p.a is None else a_steps[p.a].index, None if p.b is None else b_steps[p.b].index,
                           p.similarity, shared))
    return result


# ----- what one attempt did and the other never did ---------------------------------------------------------------

# Kinds of command a reader tells attempts apart by: (what it is called, the pattern that finds it in a command).
ACTIVITIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ran the tests", re.compile(
        r"\b(?:py\.?test|unittest|tox|nox|go test|cargo test|(?:npm|yarn|pnpm) (?:run )?test|make (?:test|check)|"
        r"jest|mocha|rspec|phpunit|ctest)\b|\bpython3?\s+\S*tests?[/_]\S*\.py")),
    ("searched the code", re.compile(r"(?:^|[|;&(]\s*)(?:grep|rg|ag|ack|find|git grep)\b", re.M)),
    ("installed packages", re.compile(r"\b(?:pip3?|uv pip|apt-get|apt|npm|yarn|conda|poetry) (?:install|add)\b")),
    ("deleted files", re.compile(r"(?:^|[|;&(]\s*)(?:rm|git rm)\s", re.M)),
    ("looked at git history or status", re.compile(r"\bgit (?:log|status|diff|show|blame|stash)\b")),
    ("ran Python of its own", re.compile(r"\bpython3?\s+(?:-c\b|-\s*<<|[\w./-]+\.py\b)")),
)
# Files an action wrote, read off its command when no snapshot says: only what a shell would write. Heredoc
# bodies and quoted text (Python inside ``python -c``, a file's new content) are data, never commands; a path must
# hold a letter ("> 1" in code is no file).
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([\w.-]+)\2")
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_PATH = re.compile(r"[\w./+@-]*[A-Za-z][\w./+@-]*")


def _shell_lines(command: str) -> list[str]:
    """The lines of a command that the shell reads as commands: heredoc bodies left out."""
    lines: list[str] = []
    ends: list[tuple[bool, str]] = []  # heredocs still open: (strip tabs, delimiter)
    for line in command.split("\n"):
        if ends:
            strip, end = ends[0]
            if (line.lstrip("\t") if strip else line).rstrip() == end:
                ends.pop(0)
            continue
        lines.append(line)
        ends.extend((bool(m.group(1)), m.group(3)) for m in _HEREDOC.finditer(line))
    return lines


def _simple_commands(line: str) -> list[list[str]]:
    """A shell line's simple commands as words (quotes removed), or none when its quoting does not close."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return []
    found: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            found.append([])
        else:
            found[-1].append(word)
    return [c for c in found if c]


def _written(words: list[str]) -> list[str]:
    """The files one simple command writes: its redirections' targets, and ``sed -i``'s, ``tee``'s, ``cp``'s and
    ``mv``'s destinations."""
    found, args = [], []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _REDIRECTS and i + 1 < len(words):
            found.append(words[i + 1])
            i += 2
            continue
        if word in {"<", "<<", "<<<", ">&", "<&"} and i + 1 < len(words):
            i += 2  # an input or a file descriptor, not a file written
            continue
        args.append(word)
        i += 1
    name = args[0].rsplit("/", 1)[-1] if args else ""
    operands, scripted, skip = [], False, False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in {"-e", "-f", "--expression", "--file"}:
            scripted = skip = True  # sed's script (or its file) is the next word
        elif not arg.startswith("-"):
            operands.append(arg)
    if name == "sed" and any(a.startswith("-i") or a.startswith("--in-place") for a in args[1:]):
        found.extend(operands if scripted else operands[1:])
    elif name == "tee":
        found.extend(operands)
    elif name in {"cp", "mv", "install"} and len(operands) >= 2:
        found.append(operands[-1])
    return found


def edited_files(command: str | None) -> set[str]:
    """The files a command writes, as far as the shell would read it (``sed -i``, redirections, ``tee``, ``cp``,
    ``mv``); nothing out of heredoc bodies, quoted text or code."""
    found: set[str] = set()
    for line in _shell_lines(command or ""):
        for words in _simple_commands(line):
            for path in _written(words):
                if _PATH.fullmatch(path) and not path.startswith("/dev/"):
                    found.add(path.removeprefix("./"))
    return found


_PATCH_FILE = re.compile(r"^(?:\+\+\+ b/(\S+)|diff --git a/\S+ b/(\S+))", re.M)


def patch_files(patch: str | None) -> set[str]:
    """The files a unified diff (a submitted ``git diff``) changes, by their paths in the repository."""
    return {m.group(1) or m.group(2) for m in _PATCH_FILE.finditer(patch or "")} - {"/dev/null"}


# How a file changed, in snapshots' words (``fsdiff``'s change kinds), -> what the attempt did to it.
FILE_VERBS = {"added": "added", "modified": "edited", "deleted": "deleted", "type_changed": "replaced"}


# Where an edit no step shows was read: the attempt's submitted patch names the file, no command does.
FROM_PATCH = "the submitted patch"


@dataclasses.dataclass(frozen=True, slots=True)
class Activity:
    """Something an attempt did: what (``ran the tests``, ``edited src/core.py``) and at which steps; or, for an
    edit no step shows (made by a script, say), no step and where it is known from (``known_from``:
    :data:`FROM_PATCH`)."""

    what: str
    steps: tuple[int, ...]
    known_from: str | None = None

    def __str__(self) -> str:
        if not self.steps:
            return f"{self.what} (known only from {self.known_from or 'no step'}: no step shows it)"
        return f"{self.what} (step{'s' if len(self.steps) > 1 else ''} {', '.join(map(str, self.steps[:5]))}" + (
            ", …)" if len(self.steps) > 5 else ")")


def activities(episode: model.Episode, files: Mapping[int, Mapping[str, str]] | None = None, *,
               patch: str | None = None) -> list[Activity]:
    """What an episode's actions did, by kind (:data:`ACTIVITIES`) and by file added, edited or deleted.

    Changed files come from ``files`` (step -> path -> change kind, from snapshots: ``fsdiff.files_by_step``)
    when given; else from what the commands unambiguously write (:func:`edited_files`), all of them "edited", and
    from the submitted ``patch``: a file it changes that no command names is "edited" at no step, known only from
    the patch (the submit command printed the patch; it did not make the edit).
    """
    found: dict[str, list[int]] = {}
    for step in episode.actions:
        command = step.command or ""
        for what, pattern in ACTIVITIES:
            if pattern.search(command):
                found.setdefault(what, []).append(step.index)
        if files is not None:
            written = {path: FILE_VERBS.get(kind, "edited") for path, kind in files.get(step.index, {}).items()}
        else:
            written = dict.fromkeys(edited_files(command), "edited")
        for path, verb in sorted(written.items()):
            steps = found.setdefault(f"{verb} {path}", [])
            if step.index not in steps:
                steps.append(step.index)
    listed = [Activity(what, tuple(steps)) for what, steps in found.items()]
    if files is None:
        for path in sorted(patch_files(patch)):
            what = f"edited {path}"
            if not any(_same(what, x.what) for x in listed):
                listed.append(Activity(what, (), FROM_PATCH))
    return listed


def _same(x: str, y: str) -> bool:
    """Two activities are the same: the same words, or the same verb on one file named from two places (a path
    in the repository and the same path under the container's work folder)."""
    if x == y:
        return True
    verb_x, _, path_x = x.partition(" ")
    verb_y, _, path_y = y.partition(" ")
    if verb_x != verb_y or not path_x or not path_y or x in dict(ACTIVITIES) or y in dict(ACTIVITIES):
        return False
    return path_x.endswith("/" + path_y.lstrip("/")) or path_y.endswith("/" + path_x.lstrip("/"))


def contrast(a: model.Episode, b: model.Episode, *, files_a: Mapping[int, Mapping[str, str]] | None = None,
             files_b: Mapping[int, Mapping[str, str]] | None = None, patch_a: str | None = None,
             patch_b: str | None = None) -> tuple[list[Activity], list[Activity]]:
    """What ``a`` did that ``b`` never did, and what ``b`` did that ``a`` never did.

    Changed files are compared from snapshots only when both sides have them; else both sides read what their
    commands unambiguously write and the files their submitted patches (``patch_a``, ``patch_b``) change, so the
    two sides name files from the same sources (:func:`files_source` says which).
    """
    if not snapshots_on_both(files_a, files_b):
        files_a = files_b = None
    mine, theirs = activities(a, files_a, patch=patch_a), activities(b, files_b, patch=patch_b)
    return ([x for x in mine if not any(_same(x.what, y.what) for y in theirs)],
            [x for x in theirs if not any(_same(x.what, y.what) for y in mine)])


def snapshots_on_both(files_a: Mapping[int, Mapping[str, str]] | None,
                      files_b: Mapping[int, Mapping[str, str]] | None) -> bool:
    """Whether both attempts' changed files can come from snapshots."""
    return files_a is not None and files_b is not None and bool(files_a or files_b)


def files_source(files_a: Mapping[int, Mapping[str, str]] | None, files_b: Mapping[int, Mapping[str, str]] | None,
                 *, patches: bool) -> str:
    """Where :func:`contrast` read the files each attempt changed, in words for the page."""
    if snapshots_on_both(files_a, files_b):
        return "the files each attempt changed come from its per-step snapshots"
    source = "the commands that plainly write a file (sed -i, redirections, tee, cp, mv)"
    return ("the files each attempt changed come from " + source
            + (" and its submitted patch" if patches else "") + "; no snapshots on both sides")
