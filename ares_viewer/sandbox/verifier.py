"""Where a task's verifier runs: a fresh container of the task's image, never the container a fork ran in.

A fork's commands run as root in their sandbox: they can change any file there (the interpreter, the shell's
profiles, installed packages, the verifier's own folder). So the verifier never runs there. :func:`fresh_container`
starts a new container of the task's image (labelled, limited, no network, never privileged, removed after);
:func:`carry` copies named paths from one container into another through the engine's archive API (the bytes
pass through this process as a tar, rewritten member by member: regular files, folders and symlinks only, no
special bits; nothing is extracted on this machine); :func:`run` runs a command there with no login shell and
a fixed environment (:data:`ENVIRONMENT`).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from ares_viewer.container import labels
from ares_viewer.container.engine import docker_errors, require_image
from ares_viewer.container.limits import ResourceLimits
from ares_viewer.container.streams import SPOOL_MEMORY_BYTES, archive_to_file
from ares_viewer.sandbox.commands import CommandResult, SandboxError, run_command

_LOGGER = logging.getLogger(__name__)

# The verifier's environment, on top of the image's own: a fixed PATH; Python without the user's site folder
# and without bytecode files written into the task's folders; pytest loading no plugin it was not asked for
# (``-p name``) even if a distribution on the path declares one.
ENVIRONMENT: Mapping[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PAGER": "cat",
    "TQDM_DISABLE": "1",
}
# Where commands start (outside any task's work folder; a recipe's command changes folder itself).
START_FOLDER = "/"


def start_container(client: Any, image: str, container_labels: Mapping[str, str], limits: ResourceLimits) -> Any:
    """A new, running container of ``image``: no network, ``limits``, never privileged, ``container_labels``."""
    require_image(client, image)
    return client.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        network_mode="none",
        working_dir=START_FOLDER,
        labels=dict(container_labels),
        volumes={},
        **limits.run_options(),
    )


@contextlib.contextmanager
def fresh_container(
    client: Any,
    image: str,
    *,
    episode_id: str,
    session: str,
    step: int,
    limits: ResourceLimits | None = None,
) -> Iterator[Any]:
    """A fresh container of ``image`` labelled as a verifier's (``episode_id``, ``session``, ``step``), removed
    when the block ends, whatever happens."""
    made = labels.project_labels(
        labels.ROLE_VERIFIER,
        episode_id,
        **{labels.LABEL_SESSION: session, labels.LABEL_STEP: str(step), labels.LABEL_CREATED: f"{time.time():.3f}"},
    )
    live = start_container(client, image, made, limits or ResourceLimits())
    try:
        yield live
    finally:
        with contextlib.suppress(docker_errors().NotFound):
            live.remove(force=True)


def remove_paths(live: Any, paths: Sequence[str]) -> None:
    """Remove ``paths`` in a container this process started (its own ``rm``: the image's, not a fork's)."""
    if not paths:
        return
    done = live.exec_run(["rm", "-rf", "--", *paths], workdir=START_FOLDER)
    if done.exit_code != 0:
        raise SandboxError(f"could not clear {', '.join(paths)} in {live.short_id}: {done.output[-300:]!r}")


def carry(source: Any, target: Any, paths: Sequence[str]) -> list[str]:
    """Copy each of ``paths`` (absolute, clean) from container ``source`` to the same place in ``target``; the
    paths ``source`` does not have are skipped. Returns the paths copied.

    The paths of one folder go into ``target`` in one archive (a task's project is a few names under its work
    folder): each copy into a container is a round trip the engine answers by starting a process of its own.

    Raises:
        SandboxError: When a path's archive is over the capture limits, or the engine refuses the copy.
    """
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        by_folder.setdefault(posixpath.dirname(path) or "/", []).append(path)
    copied = []
    for folder, names in by_folder.items():
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as clean:
            with tarfile.open(fileobj=clean, mode="w") as combined:
                found = [path for path in names if _add_archive(source, path, combined)]
            if not found:
                continue
            clean.seek(0)
            if not target.put_archive(folder, clean):
                raise SandboxError(f"the engine refused to copy {', '.join(found)} into {target.short_id}")
        copied.extend(found)
    return copied


def _add_archive(source: Any, path: str, out: tarfile.TarFile) -> bool:
    """Add ``path``'s archive from container ``source`` to ``out`` (:func:`_rewrite`); False when it has none."""
    try:
        archive = archive_to_file(source, path)
    except docker_errors().NotFound:
        return False
    with archive:
        _rewrite(archive, out, posixpath.basename(path))
    return True


def _rewrite(archive: IO[bytes], new: tarfile.TarFile, top: str) -> None:
    """Copy the members of the engine's tar ``archive`` under ``top`` to ``new``: folders, regular files (hard
    links as copies) and symlinks, permissions without set-id or sticky bits; every other member is dropped."""
    with tarfile.open(fileobj=archive) as tar:
        for member in tar:
            parts = member.name.split("/")
            if parts[0] != top or ".." in parts or member.name.startswith("/"):
                continue
            info = tarfile.TarInfo(member.name)
            info.mode, info.mtime, info.uid, info.gid = member.mode & 0o777, member.mtime, member.uid, member.gid
            if member.isdir():
                info.type = tarfile.DIRTYPE
                new.addfile(info)
            elif member.issym():
                info.type, info.linkname = tarfile.SYMTYPE, member.linkname
                new.addfile(info)
            elif member.isreg() or member.islnk():
                handle = tar.extractfile(member)  # a hard link reads its target's bytes
                if handle is not None:
                    info.size = member.size if member.isreg() else tar.getmember(member.linkname).size
                    new.addfile(info, handle)


def run(client: Any, live: Any, command: str, *, timeout_s: float, workdir: str = START_FOLDER) -> CommandResult:
    """``bash -c command`` (no login shell: no profile is read) in ``live`` with :data:`ENVIRONMENT`."""
    return run_command(
        client, live.id, command, workdir=workdir, timeout_s=timeout_s, environment=ENVIRONMENT, login=False
    )
