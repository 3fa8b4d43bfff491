"""The flag index: every episode's file flags kept beside the run's index, agreeing with ``behaviours.collect``,
read again only for the files that changed, a bad file an error of its own, and nothing written into the run."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import uuid

import pandas as pd
import pytest

import ares_viewer
from ares_viewer.analysis import behaviours
from ares_viewer.analysis.behaviours import flag_index, flag_queries

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
RUNS = [
    DEMO,
    REPO / "tests" / "fixtures" / "mini-swe-agent-real" / "deterministic-run",
    REPO / "tests" / "fixtures" / "tinker" / "math-rl",
    REPO / "tests" / "fixtures" / "ray",
]
SLUGIFY_WRONG = "aefe890e-4268-4666-90b5-dd09d3259e06"


def stored(run: ares_viewer.Run) -> pd.DataFrame:
    """The flag table as rows of (episode id, flag name, first evidence step)."""
    path = flag_index.table_path(run)
    assert path is not None
    table = pd.read_parquet(path)
    names = flag_index.names()
    rows = [
        (row.episode_id, name, row.steps[bit])
        for row in table.itertuples()
        for bit, name in enumerate(names)
        if row.mask >> bit & 1
    ]
    return pd.DataFrame(rows, columns=["episode_id", "flag", "step"]).sort_values(["episode_id", "flag"])


def collected(run: ares_viewer.Run) -> pd.DataFrame:
    _, evidence = behaviours.collect(run, behaviours.episode_findings)
    found = evidence[["episode_id", "flag", "step"]].sort_values(["episode_id", "flag"])
    return found.astype({"step": "Int64"})


def tree(folder: pathlib.Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.parametrize("location", RUNS, ids=lambda p: p.name)
def test_the_flag_index_holds_what_collect_finds_with_the_same_evidence_steps(location):
    run = ares_viewer.open_run(location)
    assert flag_index.update(run).read > 0
    index = stored(run).astype({"step": "Int64"}).reset_index(drop=True)
    assert index.equals(collected(run).reset_index(drop=True))
    table = behaviours.table(run, behaviours.episode_findings)
    expected = behaviours.rates(table)
    expected = expected[expected["source"] == behaviours.EPISODE].reset_index(drop=True)
    pd.testing.assert_frame_equal(flag_queries.rate_table(run), expected, check_dtype=False)
    assert flag_queries.covered(run) == len(run)


def test_the_overview_filter_and_a_flags_evidence_come_from_the_index():
    run = ares_viewer.open_run(DEMO)
    flag_index.update(run)
    assert flag_queries.episode_ids(run, ["no_tests_before_submit"]) == [SLUGIFY_WRONG]
    assert flag_queries.episode_ids(run, ["touched_tests", "ran_tests"]) == ["be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"]
    total, page = flag_queries.evidence(run, "ran_tests", limit=4, offset=4)
    assert total == 9 and len(page) == 4
    per_task = flag_queries.rate_table(run, by="task_name")
    slugify = per_task[per_task["task_name"] == "textkit__slugify-accents"].set_index("flag")
    assert slugify.loc["no_tests_before_submit", ["solved_rate", "failed_rate"]].tolist() == [0.0, 1.0]
    with pytest.raises(KeyError, match=r"no column .iteration. to group"):
        flag_queries.rate_table(run, by="iteration")
    with pytest.raises(KeyError, match="not an episode-file flag: touched_tests_files"):
        flag_queries.episode_ids(run, ["touched_tests_files"])


def test_before_the_first_build_queries_say_the_flags_are_not_read():
    run = ares_viewer.open_run(DEMO)
    assert not flag_index.coverage(run).current
    with pytest.raises(flag_queries.NotBuiltError, match="have not been read yet"):
        flag_queries.rate_table(run)


def test_only_a_changed_or_new_file_is_read_again_and_a_removed_one_leaves(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(DEMO, folder)
    run = ares_viewer.open_run(folder)
    assert flag_index.update(run).read == 10
    assert flag_index.update(run).read == 0  # unchanged: nothing read
    # The wrong slugify episode now runs its tests before submitting: its file changed, so its flags change.
    changed = folder / f"{SLUGIFY_WRONG}.json"
    text = changed.read_text()
    assert "no_tests_before_submit" not in text
    shutil.copy(folder / "48d3a704-23f6-46b7-aed6-fa19b678c0a6.json", changed)
    (folder / "fbfa4879-77ae-4a41-b721-8ccd8f237416.json").unlink()
    run.refresh()
    assert not flag_index.coverage(run).current
    result = flag_index.update(run)
    assert result.read == 1 and result.failed == {}
    assert flag_queries.episode_ids(run, ["no_tests_before_submit"]) == []
    assert flag_queries.covered(run) == len(run) == 9
    assert flag_index.coverage(run).current


def test_a_file_that_fails_is_an_error_of_its_own_and_the_rest_are_read(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(DEMO, folder)
    run = ares_viewer.open_run(folder)
    # The file goes bad after the run was indexed and keeps its size and mtime (the index still lists it).
    bad = folder / f"{SLUGIFY_WRONG}.json"
    stat = bad.stat()
    bad.write_bytes(b"\xff" * stat.st_size)
    os.utime(bad, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = flag_index.update(run)
    assert list(result.failed) == [str(bad)]
    assert flag_index.errors(run) == [(str(bad), result.failed[str(bad)])]
    assert flag_queries.covered(run) == 9
    assert len(flag_queries.episode_ids(run, ["ran_tests"])) == 9


def test_the_flags_are_kept_in_the_cache_and_nothing_is_written_into_the_run(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(DEMO, folder)
    run = ares_viewer.open_run(folder)
    before = tree(folder)
    flag_index.update(run)
    assert tree(folder) == before
    cache = pathlib.Path(os.environ["ARES_VIEWER_CACHE"])
    assert flag_index.folder(run).is_relative_to(cache)
    assert (flag_index.folder(run) / flag_index.MANIFEST).exists()


def test_worker_processes_give_the_same_table_with_progress(tmp_path):
    # A worker answers the fast paths with what the parent sent it and opens the run only for a file read whole
    # (here one not in ARES's writer layout): both must give the table one process gives.
    from ares_viewer.base import agent_text

    folder = tmp_path / "run"
    shutil.copytree(DEMO, folder)
    compact = _ares_episode([(_bash("pytest -q"), agent_text.result_message(1, "1 failed\n"))] * 3)
    (folder / f"{compact['episode_id']}.json").write_text(json.dumps(compact))
    serial = ares_viewer.open_run(folder)
    flag_index.update(serial, workers=1)
    expected = stored(serial).reset_index(drop=True)
    assert compact["episode_id"] in set(expected["episode_id"])
    shutil.rmtree(flag_index.folder(serial))
    seen: list[tuple[int, int]] = []
    result = flag_index.update(
        ares_viewer.open_run(folder), workers=2, progress=lambda done, total: seen.append((done, total))
    )
    assert result.read == 11 and result.failed == {}
    assert seen[0] == (0, 11) and seen[-1] == (11, 11)
    assert stored(serial).reset_index(drop=True).equals(expected)


def test_a_64th_episode_file_flag_is_refused_at_registration(monkeypatch):
    """The flag index keeps the episode-file flags as bits of one int64: one flag past what it holds is an error when
    it is registered, never a bit that overflows into the sign."""
    from ares_viewer.analysis.behaviours import registry

    flags = dict(registry.FLAGS)
    monkeypatch.setattr(registry, "FLAGS", flags)
    present = sum(f.source == registry.EPISODE for f in flags.values())
    for n in range(registry.MAX_EPISODE_FLAGS - present):
        registry.flag(f"extra_{n}", "a test flag", registry.EPISODE)(lambda episode: None)
    with pytest.raises(ValueError, match="at most 63 episode-file flags"):
        registry.flag("one_too_many", "a test flag", registry.EPISODE)(lambda episode: None)
    registry.flag("a_snapshot_flag", "snapshot flags are not bits", registry.SNAPSHOTS)(lambda episode, changes: None)


def _rollout(group: int, traj: int, said: list[dict], steps: int = 1, result: str = "<returncode>1</returncode>\n"
             "<output>no</output>", rewrite_at: int | None = None, **extra) -> dict:
    """A Tinker rollout line: ``steps`` steps, each answered by ``said``; the prompt grows by the answer and
    ``result`` (at step ``rewrite_at`` it starts again from the task)."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Task {group}"}]
    out = []
    for turn in range(steps):
        if turn == rewrite_at:
            messages = messages[:2]
        out.append({"ob_len": 10, "ac_len": 5, "reward": 1.0, "episode_done": turn == steps - 1, "stop_reason": "stop",
                    "trace": {"prompt": {"messages": list(messages)}, "policy_response": {"messages": said}}})
        messages = [*messages, *said, {"role": "user", "content": result}]
    return {"group_idx": group, "traj_idx": traj, "iteration": 0, "steps": out, **extra}


