"""mini-swe-agent's ``summarize_bytes`` (msgspec decoding just the fields a row reads) gives the ordinary path's
rows, or leaves the file to it."""

from __future__ import annotations

import json
import pathlib
import random
import sys

import fast_paths
import formats_fixtures as fx
import pytest
import reasoning_fixtures as rf

from ares_viewer import formats
from ares_viewer.formats import _reading, decoding
from ares_viewer.formats.adapters import mini_swe_agent
from ares_viewer.runs import sources
from ares_viewer.runs.index import builder, store
from benchmarks import bench_scale

KEPT = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "mini-swe-agent-real" / "deterministic-run"
KEPT_24 = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "mini-swe-agent-2.4" / "deterministic-run"


def _write(tmp_path, text: str | bytes, name: str = "batch_000000/trajectories.jsonl") -> pathlib.Path:
    path = tmp_path / "run" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


def _ordinary(path: str, data: bytes) -> list:
    """The rows ``summarize_file`` gives without a ``summarize_bytes``: line by line, else the whole reading."""
    rows = _reading._line_rows(path, data) if decoding.is_json_lines(data) else None
    return list(rows) if rows is not None else list(_reading._read(path, data, summaries=True).rows)


def _exact(rows: list) -> str:
    """Rows as text: equal texts are equal rows, to the type (``1`` is not ``1.0``) and the bit."""
    return repr([sorted(row.items()) for row in rows])


def _took(path: pathlib.Path) -> bool:
    """True when ``summarize_bytes`` read the file; either way ``summarize_file`` gives the ordinary rows."""
    data = path.read_bytes()
    fast = mini_swe_agent.summarize_bytes(str(path), data)
    ordinary = _ordinary(str(path), data)
    if fast is not None:
        assert _exact(fast) == _exact(ordinary)
    assert _exact(list(formats.summarize_file(str(path), data).rows)) == _exact(ordinary)
    return fast is not None


def _same_rows(tmp_path, records: list, *, text: str | bytes | None = None) -> bool:
    """True when the msgspec reader took the file; either way its rows are the ordinary path's."""
    return _took(_write(tmp_path, "".join(json.dumps(r) + "\n" for r in records) if text is None else text))


def _rows(tmp_path) -> list:
    path = tmp_path / "run" / "batch_000000" / "trajectories.jsonl"
    return list(formats.summarize_file(str(path), path.read_bytes()).rows)


def _real(name: str) -> dict:
    folder = KEPT_24 if (KEPT_24 / name).is_dir() else KEPT
    return json.loads((folder / name / f"{name}.traj.json").read_text())


def _generated(n: int = 6) -> list[dict]:
    rng = random.Random(5)
    return [bench_scale._mini_trajectory(i, rng) for i in range(n)]


def test_the_fixtures_and_the_benchmark_run_are_read_by_msgspec(tmp_path):
    records = [_real("text-timeout"), _real("toolcall-submitted"), _real("toolcall-exception"),
               json.loads(fx.MINI_V1.read_text()), json.loads(fx.MINI_V2.read_text())]
    assert _same_rows(tmp_path / "a", records)
    rows = _rows(tmp_path / "a")
    assert [r["outcome"] for r in rows] == ["completed", "completed", "errored", "completed", "completed"]
    assert [r["episode_id"] for r in rows] == [f"batch_000000/trajectories#{n}" for n in range(1, 6)]
    assert rows[0]["nonzero_returncodes"] >= 1  # the command that timed out
    assert _same_rows(tmp_path / "b", _generated(40))


@pytest.fixture(scope="module")
def produced(mini_swe_agent_runs) -> list[dict]:
    """Every scenario the real mini-swe-agent writes, as documents."""
    written = mini_swe_agent_runs.files
    return [json.loads(pathlib.Path(written[name]).read_text()) for name in sorted(written)]


def test_every_scenario_the_real_agent_writes_is_read_by_msgspec(tmp_path, produced):
    chat = [doc for doc in produced if all("role" in m for m in doc["messages"])]
    assert len(chat) == len(produced) - 1  # the Responses API's items have no role: read the ordinary way
    assert _same_rows(tmp_path / "chat", chat)
    rows = _rows(tmp_path / "chat")
    assert sorted(r["outcome"] for r in rows) == ["completed"] * 5 + ["errored", "truncated"]
    assert "LimitsExceeded" in {r["exit_status"] for r in rows}
    assert not _same_rows(tmp_path / "all", produced)


