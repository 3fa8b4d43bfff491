"""The verifier's recipe of a recorded ARES task, saved beside the run so its episodes verify again.

ARES's ``CodeEnvironment`` verifies a harbor task by uploading the task's ``tests/`` folder to ``/tests``,
running ``mkdir -p /logs/verifier`` and ``bash /tests/<test script>`` in the container, and reading
``/logs/verifier/reward.txt``. The recorder writes exactly that as ``tasks/<task>/task.json`` (the recipe
``sandbox.task_recipe`` reads) with a copy of the test files in ``tasks/<task>/tests/``, the image the episode ran
on and its work folder, once per task and run. Forks, counterfactuals and branches of the run's episodes then run
the verifier as ARES ran it, in a fresh container of that image (``sandbox.verify``).
"""

from __future__ import annotations

import json
import logging
import pathlib
import re
import shutil
from typing import Any

from ares_viewer.base import atomic
from ares_viewer.formats.sidecars import harbor_task

__all__ = ["save"]

_LOGGER = logging.getLogger(__name__)

_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def save(out_dir: pathlib.Path, task: Any, task_name: str | None, image: str | None, workdir: str | None) -> bool:
    """Write ``tasks/<task_name>/`` for a harbor ``task`` (its ``paths.tests_dir`` and ``paths.test_path``) unless
    the run has it already. False (and a warning) when the task tells too little; never raises for that."""
    paths = getattr(task, "paths", None)
    tests_dir, test_path = getattr(paths, "tests_dir", None), getattr(paths, "test_path", None)
    if not task_name or not _SAFE_NAME_RE.match(task_name) or tests_dir is None or test_path is None or not image:
        _LOGGER.warning(
            "task %r: no verifier recipe saved (the task names no tests folder, test script or image)", task_name
        )
        return False
    folder = out_dir / "tasks" / task_name
    if (folder / "task.json").exists():
        return True
    try:
        script = pathlib.Path(test_path).relative_to(pathlib.Path(tests_dir)).as_posix()
        staged = atomic.staging(folder)
        shutil.copytree(tests_dir, staged / "tests", symlinks=True)
        recipe = {
            **harbor_task.recipe(task_name, image, workdir, script),
            "recorded_from": "ARES CodeEnvironment (harbor task)",
        }
        (staged / "task.json").write_text(json.dumps(recipe, indent=2), encoding="utf-8")
        folder.parent.mkdir(parents=True, exist_ok=True)
        atomic.replace_dir(staged, folder)
    except (OSError, ValueError) as exc:
        _LOGGER.warning("task %s: no verifier recipe saved: %s", task_name, exc)
        return False
    return True
