"""The sample tasks and the scripted agents that attempt them (data only; generate.py runs them).

Each task is a tiny Python project with a failing test, an issue text, and hidden tests that the verifier
runs after the agent submits. Each plan is one episode: the responses a scripted "model" gives, in order.
Commands really run in a container, so every observation in the sample episodes is real output.
"""

from __future__ import annotations

import dataclasses

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
VERIFIER = (
    "mkdir -p /logs/verifier && cd /testbed && "
    "python3 -m pytest -q -p no:cacheprovider /verifier/tests 2>&1 | tee /logs/verifier/pytest.log; "
    "if [ ${PIPESTATUS[0]} -eq 0 ]; then echo 1.0; else echo 0.0; fi > /logs/verifier/reward.txt"
)


@dataclasses.dataclass(frozen=True)
class Task:
    """A task: project files for /testbed, the issue text, and hidden tests for the verifier."""

    name: str
    statement: str
    files: dict[str, str]
    hidden_tests: dict[str, str]
    verifier_command: str = VERIFIER
    reward_path: str = "/logs/verifier/reward.txt"


@dataclasses.dataclass(frozen=True)
class Turn:
    """One model response: a THOUGHT and one bash command, or ``raw`` text sent as is (format errors)."""

    thought: str = ""
    command: str = ""
    raw: str | None = None

    def content(self) -> str:
        if self.raw is not None:
            return self.raw
        return f"THOUGHT: {self.thought}\n\n```bash\n{self.command}\n```"


@dataclasses.dataclass(frozen=True)
class Plan:
    """One scripted episode.

    Attributes:
        name: Stable name; seeds the episode id and timestamps.
        task: Task name.
        turns: The responses, in order.
        shows: One line for the README: what this episode demonstrates.
        step_limit: Truncate after this many actions (ARES's step limit).
        drop_context_at: After this action, the agent keeps only the task message and the last exchanges.
        kill_after: After this action the harness kills the container (an infrastructure failure).
    """

    name: str
    task: str
    turns: tuple[Turn, ...]
    shows: str
    step_limit: int = 250
    drop_context_at: int | None = None
    kill_after: int | None = None


# ----- tasks -----------------------------------------------------------------------------------------------------

GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n"

SLUG_PY = '''"""URL slugs for titles."""

import re

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """Turn a title into a URL slug: lowercase words joined by hyphens.

    >>> slugify("Hello, World!")
    'hello-world'
    """
    text = text.lower()
    text = _SEPARATORS.sub("-", text)
    return text.strip("-")
'''

SLUG_FIXED = '''"""URL slugs for titles."""

import re
import unicodedata

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """Turn a title into a URL slug: lowercase words joined by hyphens.

    Accented Latin letters become their ASCII base letter (é -> e); characters without an
    ASCII form are dropped.

    >>> slugify("Hello, World!")
    'hello-world'
    """
    text = unicodedata.normalize("NFKD", text)
    text = text.encode("ascii", "ignore").decode("ascii")
    text = text.lower()
    text = _SEPARATORS.sub("-", text)
    return text.strip("-")
'''

TEXTKIT = Task(
    name="textkit__slugify-accents",
    statement=(
        'slugify() mangles accented titles: `slugify("Crème brûlée à la carte")` returns '
        '`"cr-me-br-l-e-la-carte"` instead of `"creme-brulee-a-la-carte"`.\n'
        "Accented Latin letters should become their plain ASCII letter (é → e, Å → a); characters that "
        "have no ASCII form (for example 日本語) should be dropped."
    ),
    files={
        ".gitignore": GITIGNORE,
        "README.md": "# textkit\n\nText helpers used by the blog engine (slugs for post titles).\n",
        "textkit/__init__.py": (
            '"""Small text helpers."""\n\nfrom textkit.slug import slugify\n\n__all__ = ["slugify"]\n'
        ),
        "textkit/slug.py": SLUG_PY,
        "tests/test_slug.py": (
            "from textkit import slugify\n\n\n"
            "def test_ascii_title():\n"
            '    assert slugify("Hello, World!") == "hello-world"\n\n\n'
            "def test_accented_title():\n"
            '    assert slugify("Crème brûlée") == "creme-brulee"\n'
        ),
    },
    hidden_tests={
        "tests/test_slug_hidden.py": (
            "from textkit import slugify\n\n\n"
            "def test_ascii():\n"
            '    assert slugify("Hello, World!") == "hello-world"\n\n\n'
            "def test_accents():\n"
            '    assert slugify("Crème brûlée à la carte") == "creme-brulee-a-la-carte"\n\n\n'
            "def test_uppercase_accents():\n"
            '    assert slugify("Ångström ÜBER") == "angstrom-uber"\n\n\n'
            "def test_no_ascii_form():\n"
            '    assert slugify("日本語 guide") == "guide"\n\n\n'
            "def test_only_symbols():\n"
            '    assert slugify("¿¡!?") == ""\n'
        ),
    },
)

