"""Per-step container snapshots: the on-disk layout, finding them, and opening them safely.

Here: the names and formats, discovery (:func:`find_for_episode`), and :func:`open_step`, which checks the
manifests. The opened snapshot is :mod:`._per_step_snapshot` (reading from :mod:`._per_step_archives`);
writing is :mod:`._per_step_writer`.

A snapshot records how a task container's filesystem differs from its base image after one step of an
episode, plus the base image's own versions of every touched path, so that the files at any step (and at
the base) can be read and diffed without a Docker daemon. The layout is documented in ``docs/snapshots.md``::

    <run>/<episode_id>.json                     the episode file
    <run>/snapshots/<episode_id>/base/          manifest.json + blobs.tar.gz: base versions of touched paths
    <run>/snapshots/<episode_id>/step_0000/     manifest.json + blobs.tar.gz: state after step 0
    <run>/snapshots/<episode_id>/step_0001/     ...

Every input is untrusted. Archives are never extracted onto the filesystem (see :mod:`._tar_safety`), and a
malformed manifest raises :class:`SnapshotError` naming the snapshot and the reason. This module imports no
Docker code.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import posixpath
import re
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ares_viewer.base import locations
from ares_viewer.base.cache import BoundedCache
from ares_viewer.runs import companions
from ares_viewer.snapshots import mirror
from ares_viewer.snapshots._per_step_archives import Archive, MemoryArchive
from ares_viewer.snapshots._per_step_snapshot import BLOBS_NAME, StepSnapshot
from ares_viewer.snapshots._tar_safety import SHA256_RE
from ares_viewer.snapshots.base import (
    ABSENT,
    CHANGES,
    DELETED,
    DIR,
    ENTRY_TYPES,
    FILE,
    MAX_MANIFEST_BYTES,
    MAX_PATH_CHARS,
    SNAPSHOTS_DIRNAME,
    SYMLINK,
    Entry,
    SnapshotError,
)

if TYPE_CHECKING:
    from ares_viewer import model

_LOGGER = logging.getLogger(__name__)

BASE_DIRNAME = companions.SNAPSHOT_BASE_DIRNAME
MANIFEST_NAME = companions.SNAPSHOT_MANIFEST
STEP_FORMAT = "ares-viewer.step-snapshot/1"
BASE_FORMAT = "ares-viewer.base-snapshot/1"

_STEP_DIR_RE = companions.SNAPSHOT_STEP_DIR_RE
_STORED_IN_RE = re.compile(r"^(base|step_\d{1,9})$")
# Episode ids come from untrusted files and become folder names: keep them to one plain path component.
_EPISODE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


@dataclasses.dataclass(frozen=True)
class StepRef:
    """Where a per-step snapshot lives, found without opening it (a :class:`~.base.SnapshotRef`).

    Attributes:
        path: The step folder (``.../snapshots/<episode_id>/step_NNNN``).
        episode_id: The episode it belongs to.
        step_index: The step it records (0 = the initial state, k = after action k ran).
    """

    path: str
    episode_id: str
    step_index: int

    @property
    def records_base(self) -> bool:
        return True

    def open(self) -> StepSnapshot:
        return open_step(self)


# ----- discovery and opening ------------------------------------------------------------------------------------


def episode_snapshots_dir(run_dir: str | os.PathLike[str], episode_id: str) -> pathlib.Path:
    """The folder holding an episode's snapshots: ``<run_dir>/snapshots/<episode_id>``.

    Raises:
        ValueError: When ``episode_id`` is not a single safe path component.
    """
    if not names_a_folder(episode_id):
        raise ValueError(f"episode id {episode_id!r} cannot name a snapshot folder")
    return pathlib.Path(run_dir) / SNAPSHOTS_DIRNAME / episode_id


def names_a_folder(episode_id: str | None) -> bool:
    """Whether ``episode_id`` (untrusted: it comes from a file) may become a folder name: one plain path component
    of letters, digits, ``.``, ``_`` and ``-`` (never ``..`` or a separator), at most 200 characters."""
    return bool(_EPISODE_ID_RE.fullmatch(episode_id or "")) and episode_id not in {".", ".."}


def step_dirname(step_index: int) -> str:
    """The folder name of step ``step_index``'s snapshot."""
    return f"step_{step_index:04d}"


