"""Figures for runs and episodes: the traces a reader sees, and ids a click opens."""

from __future__ import annotations

import pathlib

import pandas as pd
import pytest

import ares_viewer
from ares_viewer import model
from ares_viewer.analysis import plots
from ares_viewer.model import colours
from testdata import synthetic


@pytest.fixture
def run(tmp_path):
    return ares_viewer.open_run(synthetic.write_mixed_run(tmp_path))


def scatter_ids(fig) -> set[str]:
    return {c for t in fig.data if t.type == "scatter" and t.customdata is not None for c in t.customdata}


@pytest.mark.parametrize("make", [plots.reward_over_time, plots.reward_vs_actions])
def test_every_episode_is_a_clickable_point(run, make):
    fig = make(run.episodes)
    assert scatter_ids(fig) == set(run.episodes["episode_id"])
    names = {t.name for t in fig.data}
    assert {"completed", "truncated", "errored, no reward (1)"} <= names


def test_points_sit_at_the_episode_values(run):
    fig = plots.reward_vs_actions(run.episodes)
    frame = run.episodes.set_index("episode_id")
    for trace in fig.data:
        for x, y, episode_id in zip(trace.x, trace.y, trace.customdata, strict=True):
            assert x == frame.loc[episode_id, "num_actions"]
            if pd.notna(frame.loc[episode_id, "total_reward"]):
                assert y == frame.loc[episode_id, "total_reward"]
            else:  # no reward: on the band below the rewards, not at 0
                assert y < 0 and trace.name.endswith("no reward (1)")


def test_reward_over_time_has_a_rolling_mean(run):
    fig = plots.reward_over_time(run.episodes, window=2)
    mean = next(t for t in fig.data if t.name.startswith("rolling mean"))
    # In start order, over the episodes with a reward: the errored one has none, so it is left out (as from the
    # mean reward), not counted as 0.
    assert list(mean.y) == pytest.approx([1.0, 0.5, 0.0, 0.5])


def test_success_rate_per_task(run):
    fig = plots.success_by_task(run.episodes)
    (bar,) = fig.data
    rates = dict(zip(bar.y, bar.x, strict=True))
    assert rates == {"calc__calc-1": 0.5, "calc__calc-2": 0.5, "calc__calc-3": 0.0}


def test_reward_distribution_counts_every_episode_with_a_reward(run):
    fig = plots.reward_distribution(run.episodes)
    assert sum(len(t.x) for t in fig.data) == len(run) - 1
    assert "(1 failed without a reward, not shown)" in fig.layout.title.text


def test_step_timeline_marks_failures_and_rewrites(tmp_path):
    doc = synthetic.episode_dict(actions=12, drop_context_at=5, seed=3)
    episode = ares_viewer.load_episode(synthetic.write_episode(tmp_path, doc))
    frame = episode.steps_frame()
    fig = plots.step_timeline(frame)
    bars = fig.data[0]
    assert list(bars.customdata) == list(range(1, 13))  # one bar per action, FIRST excluded
    failed = set(frame.loc[frame["returncode"].fillna(0) != 0, "index"])
    assert failed  # the synthetic episode has failing commands
    for index, colour in zip(bars.customdata, bars.marker.color, strict=True):
        assert (colour == plots._NONZERO_RC) == (index in failed)
    rewritten = set(frame.loc[frame["context_rewritten"], "index"])
    assert rewritten
    assert {shape.x0 for shape in fig.layout.shapes} == rewritten
    assert any(t.name == "reward" and list(t.customdata) == [12] for t in fig.data)


def test_step_timeline_shades_the_current_step_across_both_rows(tmp_path):
    episode = ares_viewer.load_episode(synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=6, seed=4)))
    fig = plots.step_timeline(episode.steps_frame(), selected=4)
    marks = [s for s in fig.layout.shapes if s.name == plots.CURRENT_STEP]
    assert {(s.x0, s.x1) for s in marks} == {(3.5, 4.5)} and {s.xref for s in marks} == {"x", "x2"}
    assert all(s.fillcolor and s.layer == "below" for s in marks)
    # Step 0 (the first request) has no bar, so no mark.
    first = plots.step_timeline(episode.steps_frame(), selected=0)
    assert not [s for s in first.layout.shapes if s.name == plots.CURRENT_STEP]


