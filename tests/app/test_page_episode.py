"""The episode page in AppTest: deep links, stepping, the prompt diff, lazy context, response diffs."""

from __future__ import annotations

import pathlib

import page_text

import ares_viewer
from testdata import synthetic


def open_step(app, runs, label="failed", step=3, run="run-a"):
    return app("episode", run=run, episode=runs[run][label], step=str(step))


def caption_of_step(at) -> str:
    return next(c.value for c in at.caption if c.value.startswith("step "))


def test_deep_link_opens_that_step(runs, app):
    at = open_step(app, runs, step=3)
    assert not at.exception
    assert caption_of_step(at).startswith("step 3 (MID)")
    assert at.query_params["episode"] == runs["run-a"]["failed"]
    assert at.query_params["step"] == "3"
    assert at.selectbox(key="episode.pick").value == runs["run-a"]["failed"]
    assert at.slider(key="episode.slider").value == 3


def test_prompt_diff_shows_the_messages_new_since_the_previous_call(runs, app):
    at = open_step(app, runs, step=3)
    shown = page_text.of(at)
    # Action 3 answered a context that grew by action 2's response and its result.
    assert "**assistant** · " in shown and "**user** · " in shown
    assert "THOUGHT: Step 2." in shown
    assert "<returncode>" in shown
    assert "THOUGHT: Step 1." not in shown  # older context is not repeated
    assert "Earlier context was dropped" not in shown


def test_stepping_with_buttons_and_slider_updates_view_and_url(runs, app):
    at = open_step(app, runs, step=3)
    at.button(key="episode_next").click().run()
    assert caption_of_step(at).startswith("step 4")
    assert at.query_params["step"] == "4"
    at.button(key="episode_prev").click().run()
    at.button(key="episode_prev").click().run()
    assert at.query_params["step"] == "2"
    at.button(key="episode_last").click().run()
    assert caption_of_step(at).startswith("step 6 (LAST)")
    assert at.button(key="episode_next").disabled
    at.slider(key="episode.slider").set_value(1).run()
    assert at.query_params["step"] == "1"
    at.button(key="episode_first").click().run()
    assert caption_of_step(at).startswith("step 0 (FIRST)")
    assert "First request" in page_text.of(at)


def test_dropped_context_is_marked_and_shown_on_request(runs, app):
    at = open_step(app, runs, label="truncated", step=9)
    warning = next(w.value for w in at.warning if "dropped or rewritten" in w.value)
    assert "message(s) of the previous context are gone" in warning
    before = len(page_text.blocks(at))
    at.toggle(key="episode.show_dropped").set_value(True).run()
    assert len(page_text.blocks(at)) > before
    assert "THOUGHT: Step 1." in page_text.of(at)  # the old exchange that was dropped


def test_dropped_and_new_messages_are_headed_apart(runs, app):
    at = open_step(app, runs, label="truncated", step=9)
    at.toggle(key="episode.show_dropped").set_value(True).run()
    markdown = [m.value for m in at.markdown]  # in page order
    dropped = next(i for i, m in enumerate(markdown) if m.startswith("##### Dropped messages (13, numbered as in"))
    new = next(i for i, m in enumerate(markdown) if m.startswith("##### New messages (1)"))
    # The dropped messages sit under their heading, the new ones under theirs, each numbered by its place in the
    # context it was in (the previous call's, this call's), as "Full context" numbers them.
    headers = [i for i, m in enumerate(markdown) if " chars" in m and m.startswith("message ")]
    assert len([i for i in headers if dropped < i < new]) == 13
    assert len([i for i in headers if i > new]) == 1
    episode = ares_viewer.open_run(pathlib.Path(runs["root"]["path"]) / "run-a").episode(runs["run-a"]["truncated"])
    change = episode.context_change(9)
    where = episode.context(9).index(change.new[0]) + 1
    assert markdown[headers[-1]].startswith(f"message {where} · ")
    previous = episode.previous_context(9)
    assert [int(markdown[i].split()[1]) for i in headers if dropped < i < new] == sorted(
        n for n, m in enumerate(previous, start=1) if any(m is d for d in change.dropped))


