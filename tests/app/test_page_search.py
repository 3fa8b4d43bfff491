"""The search page in AppTest: hits link to their steps; bad patterns read as messages."""

from __future__ import annotations

import page_text


def test_hits_link_to_their_steps(runs, app):
    at = app("search", run="run-a")
    at.text_input(key="search.query").input("COMPLETE_TASK_AND_SUBMIT").run()
    links = at.get("page_link")
    # The submit command ends each of the three completed episodes (and is quoted in every task message,
    # which is not searched: only thoughts, commands and outputs are).
    labels = [link.proto.label for link in links]
    assert len(labels) == 3
    assert all(label.endswith("· command") for label in labels)
    for link in links:
        assert link.proto.page == "episode"
        episode_id, step = link.proto.label.split(" · ")[1:3]
        assert f"&step={step.removeprefix('step ')}" in link.proto.query_string
        assert f"episode={episode_id}" in link.proto.query_string
    assert "3 hit(s)" in page_text.of(at)


def test_regex_case_and_limit(runs, app):
    at = app("search", run="run-a")
    at.text_input(key="search.query").input(r"rc?=?returncode|THOUGHT: Step [0-9]+\.").run()
    assert "0 hit(s)" in page_text.of(at)  # a regex is plain text until asked for
    at.toggle(key="search.regex").set_value(True).run()
    at.number_input(key="search.limit").set_value(5).run()
    assert "5 hit(s) (the limit" in page_text.of(at)
    at.text_input(key="search.query").input("thought: step").run()
    at.toggle(key="search.case").set_value(True).run()
    assert "0 hit(s)" in page_text.of(at)


def test_invalid_regex_is_a_message(runs, app):
    at = app("search", run="run-a")
    at.toggle(key="search.regex").set_value(True).run()
    at.text_input(key="search.query").input("([unclosed").run()
    assert not at.exception
    assert any("invalid regular expression" in e.value for e in at.error)