def test_a_long_episodes_timeline_is_light_to_redraw_on_each_step(tmp_path):
    """The timeline is drawn again on every j/k: at 200 steps its token lines carry no marker per step and its
    margins are fixed, so plotly draws it in one pass (104 -> 44 ms in Chromium, #33); a short one keeps its
    points."""
    long = ares_viewer.load_episode(synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=200, seed=4)))
    fig = plots.step_timeline(long.steps_frame(), selected=100)
    tokens = [t for t in fig.data if t.name in ("prompt tokens", "generated tokens")]
    assert len(tokens) == 2 and {t.mode for t in tokens} == {"lines"}
    axes = [fig.layout[name] for name in ("xaxis", "xaxis2", "yaxis", "yaxis2")]
    assert all(axis.automargin is False for axis in axes) and fig.layout.margin.l >= 60
    short = ares_viewer.load_episode(synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=6, seed=5)))
    fig = plots.step_timeline(short.steps_frame())
    assert {t.mode for t in fig.data if t.name == "prompt tokens"} == {"lines+markers"}


def test_two_runs_side_by_side(run):
    only_first_task = run.episodes[run.episodes["task_name"] == "calc__calc-1"]
    both = [("a", run.episodes), ("b", only_first_task)]
    dist = plots.compare_reward_distributions(both)
    assert [t.name for t in dist.data] == ["a", "b"]
    tasks = plots.compare_success_by_task(both)
    assert list(tasks.data[1].x) == ["calc__calc-1"]


def test_unscored_episodes_are_their_own_category_never_reward_0(run):
    frame = run.episodes.copy()
    row = frame.index[frame["outcome"] == "completed"][0]
    unscored_id = frame.loc[row, "episode_id"]  # a completed episode, its reward removed: nobody scored it
    frame.loc[row, "total_reward"] = float("nan")
    for make in (plots.reward_over_time, plots.reward_vs_actions):
        fig = make(frame)
        assert scatter_ids(fig) == set(frame["episode_id"])  # still clickable
        (band,) = [t for t in fig.data if t.name.startswith("unscored")]
        assert list(band.customdata) == [unscored_id] and band.name == "unscored (1)"
        # The band holds the errored episode too (it has no reward either): labelled "no reward".
        assert band.y[0] < 0 and "no reward" in fig.layout.yaxis.ticktext
        others = [t for t in fig.data if t is not band and t.customdata is not None]
        assert all(unscored_id not in list(t.customdata) for t in others)
    histogram = plots.reward_distribution(frame)
    assert sum(len(t.x) for t in histogram.data) == len(frame) - 2
    assert "(1 unscored, 1 failed without a reward, not shown)" in histogram.layout.title.text
    mean = next(t for t in plots.reward_over_time(frame, window=2).data if t.name.startswith("rolling mean"))
    assert len(mean.y) == len(frame) - 2
    only_unscored = frame[frame["outcome"] != "errored"]
    assert "unscored" in plots.reward_vs_actions(only_unscored).layout.yaxis.ticktext


def test_step_timeline_splits_model_and_command_time(tmp_path):
    import reasoning_fixtures as rf

    episode = ares_viewer.load_episode(rf.write(tmp_path)["ares"])
    fig = plots.step_timeline(episode.steps_frame())
    model_bar, command_bar = fig.data[0], fig.data[1]
    assert model_bar.name == "model seconds" and list(model_bar.y) == pytest.approx([2.0])
    assert command_bar.name == "command seconds" and list(command_bar.y) == pytest.approx([3.0])


def test_group_rewards_keep_unscored_rollouts_apart(run):
    frame = run.episodes.copy()
    row = frame.index[frame["outcome"] == "completed"][0]
    frame.loc[row, "total_reward"] = float("nan")
    (bars,) = plots.group_rewards(frame).data
    position = list(bars.customdata).index(frame.loc[row, "episode_id"])
    assert bars.y[position] is None or bars.y[position] != bars.y[position]  # no bar, not a bar at 0
    assert bars.text[position] == "unscored"


def test_group_rewards_mark_a_failure_without_a_reward_as_the_table_does(run):
    frame = run.episodes.copy()
    rows = frame.index[frame["outcome"] == "completed"][:2]
    frame.loc[rows[0], ["outcome", "total_reward"]] = ["error", float("nan")]
    frame.loc[rows[1], "total_reward"] = 1.0
    members = frame.loc[rows]
    fig = plots.group_rewards(members)
    (bars,) = fig.data
    assert list(bars.text) == ["no reward", "1"]  # not "0": the table shows a dash for it
    assert list(bars.y) == [0.0, 1.0]
    # It counts as 0 in the mean, as in the success rate.
    assert [a.text for a in fig.layout.annotations] == ["group mean 0.5"]


def test_reward_histogram_bars_span_their_bins_and_ticks_sit_on_edges(run):
    from ares_viewer.analysis import aggregate_plots

    bins = run.queries.reward_histogram()  # rewards 0 and 1: twenty bins 0.05 wide
    fig = aggregate_plots.reward_histogram(bins)
    for bar in fig.data:  # each bar covers its bin from its low edge, not a centre like 0.975 for a reward of 1
        assert bar.offset == 0
        assert list(bar.x) == pytest.approx(list(bins[bins["outcome"] == bar.name]["low"]))
        assert all(w == pytest.approx(0.05) for w in bar.width)
    assert "reward 0.95 to 1" in next(b for b in fig.data if b.name == "completed").customdata
    axis = fig.layout.xaxis
    assert list(axis.ticktext) == ["0", "0.2", "0.4", "0.6", "0.8", "1"]  # on bin edges, ends included
    assert list(axis.tickvals) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1]) and tuple(axis.range) == (0, 1)


