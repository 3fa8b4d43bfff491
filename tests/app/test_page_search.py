"""The search page in AppTest: hits link to their steps; bad patterns read as messages."""

from __future__ import annotations

import random
import re
import time
import urllib.parse

import page_text

from ares_viewer.analysis import search
from testdata import synthetic


def test_hits_link_to_their_steps(runs, app):
    at = app("search", run="run-a")
    at.multiselect(key="search.fields").set_value(["command"]).run()
    at.text_input(key="search.query").input("COMPLETE_TASK_AND_SUBMIT").run()
    links = at.get("page_link")
    # The submit command ends each of the three completed episodes.
    labels = [link.proto.label for link in links]
    assert len(labels) == 3
    assert all(label.endswith("· command") for label in labels)
    for link in links:
        assert link.proto.page == "episode"
        episode_id, step = link.proto.label.split(" · ")[1:3]
        assert f"&step={step.removeprefix('step ')}" in link.proto.query_string
        assert f"episode={episode_id}" in link.proto.query_string
    assert "3 hit(s) in 3 episode(s)" in page_text.of(at)


def test_prompts_highlight_and_groups(runs, app):
    """The task prompt quotes the submit command: every episode has a hit there, at step 0, grouped with its
    command hit; the match is marked and the run's text escaped."""
    at = app("search", run="run-a")
    at.text_input(key="search.query").input("complete_task_and_submit").run()
    labels = [link.proto.label for link in at.get("page_link")]
    assert sum(label.endswith("· step 0 · task prompt") for label in labels) == 5
    assert "8 hit(s) in 5 episode(s)" in page_text.of(at)
    shown = [h.proto.body for h in at.get("html")]
    assert all("<mark>COMPLETE_TASK_AND_SUBMIT</mark>" in body for body in shown)
    at.text_input(key="search.query").input("<pr_description>").run()
    bodies = [h.proto.body for h in at.get("html")]
    assert bodies and all("<mark>&lt;pr_description&gt;</mark>" in body for body in bodies)


def test_query_round_trips_through_the_url(runs, app):
    at = app("search", run="run-a", q="COMPLETE_TASK_AND_SUBMIT")
    assert at.text_input(key="search.query").value == "COMPLETE_TASK_AND_SUBMIT"
    assert "hit(s)" in page_text.of(at)
    at.text_input(key="search.query").input("Traceback").run()
    assert at.query_params["q"] == "Traceback"


def test_regex_case_and_limit(runs, app):
    at = app("search", run="run-a")
    at.text_input(key="search.query").input(r"rc?=?returncode|THOUGHT: Step [0-9]+\.").run()
    assert "0 hit(s)" in page_text.of(at)  # a regex is plain text until asked for
    at.toggle(key="search.regex").set_value(True).run()
    at.number_input(key="search.limit").set_value(5).run()
    assert "5 hit(s) in 1 episode(s) (the limit" in page_text.of(at)
    at.text_input(key="search.query").input("thought: step").run()
    at.toggle(key="search.case").set_value(True).run()
    assert "0 hit(s)" in page_text.of(at)


def test_invalid_regex_is_a_message(runs, app):
    at = app("search", run="run-a")
    at.toggle(key="search.regex").set_value(True).run()
    at.text_input(key="search.query").input("([unclosed").run()
    assert not at.exception
    assert any("invalid regular expression" in e.value for e in at.error)


def test_a_time_budget_stops_with_how_far_it_got_and_continues(runs, app, monkeypatch):
    """With no time to search, each page run gets one episode or file further: the page says how far, and Continue
    goes on from there until every file was searched, with the hits a whole search finds."""
    monkeypatch.setenv("ARES_VIEWER_SEARCH_SECONDS", "0")
    at = app("search", run="run-a")
    at.text_input(key="search.query").input("complete_task_and_submit").run()
    shown = page_text.of(at)
    assert ("searched 0 of 5 file(s) and part of the next (0 of 5 episodes; 1 parsed) · 4 file(s) not searched yet"
            in shown)
    assert at.button(key="search.continue")
    for _ in range(10):
        if not at.get("button") or all(b.key != "search.continue" for b in at.get("button")):
            break
        at.button(key="search.continue").click().run()
    shown = page_text.of(at)
    assert "8 hit(s) in 5 episode(s) · searched all 5 file(s) (5 of 5 episodes; 5 parsed" in shown
    labels = [link.proto.label for link in at.get("page_link")]
    assert len(labels) == 8 and len(set(labels)) == 8