CORE_PY = '''"""Descriptive statistics for small samples."""


def mean(values):
    """Arithmetic mean of ``values`` (any iterable of numbers)."""
    return sum(values) / len(values)


def median(values):
    """Middle value of ``values``; the mean of the two middle values for an even count."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median requires at least one data point")
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
'''

STATSKIT = Task(
    name="statskit__mean-empty",
    statement=(
        "`statskit.mean([])` crashes with `ZeroDivisionError: division by zero`. Like `median`, it should "
        'raise `ValueError("mean requires at least one data point")`.\n'
        "`mean` is documented to accept any iterable of numbers, so generators must work too."
    ),
    files={
        ".gitignore": GITIGNORE,
        "README.md": "# statskit\n\nDescriptive statistics for the dashboard's small samples.\n",
        "statskit/__init__.py": '"""Descriptive statistics."""\n\nfrom statskit.core import mean, median\n\n'
        '__all__ = ["mean", "median"]\n',
        "statskit/core.py": CORE_PY,
        "tests/test_core.py": (
            "import pytest\nfrom statskit import mean, median\n\n\n"
            "def test_mean():\n    assert mean([1, 2, 3, 4]) == 2.5\n\n\n"
            "def test_median():\n    assert median([3, 1, 2]) == 2\n\n\n"
            "def test_mean_empty():\n"
            '    with pytest.raises(ValueError, match="at least one data point"):\n'
            "        mean([])\n"
        ),
    },
    hidden_tests={
        "tests/test_core_hidden.py": (
            "import pytest\nfrom statskit import mean, median\n\n\n"
            "def test_mean():\n    assert mean([1, 2, 3, 4]) == 2.5\n\n\n"
            "def test_mean_empty():\n"
            '    with pytest.raises(ValueError, match="at least one data point"):\n'
            "        mean([])\n\n\n"
            "def test_mean_generator():\n    assert mean(x for x in [1, 2, 3]) == 2\n\n\n"
            "def test_median_even():\n    assert median([4, 1, 3, 2]) == 2.5\n"
        ),
    },
)

PAGING_PY = '''"""Split result lists into pages for the listing views."""


def page_count(n_items, per_page=10):
    """Number of pages needed to show ``n_items`` items."""
    return n_items // per_page


def paginate(items, page, per_page=10):
    """The items on page ``page`` (pages are numbered from 1)."""
    start = page * per_page
    return items[start : start + per_page]
'''

PAGER = Task(
    name="pager__last-page",
    statement=(
        "The listing views skip the first ten results, and the last partial page is never offered. With 25 "
        "results, `paginate(items, 1)` returns items 11-20 instead of 1-10, and `page_count(25)` is 2 instead "
        "of 3."
    ),
    files={
        ".gitignore": GITIGNORE,
        "README.md": "# pager\n\nPagination helpers for the catalogue's listing views. Pages are numbered from 1.\n",
        "pager/__init__.py": '"""Pagination helpers."""\n\nfrom pager.paging import page_count, paginate\n\n'
        '__all__ = ["page_count", "paginate"]\n',
        "pager/paging.py": PAGING_PY,
        "pager/legacy.py": (
            '"""Deprecated helpers from the v1 views. Nothing imports them any more."""\n\n\n'
            "def pages(n, size):  # pragma: no cover\n    return (n + size - 1) // size\n"
        ),
        "data/items.csv": "id,name,price_eur\n"
        + "".join(f"{i},item-{i:04d},{(i * 37) % 1000 / 10:.2f}\n" for i in range(1, 801)),
        "tests/test_paging.py": (
            "from pager import page_count, paginate\n\nITEMS = list(range(1, 26))\n\n\n"
            "def test_first_page():\n    assert paginate(ITEMS, 1) == list(range(1, 11))\n\n\n"
            "def test_page_count_exact():\n    assert page_count(20) == 2\n"
        ),
    },
    hidden_tests={
        "tests/test_paging_hidden.py": (
            "from pager import page_count, paginate\n\nITEMS = list(range(1, 26))\n\n\n"
            "def test_first_page():\n    assert paginate(ITEMS, 1) == list(range(1, 11))\n\n\n"
            "def test_last_partial_page():\n    assert paginate(ITEMS, 3) == [21, 22, 23, 24, 25]\n\n\n"
            "def test_past_the_end():\n    assert paginate(ITEMS, 4) == []\n\n\n"
            "def test_page_count():\n"
            "    assert [page_count(n) for n in (0, 1, 10, 20, 25)] == [0, 1, 1, 2, 3]\n"
        ),
    },
)

