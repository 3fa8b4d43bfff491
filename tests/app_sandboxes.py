"""Removing the sandboxes an app made during a test, and no one else's.

The app's sessions are :func:`ares_viewer.sandbox.new_session` ids; every test module that restores sandboxes itself
labels them with a session of its own named ``pytest-…``. Under pytest-xdist another worker may at that moment be
using a sandbox of the same episode, so an app test's cleanup leaves those alone: removing them made a capture fail
mid-archive ("no such file or directory") and a decisive-step branch lose its containers.
"""

from __future__ import annotations

import contextlib
from typing import Any

import docker.errors

from ares_viewer import sandbox

TEST_SESSION_PREFIX = "pytest-"


def remove_app_sandboxes(client: Any, episode_id: str, since: float) -> list[str]:
    """Remove the sandboxes of ``episode_id`` an app (not a test module) created at or after ``since``."""
    removed = []
    for info in sandbox.list_sandboxes(client, role=sandbox.ROLE):
        if info.episode_id == episode_id and info.created_at >= since and not (
                info.session or "").startswith(TEST_SESSION_PREFIX):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(info.container_id, force=True)
            removed.append(info.container_id)
    return removed
