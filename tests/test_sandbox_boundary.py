"""Episode-boundary snapshots (whole-filesystem copies, formats.md section 2) restored and replayed for real.

The copies are made the way the upstream writer makes them: the container's whole filesystem copied into a
folder (or, as its test doubles do, a tarball of part of it). They are taken from containers restored from the
sample episodes' own per-step snapshots, so the state a boundary restore must reach is known exactly.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import posixpath
import shutil
import tarfile
import time
import uuid

import app_sandboxes
import pytest

from ares_viewer import model, sandbox, snapshots
from ares_viewer.runs import run
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # pager-explorer: git rm, a deletion in /usr, gzip, a symlink
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"  # slugify-solved: 7 actions whose outputs all reproduce
IMAGE = "ares-viewer/sample-base:1"
SESSION = f"pytest-boundary-{uuid.uuid4().hex[:10]}"
# Everything but what no capture records (kernel trees, scratch space, caches, the engine's own files).
_SKIPPED = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/var/cache", "/var/log", "/root/.cache",
            "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.dockerenv")
_STATE_SCRIPT = (
    "find / -xdev \\( " + " -o ".join(f"-path {p}" for p in _SKIPPED) + " -o -name __pycache__ \\) -prune "
    "-o -printf '%y %m %p -> %l\\n' | sort; "
    "find / -xdev \\( " + " -o ".join(f"-path {p}" for p in _SKIPPED) + " -o -name __pycache__ \\) -prune "
    "-o -type f -print0 | xargs -0 sha256sum | sort"
)


class _Chunks(io.RawIOBase):
    """The engine's export stream (an iterator of byte chunks) as a file tarfile can read."""

    def __init__(self, chunks) -> None:
        self._chunks = iter(chunks)
        self._rest = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._rest:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._rest = chunk
        size = min(len(buffer), len(self._rest))
        buffer[:size] = self._rest[:size]
        self._rest = self._rest[size:]
        return size


