"""DuckDB's reading of mini-swe-agent JSON Lines gives the ordinary path's rows, or leaves the file to it."""

from __future__ import annotations

import json
import pathlib
import random

import fast_paths
import formats_fixtures as fx
import pytest
import reasoning_fixtures as rf

from ares_viewer import formats
from ares_viewer.runs import sources
from ares_viewer.runs.index import _fast_mini as fast_mini
from ares_viewer.runs.index import builder, fast_jsonl, store
from benchmarks import bench_scale

KEPT = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "mini-swe-agent-real" / "deterministic-run"
KEPT_24 = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "mini-swe-agent-2.4" / "deterministic-run"


def _files(tmp_path, text: str) -> list[sources.SourceFile]:
    path = tmp_path / "run" / "batch_000000" / "trajectories.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return sources.list_files(path.parent)


def _index(tmp_path, text: str) -> tuple[list[store.FileEntry], list[sources.SourceFile], list[sources.SourceFile]]:
    files = _files(tmp_path, text)
    taken, left = fast_paths.read(fast_mini.SPEC, files, store.Store(tmp_path / "fast"))
    return taken, left, files


def _same_rows(tmp_path, records: list, *, text: str | None = None) -> bool:
    """True when the fast path took the file; either way its rows and errors are the ordinary path's."""
    files = _files(tmp_path, "".join(json.dumps(r) + "\n" for r in records) if text is None else text)
    taken, left, entries = fast_paths.same_rows(tmp_path, fast_mini.SPEC, files, exact=True)
    assert not taken or not any(e.errors for e in entries)
    return bool(taken) and not left


def _real(name: str) -> dict:
    folder = KEPT_24 if (KEPT_24 / name).is_dir() else KEPT
    return json.loads((folder / name / f"{name}.traj.json").read_text())


def _generated(n: int = 6) -> list[dict]:
    rng = random.Random(5)
    return [bench_scale._mini_trajectory(i, rng) for i in range(n)]


def test_the_fixtures_and_the_benchmark_run_are_read_in_sql(tmp_path):
    records = [_real("text-timeout"), _real("toolcall-submitted"), _real("toolcall-exception"),
               json.loads(fx.MINI_V1.read_text()), json.loads(fx.MINI_V2.read_text())]
    assert _same_rows(tmp_path / "a", records)
    rows = fast_paths.frame(tmp_path / "a" / "fast")
    assert list(rows["outcome"]) == ["completed", "completed", "errored", "completed", "completed"]
    assert list(rows["episode_id"]) == [f"batch_000000/trajectories#{n}" for n in range(1, 6)]
    assert rows["nonzero_returncodes"].iloc[0] >= 1  # the command that timed out
    assert _same_rows(tmp_path / "b", _generated(40))


@pytest.fixture(scope="module")
def produced(mini_swe_agent_runs) -> list[dict]:
    """Every scenario the real mini-swe-agent writes, as documents."""
    written = mini_swe_agent_runs.files
    return [json.loads(pathlib.Path(written[name]).read_text()) for name in sorted(written)]


def test_every_scenario_the_real_agent_writes_is_read_in_sql(tmp_path, produced):
    chat = [doc for doc in produced if all("role" in m for m in doc["messages"])]
    assert len(chat) == len(produced) - 1  # the Responses API's items have no role: read the ordinary way
    assert _same_rows(tmp_path / "chat", chat)
    rows = fast_paths.frame(tmp_path / "chat" / "fast")
    assert sorted(rows["outcome"]) == ["completed"] * 5 + ["errored", "truncated"]
    assert "LimitsExceeded" in set(rows["exit_status"])
    assert not _same_rows(tmp_path / "all", produced)


