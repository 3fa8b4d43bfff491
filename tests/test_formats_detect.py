"""Detection by content across formats, mixed folders, and the same bad input for every adapter."""

from __future__ import annotations

import json
import os

import formats_fixtures as fx
import pytest

import ares_viewer
from ares_viewer import formats
from testdata import synthetic


def test_mixed_folder_lists_every_format(tmp_path):
    root = tmp_path / "mixed"
    synthetic.write_run(root / "ares", 2, actions=3)
    fx.copy_tree(fx.TINKER, root / "tinker")
    fx.copy_tree(fx.RAY, root / "ray")
    fx.copy_tree(fx.MINI, root / "mini")
    run = ares_viewer.open_run(root)
    assert run.errors == []
    counts = run.episodes["format"].value_counts().to_dict()
    assert counts == {"ares": 2, "tinker": 21, "ray": 4, "mini-swe-agent": 2}
    for row in run.episodes.itertuples():
        expected = {"ares": "ares", "tinker": "tinker", "ray": "ray", "mini": "mini-swe-agent"}
        assert row.format == expected[os.path.relpath(row.path, root).split(os.sep)[0]]
    # Every format opens into the same model, with actions and contexts.
    for episode_id in run.episodes.groupby("format")["episode_id"].first():
        episode = run.episode(episode_id)
        assert episode.num_actions >= 1 and episode.context(1)
        assert len(episode.steps_frame()) == len(episode.steps)


def test_content_decides_not_the_file_name(tmp_path):
    # JSON Lines in a file named .json, a pretty-printed document in a file named .jsonl.
    (tmp_path / "rollouts.json").write_text(fx.RAY_LINES.read_text())
    (tmp_path / "one.jsonl").write_text(fx.MINI_V2.read_text())
    (tmp_path / "renamed.json").write_text(fx.MATH_IT0.read_text())
    run = ares_viewer.open_run(tmp_path)
    assert run.errors == []
    by_file = run.episodes.groupby(run.episodes["path"].map(os.path.basename))["format"].agg(["first", "size"])
    assert by_file.loc["rollouts.json"].tolist() == ["ray", 3]
    assert by_file.loc["one.jsonl"].tolist() == ["mini-swe-agent", 1]
    assert by_file.loc["renamed.json"].tolist() == ["tinker", 8]


def test_files_named_like_a_format_but_holding_something_else_are_errors(tmp_path):
    fx.write_json(tmp_path / "django__django-11099.traj.json", {"instance_id": "django__django-11099"})
    fx.write_lines(tmp_path / "iteration_000001" / "train_rollout_summaries.jsonl", [{"reward": 1.0}])
    fx.write_lines(tmp_path / "metrics.jsonl", [{"step": 0, "env/all/reward/total": 0.5}])
    run = ares_viewer.open_run(tmp_path)
    reasons = {os.path.basename(e.path): e.reason for e in run.errors}
    assert reasons["django__django-11099.traj.json"].startswith("named like a mini-swe-agent trajectory but not one")
    assert reasons["train_rollout_summaries.jsonl"].startswith("named like Tinker rollout summaries but not one")
    assert run.skipped == 1  # metrics.jsonl: other JSON Lines are left alone


# ----- the same bad input for every adapter ---------------------------------------------------------

def _tinker(tmp_path):
    return tmp_path / "iteration_000003" / "train_rollout_summaries.jsonl", fx.lines(fx.MATH_IT0)[:3], "steps"


def _ray(tmp_path):
    return tmp_path / "rollouts.jsonl", fx.lines(fx.RAY_LINES), "timesteps"


def _mini(tmp_path):
    return tmp_path / "astropy__astropy-12907.traj.json", [json.loads(fx.MINI_V2.read_text())], "messages"


ADAPTERS = {"tinker": _tinker, "ray": _ray, "mini-swe-agent": _mini}


def _write(path, records):
    if path.suffix == ".jsonl":
        return fx.write_lines(path, records)
    return fx.write_json(path, records[0])


@pytest.mark.parametrize("name", ADAPTERS)
def test_truncated_file_is_an_error_and_the_rest_loads(tmp_path, name):
    path, records, _ = ADAPTERS[name](tmp_path)
    data = _write(path, records).read_bytes()
    path.write_bytes(data[: len(data) - len(data) // 5])  # a writer killed mid-write
    synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=2))
    run = ares_viewer.open_run(tmp_path)
    [error] = run.errors
    assert error.path == str(path) and "truncated JSON" in error.reason
    if path.suffix == ".jsonl":  # the complete lines still load; the cut one is named
        assert (run.episodes["format"] == name).sum() == len(records) - 1
        assert error.reason.startswith(f"line {len(records)}: ")
    assert (run.episodes["format"] == "ares").sum() == 1


