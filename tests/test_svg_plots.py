"""The Overview's charts drawn as SVG (``analysis.svg_plots``): what a reader sees in them, the links a click
follows, the "no reward" band, and file text kept as text. No Streamlit, no browser: the drawing is read as XML and
the page's HTML as the browser's parser reads it."""

from __future__ import annotations

import base64
import html.parser
import urllib.parse
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

import ares_viewer
from ares_viewer.analysis import svg_plots
from ares_viewer.model import colours
from testdata import synthetic

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def run(tmp_path):
    return ares_viewer.open_run(synthetic.write_mixed_run(tmp_path))


def link(episode_id: str) -> str:
    return "episode?" + urllib.parse.urlencode({"run": "r", "episode": episode_id, "step": 1})


def texts(chart: svg_plots.Chart) -> list[str]:
    """Every text of the drawing (which parses as SVG)."""
    return [t.text or "" for t in ET.fromstring(chart.svg).iter(f"{SVG}text")]


class _Page(html.parser.HTMLParser):
    """What a browser reads of :func:`svg_plots.html`: the title's text, the image, the links and tooltips."""

    def __init__(self):
        super().__init__()
        self.title, self.images, self.links, self.tips, self._in_title = "", [], [], [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._in_title = attrs.get("class") == "ares-chart-title"
        if tag == "img":
            self.images.append(attrs["src"])
        elif tag == "a":
            self.links.append(attrs)
        elif tag == "span":
            self.tips.append(attrs["title"])

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def page(chart: svg_plots.Chart) -> _Page:
    parsed = _Page()
    parsed.feed(svg_plots.html(chart, "overview.x"))
    return parsed


@pytest.mark.parametrize("make", [svg_plots.reward_over_time, svg_plots.reward_vs_actions])
def test_every_episode_is_a_point_linking_to_its_episode_with_its_figures_on_hover(run, make):
    chart = make(run.episodes, link=link)
    shown = page(chart)
    assert {a["data-episode"] for a in shown.links} == set(run.episodes["episode_id"])
    for a in shown.links:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(a["href"]).query)
        assert query == {"run": ["r"], "episode": [a["data-episode"]], "step": ["1"]}
        row = run.episodes.set_index("episode_id").loc[a["data-episode"]]
        assert a["title"].startswith(f"{row['task_name']}\n{row['outcome']} · ")
        assert f"{row['num_actions']} actions" in a["title"] and a["data-episode"] in a["title"]
    # the drawing is the image of the same SVG, and the title is text above it
    (image,) = shown.images
    assert base64.b64decode(image.split(",", 1)[1]).decode() == chart.svg
    assert shown.title == chart.title
    assert {"completed", "truncated", "errored, no reward (1)"} <= set(texts(chart))  # the legend


def test_a_point_that_covers_others_names_them_on_hover(run):
    """Episodes with the same reward and actions sit on one place: the point a click reaches says what it covers."""
    frame = run.episodes.copy()
    same = frame.index[frame["total_reward"].notna()][:3]
    assert len(same) == 3
    frame.loc[same, ["total_reward", "num_actions"]] = [1.0, 7]
    chart = svg_plots.reward_vs_actions(frame, link=link)
    titles = {a["data-episode"]: a["title"] for a in page(chart).links}
    # drawn in the order of the chart's marks: a later point lies over an earlier one
    first, second, third = (m.episode for m in chart.marks if m.episode in set(frame.loc[same, "episode_id"]))
    assert "other episode" not in titles[first]
    assert titles[second].endswith(f"over 1 other episode at this point: {first[:8]}")
    assert titles[third].endswith(f"over 2 other episodes at this point: {second[:8]}, {first[:8]}")
    alone = set(titles) - {first, second, third}
    assert alone and not any("at this point" in titles[e] for e in alone)


def test_points_sit_at_their_values_and_one_without_a_reward_on_its_band_never_at_0(run):
    chart = svg_plots.reward_vs_actions(run.episodes, link=link)
    frame = run.episodes.set_index("episode_id")
    marks = {m.episode: m for m in chart.marks}
    centre = {e: (m.x + m.width / 2, m.y + m.height / 2) for e, m in marks.items()}
    zero = [centre[e][1] for e in frame.index if frame.loc[e, "total_reward"] == 0]
    one = [centre[e][1] for e in frame.index if frame.loc[e, "total_reward"] == 1]
    assert len(set(zero)) == 1 and len(set(one)) == 1 and one[0] < zero[0]  # y grows downwards in SVG
    errored = frame.index[frame["outcome"] == "errored"][0]
    assert pd.isna(frame.loc[errored, "total_reward"])
    assert centre[errored][1] > zero[0]  # below the rewards, not at 0
    assert "no reward" in texts(chart)  # the band's tick
    by_actions = sorted(frame.index, key=lambda e: frame.loc[e, "num_actions"])
    assert sorted(centre, key=lambda e: centre[e][0]) == by_actions
    # drawn: a hollow ring in the errored outcome's colour on the band
    rings = [c for c in ET.fromstring(chart.svg).iter(f"{SVG}circle") if c.get("fill") == "none"]
    assert rings and rings[0].get("stroke") == colours.outcome_colour("errored")


