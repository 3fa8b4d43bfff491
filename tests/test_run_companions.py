"""Activation captures beside a run's episodes are part of the run: not episodes, errors or "other files"."""

from __future__ import annotations

import os
import shutil

import fsspec
import pytest

import ares_viewer
from ares_viewer import activations, cli, display, sources
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
    listing = sources.listing(run)
    assert scanned == [str(run)]  # one folder read, whatever the number of captures
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