def test_several_commands_of_one_call_are_counted_in_sql(tmp_path):
    """Each command a call ran is an action with its own return code, in SQL as in the parsed episode."""
    records = [_real("toolcall-two-calls"), _real("text-two-commands")]
    assert _same_rows(tmp_path, records)
    rows = fast_paths.frame(tmp_path / "fast")
    assert list(rows["num_actions"]) == [4, 4]  # 3 model calls, the first ran 2 commands
    assert list(rows["nonzero_returncodes"]) == [1, 1]  # cat missing.txt, the second command of the first call


def _reasoning_docs() -> list[dict]:
    return [rf.deepseek_v2(), rf.gemini_openrouter_v1(), rf.claude_thinking_v2()]


def _text_results(doc: dict) -> None:
    # 1.x results: the return code only in the text; the second command failed.
    results = [m for m in doc["messages"] if m["role"] in ("tool", "user")][1:]
    for n, m in enumerate(results):
        m.pop("extra", None)
        m["content"] = f"<returncode>{2 * (n == 1)}</returncode>\n<output>\nx\n</output>"


def _exit_message(doc: dict) -> None:
    # 2.x: the status and the exception's text only in the closing exit message.
    _exception(doc)
    doc["info"].pop("exit_status")
    doc["messages"].append({"role": "exit", "content": "RuntimeError: boom", "extra": {"exit_status": "RuntimeError",
                                                                                     "submission": ""}})


def _exception(doc: dict) -> None:
    doc["info"]["exit_status"] = "RuntimeError"
    doc["info"]["traceback"] = "Traceback (most recent call last):\n  ...\nRuntimeError: provider went away\n"
    doc["messages"] = [m for m in doc["messages"] if m["role"] != "exit"]


_SHAPES = [
    _text_results, _exception, _exit_message,
    lambda d: d["info"].update(exit_status=0),  # falls back to the exit message's
    lambda d: d["info"].update(exit_status=""),
    lambda d: [m.get("extra", {}).update(returncode=124) for m in d["messages"] if m["role"] == "tool"],
    lambda d: [m.get("extra", {}).update(returncode=True) for m in d["messages"] if m["role"] == "tool"],
    lambda d: [m.get("extra", {}).update(returncode="1") for m in d["messages"] if m["role"] == "tool"],
    lambda d: [m.get("extra", {}).pop("cost", None) for m in d["messages"]],  # the total falls back to info
    lambda d: [m.get("extra", {}).pop("timestamp", None) for m in d["messages"]],
    lambda d: d["info"].update(exit_status="LimitsExceeded"),
    lambda d: d["info"].pop("exit_status"),
    lambda d: (d["info"].pop("exit_status"), d["messages"].pop()),  # still running
    lambda d: d.pop("info"),
    lambda d: d.update(messages=[]),
    lambda d: d["info"]["model_stats"].update(instance_cost=True),
]
_SHAPE_IDS = ["text-codes", "exception", "exit-message", "status-number", "status-empty", "code-124", "code-bool",
              "code-text", "no-costs", "no-times", "limits", "no-status", "incomplete", "no-info", "no-messages",
              "cost-bool"]


@pytest.mark.parametrize("change", _SHAPES, ids=_SHAPE_IDS)
def test_shapes_read_in_sql_give_the_ordinary_rows(tmp_path, change):
    records = _generated(4)
    change(records[1])
    assert _same_rows(tmp_path, records)


@pytest.mark.parametrize("change", _SHAPES, ids=_SHAPE_IDS)
def test_rows_read_line_by_line_agree_with_the_parsed_trajectories(tmp_path, change):
    # The ordinary path summarizes each line without parsing its steps: its row must say what the Episode page
    # shows (return codes counted from the first result of each call, costs, times, outcome).
    records = _generated(4)
    change(records[1])
    path = _files(tmp_path, "".join(json.dumps(r) + "\n" for r in records))[0].path
    data = pathlib.Path(path).read_bytes()
    rows = formats.summarize_file(path, data).rows
    episodes = formats.read_file(path, data).episodes
    assert [r["episode_id"] for r in rows] == [e.episode_id for e in episodes] != []
    for row, episode in zip(rows, episodes, strict=True):
        for key, value in episode.summary().items():
            if isinstance(value, float) and value == value:
                assert row[key] == pytest.approx(value), key
            else:
                assert row[key] == value or (value is None and row[key] is None), key


