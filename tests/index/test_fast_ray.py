"""DuckDB's reading of Ray runner JSON Lines gives the ordinary path's rows, or leaves the file to it."""

from __future__ import annotations

import json
import random
import re

import fast_paths
import formats_fixtures as fx
import pytest

from ares_viewer import model
from ares_viewer.formats.adapters import ray_runner
from ares_viewer.runs import sources
from ares_viewer.runs.index import _fast_ray as fast_ray
from ares_viewer.runs.index import builder, store
from benchmarks import bench_scale


def _same_rows(tmp_path, records: list[dict]) -> bool:
    """True when the fast path took the file; either way its rows equal the ordinary path's."""
    path = fx.write_lines(tmp_path / "run" / "rollouts.jsonl", records)
    taken, left, _ = fast_paths.same_rows(tmp_path, fast_ray.SPEC, sources.list_files(path.parent))
    return bool(taken) and not left


def _generated(n: int = 40) -> list[dict]:
    rng = random.Random(3)
    return [bench_scale._ray_trajectory(2, i, rng) for i in range(n)]


def test_the_fixture_and_generated_runs_are_read_in_sql(tmp_path):
    assert _same_rows(tmp_path / "a", fx.lines(fx.RAY_LINES))
    assert _same_rows(tmp_path / "b", _generated())


def _result_codes(doc: dict) -> None:
    # Results written in the shell protocol: the second command failed.
    for step in doc["timesteps"]:
        for n, m in enumerate(m for m in step["chats"][-1] if m["role"] == "tool"):
            m["content"] = f"<returncode>{int(n == 1)}</returncode>\n<output>\nx\n</output>"


def _keys_reordered(doc: dict) -> None:
    # Roles are read from the start of a message's JSON text when they come first: the other order is parsed.
    for step in doc["timesteps"]:
        step["chats"][-1] = [dict(reversed(list(m.items()))) for m in step["chats"][-1]]


def _note_before_results(doc: dict) -> None:
    # Each result comes after a developer's note: the result is the first user or tool message after the answer.
    for step in doc["timesteps"]:
        chat = step["chats"][-1]
        for n in range(len(chat) - 1, 0, -1):
            if chat[n]["role"] == "tool":
                chat.insert(n, {"role": "developer", "content": "note"})
    _result_codes(doc)


def _results_after_answers(doc: dict) -> None:
    # Each chat goes on after its answer with that call's result (the next chat repeats it): read from the chat.
    for step, after in zip(doc["timesteps"], doc["timesteps"][1:], strict=False):
        chat = step["chats"][-1]
        chat.append(after["chats"][-1][len(chat)])
    _result_codes(doc)


def _non_ascii(doc: dict) -> None:
    # Texts beyond ASCII: chats are compared and cut by bytes, messages counted by their length in bytes.
    seen: set[int] = set()  # a message a later chat repeats is the same dict: changed once
    for step in doc["timesteps"]:
        for m in step["chats"][-1]:
            if id(m) not in seen:
                seen.add(id(m))
                m["content"] = "Résumé — 日本語 ✓ " + m["content"]


def _two_answers(doc: dict) -> None:
    # The answer is a run of two assistant messages: both stay out of the context.
    for step in doc["timesteps"]:
        step["chats"][-1].append({"role": "assistant", "content": "and one more thought"})


_SHAPES = [
    _note_before_results, _results_after_answers, _non_ascii,
    _result_codes, _two_answers, _keys_reordered,
    lambda d: d.update(error_info="ConnectionResetError: sandbox closed the socket"),
    lambda d: d.update(error_info={"exception_type": "TimeoutError", "error_message": "step exceeded 600 s"}),
    lambda d: d.update(error_info={}),
    lambda d: d.update(reset_kwargs={"task": {"id": "nested-task"}}),
    lambda d: d.update(reset_kwargs=None),
    lambda d: d.update(episode_id=12),
    lambda d: d.update(total_cost=0.25),
    lambda d: d.pop("total_cost", None),  # no cost and no token count recorded: unknown, never 0
    lambda d: d.update(total_cost=None),
    lambda d: [t.pop("timestamp") for t in d["timesteps"]],
    lambda d: d["timesteps"][-1].update(done="true", reward=True),
    lambda d: d["timesteps"][0]["chats"].insert(0, [{"role": "user", "content": "a sub-call"}]),
]
_SHAPE_IDS = ["note-before-results", "results-after-answers", "non-ascii", "codes", "two-answers", "keys-reordered",
              "error-text", "error-dict", "error-empty", "nested-task", "no-kwargs", "int-id", "cost", "no-cost",
              "null-cost", "no-times", "done-text", "other-chat"]


