"""Hostile Inspect AI ``.eval`` logs (issue #45, items 5 and 6): archives bounded as a whole, and a sample that cannot
be read is an error with its reason, never a row.

Every archive is built from a log Inspect itself wrote (``hostile_archives``). Each is that file's error, naming
it and the reason, found within bounded memory and time; the good log beside it still opens.
"""

from __future__ import annotations

import shutil
import time
import tracemalloc

import hostile_archives as ha
import orjson
import pytest
from hostile_files import deep_list

import ares_viewer
from ares_viewer import formats
from testdata import inspect_logs

MB = 1024 * 1024


def _read_bounded(path, seconds: float = 5.0, peak_mb: int = 48) -> formats.FileResult:
    """The file's rows, then its episodes, each read within ``seconds`` and ``peak_mb`` of Python memory (the
    file's own bytes aside)."""
    data = path.read_bytes()
    results = []
    for read in (formats.summarize_file, formats.read_file):
        tracemalloc.start()
        start = time.perf_counter()
        try:
            results.append(read(str(path), data))
            elapsed = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert elapsed < seconds, f"{read.__name__} took {elapsed:.1f} s"
        assert peak < peak_mb * MB, f"{read.__name__} peaked at {peak / MB:.0f} MB"
    return results[0]


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bombs")
    return {"shared": ha.shared_entries(folder), "huge": ha.one_huge_sample(folder),
            "summaries": ha.huge_summaries(folder)}


def test_entries_sharing_one_compressed_sample_are_refused_at_once(bombs):
    path = bombs["shared"]
    assert path.stat().st_size < 120_000  # 40 entries of 105 MB each: 4.2 GB to decompress
    result = _read_bounded(path)
    assert result.rows == () and "share compressed bytes" in result.errors[0]


def test_shared_entries_are_refused_whatever_their_size(tmp_path):
    small = ha.shared_entries(tmp_path, entries=3, size=MB)  # 3 MB in all: within every size bound
    result = _read_bounded(small)
    assert result.rows == () and "'samples/s0_epoch_1.json' and 'samples/s1_epoch_1.json' share compressed bytes" \
        in result.errors[0]


def test_one_huge_sample_in_a_small_archive_is_refused_before_it_is_decompressed(bombs):
    path = bombs["huge"]
    assert path.stat().st_size < 500_000
    result = _read_bounded(path)
    assert result.rows == ()
    declared = 400 * MB + len(ha.members()["header.json"])
    assert f"2 members declare {declared:,} bytes in all" in result.errors[0]
    assert "more than 100 times" in result.errors[0]


def test_a_huge_summaries_member_costs_nothing_at_indexing(bombs):
    result = _read_bounded(bombs["summaries"])
    assert result.rows == () and "more than 100 times" in result.errors[0]


def test_a_run_lists_each_bomb_as_its_file_s_error_beside_the_good_log(bombs, tmp_path):
    for path in bombs.values():
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(ha.LOG, tmp_path / "good.eval")
    start = time.perf_counter()
    run = ares_viewer.open_run(tmp_path)
    assert time.perf_counter() - start < 30
    errors = {error.path: error.reason for error in run.errors}
    assert set(errors) == {str(tmp_path / path.name) for path in bombs.values()}
    assert set(run.episodes["path"]) == {str(tmp_path / "good.eval")}
    assert len(run.episodes) == len(inspect_logs.SAMPLES)


def _sample(**changes) -> dict:
    return {**orjson.loads(ha.members()[ha.SOLVED]), **changes}


def _solved(run):
    rows = run.episodes
    return rows[rows["task_name"] == "arith/solve"]


def test_duplicate_sample_entries_never_give_two_rewards(tmp_path):
    """Two members of one name, the first scored C, the second I: Inspect's summary said 1.0 on the overview, the
    episode 0.0. The archive is ambiguous, hence an error."""
    scores = orjson.loads(ha.members()[ha.SOLVED])["scores"]
    wrong = {name: {**score, "value": "I"} for name, score in scores.items()}
    path = ha.with_sample(tmp_path, "dup.eval", orjson.dumps(_sample(scores=wrong)), duplicate=True)
    run = ares_viewer.open_run(tmp_path)
    assert run.episodes.empty or 1.0 not in set(_solved(run)["total_reward"])
    [error] = run.errors
    assert error.path == str(path) and f"member {ha.SOLVED!r} appears more than once" in error.reason


@pytest.mark.parametrize(("name", "sample", "reason"), [
    ("latin1.eval", ha.members()[ha.SOLVED].replace(b"The answer is 42", "La réponse: 42".encode("latin-1")),
     "not readable JSON"),
    ("deep.eval", orjson.dumps(_sample(metadata="@DEEP@")).replace(b'"@DEEP@"', deep_list()), "not readable JSON"),
    ("oversize.eval", orjson.dumps(_sample(metadata={"pad": " " * (2 * MB)})), "more than 1,048,576"),
])
def test_a_sample_that_cannot_be_read_is_an_error_never_solved(tmp_path, monkeypatch, name, sample, reason):
    monkeypatch.setenv("ARES_VIEWER_MAX_FILE_MB", "1")
    path = ha.with_sample(tmp_path, name, sample)
    run = ares_viewer.open_run(tmp_path)
    assert _solved(run).empty  # neither solved nor listed: a row is its sample parsed
    assert len(run.episodes) == len(inspect_logs.SAMPLES) - 1  # the log's other samples
    [error] = run.errors
    assert error.path == str(path) and ha.SOLVED in error.reason and reason in error.reason, error.reason
