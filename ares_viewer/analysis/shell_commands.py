"""What a shell command does, read from its text: runs tests, installs packages, reaches the network, or
unambiguously writes, deletes, renames or chmods a test or verifier file.

A command is split into its simple commands (at ``&&``, ``||``, ``;``, ``|`` and newlines) and each is read on
its own, so ``pip install pytest && pytest -q`` both installs and runs the tests. Only what the text says for
sure counts: a script that edits the tests when it runs is not seen here (snapshots see it).
"""

from __future__ import annotations

import functools
import re

_SPLIT = re.compile(r"&&|\|\||;|\||\n")
# Leading ``VAR=value``, ``sudo`` and ``timeout N`` do not change what a simple command is.
_PREFIX = re.compile(r"^\s*(?:(?:\w+=\S*|sudo|env|timeout\s+\S+|time|nohup)\s+)*")

TEST_RUN = re.compile(
    r"^(?:\S*/)?(?:pytest|py\.test|tox|nox|jest|mocha|phpunit|rspec)\b"
    r"|^python[\d.]*\s+(?:-\w+\s+)*-m\s+(?:pytest|unittest|tox|nox)\b"
    r"|^python[\d.]*\s+(?:\S*/)?(?:manage\.py\s+test|runtests\.py|setup\.py\s+test)\b"
    r"|^make\s+(?:test|tests|check)\b|^(?:npm|yarn|pnpm)\s+(?:run\s+)?test\b|^(?:go|cargo|dotnet|mvn|gradle)\s+test\b"
    r"|^(?:bash\s+|sh\s+)?(?:\S*/)?(?:run_?)?tests?\.sh\b"
)
INSTALL = re.compile(
    r"^(?:python[\d.]*\s+-m\s+)?pip[\d.]*\s+install\b|^uv\s+(?:pip\s+install|add)\b|^poetry\s+(?:add|install)\b"
    r"|^(?:conda|mamba|micromamba)\s+install\b|^apt(?:-get)?\s+(?:-\S+\s+)*install\b|^apk\s+add\b"
    r"|^(?:yum|dnf)\s+install\b|^(?:npm|pnpm)\s+(?:install|i|add)\b|^yarn\s+add\b|^gem\s+install\b"
    r"|^cargo\s+(?:install|add)\b|^go\s+(?:get|install)\b"
)
NETWORK = re.compile(
    r"^(?:curl|wget|ssh|scp|rsync|telnet|ping|nslookup|dig|ftp|nc|ncat)\s"
    r"|^git\s+(?:clone|fetch|pull|push|ls-remote)\b|\bhttps?://"
)
# ``NETWORK`` in two: its anchored branches are tried once, the URL only looked for where ``://`` is (a search
# for it at every position took most of the rule's time).
_NETWORK_TOOL = re.compile(
    r"^(?:curl|wget|ssh|scp|rsync|telnet|ping|nslookup|dig|ftp|nc|ncat)\s|^git\s+(?:clone|fetch|pull|push|ls-remote)\b"
)
_URL = re.compile(r"\bhttps?://")
# Test and verifier files: test folders, test modules, conftest, pytest's own config, the verifier's folders
# and the reward file it reads.
TEST_PATH = re.compile(
    r"(?:^|/)(?:tests?|testing)(?:/|$)|(?:^|/)test_[^/]*\.py$|_test\.py$|(?:^|/)conftest\.py$"
    r"|(?:^|/)(?:pytest\.ini|tox\.ini)$|(?:^|/)verifier(?:/|$)|(?:^|/)reward\.(?:txt|json)$"
)
# Simple commands that change the files they name: which arguments are their targets.
_ALL_TARGETS = re.compile(r"^(?:rm|unlink|shred|truncate|chmod|chown|chgrp|mv|git\s+rm|git\s+mv|touch|tee)\b")
_LAST_TARGET = re.compile(r"^(?:cp|ln|install)\b")
_IN_PLACE = re.compile(r"^(?:sed|perl)\b.*\s(?:-i|-pi|--in-place)")
_MODE = re.compile(r"^(?:[0-7]{3,4}|[ugoa]*[-+=][rwxXst]*)$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_REDIRECT = re.compile(r"(?<![0-9&])>>?\s*(['\"]?)([^\s'\";&|<>]+)\1")
# What makes ``shlex`` split text other than ``str.split`` does: quotes, escapes, whitespace only one splits at.
_NOT_PLAIN = re.compile(r"['\"\\]|(?![ \t\r\n])\s")


@functools.lru_cache(maxsize=4096)
def simple_commands(command: str) -> tuple[str, ...]:
    """The simple commands of ``command``, each without its leading variables, ``sudo`` or ``timeout``; kept, as
    every command rule asks for them and agents repeat commands."""
    parts = (_PREFIX.sub("", part, count=1).strip() for part in _SPLIT.split(command))
    return tuple(part for part in parts if part)


@functools.lru_cache(maxsize=4096)
def _words(simple: str) -> tuple[str, ...]:
    """``simple`` split as a shell would (``shell_split``); agents repeat commands, so the answers are kept."""
    if not _NOT_PLAIN.search(simple):
        return tuple(simple.split())  # the same words, without reading quotes
    try:
        return shell_split(simple)
    except ValueError:
        return tuple(simple.split())


# One piece of a shell word each: plain text (its escaped characters in it), a single-quoted part, a double-quoted
# part, whitespace between words; anything else is an unclosed quote or a trailing backslash. A plain piece holds
# at most 4096 runs, so that one match never holds the interpreter long (a word may be several pieces).
_PIECE = re.compile(
    r"""((?:[^ \t\r\n'"\\]+|\\.){1,4096})|'([^']*)'|"([^"\\]*(?:\\.[^"\\]*)*)"|([ \t\r\n]+)""", re.DOTALL
)
_IN_DOUBLE_QUOTES = re.compile(r'\\(["\\])')


def _unescape(plain: str) -> str:
    """Unquoted text with each backslash-escaped character as itself (``a\\ b`` -> ``a b``, ``\\\\`` -> ``\\``).

    Split at the backslashes: a backslash escapes the first character of the part after it, which is kept as it
    is, except an empty part, which is an escaped backslash (and the part after it is then plain text).
    """
    parts = plain.split("\\")
    kept = [parts[0]]
    i = 1
    while i < len(parts):
        if parts[i] == "" and i + 1 < len(parts):
            kept += ("\\", parts[i + 1])
            i += 2
        else:
            kept.append(parts[i])
            i += 1
    return "".join(kept)


def shell_split(text: str) -> tuple[str, ...]:
    """``text`` split into words as ``shlex.split`` splits it (POSIX quoting: single quotes keep everything, double
    quotes let a backslash escape ``"`` and ``\\``, a backslash outside quotes escapes any character), in time linear
    in the text. ``shlex`` grows a word one character at a time, which is quadratic in the word's length: one 2 MB
    word of escaped spaces took seconds, and every flag of a run waits for it.

    Raises:
        ValueError: for an unclosed quote or a backslash at the end, as ``shlex`` does.
    """
    words: list[str] = []
    word: list[str] = []
    in_word = False
    pos = 0
    for found in _PIECE.finditer(text):  # the pieces one after another; a gap is where none matches
        if found.start() != pos:
            break
        plain, single, double, space = found.groups()
        pos = found.end()
        if space is not None:
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            continue
        in_word = True
        if plain is not None:
            word.append(_unescape(plain) if "\\" in plain else plain)
        elif double is not None:
            word.append(_IN_DOUBLE_QUOTES.sub(r"\1", double) if "\\" in double else double)
        else:
            word.append(single)
    if pos < len(text):
        raise ValueError("No closing quotation" if text[pos] in "'\"" else "No escaped character")
    if in_word:
        words.append("".join(word))
    return tuple(words)


def runs_tests(command: str) -> bool:
    """Whether any simple command of ``command`` runs a test suite."""
    return any(TEST_RUN.search(part) for part in simple_commands(command))


def installs_packages(command: str) -> bool:
    return any(INSTALL.search(part) for part in simple_commands(command))


def uses_network(command: str) -> bool:
    """Whether any simple command of ``command`` matches ``NETWORK``."""
    return any(_NETWORK_TOOL.match(part) or ("://" in part and _URL.search(part)) for part in simple_commands(command))


def _targets(simple: str) -> list[str]:
    if not (_ALL_TARGETS.search(simple) or _LAST_TARGET.search(simple) or _IN_PLACE.search(simple)):
        return []  # changes no file it names: no need to split it into words
    words = [w for w in _words(simple) if not w.startswith("-")]
    if _ALL_TARGETS.search(simple):
        skip = 2 if simple.startswith("git") else 1
        if simple.startswith(("chown", "chgrp")) or (
            simple.startswith("chmod") and len(words) > 1 and _MODE.match(words[1])
        ):
            skip += 1  # the owner or a mode that is not an option
        return words[skip:]
    if _LAST_TARGET.search(simple):
        return words[-1:] if len(words) > 2 else []
    if _IN_PLACE.search(simple):
        return words[2:]
    return []


def touched_test_file(command: str) -> str | None:
    """The test or verifier file a command unambiguously writes, deletes, renames or chmods, or None.

    Counts ``rm``, ``mv``, ``chmod``, ``cp``/``ln`` onto, ``sed -i``/``perl -i``, ``tee``, ``touch``,
    ``truncate`` and output redirection (``>``/``>>``) naming a ``TEST_PATH``.
    """
    for simple in simple_commands(_without_heredocs(command)):
        redirected = (m.group(2) for m in _REDIRECT.finditer(simple)) if ">" in simple else ()
        for target in [*_targets(simple), *redirected]:
            if TEST_PATH.search(target):
                return target
    return None


def _without_heredocs(command: str) -> str:
    """``command`` with its here-documents' bodies left out (their text is data, not commands)."""
    if "<<" not in command:  # no here-document: its lines as they are
        return "\n".join(command.splitlines())
    kept: list[str] = []
    until: str | None = None
    for line in command.splitlines():
        if until is not None:
            if line.strip() == until:
                until = None
            continue
        opener = _HEREDOC.search(line)
        if opener:
            until = opener.group(2)
            line = line[: opener.start()] + line[opener.end() :]
        kept.append(line)
    return "\n".join(kept)
