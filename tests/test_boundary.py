"""Episode-boundary snapshots (the upstream ARES layout): linking them to steps, diffing them, and bad input.

Snapshots are written the way ARES's proposed writer lays them out: ``{dir}/{snapshot_id}/snapshot.json`` and a
``container_fs.tar.gz`` that is a folder holding a copy of the files, or a real gzip tarball (test doubles).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import pathlib
import tarfile

import pytest

import ares_viewer
from ares_viewer import fsdiff, snapshots
from ares_viewer.snapshots import _tar_safety as tar_safety
from ares_viewer.snapshots import episode_boundary
from testdata import synthetic

CORE_V0 = "".join(f"def op_{i}(a, b):\n    return a - b  # {i}\n" for i in range(30)).encode()
CORE_V1 = CORE_V0.replace(b"return a - b  # 7\n", b"return a + b  # 7, fixed\n")
BASE_FILES = {
    "/testbed/src/calc/core.py": CORE_V0,
    "/testbed/README.md": b"# calc\n",
    "/testbed/setup.cfg": b"[metadata]\nname = calc\n",
    "/usr/lib/python3.11/EXTERNALLY-MANAGED": b"[externally-managed]\n",
    # A container filesystem holds plenty of unrelated JSON, some named like episodes: never read as episodes.
    "/usr/share/calc/0e7c9a52-6b1f-4c35-9d4e-2f8a1b3c4d5e.json": b'{"name": "not an episode"}',
}


def _state(step: int) -> tuple[dict[str, bytes], dict[str, str], dict[str, int]]:
    """The container's files after action ``step``: 2 edits core.py, adds notes, deletes setup.cfg, links, chmods."""
    files, links, modes = dict(BASE_FILES), {}, {}
    if step >= 2:
        files["/testbed/src/calc/core.py"] = CORE_V1
        files["/testbed/notes.txt"] = "café\n".encode("latin-1")
        del files["/testbed/setup.cfg"]
        links["/testbed/latest"] = "src/calc/core.py"
        modes["/testbed/README.md"] = 0o755
    if step >= 4:
        files["/testbed/logo.png"] = b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256))
    return files, links, modes


@pytest.fixture(params=["tree", "tarball"])
def run(request, tmp_path) -> tuple[pathlib.Path, dict]:
    """A run folder with a 4-action episode and boundary snapshots after steps 0, 2 and 4 (the LAST step)."""
    folder = tmp_path / "run"
    folder.mkdir()
    doc = synthetic.episode_dict(actions=4, seed=7)
    synthetic.write_episode(folder, doc)
    for k, where in ((0, folder / "snapshots"), (2, folder), (4, folder)):
        files, links, modes = _state(k)
        synthetic.write_boundary_snapshot(where, synthetic.boundary_messages(doc, k), files, links=links,
                                          modes=modes, step_count=k, tarball=request.param == "tarball",
                                          snapshot_id=f"snap-{k}", mtime=1_763_800_000 + 100 * k)
    return folder, doc


def _episode(folder: pathlib.Path, doc: dict) -> ares_viewer.Episode:
    return ares_viewer.load_episode(str(folder / f"{doc['episode_id']}.json"))


def _listing(root: pathlib.Path) -> dict[str, int]:
    return {str(p): p.lstat().st_size for p in sorted(root.rglob("*"))}


def test_observation_is_the_request_sent_after_the_action(run):
    folder, doc = run
    episode = _episode(folder, doc)
    assert [m.to_dict() for m in episode.observation(0)] == doc["steps"][0]["observation"]["messages"]
    assert episode.observation(2) == episode.context(3)
    assert episode.observation(4) is None  # a normal LAST step records no request


def test_snapshots_are_linked_to_the_step_whose_conversation_they_hold(run):
    folder, doc = run
    refs = snapshots.find(_episode(folder, doc))
    assert [(r.step_index, r.snapshot_id) for r in refs] == [(0, "snap-0"), (2, "snap-2"), (4, "snap-4")]
    assert {r.episode_id for r in refs} == {doc["episode_id"]}
    # Found both in the run's snapshots/ folder and beside the episode file.
    assert refs[0].path == str(folder / "snapshots" / "snap-0") and refs[1].path == str(folder / "snap-2")