def test_each_file_the_real_agent_writes_is_read_by_msgspec_as_a_whole_document(tmp_path, mini_swe_agent_runs):
    """One ``.traj.json`` per instance, as mini-swe-agent writes them: the record has no line number."""
    for name, written in sorted(mini_swe_agent_runs.files.items()):
        path = _write(tmp_path / name, pathlib.Path(written).read_bytes(), f"{name}/{name}.traj.json")
        doc = json.loads(path.read_text())
        assert _took(path) is all("role" in m for m in doc["messages"]), name


def test_several_commands_of_one_call_are_counted_by_msgspec(tmp_path):
    """Each command a call ran is an action with its own return code, as in the parsed episode."""
    records = [_real("toolcall-two-calls"), _real("text-two-commands")]
    assert _same_rows(tmp_path, records)
    rows = _rows(tmp_path)
    assert [r["num_actions"] for r in rows] == [4, 4]  # 3 model calls, the first ran 2 commands
    assert [r["nonzero_returncodes"] for r in rows] == [1, 1]  # cat missing.txt, the second command of the first


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
def test_shapes_read_by_msgspec_give_the_ordinary_rows(tmp_path, change):
    records = _generated(4)
    change(records[1])
    assert _same_rows(tmp_path, records)


@pytest.mark.parametrize("change", _SHAPES, ids=_SHAPE_IDS)
def test_rows_read_line_by_line_agree_with_the_parsed_trajectories(tmp_path, change):
    # The ordinary path summarizes each line without parsing its steps: its row must say what the Episode page
    # shows (return codes counted from the first result of each call, costs, times, outcome).
    records = _generated(4)
    change(records[1])
    path = str(_write(tmp_path, "".join(json.dumps(r) + "\n" for r in records)))
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


def test_reasoning_fields_are_read_by_msgspec(tmp_path):
    assert _same_rows(tmp_path, _reasoning_docs())


def test_one_trajectory_alone_keeps_the_id_of_a_whole_document(tmp_path):
    assert _same_rows(tmp_path, _generated(1))
    assert [r["episode_id"] for r in _rows(tmp_path)] == ["batch_000000/trajectories"]


@pytest.mark.parametrize("change", [
    lambda d: d["messages"][3].update(extra="not an object"),  # the ordinary path reads it as {}
    lambda d: d.update(info=["a list"]),  # the ordinary path warns
    lambda d: d.update(messages="a text"),  # the ordinary path reports the line
    lambda d: d.pop("messages"),
    # What the reader skips is named in the row's warnings (read in part), which only the ordinary path writes.
    lambda d: d["messages"].insert(3, None),
    lambda d: d["messages"].insert(3, {"type": "web_search_call", "status": "completed"}),
    # A value of another JSON type than the field's: a list or an object where a number or a text is read.
    lambda d: d["messages"][2]["extra"].update(cost=[0.01]),
    lambda d: d["info"].update(exit_status={"a": "b"}),
    lambda d: d["messages"][2]["extra"].update(actions="ls"),
    lambda d: d["messages"][2]["extra"]["response"].update(usage=[1]),
    # Integers beyond 64 bits: orjson reads them as floats.
    lambda d: d["messages"][2]["extra"].update(timestamp=2**64 + 1),
    lambda d: d["messages"][2]["extra"]["response"]["usage"].update(prompt_tokens=2**70),
], ids=["extra-text", "info-list", "messages-text", "no-messages", "null-message", "no-role", "cost-list",
        "status-object", "actions-text", "usage-list", "time-65-bits", "tokens-70-bits"])
def test_odd_shapes_leave_the_file_to_the_ordinary_path(tmp_path, change):
    records = _generated(4)
    change(records[1])
    assert not _same_rows(tmp_path, records)


