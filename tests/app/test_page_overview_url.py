"""The run overview's table in the URL: filters, sorting, page and failure reason survive a reload, a shared link
and a visit to another page; what a link names that the run lacks is left out with a caption."""

from __future__ import annotations

import conftest
import page_text
from streamlit.testing.v1 import AppTest


def _episodes(at) -> list[str]:
    return at.dataframe(key="overview.table").value["episode_id"].tolist()


def _shown(at) -> str:
    return page_text.of(at).replace("\\", "")  # markdown escapes aside


def test_filters_and_sorting_are_in_the_url_and_a_shared_link_shows_the_same_table(runs, app):
    at = app()
    at.multiselect(key="overview.tasks_filter").select("calc__calc-1").run()
    at.multiselect(key="overview.outcomes").select("completed").run()
    at.slider(key="overview.reward").set_range(0.5, 1.0).run()
    at.text_input(key="overview.text").input("calc").run()
    at.selectbox(key="overview.sort").select("num_actions").run()
    at.toggle(key="overview.descending").set_value(True).run()
    solved = [runs["run-a"]["solved2"], runs["run-a"]["solved"]]  # 7 actions, then 5
    assert _episodes(at) == solved
    link = dict(at.query_params)
    assert link == {"run": "run-a", "task": "calc__calc-1", "outcome": "completed", "reward": "0.5..1.0",
                    "contains": "calc", "sort": "num_actions", "desc": "1"}
    shared = app(**link)
    assert not shared.exception
    assert _episodes(shared) == solved
    assert shared.selectbox(key="overview.sort").value == "num_actions"
    assert shared.slider(key="overview.reward").value == (0.5, 1.0)
    # Back to the defaults: out of the URL again.
    for key in ("overview.tasks_filter", "overview.outcomes"):
        at.multiselect(key=key).set_value([]).run()
    at.slider(key="overview.reward").set_range(0.0, 1.0).run()
    at.text_input(key="overview.text").input("").run()
    at.selectbox(key="overview.sort").select("run order").run()
    at.toggle(key="overview.descending").set_value(False).run()
    assert dict(at.query_params) == {"run": "run-a"}
    assert len(_episodes(at)) == 5


def test_the_filters_come_back_after_another_page_and_stay_out_of_its_url(runs, app):
    at = app(run="run-a", outcome="errored", sort="total_reward")
    assert _episodes(at) == [runs["run-a"]["errored"]]
    at.query_params.clear()
    at.query_params.update({"run": "run-a", "episode": runs["run-a"]["errored"], "step": "1"})
    at.switch_page("views/episode/episode.py").run()
    assert not at.exception
    assert "outcome" not in at.query_params and "sort" not in at.query_params
    at.query_params.clear()
    at.switch_page("views/overview/overview.py").run()  # the sidebar: no parameters
    assert _episodes(at) == [runs["run-a"]["errored"]]
    assert at.query_params["outcome"] == "errored" and at.query_params["sort"] == "total_reward"


def test_the_failure_reason_picked_is_in_the_url(runs, app):
    at = app()
    reasons = at.dataframe(key="overview.failures").value
    row = int(reasons.index[reasons["reason"].str.startswith("errored")][0])
    at.session_state["overview.failures"] = {"selection": {"rows": [row], "columns": []}}
    at.run()
    reason = at.query_params["reason"]
    assert reason == reasons.loc[row, "reason"]
    shared = app(run="run-a", reason=reason)
    assert _episodes(shared) == [runs["run-a"]["errored"]]
    assert "The link picked the reason" in _shown(shared)
    shared.button(key="overview.all_reasons").click().run()
    assert "reason" not in shared.query_params
    assert len(_episodes(shared)) == 5


def test_what_the_run_lacks_is_left_out_of_the_link_with_a_caption(runs):
    at = AppTest.from_file(conftest.MAIN, default_timeout=60)
    at.query_params.update(run="run-a", task=["calc__calc-1", "calc__calc-99"], outcome="exploded",
                           sort="no_such_column", desc="maybe", reward="high", page="7", reason="the moon fell")
    at.run()
    assert not at.exception
    shown = _shown(at)
    for left_out in ("task=calc__calc-99", "outcome=exploded", "sort=no_such_column", "desc=maybe", "reward=high",
                     "page=7", "reason=the moon fell"):
        assert f"Left out `{left_out}` of the link" in shown, left_out
    assert at.multiselect(key="overview.tasks_filter").value == ["calc__calc-1"]
    assert dict(at.query_params) == {"run": "run-a", "task": "calc__calc-1"}
    assert len(_episodes(at)) == 3


def test_sort_by_names_the_columns_as_the_table_headers_do(runs, app):
    at = app()
    sort = at.selectbox(key="overview.sort")
    assert {"reward", "actions", "rc≠0", "duration (s)", "task"} <= set(sort.options)
    assert not {"total_reward", "num_actions", "nonzero_returncodes", "duration_s"} & set(sort.options)
    sort.select("nonzero_returncodes").run()
    assert at.selectbox(key="overview.sort").value == "nonzero_returncodes"
    assert at.query_params["sort"] == "nonzero_returncodes"


def test_a_hand_written_link_may_name_a_column_as_the_table_does(runs, app):
    at = app(sort="reward", desc="1")
    assert at.selectbox(key="overview.sort").value == "total_reward"
    assert "Left out" not in _shown(at)
    rewards = at.dataframe(key="overview.table").value["total_reward"].dropna().tolist()
    assert rewards == sorted(rewards, reverse=True)
