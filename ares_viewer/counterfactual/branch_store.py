"""Where a decisive-step search keeps its branches: a local folder (the cache folder by default) or an fsspec URL.

Both hold the same layout: ``branches.jsonl`` (one JSON record per finished branch, its ``path`` relative to the
folder, so a store can be moved or shipped), ``parent.json``, and the branch episodes with their snapshots (the
counterfactual layout). A local log is appended to. An object store (``s3://...``) has no append: the search's
driver, the log's only writer, rewrites it whole after each branch.

:func:`staged` runs one branch for an object store, on whichever machine (a Ray node) runs it: the episode's
snapshots come through fsspec into that machine's cache folder (``snapshots.mirror``), the task's verifier recipe
too (never into the run folder), the branch is written to a staging folder in the cache folder and uploaded into
the store, and the staging folder is removed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import posixpath
import shutil
import stat
import uuid
from collections.abc import Callable
from typing import Any

from ares_viewer.base import locations
from ares_viewer.runs import index_cache
from ares_viewer.snapshots import mirror

LOG_NAME = "branches.jsonl"
STAGING_DIRNAME = "branch-staging"
# The most bytes of a branch log read (about 100,000 branches).
MAX_LOG_BYTES = 64 * 2**20

Folder = pathlib.Path | str  # a local folder, or an fsspec URL


def is_remote(folder: Folder) -> bool:
    """Whether ``folder`` is an fsspec URL (an object store), not a path on this machine."""
    return not locations.is_local(os.fspath(folder))


def join(folder: Folder, name: str) -> Folder:
    """``name`` inside ``folder``: a path for a local folder, a URL for a remote one."""
    if is_remote(folder):
        return posixpath.join(str(folder).rstrip("/"), name)
    return pathlib.Path(folder).expanduser() / name


def read_records(folder: Folder, root: str | os.PathLike | None = None) -> list[tuple[int, Any]]:
    """The log's records, numbered from 1; a line that is not JSON (a half-written last one) as its exception.

    A local log is read as an untrusted file: it must lie inside ``root`` (default: ``folder``) once symlinks are
    resolved, be a regular file (a FIFO or a device is refused without opening it for a blocking read) and hold
    at most :data:`MAX_LOG_BYTES`.

    Raises:
        ValueError: the log is outside ``root``, not a regular file, or too large (the reason, naming the file).
    """
    try:
        if is_remote(folder):
            fs, path, _ = mirror.url_to_fs(str(join(folder, LOG_NAME)))
            text = fs.cat_file(path).decode("utf-8", errors="replace")
        else:
            text = read_confined(pathlib.Path(join(folder, LOG_NAME)), root or folder, MAX_LOG_BYTES).decode(
                "utf-8", errors="replace"
            )
    except FileNotFoundError:
        return []
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            records.append((number, json.loads(line)))
        except ValueError as exc:
            records.append((number, exc))
    return records


def inside(path: str | os.PathLike, root: str | os.PathLike) -> str:
    """``path``'s real location (symlinks resolved), checked to lie inside ``root``'s.

    Raises:
        ValueError: it lies outside ``root``.
    """
    real, top = os.path.realpath(path), os.path.realpath(root)
    if real != top and not real.startswith(top.rstrip(os.sep) + os.sep):
        raise ValueError(f"{path} lies outside {root}")
    return real


def read_confined(path: pathlib.Path, root: str | os.PathLike, limit: int) -> bytes:
    """The bytes of ``path``, an untrusted regular file inside ``root``, at most ``limit`` of them.

    It is opened without blocking (a FIFO with no writer would hold the reader forever) and checked to be a
    regular file before a byte is read.

    Raises:
        FileNotFoundError: there is no such file.
        ValueError: it lies outside ``root``, is not a regular file, or holds more than ``limit`` bytes.
    """
    real = inside(path, root)
    if not stat.S_ISREG(os.stat(real).st_mode):  # refused before it is opened
        raise ValueError(f"{path} is not a regular file (a FIFO, device, socket or folder): not read")
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped since
            raise ValueError(f"{path} is not a regular file (a FIFO, device, socket or folder): not read")
        if info.st_size > limit:
            raise ValueError(f"{path} holds {info.st_size:,} bytes, over the {limit:,} byte limit: not read")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"{path} grew over the {limit:,} byte limit while read: not read")
    return data


def start(folder: Folder, parent: dict[str, Any]) -> None:
    """Create ``folder`` (a local one) and write ``parent.json``, naming the episode the branches come from."""
    text = json.dumps(parent)
    if is_remote(folder):
        fs, path, _ = mirror.url_to_fs(str(join(folder, "parent.json")))
        fs.pipe_file(path, text.encode())
        return
    pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
    pathlib.Path(join(folder, "parent.json")).write_text(text)


def read_parent(folder: Folder, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """``parent.json`` of ``folder`` (read as the log is, at most 64 KiB), or ``{}`` when there is none or it cannot
    be used: the episode the branches come from and the search rule that wrote them last (``strategy``,
    ``samples``, ``batch``)."""
    try:
        if is_remote(folder):
            fs, path, _ = mirror.url_to_fs(str(join(folder, "parent.json")))
            data = fs.cat_file(path)
        else:
            data = read_confined(pathlib.Path(join(folder, "parent.json")), root or folder, 64 * 2**10)
        parent = json.loads(data)
    except (OSError, ValueError):
        return {}
    return parent if isinstance(parent, dict) else {}


def append(folder: Folder, record: dict[str, Any]) -> None:
    """Add one branch record to the log (its ``path`` made relative to ``folder``); the caller serialises calls."""
    record = dict(record)
    if record.get("path") is not None:
        record["path"] = relative(folder, record["path"])
    line = json.dumps(record) + "\n"
    if not is_remote(folder):
        with pathlib.Path(join(folder, LOG_NAME)).open("a", encoding="utf-8") as log:
            log.write(line)
        return
    fs, path, _ = mirror.url_to_fs(str(join(folder, LOG_NAME)))
    before = fs.cat_file(path) if fs.exists(path) else b""
    fs.pipe_file(path, before + line.encode())


def relative(folder: Folder, path: str) -> str:
    """``path`` (inside ``folder``) relative to it."""
    if is_remote(folder):
        return posixpath.relpath(str(path), str(folder).rstrip("/"))
    return os.path.relpath(path, folder)


def _stage_recipe(episode: Any) -> pathlib.Path | None:
    """The remote run's ``tasks/<task>/`` mirrored into this machine's cache folder, or None when it has none."""
    name = episode.task_name or ""
    if not name or "/" in name or "\\" in name or name in {".", ".."}:
        return None
    fs, run_file, _ = mirror.url_to_fs(str(episode.path))
    remote = posixpath.join(posixpath.dirname(run_file), "tasks", name)
    if not fs.exists(posixpath.join(remote, "task.json")):
        return None
    return mirror.mirror_remote(fs, remote, "recipes", name)


def staged(
    run_branch: Callable[..., Any], folder: str, episode: Any, step: int, client: Any, max_steps: int, **restore: Any
) -> Any:
    """``run_branch`` (``branching.run_branch``) for a store at URL ``folder``: run into a staging folder in this
    machine's cache folder, upload the branch episode and its snapshots into ``folder``, and return its record with
    ``path`` the uploaded file's URL. A remote episode's recipe is staged beside it when the caller gave none."""
    staging = index_cache.cache_dir() / STAGING_DIRNAME / uuid.uuid4().hex
    try:
        if restore.get("recipe") is None and is_remote(episode.path):
            restore["recipe"] = _stage_recipe(episode)
        out = staging / "out"
        branch = run_branch(episode, step, client, out, max_steps, **restore)
        if branch.path is None:
            return branch
        fs, root, _ = mirror.url_to_fs(folder)
        for local in sorted(p for p in out.rglob("*") if p.is_file()):
            fs.put_file(str(local), posixpath.join(root, local.relative_to(out).as_posix()))
        uploaded = join(folder, pathlib.Path(branch.path).relative_to(out).as_posix())
        return dataclasses.replace(branch, path=str(uploaded))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