def test_a_rare_text_parses_nothing_else_and_a_rerun_does_not_search_again(runs, app):
    at = app("search", run="run-a")
    at.text_input(key="search.query").input("no episode says this").run()
    assert "0 hit(s) in 0 episode(s) · searched all 5 file(s) (5 of 5 episodes; 0 parsed" in page_text.of(at)
    assert not any(b.key == "search.continue" for b in at.get("button"))
    at.text_input(key="search.query").input("COMPLETE_TASK_AND_SUBMIT").run()
    first = at.session_state["search.saved"]["search"]
    at.run()
    assert at.session_state["search.saved"]["search"] is first
    assert "8 hit(s) in 5 episode(s)" in page_text.of(at)


def test_each_episode_counts_its_hits_in_the_words_of_the_total(runs, app):
    """The line above says "8 hit(s) in 5 episode(s)"; each episode's box says how many of those hits are its."""
    at = app("search", run="run-a")
    at.text_input(key="search.query").input("complete_task_and_submit").run()
    shown = page_text.of(at)
    counts = [int(n) for n in re.findall(r"\*\* · (\d+) hit\(s\)", shown)]
    assert len(counts) == 5 and sum(counts) == 8
    assert "match(es)" not in shown


def _go(at, page: str, **params):
    """Open another page as the sidebar does (no parameters) or as a link or Back does (its parameters)."""
    at.query_params.clear()
    at.query_params.update(params)
    at.switch_page(f"views/{page}/{page}.py")
    return at.run()


def test_the_query_and_hits_come_back_after_another_page(runs, app):
    """Streamlit forgets a page's widgets while another page shows: Back (the URL names the query) and the
    sidebar (it names nothing) both bring the query and its hits back."""
    at = app("search", run="run-a", q="COMPLETE_TASK_AND_SUBMIT")
    assert "8 hit(s) in 5 episode(s)" in page_text.of(at)
    _go(at, "episode", run="run-a", episode=runs["run-a"]["failed"], step="1")
    _go(at, "search", run="run-a", q="COMPLETE_TASK_AND_SUBMIT")  # Back
    assert at.text_input(key="search.query").value == "COMPLETE_TASK_AND_SUBMIT"
    assert "8 hit(s) in 5 episode(s)" in page_text.of(at)
    _go(at, "episode", run="run-a", episode=runs["run-a"]["failed"], step="1")
    _go(at, "search")  # the sidebar
    assert at.text_input(key="search.query").value == "COMPLETE_TASK_AND_SUBMIT"
    assert at.query_params["q"] == "COMPLETE_TASK_AND_SUBMIT"
    assert "8 hit(s) in 5 episode(s)" in page_text.of(at)


def test_options_are_in_the_url_and_a_shared_link_finds_the_same_hits(runs, app):
    at = app("search", run="run-a")
    at.text_input(key="search.query").input(r"THOUGHT: Step [0-9]+\.").run()
    at.toggle(key="search.regex").set_value(True).run()
    at.toggle(key="search.case").set_value(True).run()
    at.multiselect(key="search.fields").set_value(["thought", "output"]).run()
    at.number_input(key="search.limit").set_value(5).run()
    assert "5 hit(s) in 1 episode(s) (the limit" in page_text.of(at)
    link = dict(at.query_params)
    assert link == {"run": "run-a", "q": r"THOUGHT: Step [0-9]+\.", "regex": "1", "case": "1",
                    "in": ["thought", "output"], "limit": "5"}
    shared = app("search", **link)
    assert shared.toggle(key="search.regex").value and shared.toggle(key="search.case").value
    assert shared.multiselect(key="search.fields").value == ["thought", "output"]
    assert shared.number_input(key="search.limit").value == 5
    assert "5 hit(s) in 1 episode(s) (the limit" in page_text.of(shared)
    # Back to the defaults: out of the URL again.
    at.toggle(key="search.regex").set_value(False).run()
    at.multiselect(key="search.fields").set_value(list(search.FIELDS)).run()
    at.number_input(key="search.limit").set_value(100).run()
    assert set(at.query_params) == {"run", "q", "case"}


