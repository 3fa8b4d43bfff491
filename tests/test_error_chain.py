"""An errored episode names its root cause: the innermost error of the chain its file records, not only the
wrapper ARES raises around it ("RuntimeError: Code agent task failed")."""

from __future__ import annotations

import ares_viewer
from ares_viewer import model
from ares_viewer.recorder import episode_file
from testdata import synthetic


def _raised_chain() -> BaseException:
    try:
        try:
            try:
                raise ConnectionError("409 Client Error: Conflict (container is not running)")
            except ConnectionError as exc:
                raise OSError("exec in container failed") from exc
        except OSError as exc:
            raise RuntimeError("Code agent task failed") from exc
    except RuntimeError as exc:
        return exc


def test_the_recorder_keeps_every_cause_of_an_error_and_the_reader_names_the_innermost():
    record = episode_file.error_record(_raised_chain())
    found = model.RecordedError.from_json(record)
    assert found is not None
    assert [e.type for e in found.chain()] == ["RuntimeError", "OSError", "ConnectionError"]
    assert found.root.message == "409 Client Error: Conflict (container is not running)"
    assert "container is not running" in found.traceback
    assert str(found) == ("RuntimeError: Code agent task failed (root cause: ConnectionError: "
                          "409 Client Error: Conflict (container is not running))")


def test_an_errored_ares_episode_shows_its_root_cause_in_the_episode_and_the_run_table(tmp_path):
    doc = synthetic.episode_dict(ending="errored", actions=3, seed=4)
    doc["error"] = episode_file.error_record(_raised_chain())
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
    assert found is not None and len(found.chain()) == model.records.MAX_CAUSES + 1
