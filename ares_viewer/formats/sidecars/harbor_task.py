"""A harbor task folder's verifier as the recipe ``sandbox.task_recipe`` reads (``tasks/<task>/task.json``).

A harbor task folder holds ``task.toml``, ``instruction.md``, ``environment/`` and ``tests/`` with the test script
(``tests/test.sh``). ARES's ``CodeEnvironment`` verifies one by uploading ``tests/`` to ``/tests``, running
``mkdir -p /logs/verifier`` and ``bash /tests/<script>`` in the task's container, then reading
``/logs/verifier/reward.txt``. :func:`recipe` writes that down; the recorder saves it beside a recorded run, and a
user can point a run without one at a harbor task folder.
"""

from __future__ import annotations

import pathlib
import posixpath
from typing import Any

__all__ = ["REWARD_PATH", "TESTS_IN_CONTAINER", "TEST_SCRIPT", "is_task_folder", "recipe"]

TESTS_IN_CONTAINER = "/tests"
VERIFIER_FOLDER = "/logs/verifier"
REWARD_PATH = f"{VERIFIER_FOLDER}/reward.txt"
TEST_SCRIPT = "test.sh"


def is_task_folder(folder: pathlib.Path) -> bool:
    """Whether ``folder`` looks like a harbor task folder (its ``tests/test.sh``)."""
    return (folder / "tests" / TEST_SCRIPT).is_file()


def recipe(
    task_name: str, image: str | None, workdir: str | None, script: str = TEST_SCRIPT, tests_from: str = "tests/"
) -> dict[str, Any]:
    """The recipe (``task.json``'s content) verifying as ARES does: ``tests_from`` (relative to the recipe's
    folder) copied to ``/tests``, ``script`` (relative to it) run with bash, the reward read from ``REWARD_PATH``."""
    return {
        "task_name": task_name,
        **({"base_image": image} if image else {}),
        "workdir": workdir or "/",
        "verifier": {
            "copy": {"from": tests_from, "to": f"{TESTS_IN_CONTAINER}/"},
            "command": f"mkdir -p {VERIFIER_FOLDER} && bash {posixpath.join(TESTS_IN_CONTAINER, script)}",
            "reward_path": REWARD_PATH,
        },
    }