@pytest.mark.parametrize("name", ADAPTERS)
def test_empty_file_is_an_error(tmp_path, name):
    path, _, _ = ADAPTERS[name](tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("" if name != "ray" else "\n\n")
    run = ares_viewer.open_run(tmp_path)
    assert [(e.path, e.reason) for e in run.errors] == [(str(path), "empty file")]


@pytest.mark.parametrize("name", ADAPTERS)
def test_wrong_types_are_clear_errors_or_repaired_with_warnings(tmp_path, name):
    path, records, key = ADAPTERS[name](tmp_path)
    records[0][key] = {"oops": 1}  # the list of steps is not a list
    if len(records) > 1:
        first_steps = records[1][key]
        if name == "tinker":
            first_steps[0]["reward"] = "1.0"  # a number written as text: read, with a warning
            first_steps.append(7)  # a step that is not an object: skipped, with a warning
        else:
            first_steps.insert(1, "not a timestep")
    _write(path, records)
    run = ares_viewer.open_run(tmp_path)
    [error] = run.errors
    assert f"not a readable {name} episode: '{key}' is a dict" in error.reason
    if len(records) > 1:
        assert error.reason.startswith("line 1: ")
        assert len(run) == len(records) - 1
        assert any(path_ == str(path) for path_, _ in run.warnings)
        episode = run.episode(run.episode_ids[0])
        assert episode.warnings and episode.num_actions >= 1


@pytest.mark.parametrize("name", ADAPTERS)
def test_unknown_keys_are_kept_as_metadata(tmp_path, name):
    path, records, _ = ADAPTERS[name](tmp_path)
    for record in records:
        record["run_config"] = {"cluster": "us-east-7", "seed": 3}
    _write(path, records)
    run = ares_viewer.open_run(tmp_path)
    assert run.errors == [] and len(run) == len(records)
    assert run.episode(run.episode_ids[0]).metadata["run_config"] == {"cluster": "us-east-7", "seed": 3}


@pytest.mark.parametrize("name", ADAPTERS)
def test_non_utf8_bytes_load_with_a_warning(tmp_path, name):
    path, records, _ = ADAPTERS[name](tmp_path)
    data = _write(path, records).read_bytes()
    marker = {"tinker": b"Natalia", "ray": b"Find the", "mini-swe-agent": b"Let me reproduce"}[name]
    assert marker in data
    path.write_bytes(data.replace(marker, marker[:3] + b"\xff" + marker[3:], 1))
    run = ares_viewer.open_run(tmp_path)
    assert run.errors == [] and len(run) == len(records)
    assert any("UTF-8" in w for _, w in run.warnings)
    texts = []
    for episode in run:
        texts.extend(m.content for m in episode.messages)
        texts.extend(s.response for s in episode.steps)
    assert any("\ufffd" in t for t in texts)


@pytest.mark.parametrize("name", ["tinker", "ray"])
def test_one_corrupt_line_loads_every_other_line_and_names_it(tmp_path, name):
    path, records, _ = ADAPTERS[name](tmp_path)
    text = "".join(json.dumps(r) + "\n" for r in records)
    lines = text.splitlines(keepends=True)
    lines.insert(1, '{"schema_version": 1, "steps": [{"step_idx": 0, "reward": 1.0,, }\n')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    run = ares_viewer.open_run(tmp_path)
    assert len(run) == len(records)
    [error] = run.errors
    assert error.path == str(path) and error.reason.startswith("line 2: invalid JSON")
    for episode_id in run.episode_ids:
        assert run.episode(episode_id).num_actions >= 1


def test_a_corrupt_first_line_still_loads_the_others(tmp_path):
    path = tmp_path / "iteration_000000" / "train_rollout_summaries.jsonl"
    records = fx.lines(fx.MATH_IT0)
    path.parent.mkdir()
    path.write_text('{"schema_version": 1, "steps": [\n' + "".join(json.dumps(r) + "\n" for r in records))
    run = ares_viewer.open_run(tmp_path)
    assert len(run) == len(records)
    assert [e.reason.split(":")[0] for e in run.errors] == ["line 1"]


@pytest.mark.parametrize("name", ["tinker", "ray"])
def test_index_rows_of_lines_read_one_at_a_time_match_the_whole_file_read(tmp_path, name):
    # Summaries decode a JSON Lines file a line at a time; a blank or corrupt line sends the file to the whole
    # read, which keeps every other line's row, the line numbers in the ids and the error on its line.
    path, records, _ = ADAPTERS[name](tmp_path)
    plain = fx.write_lines(path, records).read_bytes()
    rows = formats.summarize_file(str(path), plain).rows
    assert [r["episode_id"] for r in rows] == [e.episode_id for e in formats.read_file(str(path), plain).episodes]
    lines = plain.decode().splitlines(keepends=True)
    for odd, reason in (("\n", None), ('{"steps": [,\n', "line 2: invalid JSON")):
        data = "".join([lines[0], odd, *lines[1:]]).encode()
        result = formats.summarize_file(str(path), data)
        assert [r["episode_id"] for r in result.rows] == [
            e.episode_id for e in formats.read_file(str(path), data).episodes]
        assert len(result.rows) == len(rows)
        assert [e.startswith(reason) for e in result.errors] == ([True] if reason else [])
