"""Every project container, found by label whichever process made it: listing, cleanup and reaping idle ones.

Labels cannot change after a container is created, so each sandbox's last use is kept here (in memory); a
container this process never touched (a crashed app's) counts from its creation time, so nothing escapes
:func:`reap_idle` or :func:`cleanup`. The change tracker of each sandbox whose state this process knows is kept
here too, so later captures read only what changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Collection
from typing import Any

from ares_viewer import snapshots
from ares_viewer.container.changes import ChangeTracker
from ares_viewer.container.engine import connect, docker_errors
from ares_viewer.container.labels import (
    LABEL_CREATED,
    LABEL_EPISODE,
    LABEL_PROJECT,
    LABEL_ROLE,
    LABEL_SESSION,
    LABEL_STEP,
    ROLE_SANDBOX,
)

_LOGGER = logging.getLogger(__name__)

ROLE = ROLE_SANDBOX


@dataclasses.dataclass(frozen=True)
class SandboxInfo:
    """A project container as :func:`list_sandboxes` finds it (by label), owned by this process or not."""

    container_id: str
    name: str
    image: str
    state: str
    role: str | None
    episode_id: str | None
    step: int | None
    session: str | None
    created_at: float
    last_used: float

    @property
    def short_id(self) -> str:
        return self.container_id[:12]

    def age_s(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.created_at

    def idle_s(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.last_used


# Last use of each sandbox this process touched (container id -> unix time).
_REGISTRY: dict[str, float] = {}
# The change tracker of each sandbox whose filesystem state this process knows (container id -> tracker).
_TRACKERS: dict[str, ChangeTracker] = {}
_REGISTRY_LOCK = threading.Lock()


def follow(container: Any, state: snapshots.Restorable) -> None:
    """Start following a container whose filesystem is ``state`` now (its later captures read only changes)."""
    tracker = ChangeTracker.start(container, state)
    if tracker is not None:
        with _REGISTRY_LOCK:
            _TRACKERS[container.id] = tracker


def tracker(container_id: str) -> ChangeTracker | None:
    """The change tracker of a sandbox this process follows (None when its state is not known here)."""
    with _REGISTRY_LOCK:
        return _TRACKERS.get(container_id)


def forget_container(container_id: str) -> None:
    """Stop tracking a container (it was removed, or its state is no longer known)."""
    with _REGISTRY_LOCK:
        _REGISTRY.pop(container_id, None)
        _TRACKERS.pop(container_id, None)


def touch(container_id: str, when: float | None = None) -> None:
    """Record that a sandbox was just used (keeps :func:`reap_idle` away from it)."""
    with _REGISTRY_LOCK:
        _REGISTRY[container_id] = time.time() if when is None else when


def list_sandboxes(client: Any = None, *, session: str | None = None, role: str | None = None) -> list[SandboxInfo]:
    """Every container of the project (found by label, whichever process made it), oldest first.

    Args:
        client: A Docker client (one from the environment when omitted).
        session: Only the containers of this session.
        role: Only containers of this role (``sandbox`` for restored sandboxes; the sample generator and the
            capture helper use others).
    """
    client = connect(client)
    filters = [LABEL_PROJECT] + ([f"{LABEL_SESSION}={session}"] if session else []) + (
        [f"{LABEL_ROLE}={role}"] if role else [])
    found = []
    for raw in client.api.containers(all=True, filters={"label": filters}):
        labels = raw.get("Labels") or {}
        try:
            created = float(labels.get(LABEL_CREATED) or raw.get("Created") or 0)
        except ValueError:
            created = float(raw.get("Created") or 0)
        step = labels.get(LABEL_STEP)
        with _REGISTRY_LOCK:
            last_used = _REGISTRY.get(raw["Id"], created)
        found.append(SandboxInfo(
            container_id=raw["Id"],
            name=(raw.get("Names") or ["?"])[0].lstrip("/"),
            image=raw.get("Image", ""),
            state=raw.get("State", ""),
            role=labels.get(LABEL_ROLE),
            episode_id=labels.get(LABEL_EPISODE),
            step=int(step) if step and step.isdigit() else None,
            session=labels.get(LABEL_SESSION),
            created_at=created,
            last_used=last_used,
        ))
    return sorted(found, key=lambda info: info.created_at)


def cleanup(
    client: Any = None, *, older_than_s: float | None = None, session: str | None = None, role: str | None = None
) -> list[str]:
    """Remove the project's containers (all of them, or those older than ``older_than_s``, of ``session``,
    of ``role``). Returns the ids removed; a container that vanished meanwhile is skipped quietly."""
    client = connect(client)
    now = time.time()
    removed = []
    errors = docker_errors()
    for info in list_sandboxes(client, session=session, role=role):
        if older_than_s is not None and info.age_s(now) < older_than_s:
            continue
        try:
            client.api.remove_container(info.container_id, force=True)
        except errors.NotFound:
            continue
        forget_container(info.container_id)
        removed.append(info.container_id)
        _LOGGER.info("removed %s (%s, episode %s, session %s)", info.short_id, info.role, info.episode_id,
                     info.session)
    return removed


def remove_session(session: str, client: Any = None) -> list[str]:
    """Remove every container of one session (the app's Stop & remove, or a user leaving)."""
    return cleanup(client, session=session)


def reap_idle(
    max_idle_s: float, client: Any = None, *, sessions: Collection[str] | None = None, now: float | None = None
) -> list[str]:
    """Remove the sandboxes unused for ``max_idle_s`` seconds. Returns the ids removed.

    Args:
        max_idle_s: Idle time after which a sandbox goes: since its last command, capture or restore in this
            process, or (for containers this process never touched) since its creation.
        client: A Docker client (one from the environment when omitted).
        sessions: Only the sandboxes of these sessions (an app passes the sessions it created, so a notebook's
            sandboxes on the same engine are left alone); None: every sandbox on the engine.
        now: The current time (for tests).
    """
    client = connect(client)
    now = time.time() if now is None else now
    removed = []
    errors = docker_errors()
    for info in list_sandboxes(client, role=ROLE):
        if info.idle_s(now) < max_idle_s or (sessions is not None and info.session not in sessions):
            continue
        with contextlib.suppress(errors.NotFound):
            client.api.remove_container(info.container_id, force=True)
        forget_container(info.container_id)
        removed.append(info.container_id)
    return removed
