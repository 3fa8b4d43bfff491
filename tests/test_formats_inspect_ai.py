"""Inspect AI logs, written by inspect-ai itself (``inspect_logs``), read as runs: one episode per sample and epoch."""

from __future__ import annotations

import copy
import importlib.metadata
import io
import shutil
import zipfile

import pytest
from inspect_ai.scorer import value_to_float
from packaging.specifiers import SpecifierSet

import ares_viewer
from ares_viewer import model
from ares_viewer.analysis import ending, search
from ares_viewer.formats import zipped
from ares_viewer.formats.adapters import inspect_ai
from testdata import inspect_logs


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """A folder with one ``.eval`` log (two epochs) and one ``.json`` log of the same task."""
    folder = tmp_path_factory.mktemp("inspect")
    inspect_logs.write_logs(folder, "eval", epochs=2)
    inspect_logs.write_logs(folder, "json")
    return folder


def _by_sample(run, suffix: str, sample: str, epoch: int = 1) -> model.Episode:
    ids = [i for i in run.episode_ids if i.endswith(f"/{sample}/epoch{epoch}") and run.episodes.set_index(
        "episode_id").loc[i, "path"].endswith(suffix)]
    assert len(ids) == 1, ids
    return run.episode(ids[0])


def test_the_installed_inspect_is_in_the_range_the_adapter_reads():
    assert importlib.metadata.version("inspect-ai") in SpecifierSet(inspect_ai.INSPECT_VERSIONS)


@pytest.mark.parametrize("value", ["C", "I", "P", "N", "yes", "No", "TRUE", "false", "0.25", "7", "maybe", 3, 0.5,
                                   True, False])
def test_scores_read_as_inspect_reads_them(value):
    assert inspect_ai.score_value(value) == value_to_float()(value)


def test_a_folder_of_inspect_logs_lists_every_sample_and_epoch(logs):
    run = ares_viewer.open_run(logs)
    assert run.errors == []
    rows = run.episodes
    assert set(rows["format"]) == {"inspect_ai"}
    assert len(rows) == 3 * len(inspect_logs.SAMPLES)  # two epochs in the .eval log, one in the .json log
    by_task = rows.groupby("task_name")["outcome"].agg(set).to_dict()
    assert by_task == {"arith/solve": {"completed"}, "arith/wrong": {"completed"}, "arith/crash": {"errored"},
                       "arith/loop": {"truncated"}, "arith/typo": {"completed"}}
    rewards = rows.groupby("task_name")["total_reward"].max().to_dict()
    assert rewards["arith/solve"] == 1.0 and rewards["arith/wrong"] == 0.0


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_a_sample_reads_as_steps_with_its_tool_results_reward_and_why(logs, suffix):
    run = ares_viewer.open_run(logs)
    solved = _by_sample(run, suffix, "solve")
    assert solved.outcome is model.Outcome.COMPLETED and solved.total_reward == 1.0
    first, last = solved.actions
    assert first.command == "ls step0" and first.tool_calls[0].name == "shell"
    assert first.output == "$ ls step0\nanswer.txt\nnotes.md"
    assert last.response == "The answer is 42" and last.reward == 1.0
    assert last.reasoning == "6 times 7 is 42"
    # The exact input of the second model call: the task, the tool call and its result.
    assert [m.role for m in solved.context(2)] == ["user", "assistant", "tool"]
    assert solved.context(2)[0].content == "solve"
    assert solved.prompt_tokens == 40 and solved.generated_tokens == 14
    assert solved.metadata["evaluation"]["rationale"] == "the answer contains the target '42'"
    assert solved.metadata["evaluation"]["metadata"] == {"target": "42", "grader": "GRADE: noted"}
    assert "the answer contains the target '42'" in ending.of(solved).explanation
    wrong = _by_sample(run, suffix, "wrong")
    assert wrong.total_reward == 0.0
    assert ending.of(wrong).explanation == "completed, reward 0: the answer lacks the target '42'"


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_errors_and_limits_are_outcomes(logs, suffix):
    run = ares_viewer.open_run(logs)
    crashed = _by_sample(run, suffix, "crash")
    assert crashed.outcome is model.Outcome.ERRORED and crashed.total_reward is None
    assert "the tool exploded" in crashed.error
    assert crashed.actions[0].command == "boom" and crashed.actions[0].failure == "exception"
    looped = _by_sample(run, suffix, "loop")
    assert looped.outcome is model.Outcome.TRUNCATED and looped.truncated
    assert looped.metadata["limit"]["type"] == "message"
    assert ending.of(looped).explanation == ("truncated, reward 0: the message limit ended the episode before it "
                                             "finished: Message limit exceeded. count: 7; limit: 6")
    # The last call's tool result, which the limit kept out of the conversation, is still its output.
    assert looped.actions[-1].output.startswith("$ ls step2")


