"""DuckDB's reading of Tinker rollout files gives the ordinary path's rows for every shape it takes, and leaves
every shape it cannot read exactly to the ordinary path (whose rows, errors and warnings the file then gets)."""

from __future__ import annotations

import json

import fast_paths
import pandas as pd
import pytest

from ares_viewer.runs import sources
from ares_viewer.runs.index import _fast_tinker as fast_tinker
from ares_viewer.runs.index import builder, fast_jsonl, store

_SYSTEM = {"role": "system", "content": "You are a coding agent. Run one command per turn."}
_TASK = {"role": "user", "content": "Fix   the failing test\tin  tests/test_io.py, then  submit."}


def _result(code: int, output: str = "done") -> str:
    return f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"


def _swe_rollout(group: int, traj: int, codes: tuple[int, ...] = (0, 1, 0)) -> dict:
    """A multi-turn shell rollout: every prompt extends the previous one by the answer and the command's result."""
    messages = [_SYSTEM, _TASK]
    steps = []
    for turn, code in enumerate((*codes, None)):
        said = {"role": "assistant", "content": f"```bash\nls {turn}\n```"}
        steps.append({"ob_len": 100 + 10 * turn, "ac_len": 20 + turn, "reward": 0.0 if code is not None else 1.0,
                      "episode_done": code is None, "stop_reason": "stop",
                      "trace": {"prompt": {"type": "conversation", "messages": list(messages)},
                                "policy_response": {"type": "conversation", "messages": [said]}}})
        if code is not None:
            messages = [*messages, said, {"role": "user", "content": _result(code, f"out {turn}")}]
    return {"group_idx": group, "traj_idx": traj, "iteration": 3, "tags": ["swe", "shell"],
            "sampling_client_step": 3, "total_reward": 1.0, "final_reward": 0.0, "steps": steps}


def _write(tmp_path, records: list[dict]) -> list[sources.SourceFile]:
    path = tmp_path / "run" / "iteration_000003" / "train_rollout_summaries.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return sources.list_files(tmp_path / "run")


def _same_rows(tmp_path, records: list[dict]) -> bool:
    """True when the fast path took the file; either way its rows equal the ordinary path's."""
    taken, left, _ = fast_paths.same_rows(tmp_path, fast_tinker.SPEC, _write(tmp_path, records))
    return bool(taken) and not left


def test_commands_that_fail_are_counted_from_the_results_in_the_next_prompt(tmp_path):
    records = [_swe_rollout(0, 0), _swe_rollout(0, 1, (2, 0, 127)), _swe_rollout(1, 0, (0,))]
    assert _same_rows(tmp_path, records)
    assert list(fast_paths.frame(tmp_path / "fast")["nonzero_returncodes"]) == [1, 2, 0]


def test_a_rollout_that_records_no_token_count_has_unknown_tokens_and_cost(tmp_path):
    doc = _swe_rollout(0, 1)
    for step in doc["steps"]:
        del step["ob_len"], step["ac_len"]
    assert _same_rows(tmp_path, [_swe_rollout(0, 0), doc])
    rows = fast_paths.frame(tmp_path / "fast")
    assert rows["prompt_tokens"].isna().tolist() == [False, True]
    assert rows["generated_tokens"].isna().tolist() == [False, True]
    assert rows["total_cost"].isna().all()  # Tinker records no cost


def _changed(change) -> dict:
    doc = _swe_rollout(0, 1)
    change(doc)  # in place
    return doc


def _rewritten(doc: dict) -> dict:
    # The agent summarises its history at the third prompt: the context is shorter than the one before.
    doc["steps"][2]["trace"]["prompt"]["messages"] = [_SYSTEM, _TASK, {"role": "user", "content": "(summary)"}]
    return doc


def _edited(doc: dict) -> dict:
    # The second prompt keeps the length but changes an earlier message.
    messages = doc["steps"][1]["trace"]["prompt"]["messages"]
    messages[1] = dict(messages[1], content="Fix the test (edited).")
    return doc


def _parts(doc: dict) -> dict:
    # Content as a list of typed parts, in the first prompt's task and in a command's result.
    doc["steps"][0]["trace"]["prompt"]["messages"][1] = {
        "role": "user", "content": [{"type": "text", "text": "Fix the test "}, {"type": "text", "text": "quickly."}]}
    for step in doc["steps"][1:]:
        messages = step["trace"]["prompt"]["messages"]
        messages[1] = doc["steps"][0]["trace"]["prompt"]["messages"][1]
        messages[3] = dict(messages[3], content=[{"type": "text", "text": _result(1)}])
    return doc


def _tool_role(doc: dict) -> dict:
    for step in doc["steps"][1:]:
        for m in step["trace"]["prompt"]["messages"]:
            if "<returncode>" in str(m.get("content")):
                m["role"] = "tool"
    return doc


def _no_trace(doc: dict) -> dict:
    doc["steps"][1].pop("trace")  # a step without a trace: skipped between the two others
    return doc


def _no_system(doc: dict) -> dict:
    for step in doc["steps"]:
        step["trace"]["prompt"]["messages"] = step["trace"]["prompt"]["messages"][1:]
    return doc