def test_a_long_full_context_is_paged_and_every_message_is_reachable(runs, app):
    doc = synthetic.episode_dict(task_name="calc__calc-9", actions=40, seed=21)
    folder = pathlib.Path(runs["root"]["path"]) / "run-long"
    folder.mkdir()
    synthetic.write_episode(folder, doc)
    at = app("episode", run="run-long", episode=doc["episode_id"], step="36")
    at.toggle(key="episode.show_context").set_value(True).run()
    picker = next(s for s in at.selectbox if s.key.startswith("episode.context_page."))
    assert picker.label == "Messages (71 in all)"
    assert picker.options == ["messages 1–11", "messages 12–71 (the most recent)"]
    shown = page_text.of(at)
    # The most recent 60 first, numbered by their place in the context; the task is on the first page.
    assert "message 12 · **assistant**" in shown and "message 71 · **user**" in shown
    assert "message 11 · " not in shown and "Consider the following PR description" not in shown
    picker.select_index(0).run()
    shown = page_text.of(at)
    assert "message 1 · **user**" in shown and "message 11 · " in shown and "message 12 · " not in shown
    assert "Consider the following PR description for calc__calc-9" in shown


def test_full_context_and_system_prompt_are_sent_only_when_asked(runs, app):
    at = open_step(app, runs, step=5)
    assert "THOUGHT: Step 1." not in page_text.of(at)
    assert "You are a helpful assistant" not in page_text.of(at)
    at.toggle(key="episode.show_context").set_value(True).run()
    assert "THOUGHT: Step 1." in page_text.of(at)
    at.toggle(key="episode.show_system").set_value(True).run()
    assert "You are a helpful assistant" in page_text.of(at)


def test_response_diff_against_previous_step_and_another_episode(runs, app):
    at = open_step(app, runs, step=3)
    diffs = [h.proto.body for h in at.get("html") if "step 3" in h.proto.body]
    assert diffs and "step 2" in diffs[0]
    at.radio(key="episode.diff_against").set_value("another episode").run()
    # The shortest solved attempt at the same task first: the comparison that explains a failure; the same
    # task's other attempts follow it.
    picker = at.selectbox(key="episode.other")
    assert picker.value == runs["run-a"]["solved"]
    assert picker.options[:2] == [picker.format_func(runs["run-a"][k]) for k in ("solved", "solved2")]
    picker.select(runs["run-a"]["solved2"]).run()
    assert at.query_params["other"] == runs["run-a"]["solved2"]
    diffs = [h.proto.body for h in at.get("html") if f"{runs['run-a']['solved2'][:8]} step 3" in h.proto.body]
    assert diffs


def test_the_response_diff_defaults_to_an_attempt_that_reaches_the_step(runs, app):
    ids = runs["run-a"]
    # The best other attempt (solved, 5 actions) has no step 6; the other solved one (7 actions) has.
    at = app("episode", run="run-a", episode=ids["failed"], step="6", diff="other")
    assert at.selectbox(key="episode.other").value == ids["solved2"]
    assert "That episode has no step 6." not in page_text.of(at)
    assert [h for h in at.get("html") if f"{ids['solved2'][:8]} step 6" in h.proto.body]
    # No other attempt at calc__calc-2 at all, and none in the run reaches step 9: said so.
    at = app("episode", run="run-a", episode=ids["truncated"], step="9", diff="other")
    assert "No other attempt at this task reaches step 9: pick an episode to compare with." in page_text.of(at)


def test_errored_episode_shows_its_error(runs, app):
    at = open_step(app, runs, label="errored", step=1)
    assert any("TimeoutError" in e.value for e in at.error)


def test_an_unknown_step_or_episode_says_so_instead_of_opening_another(runs, app):
    at = open_step(app, runs, step=999)
    assert not at.exception
    assert any("This episode has no step 999: its steps are 0 to 6." in e.value for e in at.error)
    assert not [c for c in at.caption if c.value.startswith("step ")]  # no other step is shown as if asked for
    assert at.query_params["step"] == "999"
    at = open_step(app, runs, step="two")
    assert any("“two” is not a step number" in e.value for e in at.error)
    at = app("episode", run="run-a", episode="no-such-episode", step="2")
    assert not at.exception
    assert any("The run has no episode “no-such-episode”" in e.value for e in at.error)
    assert at.query_params["episode"] == "no-such-episode"
    assert not [c for c in at.caption if c.value.startswith("step ")]
    at.selectbox(key="episode.pick").select(runs["run-a"]["solved"]).run()
    assert at.query_params["episode"] == runs["run-a"]["solved"]
    assert caption_of_step(at).startswith("step 1 (")