def test_search_finds_text_inside_an_eval_log(logs):
    run = ares_viewer.open_run(logs)
    hits = list(search.hits(run, "ls step2", fields=["command"]))
    assert {hit.episode_id.rsplit("/", 2)[-2] for hit in hits} == {"loop"}
    assert any(run.episodes.set_index("episode_id").loc[hit.episode_id, "path"].endswith(".eval") for hit in hits)


def test_index_rows_agree_with_the_parsed_samples(logs):
    """Defect 5 of #43: a .eval log's rows came from ``summaries.json`` (Inspect's ``turn_count`` as the actions, the
    sample's whole ``model_usage``, the grader's call included, as its tokens and cost), its episodes from the
    samples: the overview and the Episode page disagreed. Every column of every row is now the parsed episode's."""
    run = ares_viewer.open_run(logs)
    assert run.errors == []
    for row in run.episodes.itertuples():
        summary = run.episode(row.episode_id).summary()
        for column in model.EPISODE_COLUMNS:
            listed, parsed = getattr(row, column), summary[column]
            assert listed == parsed or (listed != listed and parsed is None), (row.episode_id, column, listed, parsed)
    solved = run.episodes[run.episodes["task_name"] == "arith/solve"]
    assert set(solved["num_actions"]) == {2} and set(solved["prompt_tokens"]) == {40}  # the grader's 10 left out


def test_eval_rows_are_the_samples_read_once_and_not_the_summaries(logs, monkeypatch):
    path = next(logs.glob("*.eval"))
    read = []
    original = zipped.Archive.read
    monkeypatch.setattr(zipped.Archive, "read", lambda self, name: read.append(name) or original(self, name))
    result = ares_viewer.formats.summarize_file(str(path), path.read_bytes())
    assert len(result.rows) == 2 * len(inspect_logs.SAMPLES) and result.errors == ()
    samples = [name for name in read if name.startswith("samples/")]
    assert sorted(samples) == sorted(set(samples)) and len(samples) == len(result.rows)
    assert "summaries.json" not in read


