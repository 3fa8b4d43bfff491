"""The hand-written fixture files of every format the viewer reads, and copies of them for tests to change."""

from __future__ import annotations

import json
import pathlib
import shutil

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
TINKER = FIXTURES / "tinker"
RAY = FIXTURES / "ray"
MINI = FIXTURES / "mini-swe-agent"
MATH_IT0 = TINKER / "math-rl" / "iteration_000000" / "train_rollout_summaries.jsonl"
GUESS = TINKER / "guess-number" / "iteration_000000" / "train_rollout_summaries.jsonl"
RAY_LINES = RAY / "rollouts-epoch3.jsonl"
RAY_ONE = RAY / "episode-0c4d2e8f.json"
MINI_V2 = MINI / "swebench-sonnet" / "astropy__astropy-12907" / "astropy__astropy-12907.traj.json"
MINI_V1 = MINI / "swebench-gpt4o-v1" / "django__django-11099" / "django__django-11099.traj.json"


def lines(path: pathlib.Path) -> list[dict]:
    """The records of a JSON Lines fixture."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_lines(path: pathlib.Path, records: list) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_json(path: pathlib.Path, doc) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def copy_tree(source: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    shutil.copytree(source, target, dirs_exist_ok=True)
    return target


def harness_report(resolved=(), unresolved=(), empty=(), error=(), incomplete=()) -> dict:
    """A report as ``python -m swebench.harness.run_evaluation`` writes it (``<model>.<run_id>.json``)."""
    submitted = [*resolved, *unresolved, *empty, *error]
    return {
        "total_instances": len(submitted) + len(incomplete), "submitted_instances": len(submitted),
        "completed_instances": len(resolved) + len(unresolved), "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved), "empty_patch_instances": len(empty), "error_instances": len(error),
        "completed_ids": [*resolved, *unresolved], "incomplete_ids": list(incomplete), "empty_patch_ids": list(empty),
        "submitted_ids": submitted, "resolved_ids": list(resolved), "unresolved_ids": list(unresolved),
        "error_ids": list(error), "schema_version": 2,
    }


def write_instance_report(root: pathlib.Path, instance: str, *, still_failing=(), broken=(),
                          fixed=("tests/test_calc.py::test_add",)) -> pathlib.Path:
    """An unresolved instance's report as the harness writes it, kept at ``root/logs/<instance>/report.json``
    (beside ``trajs/``): its target tests still failing and fixed, and the tests the patch broke."""
    report = root / "logs" / instance / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({instance: {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
        "tests_status": {"FAIL_TO_PASS": {"success": [] if still_failing else list(fixed),
                                          "failure": list(still_failing)},
                         "PASS_TO_PASS": {"success": [], "failure": list(broken)}}}}))
    return report