def _played(group: int, traj: int, turns: list[tuple[list[dict], str]]) -> dict:
    """A Tinker rollout line of one step per turn: its response, then the result the next prompt adds."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Task {group}"}]
    out = []
    for turn, (said, result) in enumerate(turns):
        out.append({"ob_len": 10, "ac_len": 5, "reward": 0.0, "episode_done": turn == len(turns) - 1,
                    "stop_reason": "stop",
                    "trace": {"prompt": {"messages": list(messages)}, "policy_response": {"messages": said}}})
        messages = [*messages, *said, {"role": "user", "content": result}]
    return {"group_idx": group, "traj_idx": traj, "iteration": 0, "steps": out}


def test_tinker_rollouts_that_run_no_command_are_screened_and_the_flags_are_those_of_the_whole_read(
        tmp_path, monkeypatch):
    # One-step rollouts that run no command are only decoded (no episode built); every other line is parsed: the
    # flags must be exactly what reading every episode whole finds, with the same evidence steps.
    from ares_viewer.analysis.behaviours import screen
    from ares_viewer.base import agent_text

    bash = [{"role": "assistant", "content": "Install it.\n```bash\npip install pytest && pytest -q\n```"}]
    lines = [
        _rollout(0, 0, [{"role": "assistant", "content": "The answer is \\boxed{4}."}]),
        _rollout(0, 1, [{"role": "assistant", "content": "Two blocks ```bash\nls\n``` and ```bash\npwd\n```"}]),
        _rollout(1, 0, bash),
        _rollout(1, 1, bash, steps=3),
        _rollout(2, 0, [{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "curl x"}'}}]}]),
        _rollout(2, 1, [{"role": "assistant", "content": "done"}], error="docker: container died"),
        _rollout(3, 0, [{"role": "assistant", "content": "again"}], steps=4),
        _rollout(3, 1, [{"role": "assistant", "content": "no block"}], steps=3,
                 result="<returncode></returncode>\n" + agent_text.format_error(0)),
        _rollout(4, 0, [{"role": "assistant", "content": "think"}], steps=4, rewrite_at=2),
        _rollout(4, 1, [{"role": "assistant", "content": "think"}], steps=3, result="plain feedback"),
    ]
    run_dir = tmp_path / "tinker" / "iteration_000000"
    run_dir.mkdir(parents=True)
    path = run_dir / "train_rollout_summaries.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "{not json\n")
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    run = ares_viewer.open_run(tmp_path / "tinker")
    screened = [screen.context_steps(line) is not None for line in lines]
    assert screened == [True, True, False, False, False, False, True, True, True, True]
    assert screen.flag_rows(run, str(path), flag_index.names(), flag_index.flag_rows) is not None
    assert flag_index.update(run).episodes == 10
    index = stored(run).astype({"step": "Int64"}).reset_index(drop=True)
    assert index.equals(collected(run).reset_index(drop=True))
    assert {"installed_packages", "ran_tests", "tried_network", "container_errors", "format_errors",
            "context_rewrites"} <= set(index["flag"])
    monkeypatch.setattr(screen, "SCREENED", frozenset())  # another flag registered: every file is read whole
    assert screen.flag_rows(run, str(path), flag_index.names(), flag_index.flag_rows) is None


def _ares_episode(actions: list[tuple[str, str]], *, rewrite_at: int | None = None, final: str | None = None,
                  **top) -> dict:
    """An ARES episode file's document as ARES's collector writes it: each action a response and the result
    message the environment answered (the context grows by both; at ``rewrite_at`` it starts again from the
    task); ``final``: the output of a submit command answered by no observation (the recorder's
    ``final_command``)."""
    task = {"role": "user", "content": "Fix the bug."}
    messages = [task]
    steps: list[dict] = [{"step_index": 0, "step_type": "FIRST", "observation": {"messages": list(messages)},
                          "action": None, "reward": None, "discount": None, "timestamp": 1.0}]
    for k, (response, result) in enumerate(actions, start=1):
        if k == rewrite_at:
            messages = [task]
        messages = [*messages, {"role": "assistant", "content": response}, {"role": "user", "content": result}]
        steps.append({"step_index": k, "step_type": "MID", "observation": {"messages": list(messages)},
                      "action": {"data": [{"content": response}]}, "reward": 0.0, "discount": 1.0,
                      "timestamp": 1.0 + k})
    doc = {"episode_id": str(uuid.uuid4()), "task_name": "calc", "steps": steps, **top}
    if final is not None:
        k = len(actions) + 1
        steps.append({"step_index": k, "step_type": "LAST", "observation": None,
                      "action": {"data": [{"content": _bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")}]},
                      "reward": 0.0, "discount": 0.0, "timestamp": 1.0 + k})
        doc["final_command"] = {"step_index": k, "returncode": 0, "output": final}
    return doc


def _bash(command: str) -> str:
    return f"THOUGHT: next.\n\n```bash\n{command}\n```"


def test_ares_flags_read_from_the_commands_side_are_those_of_the_whole_read(tmp_path, monkeypatch):
    # ARES files are read as the index's fast path reads them (context lists as bytes, only the messages each
    # adds decoded) and the flags checked on that: every flag, with its evidence step, must be what reading the
    # episode whole finds, and a file in another layout is read whole.
    from ares_viewer.analysis.behaviours import ares_flags
    from ares_viewer.base import agent_text
    from ares_viewer.runs import sources

    def ran(command: str, code: int, output: str = "ok\n") -> tuple[str, str]:
        return _bash(command), agent_text.result_message(code, output)

    docs = [
        _ares_episode([ran("pip install pytest", 0), ran("curl https://example.com", 0), ran("make build", 2),
                       ran("sed -i s/a/b/ tests/test_calc.py", 0), ran("make  build", 2), ran("pytest -q", 1),
                       ("```bash\nls\n``` and ```bash\npwd\n```", agent_text.format_error(2)),
                       (_bash("sleep 999"), "The command timed out after 60 seconds."), ran("make build", 2)],
                      rewrite_at=8, final="COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"),
        _ares_episode([ran("ls", 0), ran("cat src/calc.py", 0)], final="COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"
                      "diff --git a/src/calc.py b/src/calc.py\n"),
        _ares_episode([ran("python -m pytest -q", 1), ran("ls", 0)], error="RateLimitError: too many requests"),
        _ares_episode([ran("ls", 0)], error="docker: container 3f2 exited (OCI runtime error)"),
    ]
    folder = tmp_path / "ares"
    folder.mkdir()
    for doc in docs:
        (folder / f"{doc['episode_id']}.json").write_text(json.dumps(doc, indent=2))
    compact = _ares_episode([ran("ls", 0), ran("ls", 0), ran("ls", 0)])  # not the writer's layout: read whole
    (folder / f"{compact['episode_id']}.json").write_text(json.dumps(compact))
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    for location in (folder, DEMO):
        run = ares_viewer.open_run(location)
        for path, _ in run.files():
            data = sources.read_bytes(path)
            fast = ares_flags.flag_rows(run, path, data, flag_index.names(), flag_index.flag_rows)
            assert (fast is None) == (path.endswith(f"{compact['episode_id']}.json")), path
            assert fast is None or fast == flag_index.flag_rows(run.file_episodes(path, data), path), path
    run = ares_viewer.open_run(folder)
    assert flag_index.update(run).episodes == 5
    index = stored(run).astype({"step": "Int64"}).reset_index(drop=True)
    assert index.equals(collected(run).reset_index(drop=True))
    assert set(index["flag"]) == set(flag_index.names())  # every episode-file flag shows in this run
    monkeypatch.setattr(ares_flags, "READ", frozenset())  # another flag registered: every file is read whole
    path = run.files()[0][0]
    assert ares_flags.flag_rows(run, path, sources.read_bytes(path), flag_index.names(), flag_index.flag_rows) is None


def _varied_ares_episodes() -> list[dict]:
    """ARES episode documents in the shapes the commands' side must read as the whole read does: the collector's
    own (``synthetic``: completed, truncated, errored, long outputs elided, a dropped context), tool calls (one or
    several per response, Anthropic's ``input`` and OpenAI's ``arguments``) answered by tool messages, several bash
    blocks in one response, time-outs, exceptions and killed commands, content parts, a context that adds nothing,
    a missing observation, an unknown step type, a record that is not one, a recorded submission and errors."""
    from ares_viewer.base import agent_text
    from testdata import synthetic

    docs = [synthetic.episode_dict(actions=actions, ending=ending, output_chars=chars, seed=seed, drop_context_at=drop)
            for seed, (actions, ending, chars, drop) in enumerate([
                (6, "completed", 400, None), (5, "truncated", 12_000, None), (4, "errored", 600, 2),
                (7, "incomplete", 25_000, 3), (1, "completed", 10, None)])]

    def tool(name: str, call: dict) -> dict:
        return {"id": f"toolu_{name}", "name": name, **call}

    timed_out = "<returncode>-1</returncode>\n<exception>TimeoutExpired: timed out after 60 s</exception>"
    doc = _ares_episode([
        (_bash("pytest -q"), agent_text.result_message(1, "1 failed\n")),
        (_bash("sleep 999"), timed_out),
        (_bash("python big.py"), agent_text.result_message(137, "Killed\n")),
        (_bash("ls"), "<exception>RuntimeError: the container went away</exception>"),
        ("```bash\nls\n```\n```bash\npwd\n```", agent_text.format_error(2)),
        (_bash("pip install requests"), agent_text.result_message(0, "")),
        (_bash("pytest -q"), agent_text.result_message(1, "1 failed\n")),
        (_bash("pytest  -q"), agent_text.result_message(1, "1 failed\n")),
        (_bash("pytest -q "), agent_text.result_message(1, "1 failed\n")),
    ], final="COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n")
    steps = doc["steps"]
    steps[1]["action"]["data"] = [{"content": "Run it."}, tool("bash", {"input": {"command": "cat tests/x.py"}})]
    steps[1]["observation"]["messages"][-1] = {"role": "tool", "content": "def test(): pass\n"}
    steps[2]["action"]["data"] = [tool("bash", {"arguments": '{"command": "curl https://example.com"}'}),
                                  tool("bash", {"arguments": '{"command": "rm tests/x.py"}'})]
    steps[3]["observation"]["messages"][-1]["content"] = [{"type": "text", "text": timed_out}]
    steps[4]["observation"] = None  # a result that reached no observation
    steps[5]["step_type"] = "ODD"
    steps.insert(6, "not a step record")
    steps[7]["observation"]["messages"] = steps[5]["observation"]["messages"]  # a context that adds nothing
    docs.append(doc)
    docs.append(_ares_episode([(_bash("ls"), agent_text.result_message(0, "a\n"))], submission="",
                              error={"type": "APIConnectionError", "message": "openai: connection reset"}))
    docs.append(_ares_episode([(_bash("git diff"), agent_text.result_message(0, ""))], rewrite_at=1,
                              error="docker: OCI runtime exec failed"))
    return docs


def test_ares_flags_of_the_commands_side_are_those_of_the_whole_read_on_varied_files(tmp_path, monkeypatch):
    # The commands' side (``ares.command_side``, no ``model.Step`` built) must give every flag its evidence as the
    # whole read does, on the sample run (recorded through real ARES) and on varied shapes of ARES files: each
    # flag's hit compared (step, evidence, how it was found), not only the index's bits.
    from ares_viewer.analysis.behaviours import ares_flags, registry
    from ares_viewer.formats.adapters import ares
    from ares_viewer.runs import sources

    folder = tmp_path / "varied"
    folder.mkdir()
    for doc in _varied_ares_episodes():
        (folder / f"{doc['episode_id']}.json").write_text(json.dumps(doc, indent=2))
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    order = [registry.FLAGS[name] for name in flag_index.names()]
    assert set(flag_index.names()) <= ares_flags.READ
    shown: set[str] = set()
    for location in (folder, DEMO):
        run = ares_viewer.open_run(location)
        for path, _ in run.files():
            data = sources.read_bytes(path)
            side = ares.command_side(path, data)
            assert side is not None, path  # every one of them is in the writer's layout
            (episode,) = run.file_episodes(path, data)
            hits = [flag.check(episode) for flag in order]
            assert [flag.check(side) for flag in order] == hits, path
            assert ares_flags.flag_rows(run, path, data, flag_index.names(), flag_index.flag_rows) == \
                flag_index.flag_rows(iter((episode,)), path)
            shown |= {flag.name for flag, hit in zip(order, hits, strict=True) if hit is not None}
    assert shown == set(flag_index.names())  # every flag shows somewhere: each was compared on a hit


def test_the_tinker_screen_read_from_line_bytes_gives_the_flags_of_the_whole_read(tmp_path, monkeypatch):
    # Most lines are screened from their bytes (no backtick, no ``tool_calls``, no escaped ASCII character): only
    # their responses' shapes are looked at. Lines that could still hide a command (content parts that join into a
    # bash block, escaped backticks or an escaped ``tool_calls`` key, a response in another shape, a line only
    # Python's decoder reads) must be parsed: every flag, with its evidence step, is what the whole read finds.
    from ares_viewer.analysis.behaviours import screen
    from ares_viewer.base import agent_text
    from ares_viewer.runs import sources

    def bash(command: str) -> list[dict]:
        return [{"role": "assistant", "content": f"Next.\n```bash\n{command}\n```"}]

    quiet = [{"role": "assistant", "content": "The answer is \\boxed{4}, caf\u00e9."}]
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "Run ``"},
                                               {"type": "text", "text": "`bash\npip install requests\n```"}]}]
    submit = bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    lines = [json.dumps(line) for line in (
        _rollout(0, 0, quiet),
        _rollout(0, 1, quiet, steps=3),
        _rollout(0, 2, quiet, steps=3, result="<returncode></returncode>\n" + agent_text.format_error(0)),
        _rollout(0, 3, quiet, steps=4, rewrite_at=2),
        _rollout(1, 0, parts),
        _rollout(1, 1, bash("make build"), steps=3),
        _rollout(1, 2, bash("sed -i s/a/b/ tests/test_calc.py && pytest -q"), steps=2),
        _rollout(1, 3, bash("curl https://example.com"), steps=2, result="<returncode>0</returncode>\n<output>"
                 "</output>"),
        _rollout(2, 0, submit, result="<returncode>0</returncode>\n<output>COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"
                 "</output>"),
        _rollout(2, 1, quiet, error="RateLimitError: too many requests"),
        _rollout(2, 2, quiet, error="docker: container died"),
        {**_rollout(2, 3, quiet), "steps": [{**_rollout(2, 3, quiet)["steps"][0], "trace": {
            "prompt": {"messages": [{"role": "user", "content": "Task 2"}]}, "policy_response": "I think 4"}}]},
    )]
    # the same bash block written with escaped backticks, and a tool call under an escaped key: no byte shows them
    lines.append(json.dumps(_rollout(3, 0, bash("curl https://example.com"))).replace("`", "\\u0060"))
    call = {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pip install x"}'}}
    lines.append(json.dumps(_rollout(3, 1, [{"role": "assistant", "content": "", "tool_calls": [call]}]))
                 .replace("tool_calls", "tool\\u005fcalls"))
    lines.append(json.dumps(_rollout(3, 2, quiet)).replace('"reward": 1.0', '"reward": NaN', 1))
    # a command fails three times, then a submission of nothing, then one more call (whose prompt holds the
    # submission's output)
    failing = (bash("make build"), "<returncode>2</returncode>\n<output>error</output>")
    lines.append(json.dumps(_played(4, 0, [failing, failing, failing, (submit, "<returncode>0</returncode>\n"
                                           "<output>COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n</output>"), (quiet, "")])))
    # contexts that grow by feedback with no tagged result (no "<" in the line): only the rewrite is looked for
    lines += [json.dumps(_rollout(5, 0, quiet, steps=4, rewrite_at=2, result="Check it once more.")),
              json.dumps(_rollout(5, 1, quiet, steps=3, result="Check it once more."))]
    assert [screen.plain(lines[n].encode()) for n in (0, 1, 3, 9, 10, 11, 16, 17)] == [True] * 8
    assert [b"<" in lines[n].encode() for n in (1, 16, 17)] == [True, False, False]
    assert not any(screen.plain(line.encode()) for line in lines[12:14])
    run_dir = tmp_path / "tinker" / "iteration_000000"
    run_dir.mkdir(parents=True)
    path = run_dir / "train_rollout_summaries.jsonl"
    path.write_text("\n".join(lines) + "\n\n{not json\n")
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    run = ares_viewer.open_run(tmp_path / "tinker")
    data = sources.read_bytes(str(path))
    whole = flag_index.flag_rows(run.file_episodes(str(path), data), str(path))
    fast = screen.flag_rows(run, str(path), flag_index.names(), flag_index.flag_rows, data)
    assert fast is not None and len(whole) == len(lines) == 18
    assert {row[0]: row for row in fast} == {row[0]: row for row in whole}
    names = flag_index.names()
    shown = {name for row in whole for bit, name in enumerate(names) if row[2] >> bit & 1}
    # all but the two a Tinker line cannot show: a time-out, and a submission's output (its last step's result)
    assert set(names) - shown == {"command_timeouts", "submitted_no_change"}
    assert flag_index.update(run).episodes == 18
    assert stored(run).astype({"step": "Int64"}).reset_index(drop=True).equals(collected(run).reset_index(drop=True))
