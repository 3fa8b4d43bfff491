"""Find in one episode: every hit in reading order, literal and case-insensitive by default, bounded."""

from __future__ import annotations

import pytest

import ares_viewer
from ares_viewer.analysis import find
from testdata import synthetic


@pytest.fixture
def episode(tmp_path):
    doc = synthetic.episode_dict(actions=6, seed=3)
    # A command of step 2 holding regex and markup characters, to be found literally.
    doc["steps"][2]["action"]["data"][0]["content"] = (
        "THOUGHT: Step 2. Try the [a-z]+ pattern.\n\n```bash\ngrep -n '[a-z]+ <b>x</b>' src/calc/core.py\n```"
    )
    synthetic.write_episode(tmp_path, doc)
    run = ares_viewer.open_run(tmp_path)
    return run.episode(run.episodes["episode_id"].iloc[0])


def test_hits_come_in_reading_order_with_their_step_field_and_offset(episode):
    found = find.find(episode, "step")
    assert found.stopped is None
    keys = [(h.step, find.FIELDS.index(h.field), h.start) for h in found.hits]
    assert keys == sorted(keys) and len(keys) == len(set(keys))
    assert {h.field for h in found.hits} >= {"thought"}
    for hit in found.hits:
        assert find.text_of(episode, hit)[hit.start : hit.end].lower() == "step"
    assert found.steps() == sorted({h.step for h in found.hits})


def test_literal_and_case_insensitive_unless_asked(episode):
    literal = find.find(episode, "[A-Z]+ <B>")
    assert [(h.step, h.field) for h in literal.hits] == [(2, "command")]
    assert find.text_of(episode, literal.hits[0])[literal.hits[0].start : literal.hits[0].end] == "[a-z]+ <b>"
    assert not find.find(episode, "[A-Z]+ <B>", case=True).hits
    assert [h.step for h in find.find(episode, r"Step [34]\.", regex=True, case=True).hits] == [3, 4]
    assert not find.find(episode, r"Step [34]\.").hits  # not a regular expression unless asked


def test_fields_cover_the_task_thoughts_commands_and_outputs(episode):
    fields = {h.field for h in find.find(episode, "calc").hits}
    assert {"task", "output", "command"} <= fields
    assert find.find(episode, "calc").hits[0].step == 0  # the task comes first


def test_hits_stop_at_the_limit_and_the_time_and_say_so(episode):
    everything = find.find(episode, "e")
    assert len(everything.hits) > 5
    capped = find.find(episode, "e", limit=5)
    assert capped.hits == everything.hits[:5] and capped.stopped == "limit"
    assert capped.describe(3) == "hit 3 of 5 (the first hits only)"
    assert find.find(episode, "e", seconds=0).stopped == "time"
    exact = find.find(episode, "[a-z]+ <b>")
    assert exact.describe(1) == "hit 1 of 1"


def test_bad_queries_raise_value_error(episode):
    with pytest.raises(ValueError, match="empty"):
        find.find(episode, "")
    with pytest.raises(ValueError, match="invalid regular expression"):
        find.find(episode, "([", regex=True)