def test_the_step_list_shows_every_step_and_filters_the_failed_ones(runs, app):
    at = open_step(app, runs, step=3)
    frame = page_text.step_list(at)
    assert list(frame["step"]) == list(range(7))
    assert frame.loc[5, "rc"] == "1" and frame.loc[6, "kind"] == "LAST"
    assert frame.loc[0, "command"] == "(first request)"
    at.toggle(key="episode.failed_only").set_value(True).run()
    assert at.query_params["failed"] == "1"
    assert all(rc not in ("", "0") for rc in page_text.step_list(at)["rc"])
    assert "Step 3 did not fail: it is not in this list." in page_text.of(at)
    # A reload of that link keeps the filter.
    at = app("episode", run="run-a", episode=runs["run-a"]["failed"], step="3", failed="1")
    assert at.toggle(key="episode.failed_only").value


def test_next_and_previous_failed_step_buttons_move_between_failures(runs, app):
    at = open_step(app, runs, step=1)
    failures = [int(i) for i in page_text.step_list(at).query("rc not in ['', '0', '–']")["step"]]
    assert failures and failures[0] > 1
    at.button(key="episode_next_failed").click().run()
    assert at.query_params["step"] == str(failures[0])
    at.button(key="episode_last").click().run()
    at.button(key="episode_prev_failed").click().run()
    assert at.query_params["step"] == str(failures[-1])


def test_the_response_comes_before_the_prompt_and_long_texts_collapse(runs, app):
    at = open_step(app, runs, step=3)
    shown = [m.value for m in at.markdown]
    assert shown.index("#### Response") < next(i for i, v in enumerate(shown) if v.startswith("#### Output"))
    assert next(i for i, v in enumerate(shown) if v.startswith("#### Output")) < shown.index(
        "#### Prompt: new since the previous call")


def test_transcript_mode_shows_every_step_and_is_in_the_url(runs, app):
    at = open_step(app, runs, step=3)
    at.segmented_control(key="episode.view").set_value("Transcript").run()
    assert at.query_params["view"] == "transcript"
    shown = page_text.of(at)
    assert all(f"**Step {k}** (" in shown for k in range(7))
    assert "THOUGHT: Step 1." in shown and "THOUGHT: Step 5." in shown
    at = app("episode", run="run-a", episode=runs["run-a"]["failed"], step="3", view="transcript")
    assert "**Step 6** (LAST)" in page_text.of(at)
    at.button(key="episode.open.4").click().run()
    assert "view" not in at.query_params and at.query_params["step"] == "4"
    assert caption_of_step(at).startswith("step 4 (")


def test_the_response_diff_target_is_in_the_url(runs, app):
    ids = runs["run-a"]
    at = app("episode", run="run-a", episode=ids["failed"], step="3", diff="other", other=ids["solved"])
    assert at.radio(key="episode.diff_against").value == "another episode"
    assert at.selectbox(key="episode.other").value == ids["solved"]
    at.radio(key="episode.diff_against").set_value("previous step").run()
    assert "diff" not in at.query_params


def test_the_last_step_says_why_the_reward_is_zero(runs, app):
    at = open_step(app, runs, step=6)
    shown = page_text.of(at)
    assert "#### Why this reward" in shown
    # The words are escaped for markdown, so they show as written.
    # no verifier run is recorded: the page never claims the verifier's tests failed
    assert "completed, reward 0: the reward came with the episode's last step" in page_text.shown(shown)
    assert "tests failed" not in page_text.shown(shown)
    assert "The recording holds no verifier output" in shown


def test_page_change_keeps_the_view_in_the_url(runs, app):
    at = open_step(app, runs, step=4)
    at.switch_page("views/overview/overview.py").run()
    assert at.query_params["episode"] == runs["run-a"]["failed"]
    at.switch_page("views/episode/episode.py").run()
    assert caption_of_step(at).startswith("step 4")


