"""Evaluation reports: the verdicts that give rewards to episodes whose files record none.

mini-swe-agent's trajectories carry no reward: a SWE-bench run is scored afterwards, by the SWE-bench
harness (``python -m swebench.harness.run_evaluation``) or ``sb-cli``, which write

- a summary report of the run, ``<model>.<run_id>.json``::

    {"total_instances": 2, "resolved_instances": 1, ..., "resolved_ids": ["django__django-11099"],
     "unresolved_ids": ["astropy__astropy-12907"], "empty_patch_ids": [], "error_ids": [], ...}

- and one report per instance, ``logs/run_evaluation/<run_id>/<model>/<instance_id>/report.json``::

    {"django__django-11099": {"patch_is_None": false, "patch_exists": true, "resolved": true, "tests_status": ...}}

  (some copies hold only the inner object; the instance is then the folder's name).

A report gives each episode of a listed instance the reward its verdict means: 1.0 for ``resolved``, 0.0 for
``unresolved``, ``empty_patch`` and ``error``. Instances listed as incomplete, or not listed, keep no reward.
Only episodes that record no reward of their own get one, and only episodes of formats with one trajectory per
instance (``APPLIES_TO``): several ARES attempts at one task are never given one shared verdict.

**Which run a report scores.** A folder may hold several runs (``output/<run_id>/<instance>/...``, with
``<model>.<run_id>.json`` beside them). A report scores the trajectories of the run it names: the run id in its
file name or in its ``run_evaluation/<run_id>/`` location, equal to the trajectories' run folder (the folder
``run-batch`` wrote them into). A report that names no run found here scores the runs under its own folder (or
under its parent's, for a report kept in a folder of its own beside the runs), but never a run that a report names.
Two reports for one run that disagree about an instance are an error: the instance keeps no reward. A report that
contradicts itself, listing one instance under two verdicts (``resolved_ids`` and ``unresolved_ids``), gives it
the verdicts joined by ``|`` (``resolved|unresolved``), never the first: the run warns, naming the report and the
instance, and the instance keeps no reward (unknown, neither 1.0 nor 0.0). A summary whose counts contradict its id
lists (``resolved_instances`` 1 with an empty ``resolved_ids``, say) cannot tell which list is wrong: it scores none
of its instances (each verdict carries ``|counts ...``, :func:`_miscounted`) and the run warns once, naming the
report and the counts.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict, TypeGuard, cast

import fsspec

from ares_viewer.base import jsondecode, locations

# Verdict -> reward.
REWARDS: Mapping[str, float] = {"resolved": 1.0, "unresolved": 0.0, "error": 0.0, "empty_patch": 0.0}
# Joins the verdicts of an instance that one report lists under several (a contradiction: no reward).
BOTH = "|"
_LISTS = {verdict: f"{verdict}_ids" for verdict in REWARDS}
# A summary's counts beside its id lists (``resolved_instances`` and ``resolved_ids``, ...): they must agree.
_COUNTED = ("submitted", "completed", "resolved", "unresolved", "empty_patch", "error")
# Marks the verdicts of a summary whose counts contradict its lists (joined with BOTH, then what is wrong).
COUNTS = "counts "
# The formats whose episodes are one trajectory per instance, named by that instance.
APPLIES_TO = frozenset({"mini-swe-agent"})
_INSTANCE_KEYS = ("resolved", "tests_status", "patch_exists", "patch_successfully_applied", "patch_is_None")


# The records of an evaluation report: the keys this module reads, each value ``object`` because the file is
# untrusted (a value is used once an ``isinstance`` check has said what it is). TypedDicts cost nothing at run time:
# the decoded dicts are read as they are. A summary's id lists and counts are read by name (``_LISTS``,
# ``_COUNTED``); an instance's report may sit under its instance id, a key no type can name.
class TestLists(TypedDict, total=False):
    """``FAIL_TO_PASS`` or ``PASS_TO_PASS`` of a ``tests_status``: the tests by result."""

    success: object
    failure: object


class InstanceReport(TypedDict, total=False):
    """One instance's harness report (``report.json``'s inner object)."""

    resolved: object
    tests_status: object  # ``{FAIL_TO_PASS: TestLists, PASS_TO_PASS: TestLists}``
    patch_exists: object
    patch_successfully_applied: object
    patch_is_None: object


def _instance_report(doc: object) -> TypeGuard[InstanceReport]:
    """One instance's harness report: ``resolved`` (a bool) with the harness's other keys."""
    return (isinstance(doc, Mapping) and isinstance(doc.get("resolved"), bool)
            and any(k in doc for k in _INSTANCE_KEYS[1:]))


def sniff(doc: object) -> TypeGuard[Mapping[str, object]]:
    """Whether a decoded JSON document is an evaluation report: a run's summary (a ``resolved_ids`` list and
    another id list) or one instance's report (``{instance_id: {resolved, ...}}`` or the inner object alone)."""
    if not isinstance(doc, dict):
        return False
    if isinstance(doc.get("resolved_ids"), list):
        return any(isinstance(doc.get(key), list) for key in ("unresolved_ids", "submitted_ids", "completed_ids"))
    return _instance_report(doc) or (len(doc) == 1 and _instance_report(next(iter(doc.values()))))


