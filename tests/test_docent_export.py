"""Export to Docent: every sample run and format fixture as Docent agent runs, validated with docent's own models
(``pip install --no-deps docent``, as .ci/run installs it) and read back: episodes, rewards, commands, return codes."""

from __future__ import annotations

import pathlib
import shutil
import socket

import atif_fixtures as af
import formats_fixtures as fx
import orjson
import pytest
import reasoning_fixtures as rf

import ares_viewer
from ares_viewer import cli
from ares_viewer.analysis import docent_export
from ares_viewer.analysis import ending as ending_module
from ares_viewer.formats.export import steps
from testdata import inspect_logs, synthetic

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEMO = ROOT / "sample_runs" / "demo-run"
REWRITTEN = "0b17f852-8687-4e04-a8c5-e078baf6b285"  # the demo episode whose context is rewritten at one action


@pytest.fixture(scope="module")
def agent_run(installed):
    return installed("docent.data_models", "pip install --no-deps docent (see .ci/run)").AgentRun


@pytest.fixture(scope="module")
def every_format(tmp_path_factory) -> pathlib.Path:
    """A folder with the sample run and one run of every format the tests have files of."""
    root = tmp_path_factory.mktemp("all")
    shutil.copytree(DEMO, root / "demo-run")
    synthetic.write_run(root / "ares", 2, actions=3)
    fx.copy_tree(fx.TINKER, root / "tinker")
    fx.copy_tree(fx.RAY, root / "ray")
    fx.copy_tree(fx.MINI, root / "mini")
    shutil.copytree(fx.FIXTURES / "mini-swe-agent-real", root / "mini-real")
    rf.write(root / "reasoning")
    af.write_job(root / "harbor")
    inspect_logs.write_logs(root / "inspect", "eval")
    return root


def _exported(agent_run, path: pathlib.Path) -> dict:
    """The export's agent runs, each validated by docent's AgentRun, by episode id."""
    found = {}
    for line in path.read_bytes().splitlines():
        record = agent_run.model_validate(orjson.loads(line))
        found[record.metadata["episode_id"]] = record
    return found


def _actions(record) -> dict[int, tuple]:
    """Per exported action: its tool calls, and the tool messages answering them, across every transcript."""
    calls, answers = {}, {}
    for transcript in record.transcripts:
        for message in transcript.messages:
            step = (message.metadata or {}).get("step")
            if message.role == "assistant" and step is not None:
                assert step not in calls, f"action {step} is in two transcripts"
                calls[step] = [(c.function, c.arguments) for c in message.tool_calls or []]
            elif message.role == "tool" and step is not None:
                answers.setdefault(step, []).append(message)
    return {step: (calls[step], answers.get(step, [])) for step in calls}


def test_every_format_exports_to_docent_agent_runs_that_read_back(tmp_path, every_format, agent_run, capsys):
    out = tmp_path / "docent.jsonl"
    assert cli.main(["export", str(every_format), "--format", "docent", "--out", str(out)]) == 0
    run = ares_viewer.open_run(every_format)
    assert set(run.episodes["format"]) == {"ares", "tinker", "ray", "mini-swe-agent", "atif", "inspect_ai"}
    assert f"wrote {len(run)} Docent agent runs" in capsys.readouterr().err
    exported = _exported(agent_run, out)
    assert sorted(exported) == sorted(run.episode_ids)
    for episode in run:
        record = exported[episode.episode_id]
        meta = record.metadata
        # Rewards: unknown stays null and out of Docent's scores, never 0.
        assert meta["reward"] == episode.total_reward, episode.episode_id
        assert meta["scores"] == ({} if episode.total_reward is None else {"reward": episode.total_reward})
        assert (meta["task"], meta["outcome"], meta["format"]) == (episode.task_name, str(episode.outcome),
                                                                   episode.format)
        assert meta["ending"] == ending_module.of(episode).explanation
        # Every action once, its command as a tool call and its return code on its result.
        actions = _actions(record)
        assert sorted(actions) == [s.index for s in episode.actions], episode.episode_id
        for step in episode.actions:
            calls, answers = actions[step.index]
            if step.tool_calls:
                assert calls == [(c.name or "tool", steps.arguments(c.arguments)) for c in step.tool_calls]
            elif step.command is not None:
                assert calls == [("bash", {"command": step.command})], (episode.episode_id, step.index)
            if step.returncode is not None and len(answers) == 1:
                assert answers[0].metadata["returncode"] == step.returncode, (episode.episode_id, step.index)
    assert sum(1 for e in run for s in e.actions if s.returncode not in (None, 0)) > 0  # non-zero codes were checked
    # The model's reasoning is a reasoning part of its message.
    deepseek = exported["deepseek-run/calc__calc-1"]
    parts = [p for t in deepseek.transcripts for m in t.messages if m.role == "assistant"
             and not isinstance(m.content, str) for p in m.content]
    assert any(p.type == "reasoning" and p.reasoning == rf.DEEPSEEK_REASONING for p in parts)


