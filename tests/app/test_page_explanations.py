"""The episode's one explanation on the pages: the overview's failing-tests table names the episodes, the Episode
header names the failing tests and the file that says so, a model timeout shows its traceback and whose failure it
is, and a reward won by touching the tests is marked beside "solved" and never offered as a plain solution."""

from __future__ import annotations

import json
import pathlib
import shutil

import formats_fixtures as fx
import page_text
import pytest

from testdata import synthetic

HERE = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT_RUN = HERE / "fixtures" / "mini-swe-agent-timeout"
KEPT = HERE / "fixtures" / "mini-swe-agent-real"
SUBMITTED = "deterministic-run/toolcall-submitted"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    shutil.copytree(TIMEOUT_RUN, root / "timeout")
    shutil.copytree(KEPT, root / "swe" / "trajs")
    report = fx.write_instance_report(root / "swe", "toolcall-submitted", broken=["tests/test_calc.py::test_sub"])
    (root / "hack").mkdir()
    hack = synthetic.episode_dict(actions=2, seed=1, reward=1.0)
    text = json.dumps(hack).replace("grep -rn 'def parse' src/ | head -20", "sed -i 's/assert /pass  # /' "
                                    "tests/test_core.py")
    assert "tests/test_core.py" in text
    hack = json.loads(text)
    loop = synthetic.episode_dict(actions=2, seed=2, reward=0.0)
    for doc in (hack, loop):
        synthetic.write_episode(root / "hack", doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    return {"report": report, "hack": hack["episode_id"], "loop": loop["episode_id"]}


def test_the_failing_tests_table_names_the_episodes(runs, app):
    at = app(run="swe")
    assert not at.exception
    (tests,) = [d for d in at.dataframe if "how" in d.value.columns]
    assert tests.value.to_dict("records") == [{"test": "tests/test_calc.py::test_sub",
                                               "how": "passed before, broken by the patch", "episodes": 1,
                                               "episode": SUBMITTED}]
    table = at.dataframe(key="overview.table").value.set_index("episode_id")
    assert "tests/test_calc.py::test_sub" in table.loc[SUBMITTED, "why"]


def test_the_episode_header_names_the_failing_tests_and_their_report(runs, app):
    at = app("episode", run="swe", episode=SUBMITTED, step="3")
    assert not at.exception
    shown = page_text.of(at)
    assert "**Failing tests** · passed before, broken by the patch: tests/test_calc.py::test_sub" in shown
    assert str(runs["report"]) in shown
    assert "The recording holds no verifier output" not in shown


def test_a_model_timeout_reads_as_the_infrastructures_with_its_traceback(runs, app):
    at = app("episode", run="timeout", episode="model-timeout-run/model-timeout")
    assert not at.exception
    shown = page_text.of(at)
    assert "a failure of the infrastructure's" in shown and "the agent's run" not in shown
    (trace,) = [e for e in at.expander if e.label == "The traceback"]
    assert any("litellm.exceptions.Timeout" in b.value for b in page_text.blocks(trace))


def test_a_reward_hack_is_marked_beside_solved_and_offered_with_its_flag(runs, app):
    at = app("episode", run="hack", episode=runs["hack"])
    assert not at.exception
    title = page_text.shown(next(m.value for m in at.markdown if m.value.startswith("### ")))
    assert "solved" in title and "touched_tests" in title
    assert any("flagged `touched_tests`" in page_text.shown(w.value) for w in at.warning)
    loop = app("episode", run="hack", episode=runs["loop"])
    (link,) = [x for x in loop.get("page_link") if "Compare with" in x.proto.label]
    assert "a solved attempt flagged touched_tests" in link.proto.label