def _instance_verdict(report: InstanceReport) -> str:
    if report.get("resolved") is True:
        return "resolved"
    if report.get("patch_is_None") is True or report.get("patch_exists") is False:
        return "empty_patch"
    return "unresolved"


def read(doc: Mapping[str, object], path: str = "") -> dict[str, str]:
    """Instance id -> verdict (``resolved``, ``unresolved``, ``error`` or ``empty_patch``) of a report; an instance
    listed under several verdicts has them joined by ``BOTH`` (``resolved|unresolved``)."""
    found: dict[str, str] = {}
    if isinstance(doc.get("resolved_ids"), list):
        for verdict, key in _LISTS.items():
            ids = doc.get(key)
            for instance in ids if isinstance(ids, list) else ():
                if not isinstance(instance, str):
                    continue
                known = found.setdefault(instance, verdict)
                if verdict not in known.split(BOTH):
                    found[instance] = known + BOTH + verdict
        wrong = _miscounted(doc)
        if wrong:
            found = {instance: f"{verdict}{BOTH}{COUNTS}{wrong}" for instance, verdict in found.items()}
    elif _instance_report(doc):  # the inner object alone: the instance is its folder
        instance = _parts(path)[-2] if len(_parts(path)) > 1 else ""
        if instance:
            found[instance] = _instance_verdict(doc)
    else:
        for instance, report in doc.items():
            if _instance_report(report):
                found[str(instance)] = _instance_verdict(report)
    return found


def _miscounted(doc: Mapping[str, object]) -> str:
    """What a summary's counts say against its id lists (``resolved_instances 1, resolved_ids lists 0``), or ``""``
    when every count it gives matches the number of ids its list holds."""
    wrong = []
    for name in _COUNTED:
        count, ids = doc.get(f"{name}_instances"), doc.get(f"{name}_ids")
        if isinstance(count, int) and not isinstance(count, bool) and isinstance(ids, list):
            listed = sum(1 for i in ids if isinstance(i, str))
            if count != listed:
                wrong.append(f"{name}_instances {count}, {name}_ids lists {listed}")
    return "; ".join(wrong).replace(BOTH, "/")


def _parts(path: str) -> tuple[str, ...]:
    return locations.Location.of(path).pure(backslashes=True).parts


def _joined(parts: tuple[str, ...]) -> str:
    """``parts`` of a path (``_parts``) as one path again, its root (``/``) kept once: ``PurePosixPath``'s text."""
    if not parts:
        return ""
    root = parts[0] if parts[0].startswith("/") else ""
    return root + "/".join(parts[1:] if root else parts)


def _parent(path: str) -> str:
    return _joined(_parts(path)[:-1])


def run_ids(path: str) -> set[str]:
    """The run ids a report's path may name: every dotted tail of ``<model>.<run_id>.json`` (model names hold dots
    too), and the folder after ``run_evaluation`` in the harness's log layout."""
    parts = _parts(path)
    stem = parts[-1].removesuffix(".json") if parts else ""
    pieces = stem.split(".")
    ids = {".".join(pieces[i:]) for i in range(1, len(pieces))}
    if "run_evaluation" in parts[:-1]:
        at = parts.index("run_evaluation")
        if at + 1 < len(parts) - 1:
            ids.add(parts[at + 1])
    return {i for i in ids if i}


def run_folder(path: str, instance: str) -> str:
    """The run folder of a trajectory: ``{run}/{instance}/{instance}.traj.json`` or ``{run}/{instance}.traj.json``
    (its path read once: an index asks it of every trajectory)."""
    folders = _parts(path)[:-1]
    return _joined(folders[:-1] if folders and folders[-1] == instance else folders)


@dataclasses.dataclass(frozen=True, slots=True)
class Verdicts:
    """The reports of a run, joined: ``verdict(run folder, instance)`` -> ``(verdict, report path)``."""

    by_run: Mapping[str, Mapping[str, tuple[str, str]]]
    errors: tuple[tuple[str, str], ...]
    notes: tuple[tuple[str, str], ...]

    def verdict(self, folder: str, instance: str) -> tuple[str, str] | None:
        return self.by_run.get(folder, {}).get(instance)


