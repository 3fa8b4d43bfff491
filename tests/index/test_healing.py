"""A damaged index heals: a partition gone, cut short or replaced is read again from the run's files, and a reader
left open carries on after another process compacted the index."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import duckdb
import pandas as pd
import pytest

import ares_viewer
from ares_viewer.runs.index import table
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parents[2]


def _damage(part: pathlib.Path, how: str) -> None:
    data = part.read_bytes()
    if how == "deleted":
        part.unlink()
    elif how == "truncated":
        part.write_bytes(data[: len(data) // 2])
    elif how == "foreign":  # another program's Parquet file under the partition's name
        duckdb.sql(f"COPY (SELECT range AS id, 'x' AS name FROM range(10)) TO '{part}' (FORMAT parquet)")
    else:  # same size, its footer overwritten: only reading it shows the damage
        part.write_bytes(data[:-8] + b"\0" * 8)


@pytest.mark.parametrize("fresh", [True, False], ids=["new-process", "same-process"])
@pytest.mark.parametrize("how", ["deleted", "truncated", "foreign", "corrupt-same-size"])
def test_a_damaged_partition_heals_on_the_next_open(tmp_path, how, fresh):
    synthetic.write_run(tmp_path / "run", 3, actions=3)
    synthetic.write_run(tmp_path / "run" / "later", 2, actions=3, seed=1)
    first = ares_viewer.open_run(tmp_path / "run")
    listed = first.episodes
    parts = sorted(first.index_store.parts.glob("*.parquet"))
    assert len(parts) == 1 and len(listed) == 5
    _damage(parts[0], how)
    if fresh:  # as a new process opens it: no episode table of this index state made yet
        ares_viewer.runs.run._TABLES.clear()
    again = ares_viewer.open_run(tmp_path / "run")
    if fresh or how != "corrupt-same-size":  # seen at once; else only by reading it, on the first query
        assert again.parsed_files == 5
    pd.testing.assert_frame_equal(again.episodes, listed)
    assert not again.errors
    healed = ares_viewer.open_run(tmp_path / "run")
    assert healed.parsed_files == 0 and len(healed) == 5  # healed for good


def test_only_the_files_of_the_damaged_partition_are_read_again(tmp_path):
    synthetic.write_run(tmp_path / "run", 3, actions=3)
    ares_viewer.open_run(tmp_path / "run")
    synthetic.write_run(tmp_path / "run" / "later", 2, actions=3, seed=1)
    run = ares_viewer.open_run(tmp_path / "run")
    assert run.parsed_files == 2
    later = {e.part for p, e in run._entries.items() if "later" in p}
    (run.index_store.parts / later.pop()).unlink()
    again = ares_viewer.open_run(tmp_path / "run")
    assert again.parsed_files == 2 and len(again) == 5 and not again.errors


_COMPACT = """
import sys
from ares_viewer.runs.index import store, update
import ares_viewer
store._GRACE_S = -1  # replaced partitions go at once
update._MAX_PARTS = 1  # and this open merges them all
print(len(ares_viewer.open_run(sys.argv[1])))
"""


@pytest.mark.parametrize("in_memory", [False, True], ids=["read-from-partitions", "in-memory"])
def test_a_reader_opened_before_another_process_compacts_still_answers(tmp_path, monkeypatch, in_memory):
    if not in_memory:  # as a large run is
        monkeypatch.setattr(table, "IN_MEMORY_ROWS", 0)
    run_dir = tmp_path / "run"
    synthetic.write_run(run_dir, 2, actions=2)
    ares_viewer.open_run(run_dir)
    for seed in range(3):  # a run followed while it is written: a partition per look
        synthetic.write_episode(run_dir, synthetic.episode_dict(actions=2, seed=100 + seed))
        ares_viewer.open_run(run_dir)
    left_open = ares_viewer.open_run(run_dir)
    before = sorted(left_open.index_store.parts.glob("*.parquet"))
    assert len(before) == 4 and len(left_open) == 5
    synthetic.write_episode(run_dir, synthetic.episode_dict(actions=2, seed=200))
    env = dict(os.environ, PYTHONPATH=str(REPO), ARES_VIEWER_CACHE=os.environ["ARES_VIEWER_CACHE"])
    out = subprocess.run([sys.executable, "-c", _COMPACT, str(run_dir)], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["6"]
    assert not any(p.exists() for p in before)  # compacted into one partition, the old ones removed
    # One read from its partitions finds them gone and reads the index anew; one in memory answers as it was opened.
    seen = 5 if in_memory else 6
    assert left_open.query("SELECT count(*) FROM episodes").fetchall() == [(seen,)]
    assert len(left_open.episodes) == seen and len(left_open.relation.fetchall()) == seen
    left_open.refresh()
    assert len(left_open.relation.fetchall()) == 6


@pytest.mark.parametrize("mirror", [b"{not json", b'{"manifest": [1, 2, 3], "columns": [], "rows": []}', b"[]"])
def test_a_damaged_or_stale_manifest_mirror_is_passed_over(tmp_path, mirror):
    synthetic.write_run(tmp_path / "run", 3, actions=3)
    first = ares_viewer.open_run(tmp_path / "run")
    first.index_store.mirror_path.write_bytes(mirror)
    ares_viewer.runs.run._TABLES.clear()
    again = ares_viewer.open_run(tmp_path / "run")
    assert again.parsed_files == 0 and len(again) == 3 and not again.errors  # read from the manifest itself