@pytest.mark.parametrize("change", [
    lambda d: d["messages"][2]["extra"].update(timestamp="1763812806.2"),  # read from the text, with a warning
    lambda d: d["messages"][2]["extra"].update(cost="0.01"),  # the ordinary path leaves out
    lambda d: d["messages"][2]["extra"].update(timestamp="soon"),
    lambda d: d["messages"][3].update(content=[{"type": "text", "text": "<returncode>1</returncode>"}]),
    lambda d: d["messages"][3].update(extra=None),
    lambda d: d["messages"][2]["extra"].pop("timestamp"),  # the response's created stands for it
    lambda d: (d["messages"][2]["extra"].pop("timestamp"), d["messages"][2]["extra"]["response"].update(
        created=1763812000)),
    lambda d: d["messages"][2]["extra"]["response"]["usage"].update(prompt_tokens=None, input_tokens=7),
    lambda d: d["messages"][2]["extra"]["response"]["usage"].update(input_tokens=7),
    lambda d: d["messages"][2].update(role=None),
    lambda d: d["messages"][2].update(role=7),
    lambda d: (d["messages"][2].update(role="user"), d["messages"][2]["extra"].update(interrupt_type="FormatError")),
    lambda d: d["messages"][3]["extra"].update(returncode=1.0),
    lambda d: d["messages"][3]["extra"].update(returncode=2**62),
    lambda d: d.update(skipped={"deep": [[[[[2**80]]]]]}),  # a field no row reads: any value
    lambda d: d["info"].update(config=2**90),
    # the last time, looked for from the end of the messages
    lambda d: d["messages"][-2]["extra"].update(timestamp="soon"),
    lambda d: d["messages"][-2]["extra"].update(timestamp=True),
    lambda d: (d["messages"][-2]["extra"].pop("timestamp"), d["messages"][-2]["extra"]["response"].update(
        created=1763819999)),
    lambda d: [_one_time(m, n) for n, m in enumerate(d["messages"])],
], ids=["time-text", "cost-text", "time-words", "content-parts", "extra-null", "no-timestamp", "created-int",
        "prompt-null", "input-tokens", "role-null", "role-number", "format-error", "code-float", "code-62-bits",
        "skipped-big", "config-big", "last-time-words", "last-time-bool", "last-created", "one-time"])
def test_values_the_ordinary_path_reads_loosely_give_its_rows(tmp_path, change):
    records = _generated(4)
    change(records[1])
    assert _same_rows(tmp_path, records)


def _one_time(message: dict, n: int) -> None:
    """Every time and response time taken out but the fourth message's: the episode starts and ends then."""
    extra = message.get("extra") or {}
    extra.pop("timestamp", None)
    if isinstance(extra.get("response"), dict):
        extra["response"].pop("created", None)
    if n == 3:
        extra["timestamp"] = 1763812345.5


def _no_code(doc: dict) -> None:
    for m in doc["messages"]:
        if m["role"] in ("tool", "user") and m is not doc["messages"][1]:
            m.get("extra", {}).pop("returncode", None)


def _first_result(doc: dict, content) -> None:
    first = next(m for m in doc["messages"] if m["role"] in ("tool", "user") and m is not doc["messages"][1])
    first["content"] = content


@pytest.mark.parametrize(("change", "in_sql"), [
    # Contents are read as text: a text with a line break is one whatever it starts with (the real agent's tool
    # results are JSON written as text), a value that may not be a text sends the file to the ordinary path.
    (lambda d: _first_result(d, '{\n  "returncode": 1,\n  "output": "x"\n}'), True),
    (lambda d: _first_result(d, "<returncode>2</returncode>\n<output>\nx\n</output>"), True),
    (lambda d: _first_result(d, "plain words"), True),
    (lambda d: _first_result(d, '{"returncode": 1}'), True),
    (lambda d: _first_result(d, {"returncode": 1}), True),
    (lambda d: _first_result(d, True), True),
    (lambda d: _first_result(d, 7), True),
    (lambda d: _first_result(d, "7"), True),
    (lambda d: _first_result(d, None), True),
    (lambda d: _first_result(d, [1, 2**70]), True),  # not decoded: its extra holds the return code
    (lambda d: (_first_result(d, [1, 2**70]), _no_code(d)), False),  # decoded: orjson reads a float there
    # The ending's texts are read only when the run did not end submitted.
    (lambda d: d["info"].update(submission=12), True),
    (lambda d: (_exception(d), d["info"].update(submission=12)), True),
    (lambda d: (_exception(d), d["info"].update(submission=["a", "list"])), False),  # a list: not a Scalar
    (lambda d: d["info"].update(traceback="Traceback:\n  boom\nValueError: x", exit_status="ValueError"), True),
    (lambda d: d["messages"][-1].update(content={"a": "b"}), True),
    (lambda d: (_exception(d), d["messages"][-1].update(content={"a": "b"})), True),
    (lambda d: (_exception(d), d["messages"][-1].update(content="provider went away")), True),
], ids=["json-text", "text-protocol", "words", "json-one-line", "object", "true", "number", "number-text", "null",
        "list-70-bits", "list-70-bits-read", "submitted-submission-number", "submission-number", "submission-list",
        "traceback", "submitted-last-object", "last-object", "last-text"])