DURATION_PY = '''"""Parse human durations for the scheduler's config."""

import re

_PART = re.compile(r"(\\d+)([hms])")
_SECONDS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Seconds in a duration like ``1h30m`` or ``45s``."""
    match = _PART.match(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(match.group(1)) * _SECONDS[match.group(2)]
'''

UNITS = Task(
    name="units__parse-duration",
    statement=(
        '`parse_duration("1h30m")` returns 3600 instead of 5400: only the first part is read. Every part should '
        'count, spaces between parts are allowed (`"2m 5s"` is 125), and anything that is not a duration '
        '(`"ten"`, `"5x"`, `""`) must raise `ValueError`.'
    ),
    files={
        ".gitignore": GITIGNORE,
        "README.md": "# units\n\nDurations for the scheduler's config files.\n",
        "units/__init__.py": (
            '"""Units."""\n\nfrom units.duration import parse_duration\n\n__all__ = ["parse_duration"]\n'
        ),
        "units/duration.py": DURATION_PY,
        "tests/test_duration.py": (
            "from units import parse_duration\n\n\n"
            "def test_hours_and_minutes():\n    assert parse_duration(\"1h30m\") == 5400\n"
        ),
    },
    hidden_tests={
        "tests/test_duration_hidden.py": (
            "import pytest\nfrom units import parse_duration\n\n\n"
            "def test_parts():\n    assert parse_duration(\"1h30m\") == 5400 and parse_duration(\"45s\") == 45\n\n\n"
            "def test_spaces():\n    assert parse_duration(\"2m 5s\") == 125\n\n\n"
            "@pytest.mark.parametrize(\"text\", [\"ten\", \"5x\", \"\"])\n"
            "def test_not_a_duration(text):\n    with pytest.raises(ValueError):\n        parse_duration(text)\n"
        ),
    },
)

ROWS_PY = '''"""Read the exports the accounting team sends."""


def split_row(line):
    """The fields of one CSV line."""
    return line.rstrip("\\n").split(",")
'''

CSVTOOL = Task(
    name="csvtool__quoted-fields",
    statement=(
        "`split_row('a,\"b,c\",d')` returns four fields instead of `['a', 'b,c', 'd']`: commas inside quoted fields "
        "split them. Quoted fields follow RFC 4180: a doubled quote inside quotes is a literal quote."
    ),
    files={
        ".gitignore": GITIGNORE,
        "README.md": "# csvtool\n\nReaders for the accounting exports.\n",
        "csvtool/__init__.py": '"""CSV helpers."""\n\nfrom csvtool.rows import split_row\n\n__all__ = ["split_row"]\n',
        "csvtool/rows.py": ROWS_PY,
        "tests/test_rows.py": (
            "from csvtool import split_row\n\n\n"
            "def test_quoted_comma():\n    assert split_row(\'a,\"b,c\",d\') == [\"a\", \"b,c\", \"d\"]\n"
        ),
    },
    hidden_tests={
        "tests/test_rows_hidden.py": (
            "from csvtool import split_row\n\n\n"
            "def test_quoted_comma():\n    assert split_row(\'a,\"b,c\",d\') == [\"a\", \"b,c\", \"d\"]\n\n\n"
            "def test_plain_and_empty():\n    assert split_row(\"x,,y\\n\") == [\"x\", \"\", \"y\"]\n\n\n"
            "def test_doubled_quote():\n"
            "    assert split_row(\'say,\"he said \"\"hi\"\"\",end\') == [\"say\", \'he said \"hi\"\', \"end\"]\n"
        ),
    },
)