def test_reward_histogram_of_one_reward_value_is_centred_on_it(tmp_path):
    from ares_viewer.analysis import aggregate_plots

    for seed in range(3):
        synthetic.write_episode(tmp_path, synthetic.episode_dict(task_name="calc__calc-1", reward=1.0, seed=seed))
    bins = ares_viewer.open_run(tmp_path).queries.reward_histogram()
    assert (bins["low"].tolist(), bins["high"].tolist()) == ([0.5], [1.5])
    axis = aggregate_plots.reward_histogram(bins).layout.xaxis
    assert list(axis.tickvals) == [1.0] and list(axis.ticktext) == ["1"]


def test_reward_over_time_legend_sits_above_the_plot_clear_of_the_axis_title(run):
    from ares_viewer.analysis import aggregate_plots

    for fig in (plots.reward_over_time(run.episodes), aggregate_plots.reward_bands(run.queries.reward_bands())):
        legend = fig.layout.legend
        # Below the plot (y < 0) it ran into the x axis title; above it, between the plot and the title.
        assert (legend.orientation, legend.yanchor) == ("h", "bottom") and legend.y >= 1
        assert fig.layout.title.yref == "container" and fig.layout.title.yanchor == "top"
        assert fig.layout.xaxis.title.text


def test_the_aggregate_reward_figures_leave_out_episodes_without_a_reward(run):
    """A run of any size: the errored episode has no reward ("–" in the table), so no figure puts it at 0."""
    asked = run.queries
    assert int(asked.reward_histogram()["episodes"].sum()) == 4
    assert "errored" not in set(asked.reward_histogram()["outcome"])
    bands = asked.reward_bands()
    assert int(bands["episodes"].sum()) == 4
    assert (bands["mean"] * bands["episodes"]).sum() / 4 == pytest.approx(run.stats()["mean_reward"])
    assert int(asked.actions_grid()["episodes"].sum()) == 4


def test_the_reward_star_sits_on_top_of_its_steps_bar_not_under_it(tmp_path):
    episode = ares_viewer.load_episode(synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=6, seed=4)))
    fig = plots.step_timeline(episode.steps_frame())
    bars = [t for t in fig.data if t.type == "bar"]
    top = {k: sum(b.y[list(b.customdata).index(k)] for b in bars) for k in bars[0].customdata}
    (star,) = [t for t in fig.data if t.name == "reward"]
    assert list(star.y) == [top[k] for k in star.customdata] and star.y[0] > 0  # before: y = 0, under the bar
    assert star.cliponaxis is False


def test_an_outcome_has_one_colour_in_figures_notebook_html_and_the_apps_badges(run):
    """An errored episode is the same red in the reward scatter and in its notebook card; every outcome has one."""
    assert set(colours.OUTCOME_COLOURS) == set(colours.OUTCOME_COLOUR_NAMES) == {o.value for o in model.Outcome}
    fig = plots.reward_vs_actions(run.episodes)
    shown = {t.name.split(",")[0]: t.marker.color for t in fig.data if t.customdata is not None}
    for outcome in ("completed", "truncated", "errored"):
        [episode_id] = run.episodes.loc[run.episodes["outcome"] == outcome, "episode_id"][:1]
        card = run.episode(episode_id)._repr_html_()
        assert f"color:{shown[outcome]};font-weight:600'>{outcome}<" in card


def test_the_step_timeline_hover_says_an_unknown_return_code_or_time_as_the_dash():
    """A command whose file records no return code, and a command time not recorded beside a model time: the
    hover says "–" (as every table and figure), never "<NA>", "None" or "0.0 s"."""
    sample = pathlib.Path(__file__).resolve().parent.parent / "sample_runs" / "demo-run"
    episode = ares_viewer.open_run(sample).episode("0b17f852-8687-4e04-a8c5-e078baf6b285")
    frame = episode.steps_frame()
    last = frame.index[-1]
    assert pd.isna(frame.loc[last, "returncode"]) and isinstance(frame.loc[last, "command"], str)
    frame.loc[last, "model_time"] = 1.5  # the model's time recorded, the command's not
    summary = plots.timeline_steps(frame)["summary"].iloc[-1]
    assert summary.startswith("step 62: 5.1 s (model 1.5 s, command –) · rc –\n"), summary
    assert not any(word in text for text in plots.timeline_steps(episode.steps_frame())["summary"]
                   for word in ("<NA>", "None", "nan"))
