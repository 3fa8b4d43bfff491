"""Readers survive hostile files: each becomes a per-file error (``Run.errors``), never an exception or a hang.

Covers nesting deep enough to exhaust the stack, wrong types in every field, a file that claims 2 GB (read
only up to the one-file limit), and folder walks bounded in breadth and depth with a message saying so.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import time

import formats_fixtures as ff
import hostile_files
import pytest

import ares_viewer
from ares_viewer import formats
from ares_viewer.runs import sources
from testdata import synthetic


def _errors_of(run, path) -> list[str]:
    return [e.reason for e in run.errors if e.path == str(path)]


def test_a_run_of_hostile_files_opens_with_one_error_per_bad_file(tmp_path):
    paths = hostile_files.write_all(tmp_path / "run")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    run = ares_viewer.open_run(tmp_path / "run", use_cache=False, workers=1)
    assert time.monotonic() - started < 30
    # The 2 GB file was judged by its size, not read: the process did not grow by anything like it.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 512 * 1024  # KiB
    assert "nested too deeply" in " ".join(_errors_of(run, paths["ares_deep"]))
    assert any(r.startswith("line 1: ") and "nested too deeply" in r for r in _errors_of(run, paths["tinker_deep"]))
    assert _errors_of(run, paths["mini_wrong"])
    huge = _errors_of(run, paths["huge"])
    assert len(huge) == 1 and "2,048 MB" in huge[0] and "ARES_VIEWER_MAX_FILE_MB" in huge[0]
    # What is readable still loads: the good episode and the tinker file's other lines.
    assert set(run.episodes["format"]) == {"ares", "tinker"}
    assert (run.episodes["format"] == "tinker").sum() == len(ff.lines(ff.MATH_IT0)) - 1
    good = run.episodes.loc[run.episodes["path"] == str(paths["good"]), "episode_id"].iloc[0]
    assert run.episode(good).num_actions == 3


def test_loading_a_hostile_file_raises_a_plain_error(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    with pytest.raises(ValueError, match="nested too deeply"):
        ares_viewer.load_episode(hostile_files.ares_deep(folder))
    with pytest.raises(sources.FileTooLargeError, match="over the 512 MB"):
        ares_viewer.load_episode(hostile_files.huge(folder))


def test_reads_stop_at_the_limit_whatever_the_size_claims(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * (3 * 1024 * 1024))
    monkeypatch.setenv("ARES_VIEWER_MAX_FILE_MB", "2")
    with pytest.raises(sources.FileTooLargeError, match="3 MB, over the 2 MB"):
        sources.read_bytes(str(path))
    # A remote file is bounded the same way.
    import fsspec

    fsspec.filesystem("memory").pipe("/hostile/big.json", b"y" * (3 * 1024 * 1024))
    with pytest.raises(sources.FileTooLargeError):
        sources.read_bytes("memory://hostile/big.json")
    monkeypatch.setenv("ARES_VIEWER_MAX_FILE_MB", "4")
    assert len(sources.read_bytes(str(path))) == 3 * 1024 * 1024


@pytest.mark.parametrize("fixture", [ff.MINI_V2, ff.MINI_V1, ff.RAY_ONE], ids=lambda p: p.parent.name)
def test_wrong_types_in_any_field_give_episodes_or_errors(fixture):
    doc = json.loads(fixture.read_text())
    for field, changed in hostile_files.with_wrong_types(doc):
        data = json.dumps(changed).encode()
        for result in (formats.read_file(str(fixture), data), formats.summarize_file(str(fixture), data)):
            assert result.episodes or result.rows or result.errors or result.skipped, field
        for episode in formats.read_file(str(fixture), data).episodes:
            episode.summary()
            episode.steps_frame()
            str(episode)


@pytest.mark.parametrize("fixture", [ff.MATH_IT0, ff.RAY_LINES], ids=lambda p: p.parent.parent.name)
def test_wrong_types_in_a_line_leave_the_other_lines(fixture):
    records = ff.lines(fixture)
    for field, changed in hostile_files.with_wrong_types(records[0]):
        data = "".join(json.dumps(r) + "\n" for r in [changed, *records[1:]]).encode()
        result = formats.read_file(str(fixture), data)
        # The first record decides the file's format: breaking what identifies it makes the file something else.
        assert result.skipped or len(result.episodes) >= len(records) - 1, field


def test_an_unforeseen_failure_in_an_adapter_is_that_record_s_error(monkeypatch, tmp_path):
    from ares_viewer.formats import registry
    from ares_viewer.formats.adapters import ares

    def broken(doc, path, record=None):
        raise TypeError("'int' object is not subscriptable")

    monkeypatch.setattr(registry, "ADAPTERS", (dataclasses.replace(ares.ADAPTER, parse=broken),
                                               *registry.ADAPTERS[1:]))
    path = synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=2))
    result = formats.read_file(path, sources.read_bytes(path))
    assert result.errors == ("not a readable ares episode: unexpected content (TypeError: 'int' object is not "
                             "subscriptable)",)


def _wide_and_deep(root, width: int, depth: int) -> None:
    doc = synthetic.episode_dict(actions=1, seed=5)
    root.mkdir(parents=True)
    for i in range(width):
        (root / f"other-{i:05d}.txt").write_text("")
    synthetic.write_episode(root, doc)
    folder = root
    for level in range(depth):
        folder = folder / f"level-{level}"
        folder.mkdir()
        synthetic.write_episode(folder, synthetic.episode_dict(actions=1, seed=100 + level))


def test_a_walk_stops_at_its_depth_with_a_message(tmp_path):
    _wide_and_deep(tmp_path / "run", width=0, depth=sources.DEFAULT_MAX_DEPTH)
    found = sources.listing(tmp_path / "run", sources.Limits(max_depth=5))
    assert len(found.files) == 6  # the top folder's episode and one per level 1..5
    assert "more than 5 levels deep" in found.cut and "ARES_VIEWER_WALK_MAX_DEPTH" in found.cut
    every = sources.listing(tmp_path / "run")  # the default depth reaches every level
    assert every.cut is None and len(every.files) == sources.DEFAULT_MAX_DEPTH + 1


def test_a_walk_stops_at_its_breadth_and_the_run_still_opens(tmp_path, monkeypatch):
    _wide_and_deep(tmp_path / "run", width=3000, depth=3)
    monkeypatch.setenv("ARES_VIEWER_WALK_MAX_ENTRIES", "1000")
    started = time.monotonic()
    run = ares_viewer.open_run(tmp_path / "run", use_cache=False)
    assert time.monotonic() - started < 10
    assert "stopped after looking at 1,000 files and folders" in run.listing_cut
    assert "ARES_VIEWER_WALK_MAX_ENTRIES" in run.listing_cut
    assert len(run) <= 4
    monkeypatch.delenv("ARES_VIEWER_WALK_MAX_ENTRIES")
    full = ares_viewer.open_run(tmp_path / "run", use_cache=False)
    assert full.listing_cut is None and len(full) == 4


def test_remote_walks_are_bounded_too(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    doc = json.dumps(synthetic.episode_dict(actions=1, seed=7)).encode()
    path = "/walk-bound"
    for level in range(8):
        path += f"/level-{level}"
        fs.pipe(f"{path}/episode.json", doc)
    found = sources.listing("memory://walk-bound", sources.Limits(max_depth=3))
    assert len(found.files) == 3 and "more than 3 levels deep" in found.cut
    assert sources.listing("memory://walk-bound").cut is None


def test_the_cli_says_when_a_listing_was_cut(tmp_path, monkeypatch, capsys):
    from ares_viewer import cli

    _wide_and_deep(tmp_path / "run", width=50, depth=2)
    monkeypatch.setenv("ARES_VIEWER_WALK_MAX_ENTRIES", "20")
    assert cli.main(["episodes", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "listing is incomplete" in err and "ARES_VIEWER_WALK_MAX_ENTRIES" in err


def test_a_walk_within_a_folder_leaves_out_symlinks_that_resolve_outside_it(tmp_path):
    """A run holding a link to an episode elsewhere on disk: a listing confined to the runs folder (what an exposed
    server asks for) leaves the linked file out, and refuses a run folder that is itself a link out; unconfined (a
    notebook, the CLI, a local server) the link is followed as before."""
    runs, outside = tmp_path / "runs", tmp_path / "outside"
    synthetic.write_run(runs / "run", 2, actions=2)
    outside.mkdir()
    elsewhere = synthetic.write_episode(outside, synthetic.episode_dict(actions=2, seed=7))
    (runs / "run" / "zz.json").symlink_to(elsewhere)
    (runs / "run" / "inner.json").symlink_to(sorted((runs / "run").glob("*.json"))[0])  # a link inside: kept
    (runs / "linked").symlink_to(outside)
    assert len(sources.list_files(runs / "run")) == 4
    confined = sources.list_files(runs / "run", within=str(runs))
    assert len(confined) == 3 and not [f for f in confined if f.path.endswith("zz.json")]
    with pytest.raises(sources.LocationError, match="resolves outside"):
        sources.list_files(runs / "linked", within=str(runs))
    assert len(ares_viewer.open_run(runs / "run", use_cache=False, within=str(runs))) == 3
