"""``ares-viewer compare-runs A B``: two runs (or two sides of one run) compared task by task, as text or JSON."""

from __future__ import annotations

import argparse
import re
import sys

import orjson

from ares_viewer.analysis import compare_runs
from ares_viewer.model import render

# Control characters in a run's text (task names, failure reasons) must not drive the terminal: shown as escapes.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
# Tasks listed per list (lost, gained, changed) in the text; --json gives them all.
_LISTED = 20


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``compare-runs`` command among ``commands``."""
    command = commands.add_parser(
        "compare-runs",
        help="two runs (or two sides of one run) task by task: tasks lost, gained and changed, with exact tests",
    )
    command.add_argument("a", help="run A: folder, file, glob or fsspec URL")
    command.add_argument("b", nargs="?", help="run B (left out with --by: two sides of run A)")
    command.add_argument(
        "--by", metavar="COLUMN", help="split run A by this column (iteration, a model or checkpoint column, ...)"
    )
    command.add_argument(
        "--sides",
        nargs=2,
        metavar=("X", "Y"),
        help="with --by: the two values compared, A's first (default: the column's two values)",
    )
    command.add_argument(
        "--alpha",
        type=float,
        default=compare_runs.ALPHA,
        help=f"q-value under which a task's difference is significant (default {compare_runs.ALPHA})",
    )
    command.add_argument("--json", action="store_true", help="everything as one JSON object")
    command.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.b is None) == (args.by is None):
        raise compare_runs.CompareError("name run B, or --by COLUMN to split run A (not both)")
    if args.sides and args.by is None:
        raise compare_runs.CompareError("--sides needs --by")
    found = compare_runs.compare_runs(args.a, args.b, by=args.by, sides=args.sides, alpha=args.alpha)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(found.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    else:
        print(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "\n".join(text(found))))
    return 0



def text(found: compare_runs.Comparison) -> list[str]:
    """The comparison in lines: both sides, the sign test, then the lost, gained and changed tasks."""
    lines = []
    for name, label, overall in (("A", found.a.label, found.overall_a), ("B", found.b.label, found.overall_b)):
        beside = ", ".join(f"{overall[k]:,} {k}" for k in ("unscored", "infrastructure") if overall[k])
        lines.append(
            f"{name}: {label}: {render.rate_text(overall['rate'])} solved of {overall['judged']:,} judged episodes "
            f"({overall['episodes']:,} in all{'; ' + beside + ' left out' if beside else ''})"
        )
    runs = [found.a.run] if found.a.run is found.b.run else [found.a.run, found.b.run]
    for side_run, overall in zip(runs, (found.overall_a, found.overall_b), strict=False):
        if overall["unscored"] or len(runs) == 1:  # why its trajectories are unscored: where reports were looked for
            lines += [f"  {message}" for _, message in side_run.missing_reports]
    counts, sign = found.counts(), found.sign_test
    lines.append(
        f"{counts['tasks']:,} tasks: {counts['lost']} lost, {counts['gained']} gained, {counts['same']} "
        f"the same, {counts['changed']} changed in behaviour; {counts['only A']} only on A, "
        f"{counts['only B']} only on B, {counts['unjudged']} not judged on a side"
    )
    p = render.UNKNOWN if sign.p_value is None else f"{sign.p_value:.3g}"
    lines.append(f"sign test over tasks: {sign.better} better on B, {sign.worse} worse, {sign.ties} tied: p = {p}")
    similar = compare_runs.similar_task_names(found.tasks["task_name"])
    lines += [f"warning: {said}" for said in similar[:_LISTED]]
    if len(similar) > _LISTED:
        lines.append(f"warning: {len(similar) - _LISTED} more group(s) of such task names")
    for title, rows in (("lost", found.lost()), ("gained", found.gained())):
        lines.append(f"\n{title} ({len(rows)}; q < {found.alpha} or solved on one side only):")
        words = found.significance(rows)
        if words:
            lines.append(f"  {words}")
        for row in rows.head(_LISTED).itertuples():
            lines.append(
                f"  {row.task_name}  {render.rate_text(row.rate_a)} of {row.judged_a} → "
                f"{render.rate_text(row.rate_b)} of {row.judged_b}  (p = {row.p_value:.3g}, q = {row.q_value:.3g})"
            )
    changed = found.changed()
    lines.append(
        f"\nchanged in behaviour ({len(changed)}; means differing by more than {found.change:.0%} of the "
        "larger, or another top failure):"
    )
    lines += [f"  {row.task_name}  {'; '.join(row.changes)}" for row in changed.head(_LISTED).itertuples()]
    return lines
