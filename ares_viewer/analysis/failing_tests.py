"""The tests a run's episodes failed, across the run: failure groups by failing test.

SWE-bench's per-instance reports name each instance's tests (``tests_status``): the target tests a patch had to
make pass (``FAIL_TO_PASS``) and the tests it had to keep passing (``PASS_TO_PASS``). Grouped over a run, they
answer "which tests do the failures fail?" with counts and the episodes, beside the failure reasons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from ares_viewer.base import locations
from ares_viewer.formats.sidecars import verdicts

if TYPE_CHECKING:
    from ares_viewer.runs import run as run_module

COLUMNS = ("test", "how", "episodes", "episode_ids", "reports")
STILL_FAILING = "target test still failing"
BROKEN = "passed before, broken by the patch"
# Reports read at the most (one file each, bounded by ``verdicts.MAX_REPORT_BYTES``): a run of a few thousand
# instances reads them all; past that the table says how many it left out.
MAX_REPORTS = 5_000


def of_run(run: run_module.Run) -> pd.DataFrame:
    """One row per failing test of the run's unresolved instances, most episodes first: ``test``, ``how``
    (``STILL_FAILING`` or ``BROKEN``), ``episodes`` (how many), ``episode_ids`` and ``reports`` (the files read).
    Empty when no report names tests."""
    found: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    wanted = [(path, instance) for path, verdict_of in sorted(run.reports.items())
              for instance, verdict in sorted(verdict_of.items()) if verdict != "resolved"][:MAX_REPORTS]
    if not wanted:  # no report of an unresolved instance (and no ``verdict`` column without reports)
        return pd.DataFrame([], columns=list(COLUMNS))
    # The episodes of every wanted instance in one query; an episode belongs to a report when its verdict names it.
    listed: dict[str, list[tuple[str, str]]] = {}
    for episode_id, task, verdict in run.query(
            "SELECT episode_id, task_name, verdict FROM episodes WHERE verdict IS NOT NULL "
            "AND task_name IN (SELECT unnest(?::VARCHAR[])) ORDER BY path, _seq",
            [sorted({instance for _, instance in wanted})]).fetchall():
        listed.setdefault(task, []).append((episode_id, verdict))
    for path, instance in wanted:
        name = locations.Location.of(path).name
        ids = [i for i, verdict in listed.get(instance, ()) if verdict.endswith(f"({name})")]
        tests = verdicts.read_tests(path, instance) if ids else None
        if tests is None:
            continue
        for how, names in ((STILL_FAILING, tests.still_failing), (BROKEN, tests.broken)):
            for test in names:
                episodes, reports = found.setdefault((test, how), (set(), set()))
                episodes.update(ids)
                reports.add(path)
    rows = [{"test": test, "how": how, "episodes": len(ids), "episode_ids": sorted(ids), "reports": sorted(paths)}
            for (test, how), (ids, paths) in found.items()]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.sort_values(["episodes", "test"], ascending=[False, True], kind="stable").reset_index(drop=True)
