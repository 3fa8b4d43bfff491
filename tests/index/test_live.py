"""live.follow: each refresh parses only what changed and says what it found."""

from __future__ import annotations

import ares_viewer
from ares_viewer.runs.index import live
from benchmarks import bench_scale


def test_follow_picks_up_new_iterations_only(tmp_path):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 2000)
    run = ares_viewer.open_run(run_dir)
    more = tmp_path / "more"
    bench_scale.write_run(more, 4000)
    steps = iter(range(3))

    def sleep(_seconds: float) -> None:
        if next(steps) == 1:  # the trainer finishes iteration 1 between two looks
            (run_dir / "iteration_000001").mkdir()
            (more / "iteration_000001" / "train_rollout_summaries.jsonl").rename(
                run_dir / "iteration_000001" / "train_rollout_summaries.jsonl")

    changes = list(live.follow(run, every=0, sleep=sleep, until=lambda: len(run) >= 4000))
    assert [(c.parsed_files, c.new_episodes) for c in changes] == [(0, 0), (1, 2000)]
    assert run.parsed_files == 1 and len(run) == 4000


def test_many_small_refreshes_are_merged_into_one_partition(tmp_path, monkeypatch):
    from ares_viewer.runs.index import update

    monkeypatch.setattr(update, "_MAX_PARTS", 3)
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir / "a", 10)
    run = ares_viewer.open_run(run_dir)
    for n in range(6):  # one new file per refresh
        bench_scale.write_run(run_dir / f"b{n}", 10, seed=n)
        run.refresh()
    assert len(run) == 70
    parts = {e.part for e in run.index_store.read_manifest().values() if e.part}
    assert len(parts) <= 3
    assert run.episodes["episode_id"].is_unique and len(run.episodes) == 70


def test_kept_answers_follow_the_run_and_are_the_callers_own(tmp_path, monkeypatch):
    """A page that runs again gets its figures without asking DuckDB again; a refresh that finds new rollouts
    answers anew, and a caller that changes its answer changes nobody else's."""
    from ares_viewer.runs.index import queries

    asked: list[str] = []
    original = queries.Queries._df

    def counted(self, sql, params=()):
        asked.append(sql)
        return original(self, sql, params)

    monkeypatch.setattr(queries.Queries, "_df", counted)
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir / "a", 2000)
    run = ares_viewer.open_run(run_dir)
    first = run.queries.per_task()
    bands = run.queries.reward_bands(bins=20)
    before = len(asked)
    again, total = run.queries.per_task()
    assert len(asked) == before  # kept: the same table, the same question
    assert again.equals(first[0]) and total == first[1]
    again.loc[:, "attempts"] = -1  # the caller's copy
    assert run.queries.per_task()[0].equals(first[0])
    assert run.queries.reward_bands(bins=10)["episodes"].sum() == bands["episodes"].sum()
    assert len(asked) == before + 1  # another question is asked

    assert run.queries.reward_histogram()["episodes"].sum() == 2000

    bench_scale.write_run(run_dir / "b", 2000, seed=3)
    run.refresh()
    assert run.queries.reward_histogram()["episodes"].sum() == 4000  # the grown run's, not the kept answer
    assert run.queries.stats()["episodes"] == 4000