def _reordered_keys(doc: dict) -> dict:
    # The same message written with its keys in another order is the same message (no rewrite).
    messages = doc["steps"][2]["trace"]["prompt"]["messages"]
    messages[2] = {"content": messages[2]["content"], "role": messages[2]["role"]}
    return doc


def _first_prompt(*extra: object):
    """Messages added after the task in every prompt (the task is then read from them, or past them)."""
    def change(doc: dict) -> None:
        for step in doc["steps"]:
            messages = step["trace"]["prompt"]["messages"]
            messages[2:2] = list(extra)
    return change


@pytest.mark.parametrize("change", [_first_prompt({"role": "user", "content": " \n\t"}),
                                    _first_prompt({"role": "user", "content": "Then  run\tthe linter."}),
                                    _first_prompt({"role": "user"}, None, {"role": 7, "content": "not a user"},
                                                  {"role": "user", "content": [{"type": "text", "text": " "}]}),
                                    _first_prompt({"role": "user", "content": "x" * 300}),
                                    _rewritten, _edited, _parts, _tool_role, _no_trace, _no_system, _reordered_keys,
                                    lambda d: d.update(tags=[]), lambda d: d.pop("tags"),
                                    lambda d: d.pop("total_reward"), lambda d: d.update(total_reward=True),
                                    lambda d: d.update(total_reward=None, final_reward=2),
                                    lambda d: d.update(split="eval"), lambda d: d.update(split=7),
                                    lambda d: d.pop("iteration"), lambda d: d.update(iteration=None),
                                    lambda d: d["steps"][-1].update(stop_reason="MAX_TOKENS"),
                                    lambda d: d["steps"][0].update(ob_len=-5, ac_len=2.7),
                                    lambda d: d["steps"][0].update(ob_len=None),
                                    # no step records a count: unknown (NULL), never 0
                                    lambda d: [(s.pop("ob_len", None), s.pop("ac_len", None)) for s in d["steps"]],
                                    lambda d: d["steps"].clear(),
                                    # read exactly as the ordinary path does: unknown counts, not the end
                                    lambda d: d["steps"][0].update(ob_len="120", ac_len=True),
                                    lambda d: d["steps"][-1].update(episode_done="true"),
                                    lambda d: d["steps"][-1].update(episode_done=1),
                                    lambda d: d.update(tags="swe")],
                         ids=["blank-last-user", "second-user", "odd-messages", "long-task",
                              "rewrite", "edited", "parts", "tool", "no-trace", "no-system", "key-order", "no-tags",
                              "tags-missing", "no-total", "bool-total", "final", "split", "split-number",
                              "no-iteration", "null-iteration", "max-tokens", "odd-counts", "null-count", "no-counts",
                              "no-steps", "count-text", "done-text", "done-one", "tags-text"])
def test_shapes_read_in_sql_give_the_ordinary_rows(tmp_path, change):
    records = [_swe_rollout(0, 0), _changed(change), _swe_rollout(1, 0, (3,))]
    assert _same_rows(tmp_path, records)


@pytest.mark.parametrize("change", [
    lambda d: d["steps"][1].update(reward="0.5"),
    lambda d: d.update(total_reward="1.0"),  # the ordinary path warns
    lambda d: d.update(final_reward="2", total_reward=None),
    lambda d: d.update(group_idx=2.5),
    lambda d: d.update(traj_idx="1"),
    lambda d: d.update(iteration="3"),
    lambda d: d.update(sampling_client_step=3.5),
    lambda d: d.update(tags=["swe", 7]),
    lambda d: d.update(tags=['say "hi"']),
    lambda d: d["steps"][0]["trace"].update(prompt="Fix the test."),  # a prompt given as a string
    lambda d: d["steps"][1]["trace"].update(prompt=d["steps"][1]["trace"]["prompt"]["messages"]),  # as a list
    lambda d: d["steps"].append(None),
    lambda d: d["steps"].append("a step"),
    lambda d: d["steps"][0]["trace"]["prompt"].update(messages="Fix the test."),  # the first prompt's messages: a text
    lambda d: d["steps"][0]["trace"]["prompt"].update(messages={"role": "user", "content": "Fix the test."}),
    lambda d: d["steps"][2]["trace"]["prompt"].update(messages="Fix the test."),  # a later prompt's
], ids=["reward-text", "total-text", "final-text",
        "group-float", "traj-text", "iteration-text", "step-float", "tag-number", "tag-quote",
        "prompt-string", "prompt-list", "null-step", "string-step", "messages-text", "messages-object",
        "later-messages-text"])
def test_odd_values_leave_the_file_to_the_ordinary_path(tmp_path, change):
    records = [_swe_rollout(0, 0), _changed(change)]
    assert not _same_rows(tmp_path, records)


@pytest.mark.parametrize("messages", ["Fix the test.", {"role": "user", "content": "Fix the test."}],
                         ids=["text", "object"])
