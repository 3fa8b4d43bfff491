"""The decisive-step search with each branch a Ray task on a local cluster (real Docker, the policy over HTTP)."""

from __future__ import annotations

import pathlib
import shutil
import uuid

import chat_server
import pytest
import test_decisive_branches as shared

from ares_viewer import counterfactual
from ares_viewer.counterfactual import branching
from ares_viewer.runs.run import load_episode

SESSION = f"pytest-{uuid.uuid4().hex[:10]}"


def _ray_search(parent, server, snapshots: bool = True, **kwargs) -> branching.Search:
    """Steps 1 and 2 of ``parent`` branched once each on a local Ray cluster started here (and shut down after),
    the model answering from ``server``, with per-step snapshots unless ``snapshots`` is False; ``kwargs`` go to
    ``branching.search``."""
    import ray

    client = counterfactual.openai_client(server.base_url, "policy")
    try:
        found = branching.search(parent, client, steps=[1, 2], samples=1, max_steps=4, ray_address="local",
                                 budget=branching.Budget(parallel=2, snapshots=snapshots), session=SESSION, **kwargs)
        assert ray.is_initialized()  # the branches went through the cluster started here
    finally:
        ray.shutdown()
    return found


def test_branches_run_as_ray_tasks_on_a_local_cluster(engine, ray_available, tmp_path):
    parent = load_episode(shared.DEMO / f"{shared.WRONG_FIX}.json")
    with chat_server.serve(shared.Policy(seed=13)) as server:
        # Without per-step snapshots (the object-store test below writes them back through Ray): half the cost.
        found = _ray_search(parent, server, snapshots=False)
    assert {b.step: (b.reward, b.failure) for b in found.branches} == {1: (1.0, None), 2: (0.0, None)}, [
        b.error for b in found.branches]
    assert all(pathlib.Path(b.path).is_file() for b in found.branches)
    assert len(server.requests) >= 4  # each branch asked the endpoint from its Ray worker


def test_ray_branches_read_the_episode_from_an_object_store_and_write_back_there(
    engine, s3_server, ray_available, tmp_path, monkeypatch
):
    import fsspec

    run = tmp_path / "run"  # the wrong-fix episode with its snapshots and its verifier recipe, put on the S3 API
    run.mkdir()
    shutil.copy(shared.DEMO / f"{shared.WRONG_FIX}.json", run)
    shutil.copytree(shared.DEMO / "snapshots" / shared.WRONG_FIX, run / "snapshots" / shared.WRONG_FIX)
    shutil.copytree(shared.DEMO / "tasks", run / "tasks")
    fs = fsspec.filesystem("s3")
    fs.put(str(run), "runs/run", recursive=True)
    in_run = sorted(fs.find("runs/run"))
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    parent = load_episode(f"s3://runs/run/{shared.WRONG_FIX}.json")
    with pytest.raises(ValueError, match="never written into the run folder"):
        branching.store_dir(parent, "s3://runs/run/branches")
    with chat_server.serve(shared.Policy(seed=13)) as server:
        found = _ray_search(parent, server, store="s3://runs/branches")
    # The real verifier ran on the recipe read from the object store: the planted drop is there.
    assert {b.step: (b.reward, b.failure) for b in found.branches} == {1: (1.0, None), 2: (0.0, None)}, [
        b.error for b in found.branches]
    assert str(found.folder).startswith("s3://runs/branches/")
    for branch in found.branches:  # each branch episode and its snapshots written back, in the counterfactual layout
        assert branch.path == f"{found.folder}/{branch.episode_id}.json" and fs.exists(branch.path)
        assert fs.find(f"{found.folder}/snapshots/{branch.episode_id}")
        opened = load_episode(branch.path)
        assert opened.metadata["counterfactual"]["step"] == branch.step and opened.total_reward == branch.reward
    assert fs.exists(f"{found.folder}/branches.jsonl") and sorted(fs.find("runs/run")) == in_run  # run untouched
    assert not list((tmp_path / "cache" / "branch-staging").glob("*"))  # staging folders removed
    again = branching.load(parent, store="s3://runs/branches")  # a reader elsewhere gets them back
    assert again.branches == found.branches and again.decisive.step == 2
