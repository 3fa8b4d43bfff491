"""Remote folders (snapshots, verifier recipes) mirrored into the cache folder, also by many workers at once."""

from __future__ import annotations

import threading
import uuid

import fsspec
import pytest

from ares_viewer.snapshots import mirror


@pytest.fixture
def remote(tmp_path, monkeypatch):
    """A folder of 40 files on fsspec's in-memory filesystem, and the cache folder set to a fresh one."""
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    fs = fsspec.filesystem("memory")
    folder = f"/runs-{uuid.uuid4().hex[:8]}/tasks/t1"
    for number in range(40):
        fs.pipe_file(f"{folder}/tests/file{number}.txt", f"file {number} ".encode() * 2000)
    yield fs, folder
    fs.rm(folder.split("/tasks")[0], recursive=True)


def test_workers_mirroring_the_same_folder_at_once_each_read_a_whole_copy(remote):
    # A search's branches stage the same snapshots and recipe at once: none may remove the copy another reads.
    fs, folder = remote
    failures: list[str] = []
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        for _ in range(5):
            copy = mirror.mirror_remote(fs, folder, "recipes", "t1")
            try:
                assert copy is not None and copy.name == "t1"
                for number in range(40):
                    text = (copy / "tests" / f"file{number}.txt").read_bytes()
                    assert text == f"file {number} ".encode() * 2000
            except (AssertionError, OSError) as exc:
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    copies = list((mirror.index_cache.cache_dir() / "recipes").rglob("file0.txt"))
    assert len(copies) == 1  # one copy left, no half-written folders
    assert not [p for p in (mirror.index_cache.cache_dir() / "recipes").rglob("*") if ".partial-" in p.name]


def test_a_copy_is_reused_until_the_remote_folder_changes(remote):
    fs, folder = remote
    first = mirror.mirror_remote(fs, folder, "recipes", "t1")
    assert first is not None
    assert mirror.mirror_remote(fs, folder, "recipes", "t1") == first  # the same listing: no second copy
    fs.pipe_file(f"{folder}/tests/file3.txt", b"changed")
    second = mirror.mirror_remote(fs, folder, "recipes", "t1")
    assert second is not None and (second / "tests" / "file3.txt").read_bytes() == b"changed"
    assert len(list(second.rglob("*.txt"))) == 40
    assert len(list((mirror.index_cache.cache_dir() / "recipes").rglob("file3.txt"))) == 1  # the earlier copy dropped
