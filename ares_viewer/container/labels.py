"""The labels every container ares-viewer creates carries, so it can be found (and cleaned up) by any process.

Labels cannot change after a container is created; last use is tracked in memory (``sandbox.registry``).
"""

from __future__ import annotations

LABEL_PROJECT = "ares-viewer.project"  # "1" on every container of the project
LABEL_ROLE = "ares-viewer.role"  # what it is for: see the roles below
LABEL_EPISODE = "ares-viewer.episode"  # the episode it belongs to
LABEL_STEP = "ares-viewer.step"  # the step a sandbox was restored from
LABEL_SESSION = "ares-viewer.session"  # the owning session (a notebook, an app session)
LABEL_CREATED = "ares-viewer.created"  # unix time of creation
LABEL_SOURCE = "ares-viewer.source"  # the episode file

ROLE_SANDBOX = "sandbox"  # a live sandbox restored from a step
ROLE_RESTORE = "restore"  # a container restored by ``container.restore_container`` directly
ROLE_BASE_READER = "base-reader"  # a never-started container the capture reads base versions from
ROLE_IMAGE_PROBE = "image-probe"  # a short-lived container listing an image's files
ROLE_VERIFIER = "verifier"  # a fresh container a task's verifier runs in, removed after it


def project_labels(role: str, episode_id: str | None = None, **more: str) -> dict[str, str]:
    """The labels of a new container of ``role`` (and ``episode_id``), plus ``more`` (label name -> value)."""
    labels = {LABEL_PROJECT: "1", LABEL_ROLE: role}
    if episode_id is not None:
        labels[LABEL_EPISODE] = episode_id
    labels.update(more)
    return labels
