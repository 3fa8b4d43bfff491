"""The run overview in AppTest: figures, charts, filters, load errors, run picker."""

from __future__ import annotations

import pathlib

import demo_runs
import page_text
import pandas as pd

from testdata import synthetic


def metrics(at) -> dict[str, str]:
    return page_text.figures(at)


def test_opens_on_the_first_run_with_its_figures(runs, app):
    at = app()
    assert not at.exception
    shown = metrics(at)
    assert shown["Episodes"] == "5"
    assert shown["Success rate"] == "40%"  # 2 solved of 5
    assert at.query_params["run"] == "run-a"
    assert at.selectbox(key="app.run_choice").options == ["run-a", "run-b", "Other folder or URL…"]
    # Four reward charts, drawn on the server (no Plotly chart on the page), two of them points that open episodes.
    charts = page_text.charts(at)
    assert set(charts) == {"overview.dist", "overview.tasks", "overview.time", "overview.actions"}
    assert not at.get("plotly_chart")
    assert charts["overview.tasks"].title == "Success rate per task"
    for name in ("overview.time", "overview.actions"):
        assert {a["data-episode"] for a in charts[name].links} == set(runs["run-a"].values())
        assert all(a["href"].startswith("episode?run=run-a&episode=") and a["href"].endswith("&step=1")
                   for a in charts[name].links)
    assert "5 of 5 episodes" in page_text.of(at)


def test_filters_narrow_the_table(runs, app):
    at = app()
    at.multiselect(key="overview.outcomes").select("errored").run()
    assert "1 of 5 episodes" in page_text.of(at)
    at.multiselect(key="overview.outcomes").unselect("errored").run()
    at.text_input(key="overview.text").input(runs["run-a"]["failed"][:8]).run()
    assert "1 of 5 episodes" in page_text.of(at)
    at.text_input(key="overview.text").input("calc__calc-1").run()
    assert "3 of 5 episodes" in page_text.of(at)


def test_run_picker_switches_run_and_url(runs, app):
    at = app()
    at.selectbox(key="app.run_choice").select("run-b").run()
    assert metrics(at)["Episodes"] == "3"
    assert at.query_params["run"] == "run-b"


def test_corrupt_file_is_listed_and_the_rest_still_loads(runs, app, tmp_path):
    bad = demo_runs.write_corrupt(tmp_path / "runs" / "run-a")
    at = app()
    assert not at.exception
    assert metrics(at)["Episodes"] == "5"
    assert any("could not be read" in e.label for e in at.expander)
    assert bad in page_text.of(at)


def test_nonexistent_folder_gives_a_message_not_a_traceback(runs, app, tmp_path):
    at = app(run=str(tmp_path / "no-such-run"))
    assert not at.exception
    assert any("Cannot open the run" in e.value and "no such file or folder" in e.value for e in at.error)