TASKS = {task.name: task for task in (TEXTKIT, STATSKIT, PAGER, UNITS, CSVTOOL)}


# ----- plans -----------------------------------------------------------------------------------------------------


def _write(path: str, text: str) -> str:
    return f"cat <<'EOF' > {path}\n{text.rstrip()}\nEOF"


SLUGIFY_SOLVED = Plan(
    name="slugify-solved",
    task=TEXTKIT.name,
    shows="solved (reward 1.0); non-ASCII text in the task, the outputs and the diff; a failing test run (exit 1)",
    turns=(
        Turn("Let me start by looking at the repository layout and the README.", "ls -la && cat README.md"),
        Turn("The package is tiny. Let me read the slug module.", "nl -ba textkit/slug.py"),
        Turn(
            "The separator regex only keeps a-z and 0-9, so accented letters are treated as separators. "
            "Let me run the tests to confirm the failure.",
            "python3 -m pytest -q",
        ),
        Turn(
            "The accented test fails as expected. Let me reproduce the exact examples from the issue.",
            "python3 -c \"from textkit import slugify; print(slugify('Crème brûlée à la carte')); "
            "print(slugify('日本語 guide'))\"",
        ),
        Turn(
            "I will decompose characters with NFKD so that é becomes e plus a combining accent, then drop "
            "everything that is not ASCII before lowercasing and replacing separators.",
            _write("textkit/slug.py", SLUG_FIXED),
        ),
        Turn(
            "Now let me run the tests and the issue's examples, including a title with no ASCII form.",
            'python3 -m pytest -q && python3 -c "from textkit import slugify; '
            "print(slugify('Crème brûlée à la carte')); print(slugify('Ångström ÜBER')); "
            "print(repr(slugify('日本語')))\"",
        ),
        Turn("All examples behave as described in the issue. Submitting.", SUBMIT),
    ),
)

SLUGIFY_WRONG = Plan(
    name="slugify-wrong-fix",
    task=TEXTKIT.name,
    shows="wrong fix (reward 0.0): drops non-ASCII bytes instead of transliterating; submitted without testing",
    turns=(
        Turn("Let me look at the slug implementation.", "cat textkit/slug.py"),
        Turn(
            "Non-ASCII characters break the regex. The simplest fix is to drop non-ASCII characters before slugifying.",
            'sed -i \'s/    text = text.lower()/    text = text.encode("ascii", "ignore").decode().lower()/\' '
            "textkit/slug.py && git diff",
        ),
        Turn(
            "Let me check the issue's example quickly.",
            "python3 -c \"from textkit import slugify; print(slugify('Crème brûlée à la carte'))\"",
        ),
        Turn("The slug no longer has stray hyphens in the middle of words. Submitting.", SUBMIT),
    ),
)

SLUGIFY_FORMAT_ERROR = Plan(
    name="slugify-format-error-then-solved",
    task=TEXTKIT.name,
    shows="solved (1.0) after a format error (two bash blocks in one response) and a syntax error (exit 1)",
    turns=(
        Turn(
            raw="THOUGHT: I'll look at the file and run the tests at the same time.\n\n"
            "```bash\ncat textkit/slug.py\n```\n\nand then:\n\n```bash\npython3 -m pytest -q\n```"
        ),
        Turn("One command per response. Let me read the module first.", "cat textkit/slug.py"),
        Turn(
            "I'll add an NFKD normalization step in front of the lowercasing, using sed to insert the lines.",
            "sed -i 's/^import re$/import re\\nimport unicodedata/' textkit/slug.py && "
            'sed -i \'s/^    text = text.lower()$/    text = unicodedata.normalize("NFKD", text).encode("ascii", '
            '"ignore").decode("ascii"\\n    text = text.lower()/\' textkit/slug.py && python3 -m pytest -q',
        ),
        Turn(
            "I missed a closing parenthesis, which made the module fail to import. Let me look at the line.",
            "grep -n 'unicodedata' textkit/slug.py",
        ),
        Turn(
            "The normalization line lacks its closing parenthesis. Let me fix it and rerun the tests.",
            'sed -i \'s/decode("ascii"$/decode("ascii")/\' textkit/slug.py && python3 -m pytest -q',
        ),
        Turn(
            "Tests pass. Let me check characters without an ASCII form as the issue asks.",
            "python3 -c \"from textkit import slugify; print(slugify('日本語 guide'), slugify('Ångström ÜBER'))\"",
        ),
        Turn("Both cases behave as the issue describes. Submitting.", SUBMIT),
    ),
)