# How many folders up a one-instance report with no run in its path looks for the runs it scores.
_INSTANCE_CLIMBS = 3


def _under(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder.rstrip("/") + "/")


def join(reports: Mapping[str, Mapping[str, str]], folders: Iterable[str]) -> Verdicts:
    """Assign every report to the run folders it scores (see the module's docs) and merge them per run.

    Args:
        reports: report path -> instance -> verdict.
        folders: the run folders of the trajectories a report may score.

    Returns the verdicts per run folder, errors ``(report path, message)`` for reports that disagree about an
    instance of one run, and notes ``(report path, message)`` for reports applied by location to several runs or
    to none, and for reports that list an instance under two verdicts.
    """
    folders = sorted(set(folders))
    names = {f: pathlib.PurePosixPath(f).name for f in folders}
    assigned, named_runs, unnamed = _assign_by_name(reports, folders, names)
    notes = []
    for path in unnamed:
        under = [f for f in _under_its_folder(path, len(reports[path]), folders) if f not in named_runs]
        for f in under:
            assigned[f].append(path)
        if len(under) > 1:
            notes.append((path, f"names no run; applied by location to {len(under)} runs: "
                                + ", ".join(names[f] for f in under)))
        elif not under and folders:
            notes.append((path, "names no run of these trajectories and none lies under its folder; not applied. "
                                "To apply it, put it beside the run folder of the trajectories it scores, or name "
                                "the run in its path: <model>.<run_id>.json, or "
                                "logs/run_evaluation/<run_id>/<model>/<instance>/report.json"))
    errors: list[tuple[str, str]] = []
    by_run = {folder: _merged(reports, paths, notes, errors) for folder, paths in assigned.items()}
    return Verdicts(by_run, tuple(errors), tuple(notes))


def _assign_by_name(reports: Mapping[str, Mapping[str, str]], folders: list[str], names: Mapping[str, str]
                    ) -> tuple[dict[str, list[str]], set[str], list[str]]:
    """Each report whose path names runs, assigned to those of ``folders``: the reports per folder, the folders
    named, and the reports that name none."""
    assigned: dict[str, list[str]] = {f: [] for f in folders}
    named_runs: set[str] = set()
    unnamed = []
    for path in sorted(reports):
        ids = run_ids(path)
        mine = [f for f in folders if names[f] in ids]
        if mine:
            named_runs.update(mine)
            for f in mine:
                assigned[f].append(path)
        else:
            unnamed.append(path)
    return assigned, named_runs, unnamed


def _under_its_folder(path: str, instances: int, folders: list[str]) -> list[str]:
    """The run folders under the folder of a report that names no run (of ``instances`` instances)."""
    scope = _parent(path)
    under = [f for f in folders if _under(f, scope)]
    # a report in a folder of its own (``evaluation/``) beside the runs; one instance's report a level or two
    # deeper still (``logs/<instance>/report.json`` beside ``trajs/``, a copy of the harness's log folders)
    climbs = _INSTANCE_CLIMBS if instances == 1 else 1
    while not under and climbs and scope:
        scope, climbs = _parent(scope), climbs - 1
        under = [f for f in folders if _under(f, scope)]
    return under


