"""Activation captures beside a run's episodes are part of the run: not episodes, errors or "other files"."""

from __future__ import annotations

import os
import shutil

import fsspec
import pytest

import ares_viewer
from ares_viewer import activations, cli, snapshots
from ares_viewer.model import render as display
from ares_viewer.runs import companions, sources
from testdata import synthetic


@pytest.fixture(scope="module")
def run_with_captures(torch, tmp_path_factory):
    """Two episodes with their captures (one of them under a nested, Tinker-like id), and a config file."""
    from testdata import activations as fixtures

    run = tmp_path_factory.mktemp("run")
    ids = []
    for seed in (1, 2):
        doc = synthetic.episode_dict(actions=3, seed=seed)
        synthetic.write_episode(run, doc)
        ids.append(doc["episode_id"])
        fixtures.write_capture(run / "activations" / doc["episode_id"], steps=3, positions=4, seed=seed)
    fixtures.write_capture(run / "activations" / "it3" / "train" / "g0", steps=1, positions=4)
    (run / "config.json").write_text('{"lr": 0.1}')
    return run, ids


def test_captures_are_neither_episodes_errors_nor_other_files(run_with_captures, capsys):
    run, ids = run_with_captures
    opened = ares_viewer.open_run(run, use_cache=False)
    assert sorted(opened.episode_ids) == sorted(ids)
    assert not opened.errors and opened.skipped == 1  # config.json only
    assert opened.companions == (str(run / "activations"),)
    assert opened.companion_kinds == ["activation captures"]
    assert "other files: 1  beside them: activation captures" in display.run_text(opened)
    assert activations.find(opened.episode(ids[0])) is not None  # still found on demand

    assert cli.main(["index", str(run)]) == 0
    assert "2 episodes, 0 unreadable file(s), 1 other file(s); beside them: activation captures" in \
        capsys.readouterr().out


def test_the_listing_never_enters_a_capture_folder(run_with_captures, monkeypatch):
    run, _ = run_with_captures
    scanned = []
    real = os.scandir

    def spy(path):
        scanned.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(sources.os, "scandir", spy)
    monkeypatch.setattr(companions.os, "scandir", spy)
    listing = sources.listing(run)
    # The run's folder, and the companion's own folder to find its first capture (depth first); no capture
    # folder is listed, whatever the number of captures.
    assert scanned == [str(run), str(run / "activations")]
    assert all("activations" not in f.path for f in listing.files)


def test_a_run_of_captures_only_says_so(run_with_captures, tmp_path, capsys):
    run, _ = run_with_captures
    shutil.copytree(run / "activations", tmp_path / "activations")
    assert cli.main(["episodes", str(tmp_path)]) == 1
    assert "no episodes found (0 unreadable file(s), 0 other file(s); beside them: activation captures)" in \
        capsys.readouterr().err


def test_globs_and_fsspec_runs_leave_captures_out_too(run_with_captures):
    run, ids = run_with_captures
    assert [os.path.basename(f.path) for f in sources.list_files(f"{run}/**/*.json")] == \
        sorted(["config.json", *(f"{i}.json" for i in ids)])
    # A pattern that names the folder itself still reaches it (only wildcards are kept out of it).
    assert sources.list_files(f"{run}/activations/{ids[0]}/*.json")
    fs = fsspec.filesystem("memory")
    fs.put(str(run), "/companion-run", recursive=True)
    try:
        remote = sources.listing("memory://companion-run")
        assert sorted(os.path.basename(f.path) for f in remote.files) == sorted(["config.json",
                                                                                 *(f"{i}.json" for i in ids)])
        assert remote.companion_kinds() == ["activation captures"]
    finally:
        fs.rm("/companion-run", recursive=True)


def _write_step_snapshot(run, episode_id: str) -> None:
    """A per-step snapshot of one step, as the recorder writes it (``snapshots.write_step``)."""
    entries = [snapshots.Entry(path="/testbed", type=snapshots.DIR, mode=0o755, change="modified")]
    snapshots.write_step(snapshots.episode_snapshots_dir(run, episode_id), episode_id=episode_id, step_index=0,
                         base_image="ares-viewer/sample-base:1", image_id=None, workdir="/testbed", entries=entries,
                         blobs={})


def test_a_folder_of_snapshots_written_by_the_recorder_is_a_companion(tmp_path):
    doc = synthetic.episode_dict(actions=2, seed=3)
    synthetic.write_episode(tmp_path, doc)
    _write_step_snapshot(tmp_path, doc["episode_id"])
    opened = ares_viewer.open_run(tmp_path, use_cache=False)
    assert opened.episode_ids == [doc["episode_id"]] and not opened.errors and opened.skipped == 0
    assert opened.companions == (str(tmp_path / "snapshots"),)
    assert opened.companion_kinds == ["per-step snapshots"]


def test_folders_only_named_like_companions_are_walked_for_their_episodes(run_with_captures, tmp_path):
    """A user's episode folders that happen to be named ``snapshots`` and ``activations`` (one nested, one holding
    a ``metadata.json`` of its own) hold episodes, not captures: they are listed like any other folder."""
    run = tmp_path / "run"
    shutil.copytree(run_with_captures[0], run)
    listed = {}
    for folder, seed in ((run / "iteration_1" / "snapshots", 4), (run / "iteration_1" / "activations" / "ep", 5),
                         (run / "activations" / "snapshots", 6)):
        folder.mkdir(parents=True)
        doc = synthetic.episode_dict(actions=2, seed=seed)
        synthetic.write_episode(folder, doc)
        listed[folder] = doc["episode_id"]
    (run / "iteration_1" / "activations" / "ep" / "metadata.json").write_text('{"note": "not a capture"}')
    opened = ares_viewer.open_run(run, use_cache=False)
    # The run's real capture folder stays a companion, and nothing under it is walked ...
    assert opened.companions == (str(run / "activations"),)
    # ... the look-alikes are walked: their episodes are listed, the stray metadata.json is an other file.
    assert sorted(opened.episode_ids) == sorted([*run_with_captures[1], listed[run / "iteration_1" / "snapshots"],
                                                 listed[run / "iteration_1" / "activations" / "ep"]])
    assert not opened.errors and opened.skipped == 2  # config.json and the look-alike's metadata.json
    inside = sorted(f.path for f in sources.list_files(run / "iteration_1"))
    assert len(inside) == 3 and [f.path for f in sources.list_files(f"{run}/iteration_1/**/*.json")] == inside
    fs = fsspec.filesystem("memory")
    fs.put(str(run), "/look-alike-run", recursive=True)
    try:
        remote = sources.listing("memory://look-alike-run")
        assert [c.rsplit("look-alike-run", 1)[1] for c in remote.companions] == ["/activations"]
        assert len([f for f in remote.files if "/iteration_1/" in f.path]) == 3
    finally:
        fs.rm("/look-alike-run", recursive=True)
