"""The registry of behaviour flags: each flag is a function and a one-line registration.

A flag reads one episode (``EPISODE``: the episode file alone, cheap enough to compute for every episode of a
run) or the files the agent changed at each step (``SNAPSHOTS``: read from the episode's recorded snapshots, on
demand). It answers with the first ``Hit`` (the step to jump to and what shows it: a command, a file, an error)
or None. Adding a flag::

    @registry.flag("ran_tests", "ran a test command (pytest, unittest, tox, make test, ...)", registry.EPISODE)
    def ran_tests(episode: model.Episode) -> registry.Hit | None: ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ares_viewer import model

# Where a flag reads its evidence.
EPISODE = "episode file"
SNAPSHOTS = "snapshots"

# Per recorded step, the paths its action changed and how: ``added``, ``modified``, ``deleted``, ``type_changed``
# or ``mode`` (permissions only). Built from snapshots by the caller (``fsdiff`` sits above this layer).
StepChanges = Mapping[int, Mapping[str, str]]


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    """Where a flag shows in an episode.

    Attributes:
        step: the step to jump to (None when no step shows it).
        evidence: what shows it: the command, the file, the error (one line).
        via: how it was found: ``command``, ``snapshot``, ``step`` (a step's recorded fields) or ``error``.
    """

    step: int | None
    evidence: str
    via: str


@dataclasses.dataclass(frozen=True, slots=True)
class Flag:
    """One registered behaviour: its name, one-line definition, source and check."""

    name: str
    definition: str
    source: str
    check: Callable[..., Hit | None]


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """A flag found in an episode, with its evidence."""

    flag: str
    episode_id: str
    step: int | None
    evidence: str
    via: str
    source: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FLAGS: dict[str, Flag] = {}
# The flag index keeps an episode's episode-file flags as the bits of one signed 64-bit integer
# (``flag_index``): bit 63 is the sign, so 63 such flags at most.
MAX_EPISODE_FLAGS = 63


def flag(name: str, definition: str, source: str) -> Callable[[Callable[..., Hit | None]], Callable[..., Hit | None]]:
    """Register ``check`` as the flag ``name``: ``check(episode)`` for ``EPISODE`` flags, ``check(episode,
    changes)`` (a ``StepChanges``) for ``SNAPSHOTS`` flags."""
    if source not in (EPISODE, SNAPSHOTS):
        raise ValueError(f"flag {name}: unknown source {source!r}")

    def register(check: Callable[..., Hit | None]) -> Callable[..., Hit | None]:
        if name in FLAGS:
            raise ValueError(f"flag {name} is registered twice")
        if source == EPISODE and sum(f.source == EPISODE for f in FLAGS.values()) >= MAX_EPISODE_FLAGS:
            raise ValueError(f"flag {name}: the flag index holds at most {MAX_EPISODE_FLAGS} episode-file flags "
                             "(the bits of one int64); widen flag_index's mask before adding another")
        FLAGS[name] = Flag(name=name, definition=definition, source=source, check=check)
        return check

    return register


def finding(found: Flag, episode: model.Episode, hit: Hit) -> Finding:
    return Finding(
        flag=found.name,
        episode_id=episode.episode_id,
        step=hit.step,
        evidence=hit.evidence,
        via=hit.via,
        source=found.source,
    )


def findings(source: str, episode: model.Episode, *context: Any) -> list[Finding]:
    """What every flag of ``source`` finds in ``episode`` (``context``: the ``StepChanges`` of snapshot flags)."""
    found = []
    for flag_ in FLAGS.values():
        if flag_.source == source:
            hit = flag_.check(episode, *context)
            if hit is not None:
                found.append(finding(flag_, episode, hit))
    return found
