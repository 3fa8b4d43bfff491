"""An exposed server stays in its runs folder; a run too big to list opens with what was found and says so."""

from __future__ import annotations

import os

import demo_runs
import page_text
import pytest

from ares_viewer_app.serving import access
from testdata import synthetic


def _refusal(at) -> str:
    assert not at.exception
    return " ".join(page_text.shown(e.value) for e in at.error)


def test_run_root_is_refused_on_an_exposed_server(runs, app, exposed):
    at = app(run="/")
    assert "reachable from other machines" in _refusal(at) and "/ is outside it" in _refusal(at)
    assert not page_text.figures(at)  # nothing of the disk was indexed or shown


@pytest.mark.parametrize("where", ["../", "run-a/../..", "~", "file:///", "s3://bucket/run", "/**/*.json"])
def test_escapes_urls_and_globs_are_refused_on_an_exposed_server(runs, app, exposed, where):
    assert "reachable from other machines" in _refusal(app(run=where))


def test_a_symlink_out_of_the_runs_folder_is_refused(runs, app, exposed, tmp_path):
    (tmp_path / "outside").mkdir()
    demo_runs.write(tmp_path / "outside")
    os.symlink(tmp_path / "outside", tmp_path / "runs" / "escape")
    assert "escape/run-a is outside it" in _refusal(app(run="escape/run-a"))
    assert "outside it" in _refusal(app(run=str(tmp_path / "runs" / "escape" / "run-b")))


def _episodes(at) -> str:
    assert not at.exception and not at.error, [e.value for e in at.error]
    return page_text.figures(at)["Episodes"]


def _plant_outside_episode(tmp_path, runs) -> None:
    """An episode outside the runs folder, and a symlink to it inside run-a."""
    (tmp_path / "outside").mkdir()
    doc = synthetic.episode_dict(task_name="secret__outside-1", seed=99)
    os.symlink(synthetic.write_episode(tmp_path / "outside", doc), tmp_path / "runs" / "run-a" / "zz-link.json")


def test_a_file_symlink_out_of_the_runs_folder_is_left_out_on_an_exposed_server(runs, app, exposed, tmp_path):
    _plant_outside_episode(tmp_path, runs)
    at = app("overview", run="run-a")
    assert _episodes(at) == "5"
    assert "secret__outside" not in page_text.of(at)
    at = app("search", run="run-a", q="secret__outside")
    assert "0 hit(s) in 0 episode(s)" in page_text.of(at)


def test_a_local_server_follows_the_file_symlink(runs, app, tmp_path):
    _plant_outside_episode(tmp_path, runs)
    assert _episodes(app("overview", run="run-a")) == "6"


def test_a_symlinked_subfolder_of_the_runs_folder_is_neither_listed_nor_opened(runs, app, exposed, tmp_path):
    (tmp_path / "outside").mkdir()
    demo_runs.write(tmp_path / "outside")
    os.symlink(tmp_path / "outside", tmp_path / "runs" / "escape")
    os.symlink(tmp_path / "outside" / "run-a", tmp_path / "runs" / "escape-a")
    at = app("overview", run="run-a")
    picker = at.selectbox(key="app.run_choice")
    assert "run-a" in picker.options and not [o for o in picker.options if "escape" in o]
    for name in ("escape", "escape-a"):
        assert "outside it" in _refusal(app("overview", run=name))


def test_runs_under_the_folder_still_open_on_an_exposed_server(runs, app, exposed):
    at = app(run="run-b")
    assert not at.exception and not at.error
    assert page_text.figures(at)["Episodes"] == "3"
    at = app(run=runs["root"]["path"] + "/run-a")
    assert not at.error and page_text.figures(at)["Episodes"] == "5"


def test_urls_and_globs_open_when_the_setting_allows_them(runs, app, exposed, monkeypatch):
    monkeypatch.setenv(access.ALLOW_URLS_ENV, "1")
    at = app(run="run-a/*.json")
    assert not at.error and page_text.figures(at)["Episodes"] == "5"
    assert "reaches outside" in _refusal(app(run="../*/*.json"))
    assert "local file URL" in _refusal(app(run="file://" + runs["root"]["path"] + "/run-a"))


def test_a_local_server_opens_any_location(runs, app, tmp_path):
    at = app(run=runs["root"]["path"] + "/run-a/*.json")
    assert not at.error and page_text.figures(at)["Episodes"] == "5"


def test_the_address_decides_what_is_local():
    assert access.is_local("127.0.0.1") and access.is_local("localhost") and access.is_local("[::1]")
    assert not access.is_local("0.0.0.0") and not access.is_local("") and not access.is_local(None)
    assert not access.is_local("192.168.1.5")


def test_a_run_cut_short_opens_with_what_was_found_and_says_so(runs, app, monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_WALK_MAX_ENTRIES", "2")
    at = app(run="run-a")
    assert not at.exception
    warnings = [page_text.shown(w.value) for w in at.warning]
    assert any("listing is incomplete" in w and "ARES_VIEWER_WALK_MAX_ENTRIES" in w for w in warnings)
    assert page_text.figures(at)["Episodes"] == "2"