def test_a_run_whose_episodes_without_a_reward_are_all_unscored_names_its_band_unscored(run):
    frame = run.episodes[run.episodes["outcome"] != "errored"].copy()
    frame.loc[frame.index[0], "total_reward"] = float("nan")  # a completed episode nobody scored
    chart = svg_plots.reward_vs_actions(frame, link=link)
    assert "unscored" in texts(chart) and "unscored (1)" in texts(chart)
    assert "no reward" not in texts(chart)


def test_reward_over_time_has_a_rolling_mean_of_the_rewards_only(run):
    chart = svg_plots.reward_over_time(run.episodes, link=link, window=2)
    assert chart.title == "Reward over time (rolling mean of the episodes with a reward)"
    assert "rolling mean (2)" in texts(chart) and "episode start (UTC)" in texts(chart)
    (line,) = ET.fromstring(chart.svg).iter(f"{SVG}polyline")
    assert len(line.get("points").split()) == 4  # the four episodes with a reward, not the errored one


def test_a_run_without_start_times_says_so_instead_of_empty_axes(run):
    chart = svg_plots.reward_over_time(run.episodes.assign(start_time=None), link=link)
    assert not chart.marks and any("start time" in t for t in texts(chart))


def test_the_histogram_counts_those_without_a_reward_in_its_title_with_each_bins_range_on_hover(run):
    bins = run.queries.reward_histogram()
    chart = svg_plots.reward_histogram(bins, unscored=0, failed=1)
    assert chart.title == "Reward distribution (1 failed without a reward, not shown)"
    assert {"reward", "episodes"} <= set(texts(chart))
    tips = page(chart).tips
    assert sum(int(t.split(": ")[1].split(" episodes")[0]) for t in tips) == 4
    assert all(", reward " in t and " to " in t for t in tips) and not any("errored" in t for t in tips)


def test_success_per_task_bars_and_labels(run):
    chart = svg_plots.success_by_task(*run.queries.per_task())
    assert chart.title == "Success rate per task"
    assert {"calc__calc-1", "calc__calc-2", "calc__calc-3", "1/2", "0/1", "success rate"} <= set(texts(chart))
    tips = page(chart).tips
    assert "calc__calc-1: 50% success (1/2)" in tips and "calc__calc-3: 0% success (0/1)" in tips


def test_file_text_is_escaped_in_the_drawing_and_the_page(run):
    hostile = '<script>alert(1)</script>"&'
    frame = run.episodes.assign(task_name=hostile)
    chart = svg_plots.reward_vs_actions(frame, link=link)
    assert "<script>" not in svg_plots.html(chart) and "<script>" not in chart.svg
    assert all(a["title"].startswith(hostile) for a in page(chart).links)  # read back as the text it was
    tasks = pd.DataFrame({"task_name": [hostile], "attempts": [1], "scored": [1], "successes": [1], "rate": [1.0]})
    drawn = svg_plots.success_by_task(tasks, 1)
    assert "<script>" not in drawn.svg and any(t.startswith("<script>") for t in texts(drawn))


def test_large_runs_bands_are_drawn_with_each_bins_figures_on_hover(run):
    chart = svg_plots.reward_bands(run.queries.reward_bands())
    assert chart.title == "Reward over time (the episodes with a reward)"
    assert {"10–90% of episodes", "mean reward", "reward"} <= set(texts(chart))
    assert len(list(ET.fromstring(chart.svg).iter(f"{SVG}polygon"))) == 1
    assert chart.marks and all(m.href is None and m.text.startswith("mean reward ") for m in chart.marks)
    frame = pd.DataFrame({"iteration": [0.0, 1.0, 0.0, 1.0], "split": ["train", "train", "test", "test"],
                          "episodes": [4, 4, 2, 2], "mean": [0.2, 0.6, 0.1, 0.5], "p10": [0, 0.2, 0, 0.1],
                          "p90": [0.5, 1, 0.3, 0.9]})
    bands = svg_plots.iteration_bands(frame)
    assert bands.title == "Reward over training iterations" and "iteration" in texts(bands)
    assert "train · iteration 1: mean reward 0.6 (4 rollouts)" in [m.text for m in bands.marks]


def test_training_rollouts_link_to_their_episodes_with_a_mean_per_iteration(run):
    frame = run.episodes.assign(iteration=[0, 0, 1, 1, 1], split="train")
    chart = svg_plots.reward_over_iterations(frame, link=link)
    linked = {m.episode for m in chart.marks if m.href}
    assert linked == set(frame.loc[frame["total_reward"].notna(), "episode_id"])
    assert {"train rollouts", "train mean"} <= set(texts(chart))
    rewarded = frame[frame["total_reward"].notna()]
    first = rewarded[rewarded["iteration"] == 0]["total_reward"]
    hover = f"train · iteration 0: mean reward {first.mean():.3g} ({len(first)} rollouts)"
    assert hover in [m.text for m in chart.marks]


def test_ticks_are_round_numbers_and_times():
    assert svg_plots.nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert svg_plots.nice_ticks(3, 47, 5) == [10, 20, 30, 40]
    ticks = svg_plots.time_ticks(1.7e9, 1.7e9 + 240)
    # 1.7e9 is 2023-11-14 22:13:20 UTC: four minutes get a tick each whole minute
    assert ticks == [(1.7e9 + 40 + 60 * k, f"22:{14 + k}") for k in range(4)]
