"""Following a run that is still being written: refresh it now and then, parsing only what changed.

New iteration folders, new episode files and JSON Lines files that grow are picked up by ``Run.refresh``
(only new or changed files are parsed). A file whose end is cut off (a last line or a document still being
written) is ``pending`` rather than an error while it keeps changing; a refresh that finds it unchanged
makes it an error. Rows keep their place (run order is file path, then line), so what is already shown does
not move as the run grows.

>>> for change in live.follow(run, every=10):
...     print(change)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Protocol


class Refreshable(Protocol):
    def refresh(self) -> int: ...
    def __len__(self) -> int: ...


@dataclasses.dataclass(frozen=True)
class Change:
    """What one refresh found: files parsed, episodes before and after, and when."""

    parsed_files: int
    episodes_before: int
    episodes: int
    at: float

    @property
    def new_episodes(self) -> int:
        return self.episodes - self.episodes_before

    def __str__(self) -> str:
        return (f"{time.strftime('%H:%M:%S', time.localtime(self.at))}: {self.parsed_files} file(s) parsed, "
                f"{self.new_episodes:+,} episodes ({self.episodes:,})")


def refresh(run: Refreshable) -> Change:
    """Refresh a run once; what changed."""
    before = len(run)
    parsed = run.refresh()
    return Change(parsed, before, len(run), time.time())


def follow(run: Refreshable, every: float = 5.0, *, until: Callable[[], bool] = lambda: False,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[Change]:
    """Refresh ``run`` every ``every`` seconds and yield each change, until ``until()`` says stop."""
    while not until():
        sleep(every)
        yield refresh(run)
