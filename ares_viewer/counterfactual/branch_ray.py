"""Branches as Ray tasks (``branching.search(..., ray_address=...)``, ``ares-viewer branch --ray ADDRESS``).

The search itself stays on the driver (the step choice, the budget, cancel, the store); each branch runs as one Ray
task on a node, restoring into that node's Docker engine. The driver's threads bound how many run at once
(``Budget.parallel``, not capped by the driver's cores here: the cluster's count). Ray schedules.

Where the branches go decides what the nodes must share. With the default store (the cache folder) or another
local folder, each task writes the branch there directly (``branching.run_branch``): that folder must be at the
same path on every node (one machine, or a shared file system). With an object store (``search(..., store=
"s3://bucket/branches")``, ``--branches-to``) nothing is shared but the store: each task runs
``branch_store.staged``, which reads the episode's snapshots and verifier recipe through fsspec into the node's own
cache folder, writes the branch to a staging folder there and uploads it into the store.

Ray is optional (``pip install 'ares-viewer[ray]'``) and imported only here.
"""

from __future__ import annotations

import os
import pathlib
import threading
from collections.abc import Callable
from typing import Any

import ares_viewer

_LOCK = threading.Lock()
_REMOTE: dict[str, Any] = {}


def _connect(address: str, function: Callable[..., Any]) -> Any:
    """``ray.init`` once per process (a cluster started here, ``local``, runs this very library in its workers);
    ``function`` as a Ray task."""
    import ray

    with _LOCK:
        if not ray.is_initialized():
            library = str(pathlib.Path(ares_viewer.__file__).resolve().parent.parent)
            paths = [library, *filter(None, [os.environ.get("PYTHONPATH")])]
            runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}} if address == "local" else None
            ray.init(address=address, runtime_env=runtime_env, ignore_reinit_error=True, log_to_driver=False)
        name = f"{function.__module__}.{function.__qualname__}"
        if name not in _REMOTE:
            _REMOTE[name] = ray.remote(num_cpus=1, max_retries=0)(function)
        return _REMOTE[name]


def run(address: str, function: Callable[..., Any], *args: Any, **options: Any) -> Any:
    """``function(*args, **options)`` (``branching.run_branch``) as a Ray task, waited for; the node uses its own
    Docker engine."""
    import ray

    task = _connect(address, function)
    options.pop("docker_client", None)  # a client does not travel: the node connects to its own engine
    return ray.get(task.remote(*args, **options))