def test_reasoning_fields_are_read_in_sql(tmp_path):
    assert _same_rows(tmp_path, _reasoning_docs())


def test_one_trajectory_alone_keeps_the_id_of_a_whole_document(tmp_path):
    assert _same_rows(tmp_path, _generated(1))
    assert list(fast_paths.frame(tmp_path / "fast")["episode_id"]) == ["batch_000000/trajectories"]


@pytest.mark.parametrize("change", [
    lambda d: d["messages"][3].update(extra="not an object"),  # the ordinary path reads it as {}
    lambda d: d["messages"][2]["extra"].update(timestamp="1763812806.2"),  # read from the text
    lambda d: d["messages"][2]["extra"].update(cost="0.01"),
    lambda d: d.update(info=["a list"]),  # the ordinary path warns
    lambda d: d.update(messages="a text"),  # the ordinary path reports the line
    lambda d: d.pop("messages"),
    lambda d: d["messages"][3].update(content=[{"type": "text", "text": "<returncode>1</returncode>"}]),
    # What the reader skips is named in the row's warnings (read in part), which only the ordinary path writes.
    lambda d: d["messages"].insert(3, None),
    lambda d: d["messages"].insert(3, {"type": "web_search_call", "status": "completed"}),
], ids=["extra-text", "time-text", "cost-text", "info-list", "messages-text", "no-messages",
        "content-parts", "null-message", "no-role"])
def test_odd_shapes_leave_the_file_to_the_ordinary_path(tmp_path, change):
    records = _generated(4)
    change(records[1])
    assert not _same_rows(tmp_path, records)


def _first_result(doc: dict, content) -> None:
    first = next(m for m in doc["messages"] if m["role"] in ("tool", "user") and m is not doc["messages"][1])
    first["content"] = content


@pytest.mark.parametrize(("change", "in_sql"), [
    # Contents are read as text: a text with a line break is one whatever it starts with (the real agent's tool
    # results are JSON written as text), a value that may not be a text sends the file to the ordinary path.
    (lambda d: _first_result(d, '{\n  "returncode": 1,\n  "output": "x"\n}'), True),
    (lambda d: _first_result(d, "<returncode>2</returncode>\n<output>\nx\n</output>"), True),
    (lambda d: _first_result(d, "plain words"), True),
    (lambda d: _first_result(d, '{"returncode": 1}'), False),
    (lambda d: _first_result(d, {"returncode": 1}), False),
    (lambda d: _first_result(d, True), False),
    (lambda d: _first_result(d, 7), False),
    (lambda d: _first_result(d, "7"), False),
    (lambda d: _first_result(d, None), True),
    # The ending's texts are read only when the run did not end submitted.
    (lambda d: d["info"].update(submission=12), True),
    (lambda d: (_exception(d), d["info"].update(submission=12)), False),
    (lambda d: (_exception(d), d["info"].update(submission=["a", "list"])), False),
    (lambda d: d["info"].update(traceback="Traceback:\n  boom\nValueError: x", exit_status="ValueError"), True),
    (lambda d: d["messages"][-1].update(content={"a": "b"}), True),
    (lambda d: (_exception(d), d["messages"][-1].update(content={"a": "b"})), False),
    (lambda d: (_exception(d), d["messages"][-1].update(content="provider went away")), True),
], ids=["json-text", "text-protocol", "words", "json-one-line", "object", "true", "number", "number-text", "null",
        "submitted-submission-number", "submission-number", "submission-list", "traceback", "submitted-last-object",
        "last-object", "last-text"])
def test_contents_read_as_text_give_the_ordinary_rows(tmp_path, change, in_sql):
    records = _generated(4)
    change(records[1])
    assert _same_rows(tmp_path, records) is in_sql


