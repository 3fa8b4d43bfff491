"""Where a run loses its tasks (``counterfactual.lost``) and its values as process-reward data in TRL's stepwise
layout, on the bundled demo run: the wrong-fix episode ships 16 branches (decisive step 2, the wrong fix)."""

from __future__ import annotations

import json
import shutil

import pytest
from test_counterfactual import DEMO, SOLVED, WRONG_FIX

from ares_viewer.counterfactual import branching, lost, process_rewards, values
from ares_viewer.runs.run import load_episode, open_run

FLAT = "e53da836-e11a-422f-ae90-9e861f7e5d0b"  # statskit, failed, 4 actions


def search_of(episode, curve):
    return branching.Search("unused", tuple(curve), values.decisive(curve), ())


def test_a_decisive_step_is_named_with_its_action_kind_files_and_link_and_no_change_is_never_given_a_step():
    wrong = load_episode(DEMO / f"{WRONG_FIX}.json")
    row = lost.row(wrong, branching.load(wrong), run_location=str(DEMO))
    assert (row["state"], row["decisive_step"], row["change"], row["sure"]) == ("decisive", 2, -1.0, True)
    assert (row["kind"], row["where"], row["position"], row["direction"]) == ("edit", "middle", 0.5, "drop")
    assert row["files"] == ["/testbed/textkit/slug.py"] and row["files_from"] == "snapshots"
    assert row["command"].startswith("sed -i") and row["link"].endswith(f"episode={WRONG_FIX}&step=2")
    flat = load_episode(DEMO / f"{FLAT}.json")
    same = [values.estimate(0, [0.0, 0.0]), values.terminal(4, 0.0)]
    row = lost.row(flat, search_of(flat, same))
    assert row["state"] == "no change" and row["decisive_step"] is None and row["kind"] is None
    assert row["finding"].startswith("No change found")
    solved = load_episode(DEMO / f"{SOLVED}.json")
    assert lost.row(solved, branching.load(solved))["state"] == "not searched"  # only its recorded reward


def test_the_run_counts_count_every_episode_once_and_never_give_a_step_to_one_without_a_change():
    run = open_run(DEMO)
    frame = lost.of_run(run)
    assert len(frame) == len(run.episode_ids) and set(frame["state"]) == {"decisive", "not searched"}
    parts = lost.summary(frame)
    kinds = parts["kinds"].set_index("kind")
    assert kinds.loc["edit", "lost (failed, drop)"] == 1 and kinds["lost (failed, drop)"].sum() == 1
    assert parts["positions"].set_index("where").loc["middle", "lost (failed, drop)"] == 1
    tasks = parts["tasks"].set_index("task_name")
    assert tasks.loc["textkit__slugify-accents", ["episodes", "decisive", "not searched"]].tolist() == [3, 1, 2]
    assert parts["made"].empty  # no solved episode was searched
    flat = load_episode(DEMO / f"{FLAT}.json")
    with_flat = lost.frame([load_episode(DEMO / f"{WRONG_FIX}.json"), flat])
    with_flat.loc[1, "state"] = "no change"  # as the stored search of a flat episode reads
    states = lost.summary(with_flat)["states"]
    assert states.set_index("state").loc["no change", "episodes"] == 1
    assert lost.summary(with_flat)["kinds"]["lost (failed, drop)"].sum() == 1  # no step for the flat one


@pytest.mark.parametrize(("command", "kind"), [
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff --cached", "submit"),
    ("rm -rf src/textkit", "delete"),
    ("sed -i 's/a/b/' textkit/slug.py", "edit"),
    ("cat > fix.py <<'EOF'\nprint(1)\nEOF", "edit"),
    ("pip install -e .", "install"),
    ("python3 -m pytest -q tests", "test run"),
    ("grep -rn slugify .", "search"),
    ("cat textkit/slug.py", "read"),
    ("python3 -c 'print(1)'", "run code"),
    ("echo hello", "other"),
    (None, "no command"),
])
def test_action_kinds(command, kind):
    assert lost.action_kind(command) == kind


def test_a_script_that_changes_files_is_an_edit_by_its_snapshots_and_deletions_only_are_a_delete():
    assert lost.action_kind("python3 fix.py", {"src/a.py": "modified"}) == "edit"
    assert lost.action_kind("python3 clean.py", {"src/a.py": "deleted"}) == "delete"


def test_the_stepwise_export_loads_with_datasets_in_trls_layout_with_values_beside_labels(installed, tmp_path):
    datasets = installed("datasets", "pip install datasets (the test extra)")
    run = tmp_path / "run"  # the demo run's wrong-fix episode and its shipped branches
    run.mkdir()
    shutil.copy(DEMO / f"{WRONG_FIX}.json", run)
    shutil.copytree(DEMO / ".branches" / WRONG_FIX, run / ".branches" / WRONG_FIX)
    episode = load_episode(run / f"{WRONG_FIX}.json")
    for suffix, builder in ((".jsonl", "json"), (".parquet", "parquet")):
        path = tmp_path / f"prm{suffix}"
        assert process_rewards.write_stepwise([episode], path) == 1
        loaded = datasets.load_dataset(builder, data_files=str(path), split="train")
        assert {"prompt", "completions", "labels"} <= set(loaded.column_names)
        [row] = list(loaded)
        assert row["steps"] == [1, 2, 3, 4] and row["labels"] == [True, False, False, False]
        assert row["values"] == [1.0, 0.0, 0.0, 0.0] and row["n"] == [4, 4, 4, 0]  # 4: the recorded reward
        assert row["completions"] == [episode.step(k).response for k in (1, 2, 3, 4)]
        assert isinstance(row["prompt"], str) and row["prompt"].startswith("system: ") and row["threshold"] == 0.5
        assert all(lo <= v <= hi for lo, v, hi in zip(row["low"], row["values"], row["high"], strict=True))
    with pytest.raises(ValueError, match="not in \\(0, 1\\]"):
        process_rewards.write_stepwise([episode], tmp_path / "x.jsonl", threshold=0)


def test_a_bisection_gap_splits_the_stepwise_rows_and_no_action_without_a_value_gets_a_label():
    wrong = load_episode(DEMO / f"{WRONG_FIX}.json")
    curve = [values.estimate(0, [1.0] * 2), values.estimate(2, [0.0] * 2), values.terminal(4, 0.0)]
    rows = process_rewards.stepwise_rows(wrong, search_of(wrong, curve), threshold=0.5)
    assert [r["steps"] for r in rows] == [[2], [4]] and [r["labels"] for r in rows] == [[False], [False]]
    assert rows[0]["prompt"] != rows[1]["prompt"]  # each run of actions with the context before it
    json.dumps(rows)  # plain JSON