def test_contents_decoded_where_read_give_the_ordinary_rows(tmp_path, change, in_sql):
    records = _generated(4)
    change(records[1])
    assert _same_rows(tmp_path, records) is in_sql


def _lines(records: list[dict]) -> list[str]:
    return [json.dumps(r) + "\n" for r in records]


def test_a_truncated_last_line_leaves_the_file_to_the_ordinary_path(tmp_path):
    text = "".join(_lines(_generated(3)))
    assert not _same_rows(tmp_path, [], text=text[:-500])
    rows = builder.summarize(str(tmp_path / "run" / "batch_000000" / "trajectories.jsonl"))
    assert len(rows.rows) == 2 and rows.errors and rows.errors[0].startswith("line 3")


def test_a_corrupt_line_or_a_blank_line_leaves_the_file_to_the_ordinary_path(tmp_path):
    lines = _lines(_generated(3))
    assert not _same_rows(tmp_path / "corrupt", [], text="".join([lines[0], "{not json\n", *lines[1:]]))
    assert not _same_rows(tmp_path / "blank", [], text="".join([lines[0], "\n", *lines[1:]]))
    result = builder.summarize(str(tmp_path / "corrupt" / "run" / "batch_000000" / "trajectories.jsonl"))
    assert len(result.rows) == 3 and result.errors[0].startswith("line 2")


def test_a_run_is_indexed_by_msgspec_through_the_builder(tmp_path):
    run = tmp_path / "run"
    bench_scale.write_run(run, 30, fmt="mini")
    files = sources.list_files(run)
    assert all(mini_swe_agent.summarize_bytes(f.path, pathlib.Path(f.path).read_bytes()) for f in files)
    entries = builder.build(files, store.Store(tmp_path / "ix"), workers=1)
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
    assert not _same_rows(tmp_path, [], text=b"".join([lines[0], bad, lines[2]]))  # msgspec skips it unread
    path = tmp_path / "run" / "batch_000000" / "trajectories.jsonl"
    assert builder.summarize(str(path)).rows[1]["warnings"]  # the ordinary path warns about the line


def test_text_in_utf8_beyond_ascii_is_read_by_msgspec(tmp_path):
    records = _generated(3)
    records[1]["messages"][1]["content"] = "héllo, 世界"
    assert _same_rows(tmp_path / "escaped", records)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    assert _same_rows(tmp_path / "raw", [], text=text)