def find_for_episode(episode_path: str | os.PathLike[str], episode_id: str) -> list[StepRef]:
    """The step snapshots recorded for an episode, sorted by step (empty when there are none).

    Looks in ``snapshots/<episode_id>/`` beside the episode file. Only folder names are read here; open a
    reference with :func:`open_step` to validate and read it. For a run read through fsspec the folder is
    first mirrored into the local cache (see ``_remote_steps``).

    Args:
        episode_path: The episode file (``<run>/<episode_id>.json``).
        episode_id: The episode's id as written inside the file.
    """
    if not locations.is_local(episode_path):
        key = (os.fspath(episode_path), episode_id)
        return list(_REMOTE_SEEN.get_or_compute(key, lambda: _remote_steps(*key)))
    try:
        folder = episode_snapshots_dir(pathlib.Path(episode_path).parent, episode_id)
    except ValueError:
        # Normal for formats whose ids are paths (Tinker's "run/it10/train/g1/t3"): such episodes have no
        # per-step snapshot folders.
        _LOGGER.debug("episode %r: id is not usable as a folder name; no per-step snapshots looked up", episode_id)
        return []
    return list_steps(folder)


# A remote run's snapshot listing is asked for again after a minute (each page view asks for it).
_REMOTE_SEEN: BoundedCache[list[StepRef]] = BoundedCache(maxsize=256, ttl=60.0)


def _remote_steps(episode_url: str, episode_id: str) -> list[StepRef]:
    """The step snapshots of an episode read through fsspec (``s3://``, ``gs://``, ``memory://``...).

    The episode's snapshot folder is mirrored into the local cache (:func:`.mirror.mirror_remote`), never into
    the run, and read from there like a local one.
    """
    try:
        fs, path, local = mirror.url_to_fs(episode_url)
        if local:
            return find_for_episode(path, episode_id)
        remote = posixpath.join(posixpath.dirname(path), SNAPSHOTS_DIRNAME,
                                episode_snapshots_dir(".", episode_id).name)
        if not fs.isdir(remote):
            return []
    except ValueError:
        return []  # an id that cannot name a folder: no per-step snapshots (see find_for_episode)
    except OSError as exc:
        _LOGGER.warning("%s: cannot list its snapshots (%s)", episode_url, exc)
        return []
    copy = mirror.mirror_remote(fs, remote, "remote-snapshots", episode_id)
    return list_steps(copy) if copy is not None else []


def list_steps(episode_dir: str | os.PathLike[str]) -> list[StepRef]:
    """The step snapshots in one episode's snapshot folder (``<run>/snapshots/<episode_id>``), sorted by step."""
    folder = pathlib.Path(episode_dir)
    episode_id = folder.name
    if not folder.is_dir():
        return []
    refs: dict[int, StepRef] = {}
    for child in sorted(folder.iterdir()):
        match = _STEP_DIR_RE.match(child.name)
        if match is None or not child.is_dir() or child.is_symlink():
            continue
        index = int(match.group(1))
        if index in refs:
            _LOGGER.warning("%s: two folders for step %d; keeping %s", folder, index, refs[index].path)
            continue
        refs[index] = StepRef(path=str(child), episode_id=episode_id, step_index=index)
    return [refs[index] for index in sorted(refs)]


