"""A small part of the planted suite, recorded through real ARES, searched with real containers and the policy over
HTTP: the search names the planted step where there is one and names none where there is none.

The small part of ``sample_runs/planted_suite.py`` (``SMALL``, recorded once per session by conftest's
``planted_suite``): a package file deleted at step 1 (the policy that knows the fix cannot recover: V falls there),
the right fix written at step 4 under a policy that cannot find it (V rises there), the right fix under the policy
that knows it (V is 1 everywhere: no step is decisive) and reads only under a policy that cannot find the fix (V is 0
everywhere). The adaptive search runs here on the rise and the solved one with none; the failed two are searched by
``ares-viewer branch RUN --episodes failed`` in ``test_planted_run.py``. The policy is served with ``recover=0``,
so each branch's outcome is a function of the state it starts from; the benchmark (``benchmarks/bench_planted.py``)
measures the search against the noisy one. Fails in CI without the ARES venv or the engine (conftest).
"""

from __future__ import annotations

import uuid

import chat_server
import pytest
import sample_scripts

from ares_viewer import counterfactual
from ares_viewer.counterfactual import branching
from ares_viewer.runs.run import load_episode

pytestmark = [pytest.mark.docker, pytest.mark.ares]

SESSION = f"pytest-{uuid.uuid4().hex[:10]}"
suite = sample_scripts.load("planted_suite")


# The episodes the adaptive search is run on here: the rise and the solved one with none. The failed ones (the drop
# at step 1 and units-none-reads, with none) are searched once by the run-wide command (test_planted_run.py); a
# second search of the drop here cost 157 s of CI under load for the same branches.
SEARCHED = ["units-rise-fix", "statskit-none-fixed"]


@pytest.fixture
def recorded(planted_suite):
    """The small part of the suite, recorded once per session (conftest's ``planted_suite``): the run folder and
    its manifest entries by name."""
    return planted_suite.run, planted_suite.entries


def test_the_manifest_names_each_recorded_episodes_planted_step_and_ares_gave_the_planned_rewards(recorded):
    out, entries = recorded
    assert sorted(entries) == sorted(suite.SMALL)
    drop, rise, none, flat = (entries[name] for name in suite.SMALL)
    assert (drop["kind"], drop["planted"], drop["position"], drop["reward"]) == ("drop", 1, "early", 0.0)
    assert (rise["kind"], rise["planted"], rise["position"], rise["reward"]) == ("rise", 4, "middle", 1.0)
    assert (none["kind"], none["planted"], none["reward"]) == ("none", None, 1.0)
    assert (flat["kind"], flat["planted"], flat["action"], flat["reward"]) == ("none", None, None, 0.0)
    episode = load_episode(out / drop["file"])
    assert episode.episode_id == drop["episode_id"] and episode.num_actions == 7
    assert episode.step(1).command.startswith("git rm -q statskit/__init__.py")
    assert (out / "tasks" / drop["task"] / "task.json").is_file()  # the recorder kept the verifier's recipe


@pytest.mark.parametrize("name", SEARCHED)
def test_the_adaptive_search_names_the_planted_step_or_none(recorded, engine, name, tmp_path, monkeypatch):
    out, entries = recorded
    entry = entries[name]
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    parent = load_episode(out / entry["file"])
    with chat_server.serve(suite.Policy(seed=3, recover=0.0)) as server:
        found = branching.search(
            parent, counterfactual.openai_client(server.base_url, entry["model"]), steps="adaptive", samples=4,
            budget=branching.Budget(parallel=2, snapshots=False), max_steps=suite.MAX_STEPS, docker_client=engine,
            session=SESSION,
        )
    assert not [b for b in found.branches if b.failure is not None], [b.error for b in found.branches]
    possible = branching.branchable_steps(parent)
    assert found.strategy == "adaptive" and found.new < 4 * len(possible)  # fewer than exhaustive would run
    if entry["planted"] is None:
        assert found.decisive is None and found.describe().startswith("No change found")
        assert {b.step for b in found.branches} == set(possible)  # one branch a step showed V flat
    else:
        assert (found.decisive.step, found.decisive.sure) == (entry["planted"], True), found.to_frame()
        assert (found.decisive.change < 0) == (entry["kind"] == "drop")
    branch = load_episode(found.branches[0].path)  # a branch without per-step snapshots still opens as an episode
    assert "snapshots" not in branch.metadata["recording"] and branch.metadata["verifier"]["reward"] in (0.0, 1.0)
