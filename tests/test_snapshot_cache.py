"""Snapshot flags kept in the cache: computed once per episode, for the whole run when asked, still there for a
freshly opened run, computed again for a rewritten episode file, and never written into the run folder."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

import ares_viewer
from ares_viewer import fsdiff, model
from ares_viewer.analysis.behaviours import flag_index, registry, snapshot_cache

DEMO = pathlib.Path(__file__).resolve().parent.parent / "sample_runs" / "demo-run"
PAGER_EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"
MEAN_TRUNCATED = "298f05c6-7948-423a-8b0c-825ff593fc8d"


class Counting:
    """``fsdiff.paths_by_step`` that counts the episodes it reads the snapshots of."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def __call__(self, episode: model.Episode) -> registry.StepChanges:
        self.read.append(episode.episode_id)
        return fsdiff.paths_by_step(episode)


def tree(folder: pathlib.Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture
def demo(tmp_path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(DEMO, tmp_path / "demo-run"))


def flagged(run: ares_viewer.Run) -> dict[str, list[tuple[str, int]]]:
    _, evidence = snapshot_cache.table(run)
    found: dict[str, list[tuple[str, int]]] = {}
    for row in evidence.itertuples():
        found.setdefault(row.flag, []).append((row.episode_id, row.step))
    return found


def test_kept_snapshot_flags_survive_a_fresh_run_and_a_rewritten_file_is_computed_again(demo):
    before = tree(demo)
    first = Counting()
    run = ares_viewer.open_run(demo)
    assert snapshot_cache.covered(run) == 0
    assert snapshot_cache.update(run, first, workers=1) == 10
    assert sorted(first.read) == sorted(run.episode_ids)
    expected = {"touched_tests_files": [(PAGER_EXPLORER, 9)], "no_change_at_end": [(MEAN_TRUNCATED, 1)]}
    assert flagged(run) == expected
    assert (flag_index.folder(run) / snapshot_cache.FILE).exists()

    again = Counting()
    fresh = ares_viewer.open_run(demo)
    assert snapshot_cache.covered(fresh) == 10
    assert snapshot_cache.update(fresh, again, workers=1) == 0
    assert snapshot_cache.findings(fresh, fresh.episode(PAGER_EXPLORER), again)[0].step == 9
    assert again.read == []  # nothing read again: every answer came from the cache
    assert flagged(fresh) == expected

    path = demo / f"{PAGER_EXPLORER}.json"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # rewritten, same bytes
    rewritten = ares_viewer.open_run(demo)
    assert snapshot_cache.covered(rewritten) == 9
    assert snapshot_cache.update(rewritten, again, workers=1) == 1
    assert again.read == [PAGER_EXPLORER]
    assert flagged(rewritten) == expected
    before[str(path)] = tree(demo)[str(path)]
    assert tree(demo) == before  # nothing written into the run folder


def test_an_update_stopped_half_way_continues_where_it_stopped(demo):
    run = ares_viewer.open_run(demo)
    seen: list[int] = []

    def stop_after_the_first_batch(done: int, total: int) -> None:
        seen.append(done)
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        snapshot_cache.update(run, fsdiff.paths_by_step, progress=stop_after_the_first_batch, workers=1)
    kept = snapshot_cache.covered(run)
    assert 0 < kept < 10
    rest = Counting()
    assert snapshot_cache.update(ares_viewer.open_run(demo), rest, workers=1) == 10 - kept
    assert len(rest.read) == 10 - kept


def test_an_episode_whose_snapshots_do_not_read_is_kept_with_its_reason(demo):
    def broken(episode: model.Episode) -> registry.StepChanges:
        raise OSError(f"{episode.episode_id}: snapshot archive truncated")

    run = ares_viewer.open_run(demo)
    snapshot_cache.update(run, broken, workers=1)
    assert snapshot_cache.covered(run) == 10
    assert len(snapshot_cache.errors(run)) == 10
    assert "snapshot archive truncated" in snapshot_cache.errors(run)[0][1]
