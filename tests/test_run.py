"""Opening runs: discovery, the episode table, errors, the index cache."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

import ares_viewer
from testdata import synthetic

COLUMNS = ["episode_id", "task_name", "outcome", "total_reward", "num_actions", "start_time", "end_time",
           "duration_s", "total_cost", "prompt_tokens", "generated_tokens", "truncated", "path", "format"]


@pytest.fixture
def run_dir(tmp_path):
    folder = tmp_path / "run"
    synthetic.write_run(folder, 6, actions=5)
    nested = folder / "shard-1"
    nested.mkdir()
    synthetic.write_episode(nested, synthetic.episode_dict(actions=4, ending="truncated", seed=42))
    return folder


def _snapshot_tree(folder):
    return {p: os.stat(p).st_mtime_ns for p in (str(x) for x in folder.rglob("*"))}


def test_folder_is_searched_recursively(run_dir):
    run = ares_viewer.open_run(run_dir)
    assert len(run) == 7
    assert list(run.episodes.columns[: len(COLUMNS)]) != []
    assert set(COLUMNS) <= set(run.episodes.columns)
    assert run.episodes["outcome"].value_counts().get("truncated", 0) >= 1
    assert run.errors == []


def test_one_file_a_glob_and_a_file_url(run_dir):
    one = next(run_dir.glob("*.json"))
    assert len(ares_viewer.open_run(one)) == 1
    assert len(ares_viewer.open_run(str(run_dir / "*.json"))) == 6
    assert len(ares_viewer.open_run(str(run_dir / "**" / "*.json"))) == 7
    assert len(ares_viewer.open_run(f"file://{run_dir}")) == 7


def test_episode_row_matches_the_episode(run_dir):
    run = ares_viewer.open_run(run_dir)
    row = run.episodes.iloc[0]
    episode = run.episode(row["episode_id"])
    assert episode.num_actions == row["num_actions"]
    assert episode.total_cost == pytest.approx(row["total_cost"])
    assert episode.prompt_tokens == row["prompt_tokens"]
    assert run.episode(row["episode_id"]) is episode  # the bounded cache


def test_bad_files_are_reported_and_the_rest_loads(run_dir):
    (run_dir / "truncated.json").write_text('{"episode_id": "a", "task_name": "t", "steps": [{"step_index": 0,')
    (run_dir / "empty.json").write_text("")
    (run_dir / "wrong.json").write_text(json.dumps({"episode_id": "b", "task_name": "t", "steps": {"no": 1}}))
    (run_dir / "config.json").write_text(json.dumps({"model": "x", "lr": 1e-5}))
    (run_dir / "notes.txt").write_text("remember to rerun")
    (run_dir / "plot.png").write_bytes(b"\x89PNG\r\n")
    (run_dir / "6f1c1d0e-3a44-4c1e-9a0e-8c2d2f1b7e11.json").write_text(json.dumps([1, 2, 3]))
    run = ares_viewer.open_run(run_dir)
    assert len(run) == 7
    reasons = {os.path.basename(e.path): e.reason for e in run.errors}
    assert set(reasons) == {"truncated.json", "empty.json", "wrong.json", "6f1c1d0e-3a44-4c1e-9a0e-8c2d2f1b7e11.json"}
    assert "truncated JSON" in reasons["truncated.json"]
    assert reasons["empty.json"] == "empty file"
    assert "'steps' is a dict" in reasons["wrong.json"]
    assert "named like an episode" in reasons["6f1c1d0e-3a44-4c1e-9a0e-8c2d2f1b7e11.json"]
    assert run.skipped == 1  # config.json; .txt and .png are not even candidates


def test_folder_with_no_episodes_says_so(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    run = ares_viewer.open_run(tmp_path)
    assert len(run) == 0
    with pytest.raises(ares_viewer.EmptyRunError, match="no episodes found"):
        run.require_episodes()


def test_missing_location_is_a_clear_error(tmp_path):
    with pytest.raises(ares_viewer.LocationError, match="no such file or folder"):
        ares_viewer.open_run(tmp_path / "nope")


def test_reopening_an_unchanged_run_parses_nothing(run_dir):
    first = ares_viewer.open_run(run_dir)
    assert first.parsed_files == 7
    again = ares_viewer.open_run(run_dir)
    assert again.parsed_files == 0
    assert again.episodes.equals(first.episodes)


def test_a_changed_or_new_file_is_read_again(run_dir):
    ares_viewer.open_run(run_dir)
    path = next(run_dir.glob("*.json"))
    doc = json.loads(path.read_text())
    doc["total_reward"] = 0.25
    path.write_text(json.dumps(doc, indent=2))
    synthetic.write_episode(run_dir, synthetic.episode_dict(actions=2, seed=777))
    run = ares_viewer.open_run(run_dir)
    assert run.parsed_files == 2
    assert run.episodes.set_index("episode_id").loc[doc["episode_id"], "total_reward"] == 0.25


def test_the_run_folder_is_never_written(run_dir, monkeypatch, tmp_path):
    cache = tmp_path / "cache-here"
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(cache))
    before = _snapshot_tree(run_dir)
    run = ares_viewer.open_run(run_dir)
    run.episode(run.episodes.episode_id.iloc[0])
    assert _snapshot_tree(run_dir) == before
    assert any(cache.iterdir())


def test_large_runs_are_indexed_in_worker_processes(tmp_path, monkeypatch):
    folder = tmp_path / "big"
    synthetic.write_run(folder, 12, actions=40, output_chars=4000)
    serial = ares_viewer.open_run(folder, use_cache=False, workers=1)
    from ares_viewer.runs.index import builder

    monkeypatch.setattr(builder, "PARALLEL_MIN_BYTES", 0)
    parallel = ares_viewer.open_run(folder, use_cache=False, workers=2)
    assert parallel.episodes.equals(serial.episodes)


def test_unreadable_cache_falls_back_to_parsing(run_dir, monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(blocker / "sub"))
    assert len(ares_viewer.open_run(run_dir)) == 7


def test_run_renders_for_notebooks_and_terminals(run_dir):
    run = ares_viewer.open_run(run_dir)
    assert "7</b> episodes" in run._repr_html_()
    assert "episodes: 7" in str(run)


def test_library_does_not_import_streamlit():
    import subprocess

    code = "import sys, ares_viewer, ares_viewer.runs.run, ares_viewer.cli; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"actions": 6},
        {"actions": 5, "ending": "truncated"},
        {"actions": 4, "ending": "errored"},
        {"actions": 4, "ending": "incomplete"},
        {"actions": 9, "drop_context_at": 3},
        {"actions": 3, "output_chars": 20_000},
    ],
)
def test_index_row_agrees_with_the_parsed_episode(tmp_path, kwargs):
    path = synthetic.write_episode(tmp_path, synthetic.episode_dict(seed=11, **kwargs))
    row = ares_viewer.open_run(path).episodes.iloc[0].to_dict()
    expected = ares_viewer.load_episode(path).summary()
    for key, value in expected.items():
        if value is None or (isinstance(value, float) and value != value):  # NaN in a float column
            assert row[key] is None or row[key] != row[key], key
        elif isinstance(value, float):
            assert row[key] == pytest.approx(value), key
        else:
            assert row[key] == value, key


def test_fsspec_url_of_a_remote_filesystem():
    import fsspec

    fs = fsspec.filesystem("memory")
    doc = synthetic.episode_dict(actions=3, seed=8)
    fs.pipe(f"/remote-run/{doc['episode_id']}.json", json.dumps(doc, indent=2).encode())
    fs.pipe("/remote-run/config.json", b'{"lr": 1}')
    fs.pipe("/remote-run/broken.json", b'{"steps": [')
    try:
        run = ares_viewer.open_run("memory://remote-run")
        assert len(run) == 1 and run.skipped == 1
        assert [os.path.basename(e.path) for e in run.errors] == ["broken.json"]
        episode = run.episode(doc["episode_id"])
        assert episode.num_actions == 3 and episode.path.startswith("memory://")
        with pytest.raises(ares_viewer.LocationError, match="no such file or folder"):
            ares_viewer.open_run("memory://nowhere")
    finally:
        fs.rm("/remote-run", recursive=True)


def test_other_attempt_is_the_best_other_try_at_the_same_task(tmp_path):
    docs = {name: synthetic.episode_dict(task_name=task, reward=reward, seed=seed, actions=3)
            for name, task, reward, seed in (("failed", "t-1", 0.0, 1), ("solved", "t-1", 1.0, 2),
                                             ("other-failed", "t-1", 0.0, 3), ("alone", "t-2", 1.0, 4))}
    for doc in docs.values():
        synthetic.write_episode(tmp_path, doc)
    run = ares_viewer.open_run(tmp_path)
    ids = {name: doc["episode_id"] for name, doc in docs.items()}
    assert run.other_attempt(ids["failed"]) == ids["solved"]
    assert run.other_attempt(ids["solved"]) in {ids["failed"], ids["other-failed"]}
    assert run.other_attempt(ids["alone"]) is None
    with pytest.raises(KeyError):
        run.other_attempt("no-such-episode")


def test_other_attempt_prefers_the_shortest_solved_attempt(tmp_path):
    docs = {name: synthetic.episode_dict(task_name="t-1", reward=reward, seed=seed, actions=actions)
            for name, reward, seed, actions in (("failed", 0.0, 1, 5), ("long", 1.0, 2, 12), ("short", 1.0, 3, 4),
                                                ("shorter-failed", 0.0, 4, 2))}
    for doc in docs.values():
        synthetic.write_episode(tmp_path, doc)
    run = ares_viewer.open_run(tmp_path)
    ids = {name: doc["episode_id"] for name, doc in docs.items()}
    assert run.other_attempt(ids["failed"]) == ids["short"]
    assert run.other_attempt(ids["short"]) == ids["long"]


def test_failures_group_alike_errors_and_leave_successes_out(tmp_path):
    import pandas as pd

    from ares_viewer.runs import run as run_module

    frame = pd.DataFrame({
        "episode_id": ["a", "b", "c", "d", "e", "f", "g"],
        "task_name": ["t1", "t2", "t1", "t3", "t1", "t2", "t3"],
        "outcome": ["errored", "errored", "completed", "completed", "truncated", "incomplete", "completed"],
        "total_reward": [None, None, 0.0, 1.0, 0.0, None, None],
        "error": ["APIError: 409 Conflict for container 3f2a9c1d77e0 ('exec')\nTraceback ...",
                  "APIError: 500 Conflict for container 0b1c2d3e4f5a ('run')", None, None, None, None, None],
    }).set_index("episode_id", drop=False)
    reasons = run_module.failure_reasons(frame)
    assert reasons["a"] == reasons["b"] == "errored: APIError: N Conflict for container <id> ('…')"
    assert reasons["c"] == "completed, not solved (reward ≤ 0)"
    assert reasons["e"].startswith("truncated") and reasons["f"].startswith("incomplete")
    assert reasons["d"] is None and reasons["g"] is None  # solved, and finished but unscored

    docs = [synthetic.episode_dict(task_name="t1", reward=0.0, seed=1, actions=2),
            synthetic.episode_dict(task_name="t2", reward=0.0, seed=2, actions=2),
            synthetic.episode_dict(task_name="t2", reward=1.0, seed=3, actions=2)]
    for doc in docs:
        synthetic.write_episode(tmp_path, doc)
    failures = ares_viewer.open_run(tmp_path).failures()
    assert failures.to_dict("records") == [{
        "reason": "completed, not solved (reward ≤ 0)", "blame": "agent", "episodes": 2, "tasks": 2,
        "episode_ids": sorted(d["episode_id"] for d in docs[:2])}]


def test_repeated_episode_ids_are_all_kept_and_reachable(tmp_path):
    import json

    from testdata import synthetic

    doc = synthetic.episode_dict(actions=2, seed=1, reward=1.0)
    (tmp_path / "run-a").mkdir()
    synthetic.write_episode(tmp_path / "run-a", doc)
    copy = dict(doc, total_reward=0.0, task_name="other-task")
    (tmp_path / "run-b").mkdir()
    (tmp_path / "run-b" / f"{doc['episode_id']}.json").write_text(json.dumps(copy))
    # A sidecar beside the episode that shares its id and counts its timesteps: not a Ray trajectory.
    (tmp_path / "run-a" / f"{doc['episode_id']}.meta.json").write_text(json.dumps(
        {"episode_id": doc["episode_id"], "timesteps": 3, "reward": 1.0}))
    # One read as an episode (a Ray-shaped sidecar named before the real file) does not take the id either.
    (tmp_path / "run-a" / "0-sidecar.json").write_text(json.dumps({"episode_id": doc["episode_id"], "timesteps": []}))
    run = ares_viewer.open_run(tmp_path)
    assert not run.errors and run.skipped == 1
    assert run.episodes.set_index("episode_id").loc[doc["episode_id"], "format"] == "ares"
    second = f"{doc['episode_id']}@run-b/{doc['episode_id']}.json"
    assert sorted(run.episode_ids) == sorted([doc["episode_id"], second, f"{doc['episode_id']}@run-a/0-sidecar.json"])
    assert run.episode(doc["episode_id"]).task_name == doc["task_name"]
    other = run.episode(second)
    assert other.task_name == "other-task" and other.episode_id == second
    assert any("appears in 3 files" in message for _, message in run.warnings)


def test_reopening_an_indexed_run_does_not_load_pandas_or_pyarrow(tmp_path):
    # Every CLI command and notebook reopen pays for the library's imports; pandas alone was a third of a reopen,
    # pyarrow with numpy a fifth of what was left.
    import subprocess

    code = ("import sys, ares_viewer; run = ares_viewer.open_run(sys.argv[1]); "
            "print(len(run), 'pandas' in sys.modules or 'pyarrow' in sys.modules)")
    env = dict(os.environ, ARES_VIEWER_CACHE=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "-c", code, "sample_runs/demo-run"], env=env, capture_output=True,
                           text=True, check=True, cwd=os.path.dirname(os.path.dirname(__file__))).stdout.split()
            for _ in range(2)]
    assert runs[1] == [runs[0][0], "False"], runs


@pytest.mark.parametrize("fmt", ["tinker", "ray", "mini"])
def test_indexing_a_json_lines_run_does_not_load_pandas_or_pyarrow(tmp_path, fmt):
    # importing pandas was a tenth of a second of every cold index, more than indexing a small run takes; pyarrow
    # with numpy is half as much again
    import subprocess

    from benchmarks import bench_scale

    bench_scale.write_run(tmp_path / "run", 40, fmt=fmt)
    code = ("import sys, ares_viewer; run = ares_viewer.open_run(sys.argv[1]); "
            "print(len(run), run.parsed_files, len(run.errors), 'pandas' in sys.modules or 'pyarrow' in sys.modules)")
    env = dict(os.environ, ARES_VIEWER_CACHE=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(__file__))).stdout.split()
    assert out == ["40", "1", "0", "False"], out


def test_indexing_an_ares_run_does_not_load_pandas_or_pyarrow(tmp_path):
    # importing pandas and pyarrow.compute was 1.4 s of a 3.3 s cold index of 300 ARES episodes
    import subprocess

    synthetic.write_run(tmp_path / "run", 5, actions=4)
    code = ("import sys, ares_viewer; run = ares_viewer.open_run(sys.argv[1]); "
            "print(len(run), run.parsed_files, len(run.errors), sorted({'pandas', 'pyarrow'} & set(sys.modules)))")
    env = dict(os.environ, ARES_VIEWER_CACHE=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(__file__))).stdout.split()
    assert out == ["5", "5", "0", "[]"], out


def _huge_token_count(tmp_path):
    """A run of three ARES episodes and an ATIF trajectory, one ARES file and the ATIF one saying a step used 1e19
    prompt tokens (more than a 64-bit count holds)."""
    import atif_fixtures

    paths = synthetic.write_run(tmp_path / "run", 3, actions=3)
    doc = json.loads(pathlib.Path(paths[1]).read_text())
    doc["steps"][1]["action"]["usage"]["prompt_tokens"] = 1e19
    with open(paths[1], "w") as out:
        json.dump(doc, out, indent=2)
    trajectory = atif_fixtures.trajectory()
    trajectory["steps"][2]["metrics"]["prompt_tokens"] = 10**19
    trajectory["final_metrics"]["total_prompt_tokens"] = 10**19  # the episode's figure is the file's total
    atif = tmp_path / "run" / "trial" / "agent" / "trajectory.json"
    atif.parent.mkdir(parents=True)
    atif.write_text(json.dumps(trajectory))
    return paths, str(atif)


def test_a_number_out_of_the_index_range_is_its_files_error(tmp_path):
    paths, atif = _huge_token_count(tmp_path)
    run = ares_viewer.open_run(tmp_path / "run")
    assert sorted(run.episodes["path"]) == sorted([paths[0], paths[2]])
    assert sorted(e.path for e in run.errors) == sorted([paths[1], atif])
    assert all("prompt_tokens" in e.reason and "out of the range" in e.reason for e in run.errors)


def test_a_count_beyond_53_bits_within_64_is_kept_exactly(tmp_path):
    """orjson's strict integers (53 bits) only tell the index to look at each row of the batch: the count is kept."""
    from ares_viewer import formats

    paths = synthetic.write_run(tmp_path / "run", 3, actions=3)
    doc = json.loads(pathlib.Path(paths[1]).read_text())
    doc["steps"][1]["action"]["usage"]["prompt_tokens"] = 2**60 + 1
    pathlib.Path(paths[1]).write_text(json.dumps(doc))
    (expected,) = formats.summarize_file(paths[1], pathlib.Path(paths[1]).read_bytes()).rows
    run = ares_viewer.open_run(tmp_path / "run")
    assert not run.errors and len(run.episodes) == 3
    kept = run.episodes.set_index("path")["prompt_tokens"]
    assert expected["prompt_tokens"] > 2**60 and int(kept[paths[1]]) == expected["prompt_tokens"]


def test_the_cli_names_a_file_with_a_number_out_of_range_without_a_traceback(tmp_path):
    import subprocess

    paths, atif = _huge_token_count(tmp_path)
    env = dict(os.environ, ARES_VIEWER_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "episodes", str(tmp_path / "run")], env=env,
                         capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and f"error: {paths[1]}: prompt_tokens" in out.stderr
    assert f"error: {atif}: prompt_tokens" in out.stderr
    assert sum(pathlib.Path(p).stem[:8] in out.stdout for p in paths) == 2