def test_episode_file_broken_after_indexing_is_a_message(runs, app, tmp_path):
    at = open_step(app, runs, label="solved", step=2)
    path = next((tmp_path / "runs" / "run-a").glob(f"{runs['run-a']['solved2']}.json"))
    path.write_text("{ truncated")
    at = open_step(app, runs, label="solved2", step=2)
    assert not at.exception
    assert any("Cannot read this episode" in e.value for e in at.error)


def test_worth_a_look_buttons_go_to_the_failed_command_and_the_end(runs, app):
    at = open_step(app, runs, step=1)
    buttons = {b.key: b.label for b in at.button if b.key and b.key.startswith("episode.landmark.")}
    # The failed attempt's action 5 exits with 1; action 6 is its last.
    assert list(buttons) == ["episode.landmark.5", "episode.landmark.6"]
    assert page_text.shown(buttons["episode.landmark.5"]).startswith("step 5: first failed command (rc 1) · `")
    assert buttons["episode.landmark.6"].startswith("step 6: last action")
    at.button(key="episode.landmark.5").click().run()
    assert caption_of_step(at).startswith("step 5 ") and at.query_params["step"] == "5"
    assert "#### Output :red-badge[return code 1]" in page_text.of(at)
    at.button(key="episode.landmark.6").click().run()
    assert caption_of_step(at).startswith("step 6 ") and at.query_params["step"] == "6"


def test_a_failed_attempt_links_to_a_solved_attempt_at_the_same_task(runs, app):
    ids = runs["run-a"]
    at = app("episode", run="run-a", episode=ids["failed"], step="2")
    assert not at.exception
    [link] = [link.proto for link in at.get("page_link") if link.proto.page == "compare"]
    query = dict(part.split("=", 1) for part in link.query_string.split("&"))
    assert query["episode"] == ids["failed"] and query["other"] in {ids["solved"], ids["solved2"]}
    assert link.label == f"Compare with a solved attempt at this task ({query['other'][:8]}, reward 1)"
    # A solved attempt is offered another one; an episode alone at its task, nothing.
    at = app("episode", run="run-a", episode=ids["solved"], step="1")
    assert [link.proto.label[:31] for link in at.get("page_link") if link.proto.page == "compare"] == [
        "Compare with another attempt at"]
    at = app("episode", run="run-a", episode=ids["truncated"], step="1")
    assert not [link for link in at.get("page_link") if link.proto.page == "compare"]


def _timeline_mark(at) -> set[int]:
    """The steps the step timeline shades as the current one (its drawing, as the page sends it)."""
    import json
    import re

    [chart] = [e for e in at.get("bidi_component") if e.proto.component_name == "ares_viewer.step_timeline"]
    return {int(k) for k in re.findall(r'data-current-step="(\d+)"', json.loads(chart.proto.json)["svg"])}


def test_the_step_timeline_shades_the_current_step_and_follows_stepping(runs, app):
    at = open_step(app, runs, step=3)
    assert _timeline_mark(at) == {3}
    at.button(key="episode_next").click().run()
    assert _timeline_mark(at) == {4}
    at.button(key="episode_prev").click().run()
    at.button(key="episode_prev").click().run()
    assert _timeline_mark(at) == {2}


def test_the_step_list_rc_column_holds_its_marks_whole(runs, app):
    at = app("episode", run="run-a", episode=runs["run-a"]["solved"], step="1")
    marks = page_text.step_list(at)["rc"]
    # The solved last step: its submission's return code is not in the file, then its reward ("– · re" when cut).
    assert "– · reward 1" in set(marks)


def test_the_transcript_chart_shades_the_selected_step(runs, app):
    at = app("episode", run="run-a", episode=runs["run-a"]["failed"], step="2", view="transcript")
    assert at.segmented_control(key="episode.view").value == "Transcript"
    assert _timeline_mark(at) == {2}
    at.segmented_control(key="episode.view").set_value("Step").run()
    at.button(key="episode_next").click().run()
    at.segmented_control(key="episode.view").set_value("Transcript").run()
    assert at.query_params["step"] == "3"
    assert _timeline_mark(at) == {3}


