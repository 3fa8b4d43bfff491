"""The declared snapshot interface: both kinds implement it, and finding goes through the registry of finders."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

import ares_viewer
from ares_viewer import fsdiff, snapshots
from testdata import synthetic

DEMO = pathlib.Path(__file__).resolve().parent.parent / "sample_runs" / "demo-run"


def _boundary_episode(tmp_path: pathlib.Path) -> ares_viewer.Episode:
    doc = synthetic.episode_dict(actions=3, seed=3)
    synthetic.write_episode(tmp_path, doc)
    for k, text in ((1, b"one\n"), (3, b"three\n")):
        synthetic.write_boundary_snapshot(tmp_path / "snapshots", synthetic.boundary_messages(doc, k),
                                          {"/testbed/a.txt": text}, snapshot_id=f"s{k}",
                                          container_image=None if k == 3 else "ares-viewer/sample-base:1")
    return ares_viewer.load_episode(str(tmp_path / f"{doc['episode_id']}.json"))


def _step_episode() -> ares_viewer.Episode:
    if not DEMO.is_dir():
        pytest.skip("the bundled sample runs (with snapshots) are not there")
    run = ares_viewer.open_run(str(DEMO))
    return run.episode(run.episode_ids[0])


def test_both_kinds_implement_the_declared_protocols(tmp_path):
    for episode, records_base in ((_step_episode(), True), (_boundary_episode(tmp_path), False)):
        refs = snapshots.find(episode)
        assert refs and all(isinstance(ref, snapshots.SnapshotRef) for ref in refs)
        assert {ref.records_base for ref in refs} == {records_base}
        snap = snapshots.open(refs[-1])
        assert isinstance(snap, snapshots.Snapshot)
        assert snap.step_index == refs[-1].step_index
        assert snapshots.for_step(episode, refs[-1].step_index).path == snap.path


def test_a_boundary_snapshot_compares_with_another_step_but_not_with_the_base(tmp_path):
    episode = _boundary_episode(tmp_path)
    first, last = (snapshots.for_step(episode, k) for k in (1, 3))
    assert last.changed_since(first) == ["/testbed/a.txt"]
    assert not last.same_state_as(first, "/testbed/a.txt") and last.same_state_as(last, "/testbed/a.txt")
    assert last.stat_base("/testbed/a.txt") is None and last.read_base("/testbed/a.txt") is None
    with pytest.raises(LookupError, match="no base image"):
        last.changed_since(None)
    with pytest.raises(snapshots.SnapshotError, match="records no container image"):
        last.check_restorable()


def test_only_a_snapshot_that_records_its_base_reads_it_and_restores_as_it_is(tmp_path):
    step = snapshots.open(snapshots.find(_step_episode())[-1])
    boundary = snapshots.for_step(_boundary_episode(tmp_path), 3)
    assert snapshots.restorable(step) and snapshots.with_base(step) is step
    assert not snapshots.restorable(boundary)
    with pytest.raises(LookupError, match="records no base image"):
        snapshots.with_base(boundary)


def test_find_asks_registered_finders_for_the_locations_they_handle(tmp_path, monkeypatch):
    episode = _boundary_episode(tmp_path)
    recorded = snapshots.for_step(episode, 3)
    asked: list[str] = []

    @dataclasses.dataclass(frozen=True)
    class Ref:
        path: str
        episode_id: str
        step_index: int
        records_base: bool = False

        def open(self):
            return recorded

    class Finder:
        name = "test finder"

        def handles(self, location: str) -> bool:
            asked.append(location)
            return location.endswith(".json")

        def find(self, found_for):
            return [Ref(path="elsewhere", episode_id=found_for.episode_id, step_index=9)]

    monkeypatch.setattr(snapshots, "_FINDERS", list(snapshots.finders()))
    snapshots.register_finder(Finder(), first=True)
    assert [ref.step_index for ref in snapshots.find(episode)] == [9]
    assert asked == [str(episode.path)]
    # fsdiff reads through the interface only: the custom reference opens like any other.
    assert fsdiff.previous_step(episode, 10) == 9
    assert snapshots.open(snapshots.find(episode)[0]).read("/testbed/a.txt") == b"three\n"