def test_folder_without_episodes_says_so(runs, app, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.json").write_text('{"note": "not an episode"}')
    at = app(run=str(empty))
    assert not at.exception
    assert any("No episodes found" in w.value for w in at.warning)


def test_typed_location_opens_that_run(runs, app):
    at = app()
    at.selectbox(key="app.run_choice").select("Other folder or URL…").run()
    at.text_input(key="app.run_typed").input(runs["root"]["path"] + "/run-b").run()
    assert metrics(at)["Episodes"] == "3"
    assert at.query_params["run"] == runs["root"]["path"] + "/run-b"


def test_reload_picks_up_new_episodes(runs, app, tmp_path):
    at = app()
    assert metrics(at)["Episodes"] == "5"
    synthetic.write_episode(tmp_path / "runs" / "run-a", synthetic.episode_dict(seed=99, task_name="calc__calc-9"))
    at.run()
    assert metrics(at)["Episodes"] == "5"  # the opened run is cached...
    at.button(key="app.reload").click().run()
    assert metrics(at)["Episodes"] == "6"  # ...until the reader asks for the files again


def test_location_given_on_the_command_line_opens_first(runs, app, monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_RUN", runs["root"]["path"] + "/run-b")  # set by `ares-viewer app LOCATION`
    at = app()
    assert metrics(at)["Episodes"] == "3"
    assert at.text_input(key="app.run_typed").value == runs["root"]["path"] + "/run-b"


def test_failure_reasons_group_the_failed_episodes_and_pick_them_out(runs, app):
    at = app()
    assert not at.exception
    reasons = at.dataframe(key="overview.failures").value
    # run-a: one wrong answer (reward 0), one truncated, one errored; the solved ones are not listed.
    assert reasons["episodes"].sum() == 3
    assert {r.split(":")[0].split(",")[0] for r in reasons["reason"]} == {"completed", "truncated", "errored"}
    row = reasons.index[reasons["reason"].str.startswith("errored")][0]
    at.session_state["overview.failures"] = {"selection": {"rows": [int(row)], "columns": []}}
    at.run()
    assert not at.exception
    table = at.dataframe(key="overview.table").value
    assert table["episode_id"].tolist() == [runs["run-a"]["errored"]]
    assert "Only the 1 episode of the failure reason selected above." in page_text.of(at)


def test_unknown_values_in_the_episode_table_show_a_dash_not_none(runs, app):
    at = app()
    table = at.dataframe(key="overview.table")
    errored = table.value.set_index("episode_id").loc[runs["run-a"]["errored"]]
    assert pd.isna(errored["total_reward"])  # an errored episode has no reward
    # Streamlit draws a missing cell as "None" unless the table names what to draw instead.
    assert table.proto.placeholder == "–"


def test_overview_opens_at_slash_overview_as_well_as_at_the_root(runs, app):
    at = app()
    assert at.title[0].value == "Run overview"
    # The browser asks for a page by its URL path: "" at /, "overview" at /overview ("Page not found" if none).
    by_path = {info.get("url_pathname"): page_hash for page_hash, info in at._registered_pages.items()}
    assert "" in by_path and "overview" in by_path
    at.query_params["run"] = "run-b"
    at._page_hash = by_path["overview"]
    at.run()
    assert not at.exception
    assert at.title[0].value == "Run overview" and metrics(at)["Episodes"] == "3"
    assert at.query_params["run"] == "run-b"  # the link's view is kept


def test_reward_plots_leave_an_errored_episode_without_a_reward_off_the_reward_axis(runs, app):
    """The table shows "–" for the errored episode and the mean reward leaves it out; the plots agree."""
    at = app()
    errored = runs["run-a"]["errored"]
    assert metrics(at)["Mean reward"] == "0.5"  # of the four with a reward
    charts = page_text.charts(at)
    assert charts["overview.dist"].title == "Reward distribution (1 failed without a reward, not shown)"
    assert not any("errored" in tip for tip in charts["overview.dist"].tips)  # no bar for it
    for name, title in (("overview.time", "Reward over time"), ("overview.actions", "Reward vs number of actions")):
        chart = charts[name]
        assert chart.title.startswith(title)
        (point,) = [a for a in chart.links if a["data-episode"] == errored]  # still a point that opens it
        assert "no reward" in point["title"] and "errored, no reward (1)" in chart.texts
        rewarded = [a["top"] for a in chart.links if a["data-episode"] != errored]
        assert point["top"] > max(rewarded)  # on its band below the rewards (0 among them), not at 0
        assert "no reward" in chart.texts  # the band's tick
    assert ("The reward plots show the 4 episodes with a reward; the 1 without one (“–” in the table, left out of "
            "the mean reward) is left out of the reward axes") in page_text.of(at)


def test_a_run_folder_made_after_the_runs_were_listed_opens_at_once(runs, app):
    from testdata import synthetic

    assert not app(run="run-a").exception  # the runs folder is listed (and the list kept for a while)
    new = pathlib.Path(runs["root"]["path"]) / "run-new"
    new.mkdir()
    doc = synthetic.episode_dict(actions=2, seed=9)
    synthetic.write_episode(new, doc)
    at = app(run="run-new")
    assert not at.exception
    assert not [e for e in at.error if "no such" in e.value.lower()]
    assert page_text.figures(at)["Episodes"] == "1"