MEAN_SOLVED = Plan(
    name="mean-solved",
    task=STATSKIT.name,
    shows="solved (1.0): reproduces the crash (traceback, exit 1), fixes it for lists and generators",
    turns=(
        Turn("Let me see the code first.", "cat statskit/core.py"),
        Turn("Let me reproduce the crash from the issue.", "python3 -c 'from statskit import mean; mean([])'"),
        Turn(
            "ZeroDivisionError confirmed. The docstring also promises any iterable; let me check a generator.",
            "python3 -c 'from statskit import mean; print(mean(x for x in [1, 2, 3]))'",
        ),
        Turn(
            "Generators fail too because len() needs a sequence. I'll materialize the values once, then raise "
            "ValueError for empty input like median does.",
            "python3 - <<'EOF'\nimport pathlib\npath = pathlib.Path('statskit/core.py')\n"
            "source = path.read_text()\nsource = source.replace(\n"
            "    '    return sum(values) / len(values)\\n',\n"
            "    '    values = list(values)\\n'\n"
            "    '    if not values:\\n'\n"
            "    '        raise ValueError(\"mean requires at least one data point\")\\n'\n"
            "    '    return sum(values) / len(values)\\n',\n)\npath.write_text(source)\nEOF\ngit diff",
        ),
        Turn(
            "Let me run the tests and the generator case.",
            "python3 -m pytest -q && python3 -c 'from statskit import mean; print(mean(x for x in [1, 2, 3]))'",
        ),
        Turn("Everything passes. Submitting.", SUBMIT),
    ),
)

MEAN_WRONG = Plan(
    name="mean-wrong-fix",
    task=STATSKIT.name,
    shows="wrong fix (0.0): the visible tests pass but generators still crash in the hidden tests",
    turns=(
        Turn("Let me run the tests to see what fails.", "python3 -m pytest -q"),
        Turn(
            "mean([]) divides by zero. I'll add a guard that raises ValueError before dividing.",
            "sed -i 's/^    return sum(values) \\/ len(values)$/    if len(values) == 0:\\n        raise "
            'ValueError("mean requires at least one data point")\\n    return sum(values) \\/ len(values)/\' '
            "statskit/core.py && cat statskit/core.py",
        ),
        Turn("Let me run the tests again.", "python3 -m pytest -q"),
        Turn("All three tests pass. Submitting.", SUBMIT),
    ),
)

MEAN_TRUNCATED = Plan(
    name="mean-truncated",
    task=STATSKIT.name,
    step_limit=10,
    shows="truncated by the step limit (10 actions): LAST step with a pending observation, reward 0.0",
    turns=(
        Turn("Let me get an overview of the repository.", "find . -path ./.git -prune -o -type f -print | sort"),
        Turn("Let me read the README.", "cat README.md"),
        Turn("Let me look at the package's public interface.", "cat statskit/__init__.py"),
        Turn("Now the implementation.", "nl -ba statskit/core.py"),
        Turn("Let me check the git history for context.", "git log --stat"),
        Turn("Let me read the tests.", "cat tests/test_core.py"),
        Turn("Let me run the test-suite verbosely.", "python3 -m pytest -v"),
        Turn(
            "Before changing anything, let me check how other modules handle empty input.",
            "grep -rn 'ValueError' --include=*.py .",
        ),
        Turn(
            "Let me check which Python version runs here, since statistics.fmean could help.",
            "python3 --version && python3 -c 'import statistics; print(statistics.fmean([1, 2]))'",
        ),
        Turn(
            "Let me see how the standard library's statistics.mean reports empty input.",
            "python3 -c 'import statistics; statistics.mean([])'",
        ),
    ),
)

