"""An episode that died on a model API timeout at its first call, written by mini-swe-agent's own code
(``tests/producers/mini_swe_agent_model_timeout.py``: litellm timing out on an endpoint that never answers).

Before, the timeout read as the agent's failure and alone made the run's success rate 0%."""

from __future__ import annotations

import pathlib

import ares_viewer
from ares_viewer.cli import main

RUN = pathlib.Path(__file__).resolve().parent / "fixtures" / "mini-swe-agent-timeout"
EPISODE = "model-timeout-run/model-timeout"


def test_a_model_timeout_is_the_infrastructures_failure_and_out_of_the_success_rate():
    run = ares_viewer.open_run(RUN)
    row = run.episodes.set_index("episode_id").loc[EPISODE]
    assert (row["outcome"], row["num_actions"], row["total_cost"]) == ("errored", 0, 0.0)
    assert "litellm.Timeout" in row["error"]
    stats = run.stats()
    assert stats["infrastructure_failures"] == 1 and stats["judged"] == 0
    assert stats["success_rate"] is None  # nothing the agent can be judged on: unknown, not 0%
    assert list(run.failures()["blame"]) == ["infrastructure"]
    assert ares_viewer.model.blame.is_infrastructure(run.episode(EPISODE).error)


def test_the_failures_command_calls_it_the_infrastructures(capsys):
    assert main(["failures", str(RUN)]) == 0
    out = capsys.readouterr().out
    assert "[infrastructure]" in out and "litellm.Timeout" in out and "[agent]" not in out


def test_the_traceback_mini_swe_agent_saved_is_kept_with_the_error():
    record = ares_viewer.open_run(RUN).episode(EPISODE).error_record
    assert record is not None and record.traceback is not None
    assert "Traceback (most recent call last)" in record.traceback and "litellm.exceptions.Timeout" in record.traceback