def test_an_unknown_duration_is_a_dash_with_no_unit_dangling_after_it(tmp_path, monkeypatch, app):
    from testdata import synthetic

    (tmp_path / "runs" / "open").mkdir(parents=True)
    doc = synthetic.episode_dict(ending="incomplete", actions=2, seed=3)
    doc["start_time"] = None  # nothing says when it started: its duration is unknown
    synthetic.write_episode(tmp_path / "runs" / "open", doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app("episode", run="open", episode=doc["episode_id"], step="1")
    assert not at.exception
    assert page_text.figures(at)["Duration"] == "–"  # before: "– s"
    assert "– s" not in page_text.of(at)


def test_a_response_with_no_command_is_shown_once(tmp_path, monkeypatch, app):
    from testdata import synthetic

    (tmp_path / "runs" / "talk").mkdir(parents=True)
    doc = synthetic.episode_dict(actions=3, seed=4)
    words = "I think the bug is in the parser, but let me explain before running anything at all."
    doc["steps"][2]["action"]["data"][0]["content"] = words
    synthetic.write_episode(tmp_path / "runs" / "talk", doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app("episode", run="talk", episode=doc["episode_id"], step="2")
    assert not at.exception
    assert "No single bash command" in page_text.of(at)
    assert [c.value for c in page_text.blocks(at)].count(words) == 1  # before: the thought, then the same text again


def test_an_episode_with_no_action_shows_the_task_it_was_given(tmp_path, monkeypatch, app):
    from testdata import synthetic

    (tmp_path / "runs" / "zero").mkdir(parents=True)
    doc = synthetic.episode_dict(actions=0, ending="incomplete", seed=2)
    synthetic.write_episode(tmp_path / "runs" / "zero", doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app("episode", run="zero", episode=doc["episode_id"])
    assert not at.exception
    task = doc["steps"][0]["observation"]["messages"][0]["content"]
    assert task[:60] in page_text.of(at)  # before: "First request" above nothing


def test_an_errored_episode_leads_with_its_root_cause_and_keeps_the_traceback_a_click_away(tmp_path, monkeypatch, app):
    from ares_viewer.recorder import episode_file
    from testdata import synthetic

    record = episode_file.error_record(synthetic.docker_died_error())
    (tmp_path / "runs" / "died").mkdir(parents=True)
    doc = synthetic.episode_dict(actions=2, ending="errored", seed=6)
    doc["error"] = record
    synthetic.write_episode(tmp_path / "runs" / "died", doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app("episode", run="died", episode=doc["episode_id"], step="1")
    assert not at.exception
    (error,) = at.error
    # before: only "RuntimeError: Code agent task failed", the wrapper
    assert "root cause is ConnectionError: 409 Client Error" in page_text.shown(error.value)
    assert "the infrastructure's" in error.value and "(the file's `error`, its `cause` chain)" in error.value
    (chain,) = [e for e in at.expander if e.label.startswith("The chain of 3 errors")]
    assert any("container is not running" in c.value for c in page_text.blocks(chain))  # the traceback


def test_the_step_list_shades_the_current_step_alone_and_follows_stepping(runs, app):
    at = open_step(app, runs, step=3)
    assert page_text.step_list_marks(at) == (3, [])
    at.button(key="episode_next").click().run()
    assert page_text.step_list_marks(at) == (4, [])


def test_a_press_with_the_slider_not_yet_moved_goes_from_the_current_step(runs, app):
    # Two fast "Next" presses: the second reaches the server while the slider still shows the step before the first
    # (it sends that value with the press). The press moves from the step the page is on, and the slider's stale
    # value does not take the view back.
    at = open_step(app, runs, step=3)
    at.button(key="episode_next").click().run()
    assert at.query_params["step"] == "4"
    at.slider(key="episode.slider").set_value(3)
    at.button(key="episode_next").click().run()
    assert at.query_params["step"] == "5"
    assert caption_of_step(at).startswith("step 5")
    assert at.slider(key="episode.slider").value == 5
    at.slider(key="episode.slider").set_value(5)
    at.button(key="episode_prev").click().run()
    assert at.query_params["step"] == "4"
    # The slider alone still moves the view.
    at.slider(key="episode.slider").set_value(1).run()
    assert at.query_params["step"] == "1"
