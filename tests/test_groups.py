"""Groups of rollouts and the training figures, on the Tinker fixtures."""

from __future__ import annotations

import formats_fixtures as fx
import pandas as pd
import pytest

import ares_viewer
from ares_viewer.analysis import groups, plots
from testdata import synthetic


@pytest.fixture
def episodes():
    return ares_viewer.open_run(fx.TINKER).episodes


def test_summary_has_one_row_per_group_in_training_order(episodes):
    table = groups.summary(episodes)
    assert len(table) == 7 and table["rollouts"].sum() == 21
    math = table[table["group"].str.startswith("math-rl/")]
    assert math["iteration"].tolist() == [0, 0, 10, 10, 10, 10]
    row = table.set_index("group").loc["math-rl/it10/train/g1"]
    assert row["rollouts"] == 4 and row["mean_reward"] == pytest.approx((1 + 1 + 0 - 0.1) / 4)
    assert row["reward_spread"] == pytest.approx(1.1) and row["solved"] == 0.5
    # A group whose rollouts all scored the same teaches a group-relative learner nothing.
    assert table.set_index("group").loc["math-rl/it0/train/g0", "reward_spread"] == 0


def test_rollouts_and_group_of(episodes):
    members = groups.rollouts(episodes, "math-rl/it0/train/g1")
    assert members["traj_idx"].tolist() == [0, 1, 2, 3]
    assert groups.group_of(episodes, "math-rl/it0/train/g1/t2") == "math-rl/it0/train/g1"


def test_runs_without_groups(tmp_path):
    synthetic.write_run(tmp_path, 2, actions=2)
    frame = ares_viewer.open_run(tmp_path).episodes
    assert not groups.has_groups(frame)
    assert groups.summary(frame).empty and groups.group_of(frame, frame["episode_id"][0]) is None


def test_reward_over_iterations_has_a_mean_line_per_split(episodes):
    math = episodes[episodes["group"].str.startswith("math-rl/")]
    fig = plots.reward_over_iterations(math)
    names = [t.name for t in fig.data]
    assert names == ["test rollouts", "test mean", "train rollouts", "train mean"]
    train_mean = fig.data[3]
    assert list(train_mean.x) == [0.0, 10.0]
    assert list(train_mean.y) == pytest.approx([0.75, (3 + 1.9) / 8])
    assert set(fig.data[2].customdata) == set(math.loc[math["split"] == "train", "episode_id"])
    # Two training logs in one folder: one series per log and split.
    names = [t.name for t in plots.reward_over_iterations(episodes).data if t.name.endswith("mean")]
    assert names == ["guess-number · train mean", "math-rl · test mean", "math-rl · train mean"]


def test_group_rewards_bars_carry_episode_ids(episodes):
    members = groups.rollouts(episodes, "math-rl/it10/train/g1")
    fig = plots.group_rewards(members)
    assert list(fig.data[0].x) == ["traj 0", "traj 1", "traj 2", "traj 3"]
    assert list(fig.data[0].customdata) == members["episode_id"].tolist()
    assert fig.data[0].marker.color[3] == plots.OUTCOME_COLOURS["truncated"]


def test_sort_by_spread_puts_groups_that_teach_first(episodes):
    table = groups.summary(episodes)
    spread = groups.sort(table)
    assert list(spread["reward_spread"]) == sorted(table["reward_spread"], reverse=True)
    assert groups.sort(table, "training order")["group"].tolist() == table["group"].tolist()
    assert list(groups.sort(table, "mean reward")["mean_reward"]) == sorted(table["mean_reward"])
    with pytest.raises(ValueError):
        groups.sort(table, "colour")


def test_run_groups_asks_the_index_what_summary_says(episodes):
    run = ares_viewer.open_run(fx.TINKER)
    found = groups.RunGroups(run)
    assert found.exist()
    for order in groups.SORTS:
        expected = groups.sort(groups.summary(episodes), order)
        assert found.table(order)["group"].tolist() == expected["group"].tolist(), order
    pd.testing.assert_frame_equal(found.table("training order"), groups.summary(episodes), check_dtype=False)
    assert found.table(limit=2)["group"].tolist() == groups.sort(groups.summary(episodes))["group"].tolist()[:2]
    assert found.table(groups=["math-rl/it0/train/g1"])["rollouts"].tolist() == [4]
    assert found.totals() == {"groups": 7, "rollouts": 21, "uniform": int((groups.summary(episodes)["reward_spread"]
                                                                            == 0).sum())}
    assert found.rollouts("math-rl/it0/train/g1")["traj_idx"].tolist() == [0, 1, 2, 3]
    assert found.group_of("math-rl/it0/train/g1/t2") == "math-rl/it0/train/g1"
    assert found.group_of("no-such-episode") is None


def test_run_without_groups_has_no_run_groups(tmp_path):
    synthetic.write_run(tmp_path, 2, actions=2)
    found = groups.RunGroups(ares_viewer.open_run(tmp_path))
    assert not found.exist() and found.table().empty and found.totals()["groups"] == 0


def test_ares_attempts_at_one_task_are_a_group_when_the_format_records_none(tmp_path):
    import ares_viewer
    from ares_viewer.analysis import groups as groups_module
    from testdata import synthetic

    for seed, (task, reward) in enumerate([("t1", 1.0), ("t1", 0.0), ("t1", 0.0), ("t2", 1.0)]):
        synthetic.write_episode(tmp_path, synthetic.episode_dict(task_name=task, reward=reward, seed=seed, actions=2))
    found = groups_module.RunGroups(ares_viewer.open_run(tmp_path))
    assert found.key == groups_module.BY_TASK and found.exist()
    table = found.table()
    assert list(table["group"]) == ["t1"]  # t2 has one attempt: no group
    assert table["rollouts"].iloc[0] == 3 and table["reward_spread"].iloc[0] == 1.0
    assert found.totals() == {"groups": 1, "rollouts": 3, "uniform": 0}
    assert len(found.rollouts("t1")) == 3 and found.group_of(found.rollouts("t1").episode_id[0]) == "t1"
