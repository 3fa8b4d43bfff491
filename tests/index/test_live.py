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