def test_a_one_step_rollout_whose_messages_are_no_list_is_left_to_the_ordinary_path(tmp_path, messages):
    # One step: no later prompt is cast to a list, so only the first prompt's own check sends the file on.
    odd = _swe_rollout(0, 1, codes=())
    odd["steps"][0]["trace"]["prompt"]["messages"] = messages
    assert not _same_rows(tmp_path, [_swe_rollout(0, 0), odd])


def test_a_run_read_in_batches_on_two_threads_equals_the_ordinary_path(tmp_path, monkeypatch):
    run = tmp_path / "run"
    for n in range(6):
        path = run / f"iteration_{n:06d}" / "train_rollout_summaries.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(_swe_rollout(g, t, (g % 3, 0))) + "\n" for g in range(20) for t in range(4)))
    files = sources.list_files(run)
    monkeypatch.setattr(fast_jsonl, "BATCH_BYTES", files[0].size * 2)
    monkeypatch.setattr(builder, "_MIN_FAST_BATCH", files[0].size)
    entries = builder.build(files, store.Store(tmp_path / "fast"), workers=2)
    assert len({e.part for e in entries}) > 1  # several batches, each its own partition
    builder.summarize_batch(files, store.Store(tmp_path / "ordinary"))
    fast, ordinary = fast_paths.frame(tmp_path / "fast"), fast_paths.frame(tmp_path / "ordinary")
    pd.testing.assert_frame_equal(fast, ordinary[list(fast.columns)], check_dtype=False)


def test_a_quote_in_the_run_or_cache_folder_is_no_sql(tmp_path):
    folder = tmp_path / "it's"
    files = _write(folder, [_swe_rollout(0, 0)])
    taken, rest = fast_tinker.build(files, store.Store(folder / "cache 'x'"), threads=1)
    assert len(taken) == 1 and not rest and taken[0].rows == 1


@pytest.mark.parametrize("layout", ["blank-lines", "crlf", "indented"])
def test_line_layouts_give_the_ordinary_rows(tmp_path, layout):
    lines = [json.dumps(_swe_rollout(0, t)) for t in range(3)]
    text = {"blank-lines": "\n\n".join(lines) + "\n", "crlf": "\r\n".join(lines) + "\r\n",
            "indented": "".join("  " + line + "\n" for line in lines)}[layout]
    path = tmp_path / "run" / "iteration_000003" / "train_rollout_summaries.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(text, newline="")
    files = sources.list_files(tmp_path / "run")
    taken, _ = fast_tinker.build(files, store.Store(tmp_path / "fast"), threads=1)
    result = builder.summarize_batch(files, store.Store(tmp_path / "ordinary"))
    assert not result[0].errors
    if taken:
        fast, ordinary = fast_paths.frame(tmp_path / "fast"), fast_paths.frame(tmp_path / "ordinary")
        pd.testing.assert_frame_equal(fast, ordinary[list(fast.columns)], check_dtype=False)


def test_a_value_the_formats_python_fails_on_leaves_only_its_file_to_the_ordinary_path(tmp_path, monkeypatch):
    run = tmp_path / "run"
    for n, task in enumerate(("Fix the parser.", "Fix the printer.")):
        doc = _swe_rollout(0, 0)
        for step in doc["steps"]:
            step["trace"]["prompt"]["messages"][1] = {"role": "user", "content": task}
        path = run / f"iteration_{n:06d}" / "train_rollout_summaries.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(doc) + "\n")
    real = fast_tinker.tinker.task_text

    def fails_on_the_printer(prompt):  # stands for a format function's bug on one value
        if "printer" in json.dumps(prompt):
            raise TypeError("unexpected value")
        return real(prompt)

    monkeypatch.setattr(fast_tinker.tinker, "task_text", fails_on_the_printer)
    taken, rest = fast_tinker.build(sources.list_files(run), store.Store(tmp_path / "fast"), threads=2)
    assert [e.path.split("/")[-2] for e in taken] == ["iteration_000000"]
    assert [f.path.split("/")[-2] for f in rest] == ["iteration_000001"]


@pytest.mark.parametrize(("workers", "count"), [(1, 7), (2, 8), (8, 8), (16, 16), (64, 19)])
def test_more_workers_never_cut_a_large_run_into_more_batches_than_they_use(workers, count):
    # 1.27 GB of rollouts in 635 files of 2 MB: each batch costs fixed queries, so more workers must not mean
    # smaller batches than needed (cut by the workers, 16 of them made 64 batches and spent twice the CPU of one).
    # As few batches as a worker's bound allows, at least one per worker while each holds 64 MiB, in whole rounds.
    files = [sources.SourceFile(f"/run/iteration_{n:06d}/train_rollout_summaries.jsonl", 2_000_000, 0)
             for n in range(635)]
    cut = builder._even(files, workers, fast_tinker.SPEC.batches)
    assert [f for batch in cut for f in batch] == files
    assert len(cut) == count
    most = fast_jsonl.BATCH_BYTES * fast_tinker.SPEC.batches // builder._PER_WORKER
    sizes = [sum(f.size for f in batch) for batch in cut]
    assert max(sizes) <= most + 2_000_000 and max(sizes) - min(sizes) <= 2_000_000
