"""The flag rows of an ARES episode file read from its commands' side, without building the whole episode.

Building an ARES episode whole (its message pool, every cumulative context decoded, usage, reasoning) was most of
the flag index's cost on ARES runs: 2.9 times the cold index's CPU. The episode-file flags read only each step's
index, command, result (return code, output, format error, failure) and context (its length, whether it was
rewritten), the episode's actions, error and submission (``metadata``): ``ares.command_side`` gives exactly those
(an ``ares.CommandSide``, no ``model.Step`` built), reading the file as the index's fast path does (its context
lists compared as bytes, only the messages each adds decoded), and the flags' own checks run on it
(``flag_index.flag_rows``), so the rules are the same functions.

Exact only for the flags it was written for (``READ``): with any other episode-file flag registered, a run whose
episode ids repeat, an episode joined to a harbor trial, or a file not in ARES's writer layout (or anything
unusual in one), it answers None and the file is read whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ares_viewer.formats.adapters import ares
from ares_viewer.formats.sidecars import harbor
from ares_viewer.runs import run as runs

# The episode-file flags that read only what ``ares.command_side`` holds (see the module's docstring).
READ = frozenset({
    "touched_tests", "repeated_command", "repeated_failing_command", "submitted_no_change", "gave_up", "ran_tests",
    "no_tests_before_submit", "installed_packages", "tried_network", "format_errors", "command_timeouts",
    "context_rewrites", "model_api_errors", "container_errors",
})

Row = tuple[str, str, int, list[int | None]]


def flag_rows(run: runs.Run, path: str, data: bytes, flags: list[str],
              rows_of: Callable[[Iterator[Any], str], list[Row]]) -> list[Row] | None:
    """The flag rows of an ARES file of ``run`` (``rows_of(episodes, path)`` over its commands' side), or None when
    this reading does not apply: the caller then reads the file whole."""
    if not set(flags) <= READ or run.table.originals or harbor.trial_of(path, ares.NAME, run.trials):
        return None
    episode = ares.command_side(path, data)
    return None if episode is None else rows_of(iter((episode,)), path)
