"""Runs inside runs in the app: a folder holding two mini-swe-agent runs (public files, SOURCES.md) shows each
episode's run, the sidebar and the overview open one run alone, and Compare runs compares the two."""

from __future__ import annotations

import pathlib
import shutil
import urllib.parse

import page_text
import pytest

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
BATCH = FIXTURES / "mini-swe-agent-batch"
DEV, RERUN = "deepseek_chat_dev", "deepseek_chat_dev_rerun"


@pytest.fixture
def batch(tmp_path, monkeypatch) -> str:
    """A runs folder whose one run is the folder of two runs; its name in the picker."""
    shutil.copytree(BATCH, tmp_path / "batch")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path))
    return "batch"


def _links(at) -> dict[str, dict[str, list[str]]]:
    return {str(link.proto.label): urllib.parse.parse_qs(link.proto.query_string) for link in at.get("page_link")}


def test_the_overview_of_a_folder_of_runs_has_a_run_column_and_opens_each_run(batch, app):
    at = app(None, run=batch)
    assert not at.exception
    table = at.dataframe(key="overview.table").value
    assert list(table.columns[:1]) == ["run_id"] and sorted(table["run_id"]) == [DEV, DEV, RERUN, RERUN]
    assert "This folder holds 2 runs" in page_text.of(at)
    (runs,) = [d.value.set_index("run") for d in at.dataframe if "success rate" in d.value.columns]
    assert runs["success rate"].to_dict() == {DEV: 1.0, RERUN: 0.5}  # not one success rate for the folder alone
    assert _links(at)[RERUN]["run"] == [f"{batch}::{RERUN}"]
    # the sidebar chooses one of them, and the URL names it
    chooser = at.selectbox(key="app.sub_run")
    assert chooser.options == ["All runs of the folder", DEV, RERUN]
    chooser.set_value(RERUN).run()
    assert at.query_params["run"] == f"{batch}::{RERUN}"


def test_one_run_of_the_folder_alone(batch, app):
    at = app(None, run=f"{batch}::{RERUN}")
    assert not at.exception
    metrics = page_text.figures(at)
    assert metrics["Episodes"] == "2" and metrics["Success rate"] == "50%"
    assert f"One of the 2 runs of this folder: `{RERUN}`" in page_text.of(at)
    assert _links(at)["All runs of the folder"]["run"] == [batch]
    assert at.selectbox(key="app.sub_run").value == RERUN
    assert at.selectbox(key="app.run_choice").value == batch
    unknown = app(None, run=f"{batch}::nope")
    assert any("no such run" in e.value for e in unknown.error)


def test_compare_runs_compares_two_runs_of_the_folder(batch, app):
    at = app("compare_runs", run=f"{batch}::{DEV}", other_run=f"{batch}::{RERUN}")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[f"A: {DEV}"] == "100%" and metrics[f"B: {RERUN}"] == "50%"
    assert "2 tasks · **1 lost**" in page_text.of(at)
    # run B is offered among the folder's other runs
    assert f"{batch}::{RERUN}" in at.selectbox(key="compare_runs.other").options
    split = app("compare_runs", run=batch, by="run_id", side=[DEV, RERUN])
    labels = [m.label for m in split.metric]
    assert f"A: run_id={DEV}" in labels and f"B: run_id={RERUN}" in labels


def test_a_run_folder_alone_applies_its_reports_or_says_where_it_looked(tmp_path, app, monkeypatch):
    output = tmp_path / "batch" / "output"
    shutil.copytree(BATCH, tmp_path / "batch")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(output))
    at = app(None, run=RERUN)
    assert page_text.figures(at)["Success rate"] == "50%"  # the report two folders up
    for report in (tmp_path / "batch").glob("*.json"):
        report.unlink()
    alone = app(None, run=DEV)
    shown = page_text.of(alone)
    assert f"No evaluation report names run {DEV} (<model>.{DEV}.json): looked in {output / DEV}" in shown


def test_one_run_of_a_folder_outside_the_runs_folder_is_refused_on_an_exposed_server(batch, app, exposed, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    shutil.copytree(BATCH, outside)
    at = app(None, run=f"{outside}::{RERUN}")
    assert any("reachable from other machines" in e.value for e in at.error), [e.value for e in at.error]
    assert not page_text.figures(at)
    inside = app(None, run=f"{batch}::{RERUN}")  # a run of a folder under the runs folder opens
    assert page_text.figures(inside)["Episodes"] == "2"


def test_compare_offers_the_folders_other_runs_beside_this_one(batch, app):
    at = app("compare", run=f"{batch}::{DEV}")
    assert not at.exception
    at.session_state["compare.tab"] = "Two runs"  # only the open tab runs
    at.run()
    assert at.selectbox(key="compare.other_run").options[0] == f"{batch}::{RERUN}"