def test_other_episodes_and_empty_conversations_are_not_linked(run):
    folder, doc = run
    other = synthetic.episode_dict(task_name="calc__calc-2", actions=3, seed=99)
    synthetic.write_episode(folder, other)
    synthetic.write_boundary_snapshot(folder, [], BASE_FILES, snapshot_id="at-reset")
    synthetic.write_boundary_snapshot(folder, synthetic.boundary_messages(other, 1), BASE_FILES,
                                      snapshot_id="other-1")
    assert [r.snapshot_id for r in snapshots.find(_episode(folder, doc))] == ["snap-0", "snap-2", "snap-4"]
    assert [(r.step_index, r.snapshot_id) for r in snapshots.find(_episode(folder, other))] == [(1, "other-1")]


def test_a_first_request_shared_by_attempts_at_one_task_links_step_0_of_each(run):
    folder, _ = run
    retry = synthetic.episode_dict(actions=3, seed=98)  # same task, so the same first request
    synthetic.write_episode(folder, retry)
    assert [(r.step_index, r.snapshot_id) for r in snapshots.find(_episode(folder, retry))] == [(0, "snap-0")]


def test_the_run_still_loads_every_episode_and_reads_no_container_file(run):
    folder, doc = run
    opened = ares_viewer.open_run(str(folder))
    assert list(opened.episode_ids) == [doc["episode_id"]]
    assert not opened.errors


def test_diff_between_two_boundary_snapshots(run):
    folder, doc = run
    episode = _episode(folder, doc)
    diff = fsdiff.compare(episode, 0, 2)
    assert {c.path: c.kind for c in diff.changes} == {
        "/testbed/src/calc/core.py": "modified", "/testbed/notes.txt": "added", "/testbed/setup.cfg": "deleted",
        "/testbed/latest": "added", "/testbed/README.md": "modified",
    }
    assert diff.change("/testbed/README.md").mode_changed
    assert diff.change("/testbed/latest").new.link_target == "src/calc/core.py"
    edit = diff.file_diff("/testbed/src/calc/core.py")
    assert "-    return a - b  # 7" in edit.unified and "+    return a + b  # 7, fixed" in edit.unified
    assert diff.file_diff("/testbed/notes.txt").new_text == "caf\\xe9\n"
    assert diff.read_old("/testbed/setup.cfg") == BASE_FILES["/testbed/setup.cfg"]
    # What action 4 changed, against the previous recorded snapshot (step 2): one binary file.
    last = fsdiff.step_changes(episode, 4)
    assert last.old_step == 2 and last.paths() == ["/testbed/logo.png"]
    assert last.file_diff("/testbed/logo.png").binary


def test_unchanged_files_with_new_timestamps_are_compared_by_content(run):
    folder, doc = run
    episode = _episode(folder, doc)
    # Every file of each snapshot has a different mtime: only real content changes are listed.
    assert "/testbed/src/calc/__init__.py" not in fsdiff.compare(episode, 2, 4).paths()
    assert "/usr/lib/python3.11/EXTERNALLY-MANAGED" not in fsdiff.compare(episode, 0, 4).paths()


def test_base_image_side_is_refused_clearly(run):
    folder, doc = run
    episode = _episode(folder, doc)
    with pytest.raises(LookupError, match="records no base image"):
        fsdiff.compare(episode, None, 2)
    with pytest.raises(LookupError, match="records no base image"):
        fsdiff.step_changes(episode, 0)


