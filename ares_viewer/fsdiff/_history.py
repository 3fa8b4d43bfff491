"""An episode's filesystem over its steps: two steps compared, what one step changed, one file's history, the
whole episode's patch and the files each step changed. Snapshots are found with ``ares_viewer.snapshots``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ares_viewer import snapshots
from ares_viewer.fsdiff import _changes as changes
from ares_viewer.fsdiff import _ranking as ranking

if TYPE_CHECKING:
    from ares_viewer import model


def _snapshot_map(episode: model.Episode) -> dict[int, snapshots.SnapshotRef]:
    refs = {ref.step_index: ref for ref in snapshots.find(episode)}
    if not refs:
        raise LookupError(f"episode {episode.episode_id} has no recorded snapshots")
    return refs


def _open(refs: dict[int, snapshots.SnapshotRef], step: int, episode_id: str) -> snapshots.Snapshot:
    if step not in refs:
        raise LookupError(f"episode {episode_id} has no snapshot for step {step} (recorded: {sorted(refs)})")
    return snapshots.open(refs[step])


def compare(episode: model.Episode, old_step: int | None, new_step: int) -> changes.FsDiff:
    """The filesystem changes of ``episode`` from ``old_step`` (None: the base image) to ``new_step``.

    Raises:
        LookupError: when the episode has no snapshot for one of the steps, or when ``old_step`` is None and
            its snapshots are episode-boundary ones (they record no base image).
        snapshots.SnapshotError: when a snapshot is corrupt (the message names it and why).
    """
    refs = _snapshot_map(episode)
    new = _open(refs, new_step, episode.episode_id)
    old = _open(refs, old_step, episode.episode_id) if old_step is not None else None
    return changes.diff_snapshots(old, new)


def previous_step(episode: model.Episode, step: int) -> int | None:
    """The latest step before ``step`` that has a snapshot (None: none has, compare with the base image)."""
    earlier = [ref.step_index for ref in snapshots.find(episode) if ref.step_index < step]
    return max(earlier) if earlier else None


def step_changes(episode: model.Episode, step: int) -> changes.FsDiff:
    """What action ``step`` changed: the previous recorded step against the step itself.

    With a snapshot per step that is step ``step - 1``; step 0 (or the first recorded step) is compared with the
    base image. Raises like :func:`compare`.
    """
    return compare(episode, previous_step(episode, step), step)


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One step at which a path's state changed, with the diff from its previous state."""

    step: int
    kind: str
    entry: snapshots.Entry | None
    diff: changes.FileDiff


def file_history(episode: model.Episode, path: str, *, steps: Sequence[int] | None = None) -> list[HistoryPoint]:
    """The steps at which ``path`` changed (against the previous recorded step; the first against the base).

    Episode-boundary snapshots record no base image: their history starts at the first readable snapshot,
    which is the starting point rather than a change. A corrupt snapshot is skipped rather than ending the
    history; its error is raised only when no snapshot can be read at all.
    """
    refs = _snapshot_map(episode)
    points: list[HistoryPoint] = []
    previous: snapshots.Snapshot | None = None
    errors: list[str] = []
    for step in sorted(steps if steps is not None else refs):
        try:
            current = snapshots.open(refs[step])
        except snapshots.SnapshotError as exc:
            errors.append(str(exc))
            continue
        if previous is None and not current.records_base:
            previous = current  # no base image to compare the first one with: it is the starting point
            continue
        old_entry = previous.stat(path) if previous is not None else snapshots.with_base(current).stat_base(path)
        new_entry = current.stat(path)
        if not current.same_state_as(previous, path):
            read_old = previous.read if previous is not None else snapshots.with_base(current).read_base
            diff = changes.diff_entries(path, old_entry, new_entry, read_old, current.read, changes.MAX_DIFF_BYTES)
            points.append(
                HistoryPoint(step=step, kind=changes.change_kind(old_entry, new_entry), entry=new_entry, diff=diff)
            )
        previous = current
    if errors and len(errors) == len(refs):
        raise snapshots.SnapshotError(refs[min(refs)].path, "; ".join(errors))
    return points


def episode_patch(episode: model.Episode) -> changes.FsDiff | None:
    """What the whole episode changed: its first recorded step (what the agent first saw) against its last.

    This is what ``git add -A && git diff`` submits when the task's repository starts clean at the first step.
    None when the episode has fewer than two snapshots.
    """
    refs = sorted(ref.step_index for ref in snapshots.find(episode))
    if len(refs) < 2:
        return None
    return compare(episode, refs[0], refs[-1])


def files_by_step(episode: model.Episode) -> dict[int, dict[str, str]]:
    """The files each recorded step changed (against the previous recorded step) and how: path -> ``added``,
    ``modified``, ``deleted`` or ``type_changed``. Version-control and cache folders are left out; steps without a
    snapshot are missing. Empty when the episode has no snapshots.

    A snapshot that cannot be read leaves its step out rather than failing.
    """
    return _by_step(episode, _file_kind)


def snapshot_folders(episode: model.Episode) -> list[str]:
    """The folders whose state identifies ``episode``'s snapshots (the behaviour flags' cache key): each snapshot
    ``snapshots.find`` gives, its parent (a snapshot added or removed beside it) and, for a per-step snapshot, the
    episode's base; with none found, the folder per-step snapshots would be written to, so that ones recorded later
    are noticed."""
    refs = snapshots.find(episode)
    folders: set[str] = set()
    for ref in refs:
        parent = os.path.dirname(str(ref.path))
        folders |= {str(ref.path), parent}
        if ref.records_base:
            folders.add(os.path.join(parent, snapshots.BASE_DIRNAME))
    path = str(episode.path)
    if not refs and os.path.isabs(path) and snapshots.per_step.names_a_folder(episode.episode_id):
        folders.add(str(snapshots.episode_snapshots_dir(os.path.dirname(path), episode.episode_id)))
    return sorted(folders)


def paths_by_step(episode: model.Episode) -> dict[int, dict[str, str]]:
    """Like :func:`files_by_step`, for every path that is not a folder (files and symlinks), and a folder or file
    whose permissions alone changed as ``mode``: what the behaviour flags read."""
    return _by_step(episode, _path_kind)


def _file_kind(old: snapshots.Entry | None, new: snapshots.Entry | None) -> str | None:
    if snapshots.FILE not in {getattr(old, "type", None), getattr(new, "type", None)}:
        return None
    return changes.change_kind(old, new)


def _path_kind(old: snapshots.Entry | None, new: snapshots.Entry | None) -> str | None:
    kind = changes.change_kind(old, new)
    folders = {getattr(old, "type", None), getattr(new, "type", None)} <= {None, snapshots.DIR}
    if kind == changes.MODIFIED and old is not None and new is not None and old.mode != new.mode:
        same_content = getattr(old, "sha256", None) == getattr(new, "sha256", None)
        return "mode" if folders or same_content else kind
    return None if folders else kind


def _by_step(
    episode: model.Episode, kind_of: Callable[[snapshots.Entry | None, snapshots.Entry | None], str | None]
) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    previous: snapshots.Snapshot | None = None
    for ref in sorted(snapshots.find(episode), key=lambda r: r.step_index):
        try:
            current = snapshots.open(ref)
        except snapshots.SnapshotError:
            previous = None
            continue
        if previous is not None:
            changed = {}
            for path in current.changed_since(previous):
                old, new = previous.stat(path), current.stat(path)
                kind = kind_of(old, new)
                if kind is not None and not ranking.is_noise(path):
                    changed[path] = kind
            found[ref.step_index] = changed
        previous = current
    return found
