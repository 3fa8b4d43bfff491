"""Restoring a snapshot into a new container: its base image, its recorded changes applied, locked down."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
from collections.abc import Callable
from typing import IO, Any

from ares_viewer import snapshots
from ares_viewer.container import labels
from ares_viewer.container.capture import ContainerFilesError
from ares_viewer.container.limits import ResourceLimits

_LOGGER = logging.getLogger(__name__)

# A restore's archive stays in memory up to this size, then moves to a temporary file.
_SPOOL_BYTES = 8 * 1024 * 1024
# (image here, image of the snapshot) pairs already warned about.
_WARNED_IMAGES: set[tuple[str, str]] = set()


def restore_container(
    client: Any, snapshot: snapshots.Restorable, *, limits: ResourceLimits | None = None, **run_kwargs: Any
) -> Any:
    """Start a container from the snapshot's base image with the step's changes and deletions applied.

    The container has no network, labels naming the project and episode, and ``limits`` (the default
    ``ResourceLimits`` when omitted) unless ``run_kwargs`` says otherwise. The caller removes it
    (``container.remove(force=True)``).

    The files to restore are streamed into a temporary file (spooled to disk) and checked, within
    ``limits.restore_max_bytes``, before the engine is asked for anything; putting them in must finish within
    ``limits.restore_timeout_s``. Whatever fails after the container was created removes it.

    Raises:
        snapshots.SnapshotError: When the snapshot cannot be read safely or is over the byte budget; raised
            before the engine is contacted.
        ContainerFilesError: When the engine refuses the files or the restore takes longer than its time limit.
    """
    limits = limits or ResourceLimits()
    deleted = snapshot.deleted_paths()
    options: dict[str, Any] = {
        "command": ["sleep", "infinity"],
        "detach": True,
        "network_mode": "none",
        "working_dir": snapshot.workdir,
        "labels": labels.project_labels(labels.ROLE_RESTORE, snapshot.episode_id),
        **limits.run_options(),
    }
    options.update(run_kwargs)
    # Read (and so validate) every byte to restore first: a bad snapshot must never reach the engine.
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as archive:
        snapshot.write_archive(archive, max_bytes=limits.restore_max_bytes)
        archive.seek(0)
        image = client.images.get(snapshot.base_image)
        if snapshot.image_id and image.id != snapshot.image_id and (
            image.id, snapshot.image_id) not in _WARNED_IMAGES:
            # Same tag, another build (e.g. the base image rebuilt from newer packages): usually fine for the
            # task's files, but the untouched parts of the filesystem may differ from what the agent saw. Said
            # once per pair of builds: a replay restores many times.
            _WARNED_IMAGES.add((image.id, snapshot.image_id))
            _LOGGER.warning("%s is %s here, the snapshot was taken on %s", snapshot.base_image, image.id,
                            snapshot.image_id)
        container = client.containers.run(snapshot.base_image, **options)
        try:
            _within(limits.restore_timeout_s, container, lambda: _apply(container, deleted, archive))
        except BaseException:
            with contextlib.suppress(Exception):
                container.remove(force=True)
            raise
    return container


def _apply(container: Any, deleted: list[str], archive: IO[bytes]) -> None:
    if deleted:
        result = container.exec_run(["rm", "-rf", "--", *deleted])
        if result.exit_code != 0:
            raise ContainerFilesError(f"could not apply deletions: {result.output[-500:]!r}")
    if not container.put_archive("/", archive):
        raise ContainerFilesError("the engine refused the restored files")


def _within(seconds: float, container: Any, work: Callable[[], None]) -> None:
    """Run ``work`` with a wall-clock limit; past it, raise (the caller removes the container)."""
    outcome: dict[str, BaseException] = {}

    def call() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=call, name=f"restore-{container.short_id}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise ContainerFilesError(f"restoring the files into {container.short_id} took over {seconds:.0f} s "
                           "(ResourceLimits.restore_timeout_s); the container was removed")
    if "error" in outcome:
        raise outcome["error"]