def _copy_filesystem(container, fs: pathlib.Path) -> None:
    """Copy a container's whole filesystem into the folder ``fs`` (files, folders, symlinks, modes, times)."""
    folders = []
    stream = io.BufferedReader(_Chunks(container.export()), 1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            name = posixpath.normpath("/" + member.name)
            target = fs / name.lstrip("/")
            if name == "/":
                continue
            # Only ever below fs: no member may pass through a symlink written earlier.
            assert os.path.realpath(target.parent).startswith(str(fs)), name
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                folders.append((target, member))
            elif member.isreg():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
                os.chmod(target, member.mode & 0o7777)
                os.utime(target, (member.mtime, member.mtime))
            elif member.issym():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(member.linkname, target)
            elif member.islnk():
                shutil.copy2(fs / member.linkname.lstrip("/"), target)
    for target, member in reversed(folders):  # after their contents: a read-only folder would refuse them
        os.chmod(target, member.mode & 0o7777)
        os.utime(target, (member.mtime, member.mtime))


def _boundary(where: pathlib.Path, doc: dict, step: int) -> pathlib.Path:
    """An empty boundary snapshot of ``doc``'s step (its ``container_fs.tar.gz`` folder to be filled)."""
    folder = synthetic.write_boundary_snapshot(where, synthetic.boundary_messages(doc, step), {}, step_count=step,
                                               snapshot_id=f"{doc['episode_id'][:8]}-{step}", container_image=IMAGE)
    return pathlib.Path(folder)


@pytest.fixture(scope="module")
def boundary_run(engine, tmp_path_factory) -> pathlib.Path:
    """Two sample episodes whose only snapshots are whole-filesystem copies: the explorer's after its last step,
    and the solved episode's before its first action and after its last."""
    run_dir = tmp_path_factory.mktemp("boundary-run")
    shutil.copytree(DEMO / "tasks", run_dir / "tasks")
    for episode_id, steps in ((EXPLORER, (12,)), (SOLVED, (0, 7))):
        shutil.copy(DEMO / f"{episode_id}.json", run_dir)
        doc = json.loads((DEMO / f"{episode_id}.json").read_text())
        recorded = run.load_episode(DEMO / f"{episode_id}.json")
        for step in steps:
            with sandbox.restore(recorded, step, client=engine, session=SESSION) as box:
                folder = _boundary(run_dir / "snapshots", doc, step)
                _copy_filesystem(box.container(), folder / "container_fs.tar.gz")
    return run_dir


def _episode(run_dir: pathlib.Path, episode_id: str = EXPLORER) -> model.Episode:
    return run.load_episode(run_dir / f"{episode_id}.json")


def _state(box: sandbox.Sandbox) -> str:
    result = box.run(_STATE_SCRIPT, timeout_s=120)
    assert result.returncode == 0, result.output[-2000:]
    return result.output


def test_a_whole_filesystem_copy_restores_the_state_it_holds(engine, boundary_run):
    episode = _episode(boundary_run)
    assert {type(ref).__name__ for ref in snapshots.find(episode)} == {"BoundaryRef"}
    with sandbox.restore(run.load_episode(DEMO / f"{EXPLORER}.json"), 12, client=engine, session=SESSION) as exact, \
            sandbox.restore(episode, 12, client=engine, session=SESSION) as box:
        assert box.image == IMAGE and box.workdir == "/testbed"
        # The whole filesystem, path by path: types, modes, link targets and every file's content.
        assert _state(box) == _state(exact)
        # What the agent deleted stays deleted, inside the task's folder and out of it.
        gone = box.run("test -e pager/legacy.py || test -e /usr/lib/python3.11/EXTERNALLY-MANAGED; echo $?")
        assert gone.output.strip() == "1"
        assert box.run("readlink tests/data").output.strip() == "../data"


def test_replaying_from_a_boundary_snapshot_compares_with_the_next_one(engine, boundary_run):
    episode = _episode(boundary_run, SOLVED)
    assert [ref.step_index for ref in snapshots.find(episode)] == [0, 7]
    with sandbox.restore(episode, 0, client=engine, session=SESSION) as box:
        results = list(sandbox.replay(box, episode, normalize=True))  # "ls -la" shows times
    assert [r.step for r in results] == list(range(1, 8))
    assert all(r.status == sandbox.Status.REPRODUCED for r in results), [(r.step, r.status, r.note) for r in results]
    last = results[-1]
    assert last.fs is not None and last.fs_changes == ()  # compared with the copy after step 7, and equal to it
    assert all(r.fs is None for r in results[:-1])  # no snapshot after steps 1..6: outputs only


def test_a_replay_that_leaves_a_different_filesystem_is_caught_by_the_copy(engine, boundary_run):
    episode = _episode(boundary_run, SOLVED)
    with sandbox.restore(episode, 0, client=engine, session=SESSION) as box:
        # Changes no later command's output shows: only the filesystem comparison can catch them.
        assert box.run("echo draft > /opt/notes.txt && chmod 600 /etc/debian_version").returncode == 0
        results = list(sandbox.replay(box, episode, normalize=True))
    last = results[-1]
    assert last.status == sandbox.Status.FILESYSTEM_DIVERGED
    changed = {change.path for change in last.fs_changes}
    assert {"/opt/notes.txt", "/etc/debian_version"} <= changed


def test_a_partial_tarball_copy_restores_its_folders_and_leaves_the_rest_of_the_image(engine, tmp_path):
    """What the upstream writer's test doubles make: a real gzip tarball holding only the task's folder."""
    recorded = run.load_episode(DEMO / f"{EXPLORER}.json")
    exact = snapshots.for_step(recorded, 12)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(DEMO / f"{EXPLORER}.json", run_dir)
    doc = json.loads((DEMO / f"{EXPLORER}.json").read_text())
    with sandbox.restore(recorded, 12, client=engine, session=SESSION) as source:
        tree = source.container().get_archive("/testbed")[0]
        raw = io.BytesIO(b"".join(tree))
    files, links, modes = {}, {}, {}
    with tarfile.open(fileobj=raw) as tar:
        for member in tar:
            path = "/" + member.name
            if member.isreg():
                files[path], modes[path] = tar.extractfile(member).read(), member.mode & 0o7777
            elif member.issym():
                links[path] = member.linkname
    synthetic.write_boundary_snapshot(run_dir, synthetic.boundary_messages(doc, 12), files, links=links, modes=modes,
                                      tarball=True, step_count=12, container_image=IMAGE)
    episode = run.load_episode(run_dir / f"{EXPLORER}.json")
    with sandbox.restore(episode, 12, client=engine, session=SESSION) as box:
        for path in exact.changed_paths():
            if path.startswith("/testbed/") and exact.stat(path).type == snapshots.FILE and "__pycache__" not in path:
                listed = box.run(f"sha256sum {path}").output.split()[0]
                assert listed == exact.stat(path).sha256, path
        assert box.run("test -e pager/legacy.py; echo $?").output.strip() == "1"
        # Folders the copy does not hold are the image's: the agent's deletion in /usr is not known here.
        assert box.run("test -e /usr/lib/python3.11/EXTERNALLY-MANAGED; echo $?").output.strip() == "0"
        assert box.run("python3 -c 'print(6 * 7)'").output.strip() == "42"


def test_a_copy_that_names_no_image_is_refused_before_the_engine(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(DEMO / f"{EXPLORER}.json", run_dir)
    doc = json.loads((DEMO / f"{EXPLORER}.json").read_text())
    synthetic.write_boundary_snapshot(run_dir, synthetic.boundary_messages(doc, 12), {"/testbed/README.md": b"x\n"},
                                      step_count=12, container_image=None)

    class NoEngine:
        def __getattr__(self, name):
            raise AssertionError(f"the engine was contacted ({name})")

    with pytest.raises(snapshots.SnapshotError, match="records no container image"):
        sandbox.restore(run.load_episode(run_dir / f"{EXPLORER}.json"), 12, client=NoEngine())


def test_the_sandbox_page_restores_and_replays_a_boundary_snapshot(engine, boundary_run, sandbox_page):
    began = time.time() - 1
    try:
        at = sandbox_page(boundary_run.parent, run=boundary_run.name, episode=SOLVED, step="0").run(timeout=120)
        assert not at.exception
        next(b for b in at.button if b.label == "Restore").click().run(timeout=180)
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert "**State** running" in " ".join(md.value for md in at.markdown)
        next(b for b in at.button if b.label == "Replay steps 1–7").click().run(timeout=300)
        assert not at.exception
        assert "7 reproduced" in " ".join(md.value for md in at.markdown)
        assert "**Filesystem** step 7 (restored from step 0)" in " ".join(md.value for md in at.markdown)
    finally:
        app_sandboxes.remove_app_sandboxes(engine, SOLVED, began)