def open_step(ref_or_path: StepRef | str | os.PathLike[str]) -> StepSnapshot:
    """Open and validate one per-step snapshot.

    Args:
        ref_or_path: A :class:`StepRef` or the step folder's path.

    Raises:
        SnapshotError: When a piece is missing, a manifest is malformed, or an archive is corrupt, truncated
            or holds anything other than plain content blobs.
    """
    if isinstance(ref_or_path, StepRef):
        step_dir = pathlib.Path(ref_or_path.path)
        expected: tuple[str, int] | None = (ref_or_path.episode_id, ref_or_path.step_index)
    else:
        step_dir = pathlib.Path(ref_or_path)
        expected = None
    if not step_dir.is_dir():
        raise SnapshotError(step_dir, "the snapshot folder does not exist")
    episode_dir = step_dir.parent

    manifest = _load_manifest(step_dir, step_dir / MANIFEST_NAME, STEP_FORMAT)
    episode_id = _field(step_dir, manifest, "episode_id", str)
    step_index = _field(step_dir, manifest, "step_index", int)
    base_image = _field(step_dir, manifest, "base_image", str)
    image_id = _field(step_dir, manifest, "image_id", str, optional=True)
    workdir = _field(step_dir, manifest, "workdir", str)
    created_at = _field(step_dir, manifest, "created_at", str, optional=True)
    match = _STEP_DIR_RE.match(step_dir.name)
    if match is None or int(match.group(1)) != step_index:
        raise SnapshotError(step_dir, f"manifest says step {step_index} but the folder is named {step_dir.name!r}")
    if episode_dir.name != episode_id:
        raise SnapshotError(
            step_dir, f"manifest says episode {episode_id!r} but it is filed under {episode_dir.name!r}"
        )
    if expected is not None and expected != (episode_id, step_index):
        raise SnapshotError(step_dir, f"expected episode {expected[0]!r} step {expected[1]}")
    if not _is_clean_path(workdir):
        raise SnapshotError(step_dir, f"workdir {workdir!r} is not an absolute normalized path")
    entries = _parse_entries(step_dir, manifest, base=False)

    base_dir = episode_dir / BASE_DIRNAME
    base_manifest, base_entries = _load_base(step_dir, base_dir / MANIFEST_NAME)
    if _field(step_dir, base_manifest, "episode_id", str) != episode_id:
        raise SnapshotError(step_dir, "base/manifest.json belongs to another episode")
    if _field(step_dir, base_manifest, "base_image", str) != base_image or (
        image_id is not None and _field(step_dir, base_manifest, "image_id", str, optional=True) != image_id
    ):
        raise SnapshotError(step_dir, "base/manifest.json records another base image")

    # Every folder whose archive holds content this snapshot can read, plus the step's own archive.
    needed = {e.stored_in for e in (*entries.values(), *base_entries.values()) if e.stored_in is not None}
    if (step_dir / BLOBS_NAME).exists():
        needed.add(step_dir.name)
    # Archives are only located here; their members are scanned on first read (see Archive).
    archives: dict[str, Archive | MemoryArchive] = {}
    for folder in sorted(needed):
        archive_path = episode_dir / folder / BLOBS_NAME
        if not archive_path.is_file():
            raise SnapshotError(step_dir, f"missing {folder}/{BLOBS_NAME}")
        archives[folder] = Archive(str(archive_path), folder)

    return StepSnapshot(
        path=str(step_dir),
        episode_id=episode_id,
        step_index=step_index,
        base_image=base_image,
        image_id=image_id,
        workdir=workdir,
        created_at=created_at,
        entries=types.MappingProxyType(entries),
        base_entries=base_entries,
        _archives=types.MappingProxyType(archives),
    )


# ----- internals -------------------------------------------------------------------------------------------------


def _is_clean_path(path: str) -> bool:
    return (
        isinstance(path, str)
        and path.startswith("/")
        and len(path) <= MAX_PATH_CHARS
        and "\x00" not in path
        and posixpath.normpath(path) == path
        and not path.startswith("//")
    )