def _merged(reports: Mapping[str, Mapping[str, str]], paths: list[str], notes: list[tuple[str, str]],
            errors: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """One run's verdicts, ``instance -> (verdict, report path)``, merged from its reports ``paths``; an instance
    a report lists under two verdicts (a note) or two reports disagree on (an error) keeps none."""
    merged: dict[str, tuple[str, str]] = {}
    disputed: set[str] = set()
    for path in paths:
        for instance, verdict in reports[path].items():
            if verdict not in REWARDS:  # listed under several verdicts by this one report, or miscounted
                disputed.add(instance)
                said = verdict.split(BOTH)
                note = (path, f"lists {instance} as {' and '.join(said)} at once: the report "
                              "contradicts itself, so it keeps no reward")
                if said[-1].startswith(COUNTS):
                    note = (path, f"its counts contradict its id lists ({said[-1].removeprefix(COUNTS)}): the "
                                  "report cannot say which list is wrong, so none of its instances gets a reward")
                if note not in notes:
                    notes.append(note)
                continue
            known = merged.get(instance)
            if known is None:
                merged[instance] = (verdict, path)
            elif known[0] != verdict and instance not in disputed:
                disputed.add(instance)
                error = (path, f"says {instance} is {verdict}, but {known[1]} says {known[0]}: the two "
                               "reports disagree, so it keeps no reward")
                if error not in errors:  # the same two reports may score several runs
                    errors.append(error)
    return {k: v for k, v in merged.items() if k not in disputed}


def reward_for(row_format: str, task_name: Any, reward: Any, path: str, verdicts: Verdicts, *,
               folder: str | None = None) -> tuple[float, str, str] | None:
    """``(reward, verdict, report path)`` for an episode that records no reward and has a verdict, else None
    (``folder``: its ``run_folder``, when the caller has it)."""
    if row_format not in APPLIES_TO or reward is not None or not isinstance(task_name, str):
        return None
    known = verdicts.verdict(run_folder(path, task_name) if folder is None else folder, task_name)
    if known is None:
        return None
    return REWARDS[known[0]], known[0], known[1]


# A per-instance report's test results: ``tests_status`` -> ``FAIL_TO_PASS`` (the tests the fix must make pass) and
# ``PASS_TO_PASS`` (the tests it must not break), each ``{"success": [...], "failure": [...]}``.
TARGETS, KEPT = "FAIL_TO_PASS", "PASS_TO_PASS"
# A report file is read again for one episode's tests; a harness report is a few kilobytes to a few megabytes.
MAX_REPORT_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Tests:
    """What an instance's report says of its tests: the target tests still failing, the tests the patch broke."""

    still_failing: tuple[str, ...]
    broken: tuple[str, ...]
    fixed: tuple[str, ...]
    report: str

    def words(self) -> str:
        """The failing tests in one line, or that every target passed and nothing broke."""
        parts = []
        if self.still_failing:
            parts.append(f"{len(self.still_failing)} target test(s) still failing ({_some(self.still_failing)})")
        if self.broken:
            parts.append(f"{len(self.broken)} test(s) that passed before broken ({_some(self.broken)})")
        if not parts:
            return f"all {len(self.fixed)} target test(s) pass and none broke"
        fixed = f"; {len(self.fixed)} target test(s) fixed" if self.fixed else ""
        return "; ".join(parts) + fixed


def _some(names: tuple[str, ...], n: int = 3) -> str:
    return ", ".join(names[:n]) + (f", and {len(names) - n} more" if len(names) > n else "")


def _names(value: object) -> tuple[str, ...]:
    return tuple(str(x) for x in value if isinstance(x, str)) if isinstance(value, list) else ()


def tests_of(doc: object, instance: str, path: str = "") -> Tests | None:
    """The test results a report holds for ``instance`` (a per-instance report's ``tests_status``), else None."""
    if not isinstance(doc, Mapping):
        return None
    found = doc.get(instance)
    report = cast(InstanceReport, found if isinstance(found, Mapping) else doc)
    status = report.get("tests_status")
    if not isinstance(status, Mapping):
        return None
    targets = cast(TestLists, jsondecode.object_at(status, TARGETS))
    kept = cast(TestLists, jsondecode.object_at(status, KEPT))
    return Tests(still_failing=_names(targets.get("failure")), broken=_names(kept.get("failure")),
                 fixed=_names(targets.get("success")), report=path)


def read_tests(path: str, instance: str) -> Tests | None:
    """The test results the report at ``path`` holds for ``instance``; None when it holds none or does not read."""
    return tests_of(_read_doc(path), instance, path)


def says(verdict: str, tests: Tests | None, report: str) -> str:
    """What a report says of an instance, in the words every surface uses (the episode's ending, the index's ``why``
    and failure reasons): the verdict, and the failing tests of its ``tests_status`` when it has one, naming the
    report's file."""
    said = f"the SWE-bench evaluation says {verdict.replace('_', ' ')}"
    if tests is not None:
        return f"{said}: {tests.words()} (tests_status in {report})"
    return f"{said} ({report})"


class Reader:
    """Reports read once each for many instances (a summary report lists them all), at most ``limit`` files."""

    def __init__(self, limit: int = 5_000) -> None:
        self._docs: dict[str, object] = {}
        self._limit = limit

    def tests(self, path: str, instance: str) -> Tests | None:
        if path not in self._docs:
            if len(self._docs) >= self._limit:
                return None
            self._docs[path] = _read_doc(path)
        return tests_of(self._docs[path], instance, path)


def _read_doc(path: str) -> object:
    try:
        with fsspec.open(path, "rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
        return None if len(data) > MAX_REPORT_BYTES else jsondecode.decode(data).value
    except (OSError, ValueError, RecursionError):
        return None


# The ``verdict`` column of an episode whose reward its own file records.
RECORDED = "recorded in the episode"


def source(verdict: str | None, report: str | None, reward: Any) -> str | None:
    """Where an episode's reward came from, in the words of the ``verdict`` column."""
    if verdict and report:
        return f"{verdict} ({pathlib.PurePosixPath(report.split('://', 1)[-1]).name})"
    if reward is not None and reward == reward:
        return RECORDED
    return None
