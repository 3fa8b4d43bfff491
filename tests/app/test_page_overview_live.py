"""Following a run that is still being written: the overview picks up new rollouts on its own refresh, a
line still being written is not an error until it stops changing, and rows already shown keep their place."""

from __future__ import annotations

import page_text

from benchmarks import bench_scale


def _episodes(at) -> str:
    return page_text.figures(at)["Episodes"]


def test_following_a_growing_run(tmp_path, monkeypatch, app):
    root = tmp_path / "runs"
    run = root / "live"
    bench_scale.write_run(run, 40)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    at = app(run="live")
    assert not at.exception
    assert _episodes(at) == "40"
    first_rows = at.dataframe(key="overview.table").value["episode_id"].tolist()[:10]

    at.toggle(key="overview.follow").set_value(True).run()
    assert "Following" in page_text.of(at)

    # The trainer writes the next iteration: 40 whole lines and one it has only begun.
    grown = tmp_path / "next"
    bench_scale.write_run(grown, 2100)
    lines = (grown / "iteration_000001" / "train_rollout_summaries.jsonl").read_bytes().splitlines(keepends=True)
    target = run / "iteration_000001" / "train_rollout_summaries.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"".join(lines[:40]) + lines[40][:300])
    at.run()  # what the fragment's timer does
    assert not at.exception
    assert _episodes(at) == "80"
    assert not any("could not be read" in e.label for e in at.expander)  # still being written: not an error
    assert "still being written" in page_text.of(at)
    assert at.dataframe(key="overview.table").value["episode_id"].tolist()[:10] == first_rows  # nothing jumps

    target.write_bytes(b"".join(lines[:41]))  # the line is finished
    at.run()
    assert _episodes(at) == "81"
    assert not any("could not be read" in e.label for e in at.expander)

    with target.open("ab") as handle:  # a line cut off for good: an error once it stops changing
        handle.write(lines[41][:200])
    at.run()
    assert "still being written" in page_text.of(at)
    at.run()
    assert any("could not be read" in e.label for e in at.expander)
    assert _episodes(at) == "81"
