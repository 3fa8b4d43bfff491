"""A writer killed (SIGKILL) at any moment leaves the old step folder or the new one, and its temporary files are
gone after the next write into the folder.

The child process stops itself at its n-th file-system step (each rename, replace, removal of a tree and archive
member written), for every n until it finishes: the parent kills it there, looks at what a reader would find,
then writes again from another process.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import tarfile
import textwrap

import pytest

from ares_viewer import snapshots
from ares_viewer.base import atomic
from ares_viewer.recorder import episode_file

REPO = pathlib.Path(__file__).resolve().parent.parent
STEP = "step_0001"

# Runs the writer named by argv[1] with content made of the word argv[2], stopping (SIGSTOP) at file-system step
# argv[3]; with argv[5] "no-exchange", as on a system without renameat2.
CHILD = textwrap.dedent("""
    import hashlib, os, pathlib, shutil, signal, sys, tarfile
    writer, word, stop_at, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
    content = (word + "-").encode() * 200_000
    calls = 0

    def pausing(function):
        def wrapped(*args, **kwargs):
            global calls
            calls += 1
            if calls == stop_at:
                print("stopped", flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)
            return function(*args, **kwargs)
        return wrapped

    os.rename, os.replace, shutil.rmtree = pausing(os.rename), pausing(os.replace), pausing(shutil.rmtree)
    tarfile.TarFile.addfile = pausing(tarfile.TarFile.addfile)
    try:
        from ares_viewer.base import atomic
        atomic._exchange = pausing(atomic._exchange if sys.argv[5] == "exchange" else lambda a, b: False)
    except ImportError:
        pass
    from ares_viewer import snapshots
    from ares_viewer.recorder import episode_file
    if writer == "step":
        digest = hashlib.sha256(content).hexdigest()
        entry = snapshots.Entry(path="/testbed/big.bin", type="file", mode=0o644, size=len(content), sha256=digest,
                                change="modified", stored_in="step_0001")
        snapshots.write_step(folder, episode_id="e", step_index=1, base_image="img", image_id=None,
                             workdir="/testbed", entries=[entry], blobs={digest: content})
    else:
        document = episode_file.EpisodeFile(folder / "e.json", "e", word, 0.0)
        document.write()
    print("done", flush=True)
    """)


def _content(word: str) -> bytes:
    return (word + "-").encode() * 200_000  # ~1 MB


def _run_child(writer: str, word: str, stop_at: int, folder: pathlib.Path, exchange: bool = True) -> bool:
    """Run the writer, killing it at its ``stop_at``-th step; False when it finished before reaching it."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, writer, word, str(stop_at), str(folder),
                              "exchange" if exchange else "no-exchange"],
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    line = child.stdout.readline().strip()
    if line == "stopped":
        child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()
    assert line in ("stopped", "done"), line
    return line == "stopped"


def _write_step(folder: pathlib.Path, content: bytes) -> None:
    digest = hashlib.sha256(content).hexdigest()
    entry = snapshots.Entry(path="/testbed/big.bin", type="file", mode=0o644, size=len(content), sha256=digest,
                            change="modified", stored_in=STEP)
    snapshots.write_step(folder, episode_id="e", step_index=1, base_image="img", image_id=None, workdir="/testbed",
                         entries=[entry], blobs={digest: content})


def _step_content(folder: pathlib.Path) -> bytes:
    """The one file a complete step folder holds: its manifest names it, its archive holds it."""
    manifest = json.loads((folder / STEP / "manifest.json").read_text())
    digest = manifest["entries"]["/testbed/big.bin"]["sha256"]
    with tarfile.open(folder / STEP / "blobs.tar.gz") as archive:
        content = archive.extractfile(digest).read()
    assert hashlib.sha256(content).hexdigest() == digest
    return content


def _debris(folder: pathlib.Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if ".tmp-" in name or ".old-" in name)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "rename-aside"])
def test_a_recapture_killed_at_any_moment_leaves_a_whole_step_and_no_debris_after_the_next_write(tmp_path, exchange):
    folder = tmp_path / "snapshots" / "e"
    old, new, later = _content("old"), _content("new"), _content("later")
    _write_step(folder, old)
    stops = 0
    for stop_at in range(1, 50):
        if not _run_child("step", "new", stop_at, folder, exchange):
            break
        stops += 1
        if not exchange:  # killed between its two renames, the old folder is aside until any write into the folder
            atomic.sweep(folder)
        # Killed at this step: a reader finds the earlier capture or the new one, whole.
        assert _step_content(folder) in (old, new), stop_at
        _write_step(folder, later)  # the next write, from another process
        assert _step_content(folder) == later
        assert _debris(folder) == [], (stop_at, _debris(folder))
        _write_step(folder, old)
    assert stops >= 4  # it was killed before, while and after writing the archive, and around the swap


def test_an_episode_file_writer_killed_before_its_rename_leaves_nothing_after_the_next_write(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    assert _run_child("episode", "killed-writer", 1, folder)  # stopped at its rename: the staging is written
    assert _debris(folder)  # the killed writer's temporary file, until the next write
    document = episode_file.EpisodeFile(folder / "e.json", "e", "next", 0.0)
    document.write()
    assert _debris(folder) == [] and json.loads((folder / "e.json").read_text())["task_name"] == "next"