def _load_manifest(snapshot: pathlib.Path, path: pathlib.Path, expected_format: str) -> dict[str, Any]:
    where = path.relative_to(snapshot.parent) if path.is_relative_to(snapshot.parent) else path
    if not path.is_file():
        raise SnapshotError(snapshot, f"missing {where}")
    size = path.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise SnapshotError(snapshot, f"{where} is {size} bytes, over the {MAX_MANIFEST_BYTES} byte limit")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SnapshotError(snapshot, f"{where} is not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise SnapshotError(snapshot, f"{where} is nested too deeply to read") from exc
    if not isinstance(manifest, dict):
        raise SnapshotError(snapshot, f"{where} is not a JSON object")
    if manifest.get("format") != expected_format:
        raise SnapshotError(snapshot, f"{where} has format {manifest.get('format')!r}, expected {expected_format!r}")
    return manifest


def _load_base(snapshot: pathlib.Path, path: pathlib.Path) -> tuple[dict[str, Any], Mapping[str, Entry]]:
    """The base manifest's header fields and parsed entries, shared by every step of an episode.

    Every step snapshot reads the same base manifest, so a parse is reused while the file is unchanged (same
    inode, size and modification time); entries are immutable, so sharing them is safe.
    """
    try:
        info = path.stat()
        key: tuple[Any, ...] | None = (str(path), info.st_ino, info.st_size, info.st_mtime_ns)
    except OSError:
        key = None  # _load_manifest reports the missing file
    cached = _BASE_CACHE.get(key) if key is not None else None
    if cached is not None:
        return cached
    manifest = _load_manifest(snapshot, path, BASE_FORMAT)
    entries = types.MappingProxyType(_parse_entries(snapshot, manifest, base=True))
    header = {k: v for k, v in manifest.items() if k != "entries"}
    if key is not None:
        _BASE_CACHE.put(key, (header, entries))
    return header, entries


# Parsed base manifests by (file, inode, size, mtime): every step of an episode reads the same one.
_BASE_CACHE: BoundedCache[tuple[dict[str, Any], Mapping[str, Entry]]] = BoundedCache(maxsize=8)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a manifest")


def _field(snapshot: pathlib.Path, manifest: Mapping[str, Any], key: str, kind: type, *, optional: bool = False) -> Any:
    value = manifest.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SnapshotError(snapshot, f"manifest field {key!r} should be {kind.__name__}, got {value!r:.80}")
    return value


def _parse_entries(snapshot: pathlib.Path, manifest: Mapping[str, Any], *, base: bool) -> dict[str, Entry]:
    raw = manifest.get("entries")
    which = "base manifest" if base else "manifest"
    if not isinstance(raw, dict):
        raise SnapshotError(snapshot, f"{which} has no 'entries' object")
    entries = {}
    # Manifests hold tens of thousands of entries: keep the per-entry work to set and dict operations.
    fields_ok = _ENTRY_FIELDS.issuperset
    new_entry = object.__new__
    for path, fields in raw.items():
        if not _is_clean_path(path):
            raise SnapshotError(snapshot, f"{which} entry {path!r:.200} is not an absolute normalized path")
        if type(fields) is not dict or not fields_ok(fields) or "type" not in fields:
            raise SnapshotError(snapshot, f"{which} entry {path} is malformed")
        # Entry's generated __init__ sets each field through object.__setattr__ (it is frozen); filling the
        # instance dict directly gives the same object at a fraction of the cost. Fields were checked above.
        entry = new_entry(Entry)
        state = entry.__dict__
        state.update(_ENTRY_DEFAULTS)
        state.update(fields)
        state["path"] = path
        problem = _entry_problem(entry, base=base)
        if problem:
            raise SnapshotError(snapshot, f"{which} entry {path}: {problem}")
        entries[path] = entry
    return entries


_ENTRY_FIELDS = frozenset(field.name for field in dataclasses.fields(Entry)) - {"path"}
_ENTRY_DEFAULTS = {
    field.name: field.default for field in dataclasses.fields(Entry) if field.name not in {"path", "type"}
}


def _entry_problem(entry: Entry, *, base: bool) -> str | None:
    return _type_problem(entry, base=base) or _field_problem(entry) or _stored_in_problem(entry)


def _type_problem(entry: Entry, *, base: bool) -> str | None:
    """Why an entry's type cannot be where it is: unknown, absent outside the base, deleted in it, a root that
    is no folder."""
    if entry.type not in ENTRY_TYPES:
        return f"unknown type {entry.type!r:.40}"
    if entry.type == ABSENT and not base:
        return "only the base manifest can hold absent paths"
    if base and entry.type == DELETED:
        return "the base cannot hold deleted paths"
    if entry.path == "/" and entry.type != DIR:
        return "the root folder can only be a folder"
    return None


def _field_problem(entry: Entry) -> str | None:
    """Why one of an entry's fields is unreadable (mode, size, sha256, mtime, link target, change)."""
    if entry.mode is not None and (not isinstance(entry.mode, int) or not 0 <= entry.mode <= 0o7777):
        return f"bad mode {entry.mode!r}"
    if entry.size is not None and (not isinstance(entry.size, int) or entry.size < 0):
        return f"bad size {entry.size!r}"
    if entry.sha256 is not None and not (isinstance(entry.sha256, str) and SHA256_RE.match(entry.sha256)):
        return "bad sha256"
    if entry.mtime is not None and (type(entry.mtime) is not int or entry.mtime < 0):
        return f"bad mtime {entry.mtime!r:.40}"
    if entry.link_target is not None and not isinstance(entry.link_target, str):
        return "bad link target"
    if entry.type == SYMLINK and entry.link_target is None:
        return "symlink without a target"
    if entry.change is not None and entry.change not in CHANGES:
        return f"unknown change {entry.change!r}"
    return None


def _stored_in_problem(entry: Entry) -> str | None:
    """Why an entry's stored content cannot be found: a ``stored_in`` that is no folder of the episode's, or
    content without a file's type, size and sha256."""
    if entry.stored_in is None:
        return None
    if not (isinstance(entry.stored_in, str) and _STORED_IN_RE.match(entry.stored_in)):
        return f"stored_in {entry.stored_in!r:.80} is not 'base' or a step folder"
    if entry.type != FILE or entry.sha256 is None or entry.size is None:
        return "stored content needs type file, a size and a sha256"
    return None


class StepFinder:
    """Finds ares-viewer's per-step snapshots: ``snapshots/<episode_id>/step_NNNN`` beside the episode file."""

    name = "per-step snapshots"

    def handles(self, location: str) -> bool:
        return not locations.is_local(location) or (pathlib.Path(location).parent / SNAPSHOTS_DIRNAME).is_dir()

    def find(self, episode: model.Episode) -> list[StepRef]:
        return find_for_episode(episode.path, episode.episode_id)