def _zip(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _lie_about_size(data: bytes, name: str, size: int) -> bytes:
    """The archive with member ``name`` declaring ``size`` uncompressed bytes (central and local headers)."""
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(name)
    out = bytearray(data)
    out[info.header_offset + 22:info.header_offset + 26] = size.to_bytes(4, "little")
    central = out.find(b"PK\x01\x02", info.header_offset + 30 + info.compress_size)
    while central >= 0:
        name_len = int.from_bytes(out[central + 28:central + 30], "little")
        if out[central + 46:central + 46 + name_len] == name.encode():
            out[central + 24:central + 28] = size.to_bytes(4, "little")
            break
        central = out.find(b"PK\x01\x02", central + 1)
    return bytes(out)


def test_hostile_eval_logs_are_errors_of_their_own_file(logs, tmp_path, monkeypatch):
    good = next(logs.glob("*.eval"))
    shutil.copy(good, tmp_path / "good.eval")
    header = b'{"eval": {"task": "bomb"}}'
    bomb = _zip({"header.json": header, "samples/x_epoch_1.json": b"{" + b" " * 20_000_000 + b"}"})
    (tmp_path / "bomb.eval").write_bytes(_lie_about_size(bomb, "samples/x_epoch_1.json", 100))
    monkeypatch.setattr(zipped, "MAX_MEMBERS", 1000)
    many = {"header.json": header, **{f"samples/{n}_epoch_1.json": b"{}" for n in range(3000)}}
    (tmp_path / "many.eval").write_bytes(_zip(many, zipfile.ZIP_STORED))
    (tmp_path / "notzip.eval").write_bytes(b'{"not": "an inspect log"}')
    (tmp_path / "other.eval").write_bytes(_zip({"README.md": b"hello"}))
    (tmp_path / "cut.eval").write_bytes(good.read_bytes()[:-30])  # as a log still being written may be
    run = ares_viewer.open_run(tmp_path)
    errors = {e.path: e.reason for e in run.errors}
    assert set(run.episodes["path"].str.rsplit("/", n=1).str[-1]) == {"good.eval"}
    assert "decompresses to more bytes than the 100 it declares" in errors[str(tmp_path / "bomb.eval")]
    assert "3,001 members, more than 1,000" in errors[str(tmp_path / "many.eval")]
    assert "named like an Inspect log" in errors[str(tmp_path / "notzip.eval")]
    assert errors[str(tmp_path / "other.eval")].endswith("(found: a zip archive of README.md)")
    assert "cut short" in errors[str(tmp_path / "cut.eval")]
    cut = tmp_path / "cut.eval"
    assert ares_viewer.formats.read_file(str(cut), cut.read_bytes()).record_errors[0].cut_short  # pending when live


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_a_tool_call_inspect_refused_before_running_is_a_parsing_error(logs, suffix):
    """#44: Inspect's ``parsing`` ToolCallError (the arguments did not fit the tool, nothing ran) was shown as an
    ``exception`` of the tool."""
    run = ares_viewer.open_run(logs)
    typo = _by_sample(run, suffix, "typo")
    refused, answer = typo.actions
    assert refused.failure == "parsing error" and "'cmd' is a required property" in refused.output
    assert answer.failure is None and typo.total_reward == 1.0
    assert "ls [parsing error]" in str(typo)


def test_a_log_without_cost_has_an_unknown_cost_not_zero(logs):
    """#44: the mock model records no cost; the index, the episode and the run's headline said $0."""
    run = ares_viewer.open_run(logs)
    assert run.episodes["total_cost"].isna().all()
    episode = run.episode(run.episode_ids[0])
    assert episode.total_cost is None and episode.summary()["total_cost"] is None
    assert run.stats()["total_cost"] is None
    assert "cost: unknown" in str(episode) and "cost: unknown" in str(run)


def test_a_log_whose_calls_hold_their_own_input_copies_reads_each_calls_own_text(logs, tmp_path):
    """Each model call's input converted once per sample (issue #46) must not hide a message that a later call
    holds under the same id with other text: logs written without ``events_data`` give each call its own copies."""
    import copy
    import json

    log = json.loads(next(logs.glob("*.json")).read_text())
    (sample,) = [s for s in log["samples"] if s["id"] == "solve"]
    pool = sample.pop("events_data")["messages"]
    calls = [e for e in sample["events"] if e["event"] == "model"]
    for event in calls:  # each call's input inline, a copy of its own
        event["input"] = [copy.deepcopy(m) for start, end in event.pop("input_refs") for m in pool[start:end]]
    edited = calls[1]["input"][0]
    assert edited["id"] == calls[0]["input"][0]["id"]
    edited["content"] = "The question, as the second call saw it"
    log["samples"] = [sample]
    (tmp_path / "log.json").write_text(json.dumps(log))
    run = ares_viewer.open_run(tmp_path)
    assert run.errors == []
    (episode_id,) = run.episode_ids
    episode = run.episode(episode_id)
    first, second = episode.context(1), episode.context(2)
    assert second[0].content == "The question, as the second call saw it"
    assert first[0].content != second[0].content and first[0].content == pool[0]["content"]


def test_texts_inspect_moved_into_attachments_read_as_written(tmp_path):
    """Inspect's writer moves every text of over 100 characters into the sample's attachments and leaves an
    ``attachment://`` reference in its place; the steps, their contexts and the search read the texts themselves."""
    log = inspect_logs.write_logs(tmp_path, "eval", files=12)
    archive = zipped.opened(log.read_bytes(), 1 << 30)
    (member,) = [m for m in archive.members() if m.name.startswith("samples/loop_")]
    assert b"attachment://" in member.read()  # the log holds references, so this test reads through them
    run = ares_viewer.open_run(tmp_path)
    assert run.errors == []
    episode = _by_sample(run, ".eval", "loop")
    listing = "\n".join(["$ ls step0", "answer.txt", "notes.md", *(f"file-{n}.txt" for n in range(12))])
    assert episode.step(1).output == listing
    assert episode.context(2)[-1].content == listing  # the next call's input: the tool's message
    texts = [episode.step(k).output or "" for k in range(len(episode.steps))]
    texts += [m.content for k in range(1, len(episode.steps)) for m in episode.context(k)]
    assert not any("attachment://" in text for text in texts)
    hits = list(search.hits(run, "file-11.txt", fields=["output"]))
    assert {hit.episode_id.rsplit("/", 2)[-2] for hit in hits} >= {"loop"}


def _sample_with_references() -> tuple[dict, dict]:
    attachments = {"a": 'the listing\n"quoted"', 'a" once': "WRONG", "tab\tname": "tabbed", "num": 5}
    sample = {
        "id": "s", "input": "attachment://a",
        "messages": [{"role": "user", "content": "attachment://a"},
                     {"role": "tool", "content": 'said "attachment://a" once'},  # quoted inside a text: no reference
                     {"role": "user", "content": "attachment://tab\tname"},
                     {"role": "user", "content": ["attachment://missing", "attachment://num", 1.5, None, True]}],
        "metadata": {"attachment://a": "a key is no reference"},
        "events": [{"event": "model", "input": [{"role": "user", "content": "attachment://a"}],
                    "output": {"choices": [{"message": {"role": "assistant", "content": "attachment://a"}}]},
                    "call": {"request": "attachment://a"}},
                   {"event": "info", "data": "attachment://a"}],
        "attachments": attachments,
    }
    return sample, attachments


def test_attachments_resolved_in_the_json_text_as_a_walk_of_the_values_resolves_them():
    """A sample orjson decoded for its reading has its references resolved in its JSON text (a third of reading a
    sample once): exactly where the walk of its values resolves them. A whole string value only (never an
    object's key, never a reference quoted inside a text, even one naming an attachment), its name's escapes read;
    a missing or non-text attachment's reference left; the keys reading never looks at left."""
    sample, attachments = _sample_with_references()
    walked = inspect_ai._resolved(copy.deepcopy(sample), attachments)
    in_text = inspect_ai._resolved(copy.deepcopy(sample), attachments, own=True)
    assert in_text == walked and list(in_text) == list(walked)
    listing = attachments["a"]
    assert [m["content"] for m in in_text["messages"][:3]] == [listing, 'said "attachment://a" once', "tabbed"]
    assert in_text["messages"][3]["content"] == ["attachment://missing", "attachment://num", 1.5, None, True]
    assert in_text["input"] == listing and in_text["metadata"] == {"attachment://a": "a key is no reference"}
    model_event, info = in_text["events"]
    assert model_event["output"]["choices"][0]["message"]["content"] == listing
    assert model_event["call"] == {"request": "attachment://a"}  # the provider's raw call: never read
    assert model_event["input"][0]["content"] == "attachment://a"  # resolved a message at a time as converted
    assert info["data"] == "attachment://a"


def test_a_sample_repeating_a_large_attachment_is_resolved_without_copying_it():
    """Resolving in the JSON text copies each reference's text; a sample whose references would make it many
    times larger (a 1 MB attachment named 200 times) is resolved by the walk instead, whose texts are shared."""
    big = "x" * (1 << 20)
    sample = {"id": "s", "messages": [{"role": "tool", "content": "attachment://big"} for _ in range(200)],
              "attachments": {"big": big}}
    assert inspect_ai._resolved_text([sample["messages"]], sample["attachments"]) is None
    resolved = inspect_ai._resolved(sample, sample["attachments"], own=True)
    contents = [m["content"] for m in resolved["messages"]]
    assert all(c is big for c in contents)


def test_a_real_logs_attachments_read_as_their_texts_in_every_step(installed, tmp_path):
    """A real Inspect log (the sample log docent ships, written by an older Inspect: each model event holds its own
    input, its long texts as ``attachment://`` references): no step, response or context shows a reference."""
    import importlib.resources

    docent = installed("docent", "pip install --no-deps docent (see .ci/run)")
    log = importlib.resources.files(docent).joinpath("samples/log.eval").read_bytes()
    (tmp_path / "log.eval").write_bytes(log)
    archive = zipped.opened(log, 1 << 30)
    assert any(b"attachment://" in m.read() for m in archive.members() if m.name.startswith("samples/"))
    run = ares_viewer.open_run(tmp_path)
    assert run.errors == [] and len(run.episode_ids) == 15
    for episode_id in run.episode_ids:
        episode = run.episode(episode_id)
        assert "attachment://" not in (episode.system_prompt or "")
        for k in range(1, len(episode.steps)):
            step = episode.step(k)
            said = [step.output or "", step.response or "", step.reasoning or ""]
            said += [m.content for m in episode.context(k)]
            assert not any("attachment://" in text for text in said), (episode_id, k)
