"""The decisive-step search with each branch a Ray task on a local cluster (real Docker, the policy over HTTP)."""

from __future__ import annotations

import pathlib
import uuid

import chat_server
import test_decisive_branches as shared

from ares_viewer import counterfactual
from ares_viewer.counterfactual import branching
from ares_viewer.runs.run import load_episode

SESSION = f"pytest-{uuid.uuid4().hex[:10]}"


def test_branches_run_as_ray_tasks_on_a_local_cluster(engine, ray_available, tmp_path):
    import ray

    parent = load_episode(shared.DEMO / f"{shared.WRONG_FIX}.json")
    with chat_server.serve(shared.Policy(seed=13)) as server:
        client = counterfactual.openai_client(server.base_url, "policy")
        try:
            found = branching.search(
                parent,
                client,
                steps=[1, 2],
                samples=1,
                max_steps=4,
                ray_address="local",
                budget=branching.Budget(parallel=2),
                session=SESSION,
            )
            assert ray.is_initialized()  # the branches went through the cluster started here
        finally:
            ray.shutdown()
    assert {b.step: (b.reward, b.failure) for b in found.branches} == {1: (1.0, None), 2: (0.0, None)}
    assert all(pathlib.Path(b.path).is_file() for b in found.branches)
    assert len(server.requests) >= 4  # each branch asked the endpoint from its Ray worker