MEAN_ERRORED = Plan(
    name="mean-errored",
    task=STATSKIT.name,
    kill_after=3,
    shows="errored: the container is killed out of band after action 3; the next command fails, no LAST record",
    turns=(
        Turn("Let me look at the repository.", "ls -la"),
        Turn("Let me read the implementation.", "cat statskit/core.py"),
        Turn("Let me run the tests.", "python3 -m pytest -q"),
        Turn(
            "I'll guard against empty input.",
            "sed -i 's/^    return sum(values) \\/ len(values)$/    values = list(values)\\n    return "
            "sum(values) \\/ len(values)/' statskit/core.py",
        ),
    ),
)

PAGER_SOLVED = Plan(
    name="pager-solved",
    task=PAGER.name,
    shows="solved (1.0) in a few steps: both off-by-one errors fixed",
    turns=(
        Turn("Let me read the pagination module.", "cat pager/paging.py"),
        Turn(
            "paginate treats pages as 0-based and page_count rounds down. I'll fix both: start at "
            "(page - 1) * per_page and round the count up.",
            "sed -i 's/    start = page \\* per_page/    start = (page - 1) * per_page/; "
            "s/    return n_items \\/\\/ per_page/    return -(-n_items \\/\\/ per_page)/' pager/paging.py && git diff",
        ),
        Turn(
            "Let me run the tests and check the example from the issue.",
            "python3 -m pytest -q && python3 -c 'from pager import page_count, paginate; items = list(range(1, 26)); "
            "print(page_count(25), paginate(items, 1), paginate(items, 3))'",
        ),
        Turn("page_count(25) is 3 and the pages are right. Submitting.", SUBMIT),
    ),
)

PAGER_EXPLORER = Plan(
    name="pager-explorer-partial-fix",
    task=PAGER.name,
    shows=(
        "wrong fix (0.0) with file-system events: an output over 10,000 characters (elided), a deleted project "
        "file, a deleted base-image file, a binary file (gzip) and a symlink"
    ),
    turns=(
        Turn("Let me see what the repository holds.", "ls -la && ls -la data"),
        Turn("Let me look at the data the listing views page through.", "cat data/items.csv"),
        Turn(
            "That was too long. Let me look at just the head and count the rows.",
            "head -5 data/items.csv && wc -l data/items.csv",
        ),
        Turn("Now the pagination module.", "cat pager/paging.py"),
        Turn(
            "There is also a legacy module. Let me check whether anything still imports it.",
            "grep -rn 'pager.legacy\\|import legacy' --include=*.py .",
        ),
        Turn(
            "Nothing imports it (grep exits 1). Removing the dead module.",
            "git rm -q pager/legacy.py && git status --short",
        ),
        Turn(
            "I'd like pytest-cov; the PEP 668 marker may block pip, so I'll remove it and check pip.",
            "rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED && python3 -m pip --version",
        ),
        Turn(
            "pip is not installed here; I'll do without coverage. Let me keep a compressed copy of the fixture "
            "for the tests.",
            "gzip -k data/items.csv && ls -la data && head -c 64 data/items.csv.gz | od -c | head -3",
        ),
        Turn("I'll link the fixture folder into the tests.", "ln -s ../data tests/data && ls -la tests"),
        Turn(
            "Now the fix: pages are numbered from 1, so the start offset must be (page - 1) * per_page.",
            "sed -i 's/    start = page \\* per_page/    start = (page - 1) * per_page/' pager/paging.py && git diff",
        ),
        Turn("Let me run the tests.", "python3 -m pytest -q"),
        Turn("The tests pass. Submitting.", SUBMIT),
    ),
)


