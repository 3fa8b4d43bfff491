"""An errored episode names its root cause: the innermost error of the chain its file records, not only the
wrapper ARES raises around it ("RuntimeError: Code agent task failed")."""

from __future__ import annotations

import ares_viewer
from ares_viewer import model
from ares_viewer.recorder import episode_file
from testdata import synthetic


def test_the_recorder_keeps_every_cause_of_an_error_and_the_reader_names_the_innermost():
    record = episode_file.error_record(synthetic.docker_died_error())
    found = model.RecordedError.from_json(record)
    assert found is not None
    assert [e.type for e in found.chain()] == ["RuntimeError", "OSError", "ConnectionError"]
    assert found.root.message == "409 Client Error: Conflict (container is not running)"
    assert "container is not running" in found.traceback
    assert str(found) == ("RuntimeError: Code agent task failed (root cause: ConnectionError: "
                          "409 Client Error: Conflict (container is not running))")


def test_an_errored_ares_episode_shows_its_root_cause_in_the_episode_and_the_run_table(tmp_path):
    doc = synthetic.episode_dict(ending="errored", actions=3, seed=4)
    doc["error"] = episode_file.error_record(synthetic.docker_died_error())
    synthetic.write_episode(tmp_path, doc)
    episode = ares_viewer.load_episode(next(tmp_path.glob("*.json")))
    assert "root cause: ConnectionError: 409 Client Error" in (episode.error or "")
    assert episode.error_record is not None and episode.error_record.root.type == "ConnectionError"
    run = ares_viewer.open_run(tmp_path)
    assert "root cause: ConnectionError" in run.episodes.error.iloc[0]


def test_an_error_without_causes_reads_as_before_and_no_error_stays_unknown():
    assert model.describe_error({"type": "ValueError", "message": "bad"}) == "ValueError: bad"
    assert model.describe_error("the step limit") == "the step limit"
    assert model.describe_error(None) is None and model.describe_error({}) is None


def test_a_chain_nested_without_end_is_read_to_a_bound_without_exhausting_the_stack():
    nested: dict = {"type": "Inner", "message": "deepest"}
    for i in range(20_000):
        nested = {"type": f"Wrapper{i}", "message": "wrapped", "cause": nested}
    found = model.RecordedError.from_json(nested)
    assert found is not None and len(found.chain()) == model.errors.MAX_CAUSES + 1


def test_failures_of_the_infrastructure_are_counted_beside_the_success_rate_not_in_it(tmp_path):
    """A run whose failures are API timeouts, a TLS error and a container that died: the agent solved every
    episode it could be judged on, and the headline says so, with the infrastructure's failures beside it."""
    solved = synthetic.episode_dict(actions=2, seed=1, reward=1.0)
    wrong = synthetic.episode_dict(actions=2, seed=2, reward=0.0)
    errors = [{"type": "APITimeoutError", "message": "Request timed out."},
              {"type": "SSLError", "message": "[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation"},
              episode_file.error_record(synthetic.docker_died_error()),
              {"type": "AgentTimeoutError", "message": "Agent execution timed out after 600 seconds"}]
    docs = [solved, wrong]
    for seed, error in enumerate(errors, start=10):
        doc = synthetic.episode_dict(actions=2, seed=seed, ending="errored")
        doc["error"] = error
        docs.append(doc)
    for doc in docs:
        synthetic.write_episode(tmp_path, doc)
    run = ares_viewer.open_run(tmp_path)
    stats = run.stats()
    # judged: the solved one, the wrong fix and the agent's own time limit; the other three are the infrastructure's
    assert stats["infrastructure_failures"] == 3 and stats["judged"] == 3
    assert stats["success_rate"] == 1 / 3
    blame = dict(zip(run.failures()["reason"], run.failures()["blame"], strict=True))
    assert blame["completed, not solved (reward ≤ 0)"] == "agent"
    assert [who for reason, who in blame.items() if "AgentTimeoutError" in reason] == ["agent"]
    assert sorted(blame.values()).count("infrastructure") == 3
