"""What the recorder reads from the environment's live container: per-step snapshots and single files.

The only module of the recorder that talks to Docker (through the docker SDK container object ARES holds) and
the only one that uses the snapshot capture code. Calls block; the recorder runs them in a worker thread.
"""

from __future__ import annotations

import dataclasses
import io
import pathlib
import tarfile
from typing import Any

from ares_viewer import container as containers
from ares_viewer import snapshots

# Files larger than this are not copied into the episode file (their presence still shows in snapshots).
MAX_INLINE_FILE_BYTES = 64 * 1024


@dataclasses.dataclass(frozen=True)
class ContainerInfo:
    """The container an episode runs in: the image it was created from, for snapshots and restores."""

    image: str  # a tag of the image when it has one, else its id
    image_id: str
    image_tags: tuple[str, ...]
    workdir: str
    name: str


def docker_container(ares_container: Any) -> Any | None:
    """The docker SDK container behind an ARES ``DockerContainer`` (None for other container kinds)."""
    inner = getattr(ares_container, "_container", None)
    if inner is None or not callable(getattr(inner, "diff", None)):
        return None
    return inner


def describe(container: Any) -> ContainerInfo:
    """Read the container's image (tag and id) and working directory from the engine."""
    container.reload()
    image_id = container.attrs.get("Image") or ""
    image = container.client.images.get(image_id)
    # ARES tags the image it builds from a task's Dockerfile with the container's own name; another tag of the
    # same image (a task image the Dockerfile starts FROM) outlives that container and is the one to restore on.
    # The reference the container was created with comes first when it is a tag of the image.
    own = f"{container.name}:latest"
    created_with = (container.attrs.get("Config") or {}).get("Image")
    tags = tuple(sorted(image.tags, key=lambda tag: (tag != created_with, tag == own)))
    workdir = (container.attrs.get("Config") or {}).get("WorkingDir") or "/"
    return ContainerInfo(
        image=tags[0] if tags else image.id,
        image_id=image.id,
        image_tags=tags,
        workdir=workdir,
        name=container.name,
    )


def capture_step(
    container: Any, info: ContainerInfo, snapshot_id: str, step_index: int, out_dir: pathlib.Path
) -> pathlib.Path:
    """Write the container's state now as step ``step_index`` of ``snapshots/<snapshot_id>/``."""
    return containers.capture_snapshot(container, info.image, snapshot_id, step_index, out_dir, info.workdir)


def changed_paths(before_step: pathlib.Path, after_step: pathlib.Path) -> list[str]:
    """Paths whose recorded state differs between two step folders this process wrote (any episodes)."""
    before = snapshots.read_manifest_entries(before_step)
    after = snapshots.read_manifest_entries(after_step)
    changed = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old is None or new is None or _state(old) != _state(new):
            changed.append(path)
    return changed


def verifier_changes(out_dir: pathlib.Path, episode_id: str, step: int, folder: pathlib.Path) -> dict[str, Any]:
    """A verifier record's ``snapshot`` (``folder``, the container after the verifier, relative to ``out_dir``) and
    ``changed_paths`` (what the verifier changed against the agent's final step snapshot); nothing when that step
    has no snapshot."""
    final = out_dir / snapshots.SNAPSHOTS_DIRNAME / episode_id / snapshots.step_dirname(step)
    if not final.is_dir():
        return {}
    return {"snapshot": folder.relative_to(out_dir).as_posix(), "changed_paths": tuple(changed_paths(final, folder))}


def _state(entry: snapshots.Entry) -> tuple[Any, ...]:
    return (entry.type, entry.mode, entry.sha256, entry.link_target, entry.size)


def read_file(container: Any, path: str, limit: int = MAX_INLINE_FILE_BYTES) -> bytes | None:
    """A regular file's content read through the archive API (None when absent or not a file; cut at ``limit``)."""
    try:
        chunks, _ = container.get_archive(path)
        data = b"".join(chunks)
    except Exception:  # the engine answers 404 for a missing path; any failure means "not readable"
        return None
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.next()
        if member is None or not member.isreg():
            return None
        handle = tar.extractfile(member)
        return handle.read(limit) if handle is not None else None