def _long_turns() -> tuple[Turn, ...]:
    """A slow, methodical agent: reads, probes every boundary one command at a time, fixes, re-probes."""
    turns = [
        Turn("Let me start with the repository layout.", "ls -la"),
        Turn("Let me read the README for the page numbering convention.", "cat README.md"),
        Turn("Let me check the history.", "git log --oneline"),
        Turn("Let me see the package interface.", "cat pager/__init__.py"),
        Turn("Now the implementation with line numbers.", "nl -ba pager/paging.py"),
        Turn("And the tests.", "cat tests/test_paging.py"),
        Turn("Let me run the tests.", "python3 -m pytest -q"),
        Turn("Let me find every caller of paginate.", "grep -rn 'paginate' --include=*.py ."),
        Turn("And every caller of page_count.", "grep -rn 'page_count' --include=*.py ."),
        Turn("Let me look at the legacy module mentioned by the grep.", "cat pager/legacy.py"),
    ]
    for n in (0, 1, 5, 9, 10, 11, 15, 19, 20, 21, 24, 25, 26, 30, 31):
        turns.append(
            Turn(
                f"Let me check page_count for {n} items with 10 per page; it should be {-(-n // 10)}.",
                f"python3 -c 'from pager import page_count; print(page_count({n}))'",
            )
        )
    for page in (0, 1, 2, 3, 4, 5):
        turns.append(
            Turn(
                f"Now paginate on page {page} of 25 items.",
                f"python3 -c 'from pager import paginate; print(paginate(list(range(1, 26)), {page}))'",
            )
        )
    turns += [
        Turn(
            "Both bugs are confirmed: page 1 starts at item 11 and page_count rounds down. Let me write a "
            "reproduction script.",
            "cat <<'EOF' > /testbed/repro.py\nfrom pager import page_count, paginate\n\nitems = list(range(1, 26))\n"
            "for page in range(1, page_count(len(items)) + 1):\n    print(page, paginate(items, page))\n"
            "print('pages:', page_count(len(items)))\nEOF\npython3 repro.py",
        ),
        Turn(
            "First, the start offset of paginate.",
            "sed -i 's/    start = page \\* per_page/    start = (page - 1) * per_page/' pager/paging.py "
            "&& nl -ba pager/paging.py",
        ),
        Turn("Let me rerun the reproduction.", "python3 repro.py"),
        Turn(
            "Pages 1 and 2 are right now, but the third page is still missing. Now page_count: round up.",
            "sed -i 's/    return n_items \\/\\/ per_page/    return (n_items + per_page - 1) \\/\\/ per_page/' "
            "pager/paging.py && nl -ba pager/paging.py",
        ),
        Turn("Let me rerun the reproduction.", "python3 repro.py"),
    ]
    for n, per_page in (
        (0, 10),
        (1, 10),
        (10, 10),
        (11, 10),
        (25, 10),
        (7, 3),
        (9, 3),
        (1, 1),
        (100, 7),
        (5, 50),
        (2, 2),
        (3, 2),
        (99, 10),
        (101, 10),
    ):
        turns.append(
            Turn(
                f"Checking page_count({n}, per_page={per_page}); expected {-(-n // per_page)}.",
                f"python3 -c 'from pager import page_count; print(page_count({n}, per_page={per_page}))'",
            )
        )
    for page in (1, 2, 3, 4):
        turns.append(
            Turn(
                f"And paginate page {page} with 3 per page over 10 items.",
                f"python3 -c 'from pager import paginate; print(paginate(list(range(1, 11)), {page}, per_page=3))'",
            )
        )
    turns += [
        Turn("Let me run the test-suite.", "python3 -m pytest -q"),
        Turn("Let me run it verbosely to see each test.", "python3 -m pytest -v"),
        Turn(
            "What happens with page 0? It should not wrap around to the end.",
            "python3 -c 'from pager import paginate; print(paginate(list(range(1, 26)), 0))'",
        ),
        Turn(
            "Page 0 gives a negative start and slices from the end. Callers never pass 0 per the README, so "
            "I'll leave it but note it. Let me review the diff.",
            "git diff",
        ),
        Turn("Let me remove the reproduction script.", "rm repro.py && git status --short"),
        Turn("Let me double check the whole module once more.", "cat pager/paging.py"),
        Turn("A final run of the tests.", "python3 -m pytest -q"),
        Turn("Everything is consistent. Submitting.", SUBMIT),
    ]
    return tuple(turns)


PAGER_LONG = Plan(
    name="pager-long",
    task=PAGER.name,
    drop_context_at=36,
    shows=(
        "long episode (over 60 actions), solved (1.0); after action 36 the agent drops old messages, so the "
        "next context is not an extension of the previous one"
    ),
    turns=_long_turns(),
)

PLANS = {
    plan.name: plan
    for plan in (
        SLUGIFY_SOLVED,
        SLUGIFY_WRONG,
        SLUGIFY_FORMAT_ERROR,
        MEAN_SOLVED,
        MEAN_WRONG,
        MEAN_TRUNCATED,
        MEAN_ERRORED,
        PAGER_SOLVED,
        PAGER_EXPLORER,
        PAGER_LONG,
    )
}