def test_bad_options_in_the_url_are_left_out_with_a_message(runs, app):
    at = app("search", run="run-a", q="COMPLETE_TASK_AND_SUBMIT", regex="yes", case="1", limit="lots",
             **{"in": ["command", "nonsense"]})
    assert not at.exception
    shown = page_text.of(at)
    assert "Left out `regex=yes` of the link" in shown.replace("\\", "")
    assert "Left out `limit=lots` of the link" in shown.replace("\\", "")
    assert "Left out `in=nonsense` of the link" in shown.replace("\\", "")
    assert not at.toggle(key="search.regex").value and at.toggle(key="search.case").value
    assert at.multiselect(key="search.fields").value == ["command"]
    assert at.number_input(key="search.limit").value == 100
    assert dict(at.query_params) == {"run": "run-a", "q": "COMPLETE_TASK_AND_SUBMIT", "case": "1", "in": "command"}
    assert "3 hit(s) in 3 episode(s)" in shown


def test_a_hit_opens_its_episode_without_the_query(runs, app):
    at = app("search", run="run-a", q="COMPLETE_TASK_AND_SUBMIT", regex="1")
    link = at.get("page_link")[0].proto
    assert "q=" not in link.query_string and "regex=" not in link.query_string
    _go(at, "episode", **dict(urllib.parse.parse_qsl(link.query_string)))
    assert not at.exception
    assert "q" not in at.query_params and "regex" not in at.query_params
    assert at.query_params["episode"] in link.query_string


def test_a_link_to_an_expression_that_backtracks_returns_within_the_budget(tmp_path, monkeypatch, app):
    """``(a+)+$`` over 27 letters a before a "!" takes a backtracking engine about 2**27 steps (seconds, doubling
    with each letter, the server held all along): the page answers within its budget and says the run was
    searched."""
    synthetic.write_output_run(tmp_path / "runs" / "letters", "a" * 27 + "!")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ARES_VIEWER_SEARCH_SECONDS", "2")
    started = time.monotonic()
    at = app("search", run="letters", regex="1", q="(a+)+$")
    assert time.monotonic() - started < 6
    assert not at.exception
    assert "0 hit(s) in 0 episode(s) · searched all 1 file(s)" in page_text.of(at)


def test_an_expression_re2_does_not_take_says_why(runs, app):
    at = app("search", run="run-a", regex="1", q="(?<!THOUGHT: )Step")
    assert not at.exception
    shown = [e.value.replace("\\", "") for e in at.error]  # the message is escaped markdown
    assert any("no lookarounds" in e and "(?<!THOUGHT: )Step" in e for e in shown)


def test_an_expression_too_costly_for_the_budget_is_stopped_with_it_and_named(tmp_path, monkeypatch, app):
    """RE2 takes ~25 s for this expression over 1 MB of a's and b's: the page stops it at its 2 s budget, says
    which text it did not finish, and the search can go on."""
    rng = random.Random(0)
    synthetic.write_output_run(tmp_path / "runs" / "letters", "".join(rng.choice("ab") for _ in range(1_000_000)))
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ARES_VIEWER_SEARCH_SECONDS", "2")
    started = time.monotonic()
    at = app("search", run="letters", regex="1", q="[ab]{500}c|a[ab]{500}c")
    assert time.monotonic() - started < 8
    assert not at.exception
    warnings = [w.value.replace("\\", "") for w in at.warning]
    assert any("step 1 output: the expression did not finish within the time budget" in w for w in warnings)
    assert "1 episode(s) searched in part" in page_text.of(at)