def _lines(records: list[dict]) -> list[str]:
    return [json.dumps(r) + "\n" for r in records]


def test_a_truncated_last_line_leaves_the_file_to_the_ordinary_path(tmp_path):
    text = "".join(_lines(_generated(3)))
    taken, left, files = _index(tmp_path, text[:-500])
    assert not taken and left == files
    rows = builder.summarize(files[0].path)
    assert len(rows.rows) == 2 and rows.errors and rows.errors[0].startswith("line 3")


def test_a_corrupt_line_or_a_blank_line_leaves_the_file_to_the_ordinary_path(tmp_path):
    lines = _lines(_generated(3))
    assert not _same_rows(tmp_path / "corrupt", [], text="".join([lines[0], "{not json\n", *lines[1:]]))
    assert not _same_rows(tmp_path / "blank", [], text="".join([lines[0], "\n", *lines[1:]]))
    result = builder.summarize(str(tmp_path / "corrupt" / "run" / "batch_000000" / "trajectories.jsonl"))
    assert len(result.rows) == 3 and result.errors[0].startswith("line 2")


def test_a_run_is_indexed_in_sql_through_the_builder(tmp_path):
    run = tmp_path / "run"
    bench_scale.write_run(run, 30, fmt="mini")
    entries = builder.build(sources.list_files(run), store.Store(tmp_path / "ix"), workers=1)
    assert [e.rows for e in entries] == [30]
    assert set(fast_paths.frame(tmp_path / "ix")["format"]) == {"mini-swe-agent"}


@pytest.mark.parametrize("line", ['[1, 2]', '"a trajectory"', '5', 'null', '{"messages": 5, "info": {}}'],
                         ids=["list", "text", "number", "null", "messages-number"])
def test_a_line_of_another_json_type_leaves_the_file_to_the_ordinary_path(tmp_path, line):
    lines = _lines(_generated(3))
    assert not _same_rows(tmp_path, [], text="".join([lines[0], line + "\n", *lines[1:]]))


def test_bytes_that_are_not_utf8_leave_the_file_to_the_ordinary_path(tmp_path):
    lines = [line.encode() for line in _lines(_generated(3))]
    bad = lines[1].replace(b"astropy", b"astr\xffpy", 1)
    path = tmp_path / "run" / "batch_000000" / "trajectories.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join([lines[0], bad, lines[2]]))
    files = sources.list_files(path.parent)
    chosen, _ = fast_jsonl.choose(files, [fast_mini.SPEC])
    taken, left = fast_jsonl.read_batch(fast_jsonl.connect(1), fast_mini.SPEC, chosen[fast_mini.SPEC],
                                        store.Store(tmp_path / "fast"))
    assert not taken and left == files  # the ordinary path warns about the line
    assert builder.summarize(str(path)).rows[1]["warnings"]


def test_a_long_trajectory_with_rejected_calls_gives_the_ordinary_row(tmp_path):
    doc = _generated(1)[0]
    exit_message = doc["messages"].pop()
    for n in range(150):
        doc["messages"].append({"role": "assistant", "content": f"step {n}", "extra": {"cost": 0.001, "timestamp": n}})
        if n % 7 == 3:  # a second result, and a rejected call's format error
            doc["messages"].append({"role": "tool", "content": "<returncode>1</returncode>", "extra": {}})
            doc["messages"].append({"role": "user", "content": "Please always provide EXACTLY ONE action",
                                    "extra": {"interrupt_type": "FormatError", "timestamp": n + 0.5}})
        doc["messages"].append({"role": "tool", "content": f"<returncode>{n % 3}</returncode>\n<output>x</output>"})
    doc["messages"].append(exit_message)
    assert _same_rows(tmp_path, [doc, *_generated(2)])
    assert fast_paths.frame(tmp_path / "fast")["num_actions"].iloc[0] > 150