@pytest.mark.parametrize("kept_in_memory", [True, False])
def test_every_file_is_hashed_and_read_in_one_pass(run, monkeypatch, kept_in_memory):
    """What a restore reads of a whole-filesystem copy: a big tarball is read once, front to back."""
    if not kept_in_memory:
        monkeypatch.setattr(tar_safety, "MAX_CACHED_ARCHIVE_BYTES", 0)  # as for a tarball of a real filesystem
    folder, doc = run
    episode_boundary._OPEN_CACHE.clear()
    snap = snapshots.for_step(_episode(folder, doc), 4)
    files, _links, _modes = _state(4)
    opened = []
    real_open = tarfile.open
    monkeypatch.setattr(tarfile, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    assert snap.digests() == {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}
    wanted = ["/testbed/logo.png", "src/calc/core.py", "/testbed/latest", "/testbed/absent.txt"]
    assert snap.read_many(wanted) == {"/testbed/logo.png": files["/testbed/logo.png"],
                                      "/testbed/src/calc/core.py": CORE_V1}  # a link and a missing path: left out
    assert len(opened) <= 2  # one pass each, however many files


def test_a_run_read_through_fsspec_links_and_opens_its_boundary_snapshots(run, monkeypatch):
    import fsspec

    folder, doc = run
    fs = fsspec.filesystem("memory")
    for file in folder.rglob("*"):
        if file.is_file():
            fs.pipe("/boundary-run/" + file.relative_to(folder).as_posix(), file.read_bytes())
    fetched: list[str] = []
    real_cat = type(fs).cat_file
    monkeypatch.setattr(type(fs), "cat_file", lambda self, path, *a, **k: fetched.append(path) or real_cat(
        self, path, *a, **k))
    try:
        remote = ares_viewer.open_run("memory://boundary-run").episode(doc["episode_id"])
        local = _episode(folder, doc)
        refs = snapshots.find(remote)
        assert [(r.step_index, r.snapshot_id) for r in refs] == [(r.step_index, r.snapshot_id)
                                                                  for r in snapshots.find(local)]
        # Linking read each snapshot.json and nothing of the filesystem copies.
        assert fetched and all(name.endswith(episode_boundary.SNAPSHOT_JSON) for name in fetched)
        cache = pathlib.Path(os.environ["ARES_VIEWER_CACHE"])
        ours, theirs = fsdiff.compare(remote, 0, 2), fsdiff.compare(local, 0, 2)
        # Opened from the cache, not from the run.
        assert all(pathlib.Path(snapshots.for_step(remote, k).path).is_relative_to(cache) for k in (0, 2))
        if (folder / "snap-2" / episode_boundary.CONTAINER_FS).is_file():
            assert ours.paths() == theirs.paths()
        else:  # an object store keeps a folder copy's files, not their modes or symlinks
            assert {"/testbed/src/calc/core.py", "/testbed/notes.txt", "/testbed/setup.cfg"} <= set(ours.paths())
        edit = "/testbed/src/calc/core.py"
        assert ours.file_diff(edit).unified == theirs.file_diff(edit).unified
        assert any(episode_boundary.CONTAINER_FS in name for name in fetched)  # fetched once opened
    finally:
        fs.rm("/boundary-run", recursive=True)
        episode_boundary._REMOTE_SEEN.clear()


def test_file_history_starts_at_the_first_snapshot(run):
    folder, doc = run
    history = fsdiff.file_history(_episode(folder, doc), "/testbed/src/calc/core.py")
    assert [(p.step, p.kind) for p in history] == [(2, "modified")]
    assert "+    return a + b  # 7, fixed" in history[0].diff.unified


def test_snapshot_reads_relative_paths_under_testbed(run):
    folder, doc = run
    snap = snapshots.for_step(_episode(folder, doc), 2)
    assert isinstance(snap, episode_boundary.BoundarySnapshot)
    assert snap.workdir == "/testbed" and snap.base_image.startswith("swebench/")
    assert snap.read("src/calc/core.py") == CORE_V1
    assert snap.stat("setup.cfg").type == snapshots.ABSENT
    assert snap.header["step_count"] == 2 and "agent_messages" not in snap.header
    with pytest.raises(snapshots.SnapshotError, match="compare it with its image first"):
        snap.to_archive()


def test_nothing_is_written_while_reading(run):
    folder, doc = run
    before = _listing(folder.parent)
    episode = _episode(folder, doc)
    fsdiff.compare(episode, 0, 4).file_diff("/testbed/src/calc/core.py")
    fsdiff.file_history(episode, "/testbed/logo.png")
    assert _listing(folder.parent) == before


def test_corrupt_snapshot_is_named_and_the_rest_works(run):
    folder, doc = run
    fs = folder / "snap-2" / episode_boundary.CONTAINER_FS
    if fs.is_dir():
        (folder / "snap-2" / episode_boundary.SNAPSHOT_JSON).write_text(
            '{"snapshot_id": "snap-2", "agent_messages": 7}')
    else:
        fs.write_bytes(fs.read_bytes()[:200])
    episode = _episode(folder, doc)
    if fs.is_dir():  # a broken snapshot.json cannot be linked to any step: the others still are
        assert [r.step_index for r in snapshots.find(episode)] == [0, 4]
        assert any("agent_messages" in str(e) for e in episode_boundary.scan(folder)[1])
    else:
        with pytest.raises(snapshots.SnapshotError, match=r"snap-2.*corrupt or truncated"):
            fsdiff.compare(episode, 0, 2)
        assert [p.step for p in fsdiff.file_history(episode, "/testbed/logo.png")] == [4]
    assert fsdiff.compare(episode, 0, 4).change("/testbed/src/calc/core.py").kind == "modified"


# ----- tarball variant: unsafe members --------------------------------------------------------------------------


def _tarball_snapshot(tmp_path: pathlib.Path, build) -> pathlib.Path:
    """A snapshot whose container_fs.tar.gz holds a good file plus whatever ``build`` adds."""
    folder = pathlib.Path(synthetic.write_boundary_snapshot(tmp_path, [{"role": "user", "content": "task"}],
                                                            {"/testbed/a.py": b"x = 1\n"}, snapshot_id="snap-bad",
                                                            tarball=True))
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("testbed/a.py")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"x = 1\n"))
        build(tar)
    (folder / episode_boundary.CONTAINER_FS).write_bytes(gzip.compress(raw.getvalue()))
    return folder


