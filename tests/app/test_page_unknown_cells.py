"""An unknown value stays visibly unknown on every page: a table's missing cell is drawn as the app's dash
(``readable.UNKNOWN``), never Streamlit's "None", never 0, and its column keeps its numbers (so it sorts by them).

The Overview of a run whose files record no usage (``testdata.no_usage``); the Lost tasks page, whose episodes never
given a decisive step have none; the Episode page's step list, for a command whose file records no return code.
The browser side (what the grid draws, how a header click sorts) is tests/browser/test_unknown_cells_browser.py.
"""

from __future__ import annotations

import ast
import pathlib

import page_text
import pandas as pd
import pytest

import ares_viewer_app
from ares_viewer_app.text import readable
from testdata import no_usage

APP = pathlib.Path(ares_viewer_app.__file__).resolve().parent
SAMPLE_RUNS = pathlib.Path(__file__).resolve().parents[2] / "sample_runs"
# A bundled episode whose last step ran a command (the submission) and whose file records no return code for it.
NO_RC = ("0b17f852-8687-4e04-a8c5-e078baf6b285", 62)


def test_every_table_of_the_app_goes_through_the_one_that_draws_unknown_cells_as_the_dash():
    """``st.dataframe`` writes "None" in a missing cell unless told otherwise: ``panels.tables.table`` tells it."""
    direct = []
    for path in sorted(APP.rglob("*.py")):
        if path == APP / "panels" / "tables.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dataframe":
                direct.append(f"{path.relative_to(APP)}:{node.lineno}")
    assert direct == [], "call panels.tables.table instead of .dataframe (it draws an unknown cell as the dash)"


@pytest.fixture
def mixed(tmp_path, monkeypatch) -> dict[str, list[str]]:
    root = tmp_path / "runs"
    ids = no_usage.write_mixed_run(root / "mixed")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    return ids


def test_the_overview_table_shows_unknown_tokens_and_cost_as_the_dash_never_0(mixed, app):
    at = app(run="mixed")
    assert not at.exception
    table = at.dataframe(key="overview.table")
    assert table.proto.placeholder == readable.UNKNOWN == "–"
    rows = table.value.set_index("episode_id")
    for column in ("total_cost", "prompt_tokens", "generated_tokens"):
        assert rows.loc[mixed["unknown"], column].isna().all(), column  # drawn as the placeholder
        assert (rows.loc[mixed["first_call"] + mixed["whole"], column] > 0).all(), column
        # Still a column of numbers: the grid sorts it by value (not as text), unknowns together at one end.
        assert pd.api.types.is_numeric_dtype(rows[column]), column
    # The headline says what the table's dashes mean.
    assert "2 episodes record none" in " ".join(page_text.figure_helps(at).values())


@pytest.fixture
def samples(monkeypatch):
    if not (SAMPLE_RUNS / "demo-run").is_dir():
        pytest.fail("the bundled sample run is missing")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(SAMPLE_RUNS))


def test_lost_tasks_draws_a_step_never_given_as_the_dash(samples, app):
    at = app("lost", run="demo-run")
    assert not at.exception
    assert [t.proto.placeholder for t in at.dataframe] == ["–"] * len(at.dataframe)  # every table of the page
    episodes = at.dataframe[-1].value
    not_searched = episodes[episodes["state"] != "decisive"]
    assert len(not_searched) and not_searched["decisive_step"].isna().all()


def test_the_step_list_marks_a_command_whose_return_code_is_not_recorded(samples, app):
    episode, step = NO_RC
    at = app("episode", run="demo-run", episode=episode, step=str(step))
    assert not at.exception
    listed = page_text.step_list(at)
    # The submission ran, its code is not in the file: the dash, then the step's marks (not blank, not 0).
    assert listed.loc[step, "rc"].split(" · ")[0] == "–"
    assert listed.loc[0, "rc"] == ""  # the first request ran no command: nothing to mark
    assert (listed["rc"] != "None").all()
