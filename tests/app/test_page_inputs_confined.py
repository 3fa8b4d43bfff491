"""Every page, every URL input: an exposed server reads nothing outside its runs folder and shows user text as text.

The inputs are enumerated, not listed by hand: every page of ``ares_viewer_app/views/`` and every URL
parameter the app reads (``state.KEYS``, ``state.PAGE_KEYS`` and the queue link's ``queue``/``reviewer``). Each page
is opened on an exposed server (bound to every interface) with every parameter naming what lies outside the runs
folder (a run beside it, a path up and out of it, an absolute path, a URL), and again with every parameter holding
markdown and HTML that would fetch an image; the page must show no traceback, nothing of the run outside (its
task's secret name), and none of that markup unescaped where Streamlit renders markdown or HTML. A page or a
parameter added later is walked the same way; one that skips the server's check of what it may read fails here.
"""

from __future__ import annotations

import pathlib
import re

import pytest
from conftest import MAIN
from google.protobuf import json_format

import ares_viewer_app
from ares_viewer_app.panels import queue_panel
from ares_viewer_app.routing import state
from testdata import synthetic

PAGES = sorted(p.parent.name for p in (pathlib.Path(ares_viewer_app.__file__).parent / "views").glob("*/*.py")
               if p.stem == p.parent.name)
PARAMETERS = sorted({*state.KEYS, *state.PAGE_KEYS, queue_panel.QUEUE, queue_panel.REVIEWER} - {"run"})
SECRET = "SECRET-TASK-OUTSIDE-THE-RUNS-FOLDER"
IMAGE = "![bait](http://127.0.0.1:9/bait.png)"
TAG = "<img src=http://127.0.0.1:9/tag.png>"
# An inline code span (``escape.code``): markdown shows what is inside it as it is.
_CODE_SPAN = re.compile(r"(`+).*?\1", re.S)
# Elements that show their text as it is (no markdown, no HTML): user text there is safe whatever it holds.
_PLAIN = {"code", "text", "json", "arrow_data_frame", "dataframe", "arrow_table", "table", "text_input", "text_area",
          "selectbox", "multiselect", "number_input", "plotly_chart", "vega_lite_chart", "exception", "html"}


@pytest.fixture
def outside(runs, tmp_path) -> pathlib.Path:
    """A run beside the runs folder, its one episode's task named by ``SECRET``."""
    folder = tmp_path / "outside" / "run-x"
    folder.mkdir(parents=True)
    synthetic.write_episode(folder, synthetic.episode_dict(task_name=SECRET, actions=3, seed=9, episode_id="secret"))
    return folder


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _elements(node):
    """Every element under an AppTest node, with its type."""
    children = getattr(node, "children", None)
    if children:
        for child in children.values():
            yield from _elements(child)
    elif getattr(node, "proto", None) is not None:
        yield node


def _shown(at) -> list[tuple[str, str]]:
    """(element type, a string of its proto) for every element of the page."""
    found = []
    for element in _elements(at._tree):
        kind = getattr(element, "type", "")
        for text in _strings(json_format.MessageToDict(element.proto)):
            found.append((kind, text))
    return found


def _open(page: str, values: dict[str, str]):
    """The page of run-a, its URL holding ``values`` (``page`` among them: a URL parameter of its own)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=60)
    at.query_params.update({"run": "run-a", **values})
    at.switch_page(f"views/{page}/{page}.py")
    return at.run()


@pytest.mark.parametrize("page", PAGES)
def test_no_url_input_of_a_page_reads_outside_the_runs_folder(page, runs, exposed, outside):
    tries = {
        "a run beside the runs folder": str(outside),
        "a path up and out": "../outside/run-x",
        "an episode's file outside": str(outside / "secret.json"),
        "a URL": "file:///etc/passwd",
    }
    for what, value in tries.items():
        values = dict.fromkeys(PARAMETERS, value)
        values["episode"] = values["other"] = "secret" if what == "a run beside the runs folder" else value
        at = _open(page, values)
        assert not at.exception, (page, what, [e.value for e in at.exception])
        leaked = [(kind, text) for kind, text in _shown(at) if SECRET in text]
        assert not leaked, (page, what, leaked[:3])


@pytest.mark.parametrize("page", PAGES)
def test_no_url_input_of_a_page_reaches_markdown_or_html_unescaped(page, runs, exposed):
    values = dict.fromkeys(PARAMETERS, f"{IMAGE} {TAG}")
    at = _open(page, values)
    assert not at.exception, (page, [e.value for e in at.exception])
    rendered = [(kind, _CODE_SPAN.sub("", text)) for kind, text in _shown(at) if kind not in _PLAIN]
    raw = [(kind, text) for kind, text in rendered if IMAGE in text or TAG in text]
    assert not raw, (page, raw[:3])
