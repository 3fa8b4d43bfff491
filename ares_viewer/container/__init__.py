"""Docker containers for snapshots: the engine connection, capture, change tracking, image comparison, restore.

- ``engine.py``: connecting to the engine, and errors that tell an unreachable engine from a missing image;
- ``labels.py``: the labels every project container carries; ``limits.py``: the one ``ResourceLimits``;
- ``capture.py``: a live container's changes written as a per-step snapshot (or kept as a live one, its content
  spooled to a temporary file);
- ``changes.py``: following a live container cheaply (``ChangeTracker``);
- ``image.py``: a whole-filesystem copy compared with its image (``against_image``, ``as_changes``);
- ``_restore.py``: a snapshot restored into a new, locked-down container.

Importing this package needs no Docker SDK and no daemon.
"""

from __future__ import annotations

from ares_viewer.container._restore import restore_container
from ares_viewer.container.capture import (
    DEFAULT_IGNORE,
    DEFAULT_MAX_FILE_BYTES,
    MAX_ARCHIVE_BYTES,
    ContainerFilesError,
    capture_live,
    capture_snapshot,
)
from ares_viewer.container.changes import ChangeTracker
from ares_viewer.container.engine import (
    BUILD_HINT,
    ENGINE_HINT,
    EngineError,
    EngineUnreachableError,
    ImageUnavailableError,
    connect,
    docker_errors,
    require_image,
)
from ares_viewer.container.image import against_image, as_changes
from ares_viewer.container.labels import (
    LABEL_CREATED,
    LABEL_EPISODE,
    LABEL_PROJECT,
    LABEL_ROLE,
    LABEL_SESSION,
    LABEL_SOURCE,
    LABEL_STEP,
    project_labels,
)
from ares_viewer.container.limits import ResourceLimits

__all__ = [
    "BUILD_HINT",
    "DEFAULT_IGNORE",
    "DEFAULT_MAX_FILE_BYTES",
    "ENGINE_HINT",
    "LABEL_CREATED",
    "LABEL_EPISODE",
    "LABEL_PROJECT",
    "LABEL_ROLE",
    "LABEL_SESSION",
    "LABEL_SOURCE",
    "LABEL_STEP",
    "MAX_ARCHIVE_BYTES",
    "ChangeTracker",
    "ContainerFilesError",
    "EngineError",
    "EngineUnreachableError",
    "ImageUnavailableError",
    "ResourceLimits",
    "against_image",
    "as_changes",
    "capture_live",
    "capture_snapshot",
    "connect",
    "docker_errors",
    "project_labels",
    "require_image",
    "restore_container",
]