@pytest.mark.parametrize(("text", "took"), [
    (lambda lines: "\ufeff" + "".join(lines), False),  # a byte order mark: orjson fails, the ordinary path warns
    (lambda lines: " " + "".join(lines), False),  # a blank first: not JSON Lines for the ordinary path
    (lambda lines: "".join(line.replace("\n", "\r\n") for line in lines), True),
    (lambda lines: "".join(lines).rstrip("\n"), True),  # no newline after the last line
    (lambda lines: "".join(lines) + "\n\n", False),  # blank lines at the end
    # a repeated key: orjson keeps the last value, msgspec checks each
    (lambda lines: lines[0].replace('{"info"', '{"info": 1, "info"', 1) + "".join(lines[1:]), False),
    (lambda lines: lines[0].replace('{"info"', '{"info": null, "info"', 1) + "".join(lines[1:]), True),
    (lambda lines: lines[1].replace('"messages"', '"deep": ' + "[" * 600 + "]" * 600 + ', "messages"', 1)
        + "".join(lines), True),
    (lambda lines: lines[1].replace('"messages"', '"deep": ' + "[" * 2000 + "]" * 2000 + ', "messages"', 1)
        + "".join(lines), False),
    (lambda lines: '{"steps": [], "episode_id": "x", "messages": [], "info": {"exit_status": "x"}}\n'
        + "".join(lines), False),  # ARES's sniff claims the first line
    (lambda lines: '{"messages": [], "info": {"other": 1}}\n' + "".join(lines), False),  # nobody's
    (lambda lines: '{"messages": [], "trajectory_format": "mini-swe-agent-1"}\n' + "".join(lines), True),
], ids=["bom", "leading-blank", "crlf", "no-last-newline", "blank-end", "repeated-key", "repeated-null", "deep-600",
        "deep-2000", "ares-first", "not-sniffed", "format-tag"])
def test_the_shape_of_the_bytes_decides_as_the_ordinary_path(tmp_path, text, took):
    # How deep Python's json and msgspec go follows the interpreter's recursion limit, which a module loaded by an
    # earlier test may have raised: the nesting cases are judged at Python's default.
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        assert _same_rows(tmp_path, [], text=text(_lines(_generated(3)))) is took
    finally:
        sys.setrecursionlimit(before)


def test_a_file_of_another_format_is_not_decoded(tmp_path):
    tinker = bench_scale._rollout(3, 0, 0, random.Random(1))
    assert not _mentions(json.dumps(tinker).encode())
    assert mini_swe_agent.summarize_bytes("x.jsonl", (json.dumps(tinker) + "\n").encode() * 2) is None


def _mentions(data: bytes) -> bool:
    return mini_swe_agent._mentions_trajectory(data)


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
    assert _rows(tmp_path)[0]["num_actions"] > 150


def test_the_kept_files_written_with_indents_are_read_by_msgspec_as_whole_documents(tmp_path):
    """mini-swe-agent writes one ``.traj.json`` per instance with indents: its first line is ``{``."""
    kept = sorted((pathlib.Path(__file__).resolve().parents[1] / "fixtures").glob("mini-swe-agent*/**/*.traj.json"))
    assert len(kept) >= 10
    for path in kept:
        assert path.read_bytes().startswith(b"{\n")
        doc = json.loads(path.read_text())
        assert _took(path) is all(isinstance(m, dict) and "role" in m for m in doc["messages"]), path


def _without_usage(doc: dict, *, keep_cost: bool) -> dict:
    """``doc`` as a deterministic model writes it: no usage in any message (and no cost unless ``keep_cost``)."""
    for message in doc["messages"]:
        extra = message.get("extra") or {}
        response = extra.get("response")
        if isinstance(response, dict):
            response.pop("usage", None)
        if not keep_cost:
            extra.pop("cost", None)
    if not keep_cost:
        doc.get("info", {}).pop("model_stats", None)
    return doc


def test_a_trajectory_whose_calls_record_no_usage_has_unknown_figures_in_msgspec(tmp_path):
    generated = _generated(4)
    records = [_without_usage(generated[0], keep_cost=False), _without_usage(generated[1], keep_cost=True),
               generated[2]]
    zero = generated[3]  # a call that records 0 tokens: known, 0
    for message in zero["messages"]:
        usage = ((message.get("extra") or {}).get("response") or {}).get("usage")
        if isinstance(usage, dict):
            usage.update(prompt_tokens=0, completion_tokens=0)
    records.append(zero)
    assert _same_rows(tmp_path, records)
    rows = _rows(tmp_path)
    assert [(r["prompt_tokens"], r["generated_tokens"]) for r in rows[:2]] == [(None, None), (None, None)]
    assert rows[0]["total_cost"] is None and rows[1]["total_cost"] is not None
    assert rows[2]["prompt_tokens"] and rows[3]["prompt_tokens"] == 0 == rows[3]["generated_tokens"]