def _special(tar: tarfile.TarFile, name: str, kind: bytes, target: str = "", data: bytes = b"") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, target, len(data)
    tar.addfile(info, io.BytesIO(data) if data else None)


@pytest.mark.parametrize(("build", "fragment"), [
    (lambda t: _special(t, "/etc/cron.d/job", tarfile.REGTYPE, data=b"x"), "absolute path"),
    (lambda t: _special(t, "testbed/../../../root/.bashrc", tarfile.REGTYPE, data=b"x"), "'..' component"),
    (lambda t: _special(t, "testbed/escape", tarfile.SYMTYPE, "../../../../etc/shadow"), "pointing outside"),
    (lambda t: _special(t, "testbed/hard", tarfile.LNKTYPE, "/etc/shadow"), "pointing outside"),
    (lambda t: _special(t, "./testbed/a.py", tarfile.REGTYPE, data=b"evil\n"), "duplicate member"),
    (lambda t: _special(t, "testbed/hard", tarfile.LNKTYPE, "testbed/missing.py"), "not a file in it"),
], ids=["absolute", "dotdot", "symlink-outside", "hardlink-absolute", "duplicate", "dangling-hardlink"])
def test_unsafe_tarball_members_are_refused(tmp_path, build, fragment):
    folder = _tarball_snapshot(tmp_path, build)
    before = _listing(tmp_path)
    with pytest.raises(snapshots.SnapshotError) as caught:
        episode_boundary.open_boundary(folder)
    assert caught.value.path == str(folder) and fragment in caught.value.reason
    assert _listing(tmp_path) == before, "nothing may be extracted"


def test_device_files_and_fifos_are_flagged_never_opened(tmp_path):
    """A real container's exported filesystem has device nodes in /dev: listed as such, never read or made."""
    def build(tar):
        _special(tar, "dev/sda", tarfile.BLKTYPE)
        _special(tar, "dev/tty9", tarfile.CHRTYPE)
        _special(tar, "testbed/pipe", tarfile.FIFOTYPE)
        _special(tar, "testbed/disk", tarfile.LNKTYPE, "dev/sda")  # a hard link to a device: no content to read

    folder = _tarball_snapshot(tmp_path, build)
    before = _listing(tmp_path)
    with pytest.raises(snapshots.SnapshotError, match="hard link 'testbed/disk' points at 'dev/sda', which is not"):
        episode_boundary.open_boundary(folder)
    folder = _tarball_snapshot(tmp_path / "plain", lambda tar: (_special(tar, "dev/sda", tarfile.BLKTYPE),
                                                                  _special(tar, "dev/tty9", tarfile.CHRTYPE),
                                                                  _special(tar, "testbed/pipe", tarfile.FIFOTYPE)))
    snap = episode_boundary.open_boundary(folder)
    assert {p: (snap.stat(p).type, snap.stat(p).note) for p in ("/dev/sda", "/dev/tty9", "/testbed/pipe")} == {
        "/dev/sda": ("other", "block device"), "/dev/tty9": ("other", "character device"),
        "/testbed/pipe": ("other", "FIFO")}
    assert snap.read("/dev/sda") is None and snap.read("/testbed/a.py") == b"x = 1\n"
    assert snap.digests() == {"/testbed/a.py": hashlib.sha256(b"x = 1\n").hexdigest()}
    after = _listing(tmp_path)
    assert {path: after.get(path) for path in before} == before
    assert sorted(p.name for p in (tmp_path / "plain").rglob("*")) == sorted(
        [folder.name, episode_boundary.SNAPSHOT_JSON, episode_boundary.CONTAINER_FS]), "nothing may be extracted"


