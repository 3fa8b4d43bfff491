"""Live sandboxes: restore any recorded step into a real container, rerun the agent's commands, and fork.

- ``_box.py``: :func:`restore` a step into a :class:`Sandbox`, run commands in it (``commands.py``);
- ``replays.py``: :func:`replay` the recorded commands and compare each step with the recording;
- ``_forks.py``: :func:`fork` with other commands, and the task's verifier (:func:`verify`);
- ``registry.py``: every project container by label: :func:`list_sandboxes`, :func:`cleanup`, :func:`reap_idle`.

A notebook session::

    from ares_viewer import sandbox
    from ares_viewer.runs import run

    episode = run.load_episode("sample_runs/demo-run/<id>.json")
    with sandbox.restore(episode, 0) as box:
        print(box.run("git status").output)
        for result in sandbox.replay(box, episode, normalize=True):
            print(result.step, result.status, result.note or "")
"""

from __future__ import annotations

from ares_viewer.container.engine import BUILD_HINT, ENGINE_HINT, connect
from ares_viewer.container.labels import (
    LABEL_CREATED,
    LABEL_EPISODE,
    LABEL_PROJECT,
    LABEL_ROLE,
    LABEL_SESSION,
    LABEL_SOURCE,
    LABEL_STEP,
)
from ares_viewer.container.limits import ResourceLimits
from ares_viewer.sandbox._box import Sandbox, new_session, restore
from ares_viewer.sandbox._forks import ForkResult, TaskRecipe, VerifierResult, fork, task_recipe, verify
from ares_viewer.sandbox.commands import (
    ARES_ENVIRONMENT,
    COMMAND_TIMEOUT_S,
    ENGINE_GRACE_S,
    CommandResult,
    SandboxError,
    run_command,
)
from ares_viewer.sandbox.registry import (
    ROLE,
    SandboxInfo,
    cleanup,
    list_sandboxes,
    reap_idle,
    remove_session,
    touch,
)
from ares_viewer.sandbox.replays import (
    ELIDE_AT,
    MAX_FILE_DIFFS,
    VOLATILE_PATTERNS,
    Status,
    StepReplay,
    as_agent_saw,
    compare_filesystem,
    compare_output,
    file_diff_text,
    mark_carried,
    normalize_text,
    replay,
)

__all__ = [
    "ARES_ENVIRONMENT", "BUILD_HINT", "COMMAND_TIMEOUT_S", "ELIDE_AT", "ENGINE_GRACE_S", "ENGINE_HINT",
    "LABEL_CREATED", "LABEL_EPISODE", "LABEL_PROJECT", "LABEL_ROLE", "LABEL_SESSION", "LABEL_SOURCE", "LABEL_STEP",
    "MAX_FILE_DIFFS", "ROLE", "VOLATILE_PATTERNS", "CommandResult", "ForkResult", "ResourceLimits", "Sandbox",
    "SandboxError", "SandboxInfo", "Status", "StepReplay", "TaskRecipe", "VerifierResult", "as_agent_saw",
    "cleanup", "compare_filesystem", "compare_output", "connect", "file_diff_text", "fork", "list_sandboxes",
    "mark_carried", "new_session", "normalize_text", "reap_idle", "remove_session", "replay", "restore",
    "run_command", "task_recipe", "touch", "verify",
]
