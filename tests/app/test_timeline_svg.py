"""The Episode page's step timeline drawing (``ares_viewer_app.views.episode.timeline``): what it charts, and file
text as text."""

from __future__ import annotations

import re

import ares_viewer
from ares_viewer_app.views.episode import timeline
from testdata import synthetic


def _frame(tmp_path, actions=6, **kwargs):
    doc = synthetic.episode_dict(actions=actions, **kwargs)
    synthetic.write_episode(tmp_path, doc)
    return ares_viewer.open_run(tmp_path).episode(doc["episode_id"]).steps_frame()


def test_every_step_is_a_column_with_its_summary_and_the_current_one_is_shaded(tmp_path):
    frame = _frame(tmp_path)
    steps = [int(i) for i in frame.loc[frame["kind"] != "FIRST", "index"]]
    svg = timeline.drawing(frame, {3: ["edits the tests"]})
    assert [int(s) for s in re.findall(r'data-step="(\d+)"', svg)] == steps == [1, 2, 3, 4, 5, 6]
    assert "▼ edits the tests" in svg
    assert "data-current-step" not in svg
    assert re.findall(r'data-current-step="(\d+)"', timeline.marked(svg, steps, 4)) == ["4"]
    assert timeline.marked(svg, steps, 0) == svg  # the first request has no column


def test_file_text_in_the_drawing_stays_text(tmp_path):
    frame = _frame(tmp_path).copy()
    frame.loc[frame["index"] == 2, "command"] = '</title><script>fetch("http://127.0.0.1:1")</script><b>x'
    svg = timeline.drawing(frame, {2: ['<img src=x onerror="alert(1)">']})
    assert "<script" not in svg and "<img" not in svg and "<b>" not in svg
    assert "&lt;/title&gt;&lt;script&gt;" in svg


def test_an_episode_without_actions_says_so(tmp_path):
    frame = _frame(tmp_path)
    svg = timeline.drawing(frame[frame["kind"] == "FIRST"])
    assert "No action was taken" in svg and "data-step" not in svg
