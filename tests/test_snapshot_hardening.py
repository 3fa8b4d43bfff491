"""Snapshot readers under hostile files: deep nesting, hard links out of a folder copy, byte budgets."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import demo_runs
import pytest

from ares_viewer import snapshots
from ares_viewer.runs import run
from ares_viewer.snapshots import episode_boundary
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"
DEPTH = 200_000


def _deep_json(tail: str = "") -> str:
    return '{"agent_messages": [{"role": "user", "content": ' + "[" * DEPTH + "]" * DEPTH + "}]" + tail + "}"


@pytest.fixture
def boundary_run(tmp_path) -> tuple[pathlib.Path, str]:
    """run-b with two readable boundary snapshots (steps 1 and 3) and one nested far too deeply."""
    root = tmp_path / "runs"
    ids = demo_runs.write(root)
    run_dir, episode_id = root / "run-b", ids["run-b"]["solved"]
    doc = json.loads((run_dir / f"{episode_id}.json").read_text())
    synthetic.write_boundary_snapshot(run_dir, synthetic.boundary_messages(doc, 1), {"/testbed/a.py": b"x = 1\n"},
                                      snapshot_id="s1")
    synthetic.write_boundary_snapshot(run_dir, synthetic.boundary_messages(doc, 3), {"/testbed/a.py": b"x = 2\n"},
                                      snapshot_id="s3", mtime=1_763_900_000)
    deep = run_dir / "deep"
    (deep / episode_boundary.CONTAINER_FS).mkdir(parents=True)
    (deep / episode_boundary.SNAPSHOT_JSON).write_text(_deep_json())
    return run_dir, episode_id


def test_a_deeply_nested_snapshot_json_is_a_per_file_error(boundary_run):
    run_dir, episode_id = boundary_run
    with pytest.raises(snapshots.SnapshotError, match="nested too deeply") as raised:
        episode_boundary.read_header(run_dir / "deep")
    assert raised.value.path == str(run_dir / "deep")
    _, errors = episode_boundary.scan(run_dir)
    assert [e.path for e in errors] == [str(run_dir / "deep")]
    # The episode's readable snapshots are still found and opened.
    episode = run.load_episode(run_dir / f"{episode_id}.json")
    assert [ref.step_index for ref in snapshots.find(episode)] == [1, 3]
    assert snapshots.for_step(episode, 3).read("/testbed/a.py") == b"x = 2\n"


def test_unreadable_boundary_snapshots_near_an_episode_are_reported_by_name(boundary_run):
    run_dir, episode_id = boundary_run
    (run_dir / "broken").mkdir()
    (run_dir / "broken" / episode_boundary.SNAPSHOT_JSON).write_text('{"agent_messages": [')
    episode = run.load_episode(run_dir / f"{episode_id}.json")
    found = {e.path: e.reason for e in snapshots.problems(episode)}
    assert found.keys() == {str(run_dir / "deep"), str(run_dir / "broken")}
    assert "snapshot.json is nested too deeply" in found[str(run_dir / "deep")]
    assert "snapshot.json is not valid JSON" in found[str(run_dir / "broken")]


def test_unreadable_boundary_snapshots_of_a_remote_run_are_named_by_their_remote_folder(boundary_run):
    import fsspec

    import ares_viewer

    run_dir, episode_id = boundary_run
    fs = fsspec.filesystem("memory")
    for file in run_dir.rglob("*"):
        if file.is_file():
            fs.pipe("/hardening-run/" + file.relative_to(run_dir).as_posix(), file.read_bytes())
    try:
        episode = ares_viewer.open_run("memory://hardening-run").episode(episode_id)
        assert [ref.step_index for ref in snapshots.find(episode)] == [1, 3]
        [problem] = snapshots.problems(episode)
        assert problem.path == "memory:///hardening-run/deep" and "nested too deeply" in problem.reason
    finally:
        fs.rm("/hardening-run", recursive=True)
        episode_boundary._REMOTE_SEEN.clear()


def test_messages_too_deep_to_compare_are_a_per_file_error(tmp_path):
    folder = tmp_path / "snap"
    (folder / episode_boundary.CONTAINER_FS).mkdir(parents=True)
    depth = 5_000  # parses, but comparing it recurses past Python's limit
    content = "[" * depth + "]" * depth
    (folder / episode_boundary.SNAPSHOT_JSON).write_text(
        '{"agent_messages": [{"role": "user", "content": ' + content + "}]}")
    result = episode_boundary._header(folder)
    assert isinstance(result, snapshots.SnapshotError) and "nested too deeply" in result.reason


def test_a_deeply_nested_per_step_manifest_is_a_per_file_error(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "snapshots").mkdir(parents=True)
    shutil.copy(DEMO / f"{WRONG_FIX}.json", run_dir)
    shutil.copytree(DEMO / "snapshots" / WRONG_FIX, run_dir / "snapshots" / WRONG_FIX)
    (run_dir / "snapshots" / WRONG_FIX / "step_0002" / "manifest.json").write_text(_deep_json())
    episode = run.load_episode(run_dir / f"{WRONG_FIX}.json")
    with pytest.raises(snapshots.SnapshotError, match=r"step_0002/manifest\.json is nested too deeply"):
        snapshots.for_step(episode, 2)
    assert snapshots.for_step(episode, 1).read("/testbed/textkit/slug.py")


def _folder_snapshot(tmp_path: pathlib.Path) -> pathlib.Path:
    messages = [{"role": "user", "content": "task"}]
    return pathlib.Path(synthetic.write_boundary_snapshot(
        tmp_path, messages, {"/testbed/a.py": b"x = 1\n", "/testbed/b.py": b"y = 2\n"}, snapshot_id="copy"))


def test_a_hard_link_to_a_host_file_in_a_folder_copy_is_refused(tmp_path):
    host = tmp_path / "host-secret.txt"
    host.write_text("the host's own file\n")
    folder = _folder_snapshot(tmp_path / "run")
    os.link(host, folder / episode_boundary.CONTAINER_FS / "testbed" / "leak.txt")
    episode_boundary._OPEN_CACHE.clear()
    with pytest.raises(snapshots.SnapshotError, match=r"/testbed/leak.txt .* hard link to a file outside the copy"):
        episode_boundary.open_boundary(folder)


def test_hard_links_inside_a_folder_copy_are_read(tmp_path):
    folder = _folder_snapshot(tmp_path / "run")
    testbed = folder / episode_boundary.CONTAINER_FS / "testbed"
    os.link(testbed / "a.py", testbed / "a-again.py")  # a container's own hard link, both names in the copy
    snap = episode_boundary.open_boundary(folder)
    assert snap.read("/testbed/a-again.py") == snap.read("/testbed/a.py") == b"x = 1\n"
    # Linked to the host after indexing: refused when read.
    os.link(testbed / "b.py", tmp_path / "outside.py")
    with pytest.raises(snapshots.SnapshotError, match="changed since the snapshot was indexed"):
        snap.read("/testbed/b.py")


def test_reading_many_files_is_held_to_the_byte_budget(tmp_path, monkeypatch):
    folder = _folder_snapshot(tmp_path / "run")
    snap = episode_boundary.open_boundary(folder)
    assert snap.read_many(["/testbed/a.py", "/testbed/b.py"]) == {"/testbed/a.py": b"x = 1\n",
                                                                  "/testbed/b.py": b"y = 2\n"}
    monkeypatch.setenv("ARES_VIEWER_SNAPSHOT_MAX_BYTES", "10")
    with pytest.raises(snapshots.SnapshotError, match="12 bytes of file content, over the budget of 10 bytes"):
        snap.read_many(["/testbed/a.py", "/testbed/b.py"])
    step = snapshots.for_step(run.load_episode(DEMO / f"{WRONG_FIX}.json"), 2)
    with pytest.raises(snapshots.SnapshotError, match="over the budget of 10 bytes"):
        step.to_archive()
    assert len(step.to_archive(max_bytes=step.restore_bytes())) > 0
