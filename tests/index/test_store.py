"""The columnar index: rows from the fast Tinker reader equal the ordinary path's, reopening parses only what
changed, and the aggregate queries agree with the DataFrame they stand in for."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import formats_fixtures
import pandas as pd
import pytest

import ares_viewer
from ares_viewer import model
from ares_viewer.runs import sources
from ares_viewer.runs.index import _fast_tinker as fast_tinker
from ares_viewer.runs.index import builder, queries, store, table
from benchmarks import bench_scale
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parents[2]


def _frame(folder: pathlib.Path) -> pd.DataFrame:
    import duckdb

    parts = sorted(str(p) for p in (folder / "parts").glob("*.parquet"))
    return duckdb.sql(f"SELECT * EXCLUDE (_seq) FROM read_parquet({parts!r}, union_by_name = true) "
                      "ORDER BY path, _seq").df()  # run order: file, then line


def _both(files, tmp_path):
    fast_dir, ordinary_dir = tmp_path / "fast", tmp_path / "ordinary"
    taken, rest = fast_tinker.build(files, store.Store(fast_dir), threads=2)
    builder.summarize_batch(files, store.Store(ordinary_dir))
    return taken, rest, _frame(fast_dir) if taken else None, _frame(ordinary_dir)


def test_fast_tinker_rows_equal_the_ordinary_paths(tmp_path):
    run = tmp_path / "run"
    bench_scale.write_run(run, 300)  # one-turn and three-turn rollouts, some cut at the token limit
    formats_fixtures.copy_tree(formats_fixtures.TINKER, run / "fixtures")
    files = [f for f in sources.list_files(run) if "rollout_summaries" in f.path]
    taken, rest, fast, ordinary = _both(files, tmp_path)
    assert len(taken) == len(files) and not rest
    ordinary = ordinary[list(fast.columns)]
    pd.testing.assert_frame_equal(fast, ordinary, check_dtype=False)
    assert fast["context_rewrites"].sum() >= 0 and (fast["num_actions"] == 3).any()


@pytest.mark.parametrize("change", [
    lambda doc: doc.update(total_reward="1.0"),  # a number written as text: the ordinary path warns
    lambda doc: doc.update(group_idx="3"),
    lambda doc: doc.pop("traj_idx"),  # no trajectory index: the id falls back to the line number
    lambda doc: doc["steps"].append(7),  # a step that is not an object
])
def test_an_irregular_file_is_left_to_the_ordinary_path(tmp_path, change):
    records = formats_fixtures.lines(formats_fixtures.MATH_IT0)
    change(records[1])
    path = formats_fixtures.write_lines(tmp_path / "run" / "iteration_000001" / "train_rollout_summaries.jsonl",
                                        records)
    good = formats_fixtures.write_lines(tmp_path / "run" / "iteration_000002" / "train_rollout_summaries.jsonl",
                                        formats_fixtures.lines(formats_fixtures.MATH_IT0))
    taken, rest = fast_tinker.build(sources.list_files(tmp_path / "run"), store.Store(tmp_path / "ix"), threads=2)
    assert [f.path for f in rest] == [str(path)]
    assert [e.path for e in taken] == [str(good)]


def test_a_cut_off_last_line_is_the_ordinary_paths_error(tmp_path):
    path = tmp_path / "run" / "iteration_000000" / "train_rollout_summaries.jsonl"
    path.parent.mkdir(parents=True)
    data = formats_fixtures.MATH_IT0.read_bytes()
    path.write_bytes(data + data[:100])
    run = ares_viewer.open_run(tmp_path / "run")
    assert len(run) == len(formats_fixtures.lines(formats_fixtures.MATH_IT0))
    assert len(run.errors) == 1 and "truncated JSON" in run.errors[0].reason


def test_reopening_parses_only_changed_files_and_keeps_the_rest(tmp_path):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 6000)  # three files
    first = ares_viewer.open_run(run_dir)
    assert first.parsed_files == 3 and len(first) == 6000
    again = ares_viewer.open_run(run_dir)
    assert again.parsed_files == 0
    pd.testing.assert_frame_equal(again.episodes, first.episodes)
    changed = run_dir / "iteration_000001" / "train_rollout_summaries.jsonl"
    lines = changed.read_bytes().splitlines(keepends=True)
    changed.write_bytes(b"".join(lines[:500]))
    (run_dir / "iteration_000000" / "train_rollout_summaries.jsonl").unlink()
    after = ares_viewer.open_run(run_dir)
    assert after.parsed_files == 1
    assert len(after) == 2000 + 500
    assert after.episodes["path"].str.contains("iteration_000002").sum() == 2000
    ares_viewer.open_run(run_dir)
    target = ares_viewer.runs.run.index_update.store_for(str(run_dir))[0]
    live = {e.part for e in target.read_manifest().values() if e.part}
    assert 1 <= len(live) <= 3  # the kept file's partition and the changed file's; replaced ones are not referenced
    assert all(os.path.exists(target.part_path(p)) for p in live)


def test_queries_agree_with_the_dataframe(tmp_path):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 5000)
    run = ares_viewer.open_run(run_dir)
    frame = run.episodes
    stats = run.stats()
    assert stats["episodes"] == len(frame) == 5000
    assert stats["success_rate"] == pytest.approx((frame["total_reward"] > 0).mean())
    assert stats["outcomes"] == frame["outcome"].value_counts().to_dict()
    reasons = ares_viewer.runs.run.failure_reasons(frame).value_counts()
    failures = run.queries.failures()
    assert dict(zip(failures["reason"], failures["episodes"], strict=True)) == reasons.to_dict()

    filters = queries.Filters(outcomes=["truncated"], text="natalia")
    expected = frame[(frame["outcome"] == "truncated") & frame["task_name"].str.contains("Natalia")]
    assert run.queries.count(filters) == len(expected)
    page = run.queries.page(filters, sort="generated_tokens", direction="desc", offset=0, limit=7)
    assert page["generated_tokens"].tolist() == sorted(expected["generated_tokens"], reverse=True)[:7]
    assert run.queries.page(offset=4990, limit=100)["episode_id"].tolist() == frame["episode_id"].tolist()[4990:]

    hist = run.queries.reward_histogram()
    assert hist["episodes"].sum() == 5000 and len(hist) <= 20 * len(stats["outcomes"])
    bands = run.queries.reward_bands(bins=50)
    assert len(bands) == 50 and bands["episodes"].sum() == 5000
    weighted = (bands["mean"] * bands["episodes"]).sum() / 5000
    assert weighted == pytest.approx(frame["total_reward"].fillna(0).mean())
    sample = run.queries.sample(500)
    assert len(sample) == 500 and sample["episode_id"].is_unique
    per_iteration = run.queries.per_iteration()
    assert per_iteration["episodes"].tolist() == [2000, 2000, 1000]
    tasks, total = run.queries.per_task(limit=10)
    assert len(tasks) == 10 and total == frame["task_name"].nunique()


def test_lazy_relation_for_notebooks(tmp_path):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 100)
    run = ares_viewer.open_run(run_dir)
    solved = run.relation.filter("total_reward > 0").df()
    assert len(solved) == int((run.episodes.total_reward > 0).sum())
    by_iteration = run.query("SELECT iteration, avg(total_reward) r FROM episodes GROUP BY ALL").df()
    assert len(by_iteration) == 1
    assert json.loads(json.dumps(run.stats()))["episodes"] == 100


def test_an_episode_id_in_two_files_is_a_warning_and_both_stay_reachable(tmp_path):
    doc = synthetic.episode_dict(actions=2, seed=5)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = synthetic.write_episode(tmp_path / "a", doc)
    second = synthetic.write_episode(tmp_path / "b", doc)
    run = ares_viewer.open_run(tmp_path)
    assert len(run) == 2
    assert [(path, message.split(":")[0]) for path, message in run.warnings] == [
        (first, f"episode id {doc['episode_id']} appears in 2 files")]
    assert str(second) in run.warnings[0][1]
    # The first in run order keeps the id (both are named by it and equally long); the other gets a key of its own.
    other = f"{doc['episode_id']}@b/{pathlib.Path(second).name}"
    assert run.episode_ids == [doc["episode_id"], other]
    assert run.episode(doc["episode_id"]).path == first
    assert run.episode(other).path == second and run.episode(other).episode_id == other
    assert run.queries.page(queries.Filters(text="@b/"))["episode_id"].tolist() == [other]


def test_a_large_runs_repeated_ids_are_kept_with_its_index_until_its_files_change(tmp_path, monkeypatch):
    # A run read from its partitions (as one of a million rollouts is) keeps the answer to "which ids repeat"
    # beside them: a fresh process does not count every id again, and a new file means a new count.
    from ares_viewer.runs import run as run_module
    from ares_viewer.runs.index import joins

    monkeypatch.setattr(table, "IN_MEMORY_ROWS", 0)
    doc = synthetic.episode_dict(actions=2, seed=5)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        synthetic.write_episode(tmp_path / name, doc)
    ids = [doc["episode_id"], f"{doc['episode_id']}@b/{doc['episode_id']}.json"]
    first = ares_viewer.open_run(tmp_path)
    assert first.episode_ids == ids
    folder = pathlib.Path(first._store.folder)
    (kept,) = folder.glob("renamed-*.json")

    counted = []
    counting = joins.renamed
    monkeypatch.setattr(joins, "renamed", lambda *a: counted.append(a) or counting(*a))
    monkeypatch.setattr(run_module, "_TABLES", type(run_module._TABLES)(maxsize=8))  # as in a fresh process
    again = ares_viewer.open_run(tmp_path)
    assert again.episode_ids == ids and again.warnings == first.warnings and not counted

    kept.write_bytes(b"{not json")  # a damaged answer is worked out again, and kept anew
    monkeypatch.setattr(run_module, "_TABLES", type(run_module._TABLES)(maxsize=8))
    assert ares_viewer.open_run(tmp_path).episode_ids == ids and len(counted) == 1

    (tmp_path / "c").mkdir()
    synthetic.write_episode(tmp_path / "c", doc)
    grown = ares_viewer.open_run(tmp_path)
    assert len(grown) == 3 and len(counted) == 2
    assert any("appears in 3 files" in message for _, message in grown.warnings)
    assert len(list(folder.glob("renamed-*.json"))) == 1  # only the answer for the parts of now


def test_a_run_left_open_outlives_partitions_another_process_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(table, "IN_MEMORY_ROWS", 0)  # read from its partitions, as a large run is
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 4000)
    left_open = ares_viewer.open_run(run_dir)
    assert left_open.stats()["episodes"] == 4000
    monkeypatch.setattr(store, "_GRACE_S", -1)  # replaced partitions go at once
    (run_dir / "iteration_000001" / "train_rollout_summaries.jsonl").unlink()
    other = ares_viewer.open_run(run_dir)  # another reader (a CLI, the app of a colleague) updates the index
    assert len(other) == 2000
    assert left_open.queries.count() == 2000  # refreshed instead of failing on the files that are gone
    assert len(left_open) == 2000 and left_open.stats()["episodes"] == 2000


def _replace_partitions(run_dir: pathlib.Path) -> None:
    """Another reader updates the index after a file of the run was touched: the partitions are written anew and
    the old ones removed at once (``store._GRACE_S`` set below 0 by the caller)."""
    touched = run_dir / "iteration_000001" / "train_rollout_summaries.jsonl"
    stat = touched.stat()
    os.utime(touched, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert ares_viewer.open_run(run_dir).parsed_files == 1


def test_a_stream_carries_on_when_another_process_replaces_the_partitions_it_reads(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 6000)
    left_open = ares_viewer.open_run(run_dir)
    in_order = [row[0] for row in left_open.query("SELECT episode_id FROM episodes ORDER BY path, _seq").fetchall()]
    assert len(set(in_order)) == 6000
    monkeypatch.setattr(store, "_GRACE_S", -1)
    # Replaced after the first chunk of a stream (the CLI's ``episodes``, a notebook's loop) ...
    chunks = left_open.queries.stream(columns=["episode_id"], chunk=2048)
    given = next(chunks)["episode_id"].tolist()
    _replace_partitions(run_dir)
    given += [i for frame in chunks for i in frame["episode_id"]]
    assert given == in_order
    # ... and between asking for a stream and reading it: every episode comes once, in run order.
    for limit in (None, 5000):
        chunks = left_open.queries.stream(columns=["episode_id"], chunk=2048, limit=limit)
        _replace_partitions(run_dir)
        assert [i for frame in chunks for i in frame["episode_id"]] == in_order[:limit]


def test_a_stream_resumes_after_the_last_row_it_gave(tmp_path):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 6000)
    asked = ares_viewer.open_run(run_dir).queries
    chunks = list(asked.positioned(queries.Filters(solved=False), columns=["episode_id", "path"], chunk=2048))
    whole = pd.concat([frame for frame, _ in chunks], ignore_index=True)
    assert list(whole.columns) == ["episode_id", "path"] and len(chunks) > 2
    frame, place = chunks[0]
    assert place[0] == frame["path"].iat[-1]
    rest = pd.concat([f for f, _ in asked.positioned(queries.Filters(solved=False), columns=["episode_id", "path"],
                                                      after=place, limit=100)], ignore_index=True)
    assert rest["episode_id"].tolist() == whole["episode_id"].tolist()[len(frame):len(frame) + 100]


def test_a_place_in_a_stream_holds_when_the_file_is_indexed_anew_in_another_batch(tmp_path, monkeypatch):
    """A stream's place is a row's place in its file: the fast path numbers a batch's rows from where the batch
    starts, and a file read again alone (it changed) starts from 0."""
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 6000)
    together = ares_viewer.open_run(run_dir, workers=1)  # the three files in one batch
    in_order = [row[0] for row in together.query("SELECT episode_id FROM episodes ORDER BY path, _seq").fetchall()]
    frame, place = next(together.queries.positioned(columns=["episode_id"], chunk=2048))
    given = frame["episode_id"].tolist()
    assert place == (str(run_dir / "iteration_000001" / "train_rollout_summaries.jsonl"), 47)  # in the second file
    monkeypatch.setattr(store, "_GRACE_S", -1)
    _replace_partitions(run_dir)  # the second file is read again, alone
    rest = ares_viewer.open_run(run_dir).queries.positioned(columns=["episode_id"], after=place)
    assert given + [i for frame, _ in rest for i in frame["episode_id"]] == in_order


def test_the_index_columns_are_the_episode_row(tmp_path):
    import duckdb

    assert store.EPISODE_COLUMNS == model.EPISODE_COLUMNS == ares_viewer.runs.run.EPISODE_COLUMNS
    assert list(store.ROW_TYPES) == list(model.EPISODE_COLUMNS)
    assert (store.ROW_TYPES["total_reward"], store.ROW_TYPES["num_actions"], store.ROW_TYPES["truncated"],
            store.ROW_TYPES["error"]) == ("DOUBLE", "BIGINT", "BOOLEAN", "VARCHAR")
    target = store.Store(tmp_path)
    part = target.part_path(target.write_part([{"episode_id": "e", "total_reward": float("nan"), "x": 1},
                                               {"episode_id": "f", "x": "a"}], [0, 1]))
    types = dict(duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE FROM '{part}')").fetchall())
    assert (types["total_reward"], types["num_actions"], types["x"], types["warnings"]) == (
        "DOUBLE", "BIGINT", "VARCHAR", "VARCHAR[]")
    assert duckdb.sql(f"SELECT total_reward, x FROM '{part}' ORDER BY _seq").fetchall() == [(None, "1"), (None, "a")]


def test_unscored_episodes_are_a_category_of_their_own_in_the_queries(tmp_path):
    shutil.copytree(formats_fixtures.MINI, tmp_path / "mini")  # two trajectories nobody scored yet
    synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=2, seed=1, reward=1.0))
    synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=3, seed=2, reward=0.0))
    run = ares_viewer.open_run(tmp_path)
    stats = run.stats()
    assert (stats["episodes"], stats["unscored"], stats["scored"], stats["rewarded"]) == (4, 2, 2, 2)
    assert stats["success_rate"] == 0.5
    asked = run.queries
    assert asked.count(queries.Filters(outcomes=[queries.UNSCORED_LABEL])) == 2
    assert asked.count(queries.Filters(outcomes=["completed"])) == 2  # completed and scored only
    assert asked.count(queries.Filters(outcomes=["completed", queries.UNSCORED_LABEL])) == 4
    assert int(asked.reward_histogram()["episodes"].sum()) == 2  # the reward figures leave them out
    assert int(asked.reward_bands()["episodes"].sum()) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_damaged_manifest_means_the_run_is_indexed_again(tmp_path, damage):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 4000)
    first = ares_viewer.open_run(run_dir)
    target = ares_viewer.runs.run.index_update.store_for(str(run_dir))[0]
    data = target.manifest_path.read_bytes()
    target.manifest_path.write_bytes({"garbage": b"not parquet at all" * 100, "truncated": data[:len(data) // 2],
                                      "empty": b""}[damage])
    assert target.read_manifest() == {}
    again = ares_viewer.open_run(run_dir)
    assert again.parsed_files == 2 and len(again) == 4000 and not again.errors
    pd.testing.assert_frame_equal(again.episodes, first.episodes)
    assert ares_viewer.open_run(run_dir).parsed_files == 0  # the manifest written anew reads back