def test_enormous_declared_size_is_refused(tmp_path):
    folder = _tarball_snapshot(tmp_path, lambda t: None)
    header = tarfile.TarInfo("testbed/huge.bin")
    header.size = 1 << 40
    (folder / episode_boundary.CONTAINER_FS).write_bytes(
        gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 4096))
    with pytest.raises(snapshots.SnapshotError, match="declares 1099511627776 bytes"):
        episode_boundary.open_boundary(folder)


def test_container_absolute_symlinks_are_kept_and_never_followed(tmp_path):
    folder = _tarball_snapshot(tmp_path, lambda t: _special(t, "usr/bin/python", tarfile.SYMTYPE,
                                                            "/usr/bin/python3.11"))
    snap = episode_boundary.open_boundary(folder)
    assert snap.stat("/usr/bin/python").link_target == "/usr/bin/python3.11"
    assert snap.read("/usr/bin/python") is None
    assert snap.read("/testbed/a.py") == b"x = 1\n"


# ----- folder variant ------------------------------------------------------------------------------------------


def test_folder_symlinks_are_recorded_never_followed(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host data\n")
    (tmp_path / "host-dir").mkdir()
    (tmp_path / "host-dir" / "inner.txt").write_text("host data\n")
    folder = pathlib.Path(synthetic.write_boundary_snapshot(
        tmp_path / "out", [{"role": "user", "content": "task"}], {"/testbed/a.py": b"x = 1\n"},
        links={"/testbed/secret": str(secret), "/testbed/hostdir": str(tmp_path / "host-dir")}))
    os.mkfifo(folder / episode_boundary.CONTAINER_FS / "testbed" / "pipe")  # must never be opened (it would block)
    snap = episode_boundary.open_boundary(folder)
    assert snap.stat("/testbed/secret").type == snapshots.SYMLINK
    assert snap.read("/testbed/secret") is None
    assert "/testbed/hostdir/inner.txt" not in snap.entries  # a linked folder is not walked into
    assert snap.stat("/testbed/pipe").type == snapshots.OTHER and snap.read("/testbed/pipe") is None
    # Swapping a folder of the copy for a symlink after indexing does not lead a read out of the tree.
    fs = folder / episode_boundary.CONTAINER_FS
    (fs / "testbed").rename(fs / "testbed-moved")
    os.symlink(tmp_path / "host-dir", fs / "testbed")
    with pytest.raises(snapshots.SnapshotError, match="symlink is in the way"):
        snap.read("/testbed/a.py")


def test_filesystem_copy_that_is_a_symlink_is_refused(tmp_path):
    folder = pathlib.Path(synthetic.write_boundary_snapshot(tmp_path, [{"role": "user", "content": "t"}], {}))
    fs = folder / episode_boundary.CONTAINER_FS
    fs.rmdir()
    os.symlink("/", fs)
    with pytest.raises(snapshots.SnapshotError, match="is a symlink"):
        episode_boundary.open_boundary(folder)


@pytest.mark.parametrize(("text", "fragment"), [
    ("{ not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"snapshot_id": "s", "step_count": "three", "agent_messages": []}), "'step_count' should be int"),
])
def test_malformed_snapshot_json(tmp_path, text, fragment):
    folder = pathlib.Path(synthetic.write_boundary_snapshot(tmp_path, [], {"/a": b""}))
    (folder / episode_boundary.SNAPSHOT_JSON).write_text(text)
    with pytest.raises(snapshots.SnapshotError, match=fragment):
        episode_boundary.open_boundary(folder)


def test_missing_filesystem_copy(tmp_path):
    folder = pathlib.Path(synthetic.write_boundary_snapshot(tmp_path, [], {"/a": b""}))
    (folder / episode_boundary.CONTAINER_FS / "a").unlink()
    (folder / episode_boundary.CONTAINER_FS).rmdir()
    with pytest.raises(snapshots.SnapshotError, match=r"missing container_fs\.tar\.gz"):
        episode_boundary.open_boundary(folder)