@pytest.mark.parametrize("change", _SHAPES, ids=_SHAPE_IDS)
def test_shapes_read_in_sql_give_the_ordinary_rows(tmp_path, change):
    records = _generated(6)
    change(records[2])
    assert _same_rows(tmp_path, records)


_ODD = [
    lambda d: d.pop("episode_id"),  # the id falls back to the line number
    lambda d: d.update(episode_id=""),
    lambda d: d["timesteps"][1].update(reward="0.5"),  # the ordinary path warns
    lambda d: d["timesteps"][1].update(timestamp="noon"),
    lambda d: d["timesteps"][1].update(chats=d["timesteps"][1]["chats"][-1]),  # one chat written flat
    lambda d: d["timesteps"].append("a timestep"),
    lambda d: d["timesteps"][2].update(chats=[]),  # a timestep without a context
    lambda d: d["timesteps"][2]["chats"][-1].pop(2),  # a context that drops a message: a rewrite
    lambda d: d["timesteps"][2]["chats"][-1][3].update(content=[{"type": "text", "text": "parts"}]),  # a result
    lambda d: d.update(timesteps={"0": {}}),
]
_ODD_IDS = ["no-id", "empty-id", "reward-text", "time-text", "flat-chat", "string-step", "no-context", "rewrite",
        "content-parts", "steps-object"]


@pytest.mark.parametrize("change", _ODD, ids=_ODD_IDS)
def test_odd_shapes_leave_the_file_to_the_ordinary_path(tmp_path, change):
    records = _generated(6)
    change(records[2])
    assert not _same_rows(tmp_path, records)


def test_a_run_of_both_formats_indexes_each_its_own_way(tmp_path):
    run = tmp_path / "run"
    fx.write_lines(run / "ray" / "rollouts.jsonl", _generated(10))
    bench_scale.write_run(run / "tinker", 20)
    files = sources.list_files(run)
    entries = builder.build(files, store.Store(tmp_path / "ix"), workers=1)
    assert sorted(e.rows for e in entries) == [10, 20]
    rows = fast_paths.frame(tmp_path / "ix")
    assert sorted(set(rows["format"])) == ["ray", "tinker"]
    assert json.loads(json.dumps(list(rows["episode_id"])))[:1]


def _long_answer(doc: dict) -> None:
    for step in doc["timesteps"]:
        step["chats"][-1].extend({"role": "assistant", "content": f"thought {k}"} for k in range(4))


def _no_answer(doc: dict) -> None:
    doc["timesteps"][1]["chats"][-1].extend({"role": "user", "content": f"more {k}"} for k in range(4))


@pytest.mark.parametrize("change", [_long_answer, _no_answer], ids=["long-answer", "no-answer-at-the-end"])
def test_answers_beyond_the_last_messages_give_the_ordinary_rows(tmp_path, change):
    records = _generated(6)
    change(records[2])
    assert _same_rows(tmp_path, records)  # the whole chat's roles are read: any answer's start is found in SQL


_MORE = [lambda d: d.update(error="a top-level error"), lambda d: d.update(total_cost=True),
         lambda d: d.update(error="kept", error_info="the real one"),
         lambda d: d["timesteps"][1].update(reward="lots", timestamp="noon")]


@pytest.mark.parametrize("change", [*_SHAPES, *_ODD, _long_answer, _no_answer, *_MORE],
                         ids=[*_SHAPE_IDS, *_ODD_IDS, "long-answer", "no-answer-at-the-end", "error-key", "cost-bool",
                              "error-both", "two-warnings"])
def test_summaries_are_the_parsed_episodes_rows(change):
    # ``summarize`` reads a row without building the episode: it must say what the Episode page shows.
    records = _generated(4)
    change(records[2])
    for n, doc in enumerate(records):
        try:
            episode = ray_runner.parse(doc, "run/rollouts.jsonl", n + 1)[0]
        except ray_runner.FormatError as exc:  # a document that is no trajectory: the same error
            with pytest.raises(ray_runner.FormatError, match=re.escape(str(exc))):
                ray_runner.summarize(doc, "run/rollouts.jsonl", n + 1)
            continue
        assert ray_runner.summarize(doc, "run/rollouts.jsonl", n + 1) == [
            model.EpisodeRow(**episode.summary(), warnings=list(episode.warnings))]


def test_the_ray_runner_records_no_token_count_and_a_cost_only_where_written(tmp_path):
    records = _generated(3)
    records[1]["total_cost"] = 0.25
    assert _same_rows(tmp_path, records)
    rows = fast_paths.frame(tmp_path / "fast")
    assert rows["prompt_tokens"].isna().all() and rows["generated_tokens"].isna().all()  # unknown, never 0
    assert rows["total_cost"].isna().tolist() == [True, False, True]
