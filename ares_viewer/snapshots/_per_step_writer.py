"""Writing per-step snapshots (the capture helper's side of :mod:`.per_step`): manifests and content archives.

Each file is written under a temporary name and renamed into place, and a step folder is assembled under a
temporary name and swapped in (``base.atomic``), so a reader never sees half of one and a writer killed at any
moment leaves the old step folder or the new one; what a killed writer left is removed by the next write.
Archives are deterministic (same input, same bytes) and written as a stream: blobs spooled to a temporary file
(:class:`~.spool.SpooledBlobs`) are never all in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import pathlib
import shutil
import tarfile
from collections.abc import Iterable, Mapping
from typing import Any

from ares_viewer.base import atomic
from ares_viewer.snapshots._per_step_snapshot import BLOBS_NAME, utc_now
from ares_viewer.snapshots.base import Entry
from ares_viewer.snapshots.per_step import BASE_DIRNAME, BASE_FORMAT, MANIFEST_NAME, STEP_FORMAT, step_dirname
from ares_viewer.snapshots.spool import SpooledBlobs


def read_manifest_entries(folder: str | os.PathLike[str]) -> dict[str, Entry]:
    """The entries of a manifest this process wrote (``{}`` when there is none). For writers, not readers."""
    path = pathlib.Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return {}
    manifest = json.loads(path.read_text(encoding="utf-8"))
    return {key: Entry(path=key, **value) for key, value in manifest.get("entries", {}).items()}


def write_base(
    episode_dir: str | os.PathLike[str],
    *,
    episode_id: str,
    base_image: str,
    image_id: str | None,
    entries: Iterable[Entry],
    blobs: Mapping[str, bytes],
    created_at: str | None = None,
) -> pathlib.Path:
    """Write (or replace) an episode's base manifest and base content archive, atomically per file.

    Args:
        episode_dir: ``<run>/snapshots/<episode_id>``.
        episode_id: The episode's id.
        base_image: Image reference the episode's container was created from.
        image_id: That image's content id.
        entries: The base versions of every touched path (``stored_in="base"`` for stored content).
        blobs: sha256 hex -> content for every entry stored in ``base``; a :class:`~.spool.SpooledBlobs` (as the
            capture gives) is streamed into the archive, never read whole.
        created_at: ISO-8601 UTC time; now when omitted.
    """
    folder = pathlib.Path(episode_dir) / BASE_DIRNAME
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {
        "format": BASE_FORMAT,
        "episode_id": episode_id,
        "base_image": base_image,
        "image_id": image_id,
        "created_at": created_at or utc_now(),
        "entries": {e.path: e.to_json() for e in sorted(entries, key=lambda e: e.path)},
    }
    atomic.sweep(folder)
    staging = atomic.staging(folder / BLOBS_NAME)
    _write_blobs_archive(staging, blobs)
    staging.replace(folder / BLOBS_NAME)
    atomic.write_bytes(folder / MANIFEST_NAME, _manifest_bytes(manifest))
    return folder


def write_step(
    episode_dir: str | os.PathLike[str],
    *,
    episode_id: str,
    step_index: int,
    base_image: str,
    image_id: str | None,
    workdir: str,
    entries: Iterable[Entry],
    blobs: Mapping[str, bytes],
    created_at: str | None = None,
) -> pathlib.Path:
    """Write one step's snapshot folder, replacing an earlier capture of the same step.

    The folder is assembled under a temporary name and swapped into place (``atomic.replace_dir``), so a reader
    never sees half of it and a kill at any moment leaves the earlier capture or this one.

    Args:
        episode_dir: ``<run>/snapshots/<episode_id>``.
        episode_id: The episode's id.
        step_index: The step it records.
        base_image: Image reference the container was created from.
        image_id: That image's content id.
        workdir: The task's working directory.
        entries: Every path differing from the base image at this step.
        blobs: sha256 hex -> content for the entries whose ``stored_in`` is this step's folder.
        created_at: ISO-8601 UTC time; now when omitted.

    Returns:
        The step folder.
    """
    episode_dir = pathlib.Path(episode_dir)
    final = episode_dir / step_dirname(step_index)
    atomic.sweep(episode_dir)
    staging = atomic.staging(final)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    manifest = {
        "format": STEP_FORMAT,
        "episode_id": episode_id,
        "step_index": step_index,
        "base_image": base_image,
        "image_id": image_id,
        "workdir": workdir,
        "created_at": created_at or utc_now(),
        "entries": {e.path: e.to_json() for e in sorted(entries, key=lambda e: e.path)},
    }
    if blobs:
        _write_blobs_archive(staging / BLOBS_NAME, blobs)
    (staging / MANIFEST_NAME).write_bytes(_manifest_bytes(manifest))
    return atomic.replace_dir(staging, final)


def _write_blobs_archive(path: pathlib.Path, blobs: Mapping[str, bytes]) -> None:
    """A deterministic gzip tar of content blobs named by their sha256 (same input, same bytes), streamed to
    ``path``: one blob at a time, spooled blobs (:class:`~.spool.SpooledBlobs`) without reading them whole."""
    with path.open("wb") as out, \
            gzip.GzipFile(filename="", fileobj=out, mode="wb", compresslevel=9, mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for digest in sorted(blobs):
            info = tarfile.TarInfo(digest)
            info.mode = 0o644
            info.mtime = 0
            if isinstance(blobs, SpooledBlobs):  # hashed as it was spooled
                info.size = blobs.size(digest)
                with blobs.open(digest) as stream:
                    tar.addfile(info, stream)
                continue
            data = blobs[digest]
            if hashlib.sha256(data).hexdigest() != digest:
                raise ValueError(f"blob {digest} does not match its content")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