def test_a_rewritten_context_starts_a_transcript_of_its_own(tmp_path, agent_run):
    run = ares_viewer.open_run(DEMO)
    written = ares_viewer.export.docent(run, tmp_path / "demo.jsonl")
    assert (written.runs, written.errors, written.sent) == (len(run), (), None)
    record = _exported(agent_run, tmp_path / "demo.jsonl")[REWRITTEN]
    episode = run.episode(REWRITTEN)
    rewrite = next(s.index for s in episode.actions if s.context_rewritten)
    assert [t.metadata["steps"] for t in record.transcripts] == [
        list(range(1, rewrite)), list(range(rewrite, episode.num_actions + 1))]
    # The second transcript starts with the very messages the model answered at the rewrite.
    second = record.transcripts[1].messages
    assert second[0].role == "system" and second[0].content == episode.system_prompt
    context = episode.context(rewrite)
    assert [(m.role, m.content) for m in second[1:1 + len(context)]] == [(m.role, m.content) for m in context]
    assert second[1 + len(context)].metadata["step"] == rewrite


def test_an_export_is_never_written_into_the_run_folder(tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(DEMO, run_dir)
    before = sorted(p.name for p in run_dir.rglob("*"))
    assert cli.main(["export", str(run_dir), "--format", "docent", "--out", str(run_dir / "sub" / "x.jsonl")]) == 2
    assert "never written into the run's folder" in capsys.readouterr().err
    assert sorted(p.name for p in run_dir.rglob("*")) == before


def test_a_server_without_a_key_is_said_and_the_file_is_still_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARES_VIEWER_DOCENT_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("ARES_VIEWER_DOCENT_API_KEY_ENV", "MY_DOCENT_KEY")
    monkeypatch.delenv("MY_DOCENT_KEY", raising=False)
    out = tmp_path / "out.jsonl"
    assert cli.main(["export", str(DEMO), "--format", "docent", "--out", str(out)]) == 1
    assert "not sent to Docent: ARES_VIEWER_DOCENT_URL is set but $MY_DOCENT_KEY holds no Docent API key" in \
        capsys.readouterr().err
    assert len(list(docent_export.read(out))) == 10


def test_a_server_that_does_not_answer_is_named_and_the_file_is_kept(tmp_path, monkeypatch, capsys, installed):
    installed("docent.sdk.client", "pip install --no-deps docent requests python-dotenv tqdm (see .ci/run)")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("ARES_VIEWER_DOCENT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("DOCENT_API_KEY", "dk_test")
    monkeypatch.delenv("ARES_VIEWER_DOCENT_API_KEY_ENV", raising=False)
    out = tmp_path / "out.jsonl"
    assert cli.main(["export", str(DEMO), "--format", "docent", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"not sent to Docent: Docent at http://127.0.0.1:{port} after 0 agent run(s) sent:" in err
    assert len(list(docent_export.read(out))) == 10
