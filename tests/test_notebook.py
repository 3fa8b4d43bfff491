"""The example notebook runs top to bottom on the sample runs, as a user would run it."""

from __future__ import annotations

import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = pathlib.Path(__file__).resolve().parent.parent / "notebooks" / "tour.ipynb"


@pytest.fixture(scope="module")
def executed():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return notebook


def outputs(notebook, mime: str) -> list:
    return [o["data"][mime] for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if mime in o.get("data", {})]


def text(notebook) -> str:
    return "\n".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_every_cell_runs_without_error(executed):
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors, errors


def test_figures_and_html_cards_render(executed):
    figures = outputs(executed, "application/vnd.plotly.v1+json")
    assert len(figures) == 3  # reward vs actions, success per task, step timeline
    cards = outputs(executed, "text/html")
    assert any("episodes" in card and "success" in card for card in cards)  # the run's card
    assert any("completed, not solved" in card and "reason" in card for card in cards)  # run.failures()


def test_it_reads_a_step_and_aligns_failed_with_solved(executed):
    printed = text(executed)
    assert "--- assistant" in printed and "=== response" in printed
    assert "--- step 1" in printed and "+++ step 2" in printed
    assert "<- diverged" in printed
