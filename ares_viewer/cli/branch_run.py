"""``ares-viewer branch RUN --episodes failed|solved|all|ID,...`` (one budget for the whole call) and
``ares-viewer branch RUN --report`` (where the run's tasks are lost): the run-wide faces of the ``branch`` command.

The search is ``counterfactual.run_search.search_run``; the report ``counterfactual.lost`` (docs/decisive.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import orjson

from ares_viewer.cli import terminal
from ares_viewer.counterfactual import branching, lost, process_rewards, run_search
from ares_viewer.runs import run as runs

_BAR = 30


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "time left unknown yet"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"~{hours}h{minutes:02d}m left" if hours else f"~{minutes}m{secs:02d}s left"


def bar(p: run_search.RunProgress) -> str:
    """The progress line: a bar of branches done against the estimate, episodes settled, the time left."""
    filled = int(_BAR * p.done / p.planned) if p.planned else 0
    b = p.branch
    said = f"reward {b.reward}" if b.failure is None else f"failed ({b.failure})"
    return (f"[{'#' * filled}{'-' * (_BAR - filled)}] {p.done}/~{p.planned} branches · {p.settled}/{p.episodes} "
            f"episodes settled · {_duration(p.eta_s)} · {p.episode_id[:8]} step {b.step}: {said}")


def _search(args: argparse.Namespace, opened: Any, client_of: Callable[[argparse.Namespace], Any]
            ) -> run_search.RunSearch:
    budget = branching.Budget(max_rollouts=args.max_rollouts, parallel=args.parallel, wall_s=args.wall_s,
                              token_budget=args.max_model_tokens, snapshots=not args.no_snapshots)
    client = client_of(args)
    live = sys.stderr.isatty()

    def progress(p: run_search.RunProgress) -> None:
        print(("\r" if live else "") + bar(p), end="" if live else "\n", file=sys.stderr, flush=True)

    found = terminal.until_done(lambda cancel: run_search.search_run(
        opened, client, episodes=args.episodes, flag=args.flag, task=args.task, samples=args.samples, budget=budget,
        max_steps=args.max_steps, progress=progress, cancel=cancel, recipe=args.recipe, ray_address=args.ray,
        store=args.branches_to), "run-branch-search")
    if live:
        print(file=sys.stderr)
    return found


def _shown(value: Any, form: str = "{}") -> str:
    """A cell as text: ``-`` for a missing value (None or NaN), never ``nan``."""
    return "-" if value is None or value != value else form.format(value)


def _report_lines(frame: Any) -> list[str]:
    lines = [f"{'episode':<10} {'task':<28} {'outcome':<8} {'state':<12} {'step':>4} {'change':>7} {'sure':<5} kind"]
    for r in frame.itertuples():
        sure = _shown(r.sure) if r.sure is None or r.sure != r.sure else ("yes" if r.sure else "no")
        lines.append(f"{r.episode_id[:10]:<10} {_shown(r.task_name)[:28]:<28} {_shown(r.outcome):<8} "
                     f"{r.state:<12} {_shown(r.decisive_step, '{:.0f}'):>4} {_shown(r.change, '{:+.2f}'):>7} "
                     f"{sure:<5} {_shown(r.kind)}")
    parts = lost.summary(frame)
    lines.append("")
    lines.append("episodes by outcome and state:")
    lines += ["  " + line for line in parts["states"].to_string(index=False).splitlines()]
    lines.append("decisive steps by kind of action:")
    lines += ["  " + line for line in parts["kinds"].to_string(index=False).splitlines()]
    lines.append("decisive steps by position in the episode (thirds of its actions):")
    lines += ["  " + line for line in parts["positions"].to_string(index=False).splitlines()]
    lines.append("per task:")
    lines += ["  " + line for line in parts["tasks"].to_string(index=False).splitlines()]
    return lines


def _exports(args: argparse.Namespace, chosen: list[Any]) -> None:
    if args.export:
        written = process_rewards.write(chosen, args.export, args.branches_to)
        print(f"{written} process-reward row(s) written to {args.export}", file=sys.stderr)
    if args.export_stepwise:
        written = process_rewards.write_stepwise(chosen, args.export_stepwise, args.branches_to, args.threshold)
        print(f"{written} stepwise row(s) written to {args.export_stepwise}", file=sys.stderr)


def run(args: argparse.Namespace, client_of: Callable[[argparse.Namespace], Any]) -> int:
    """The run-wide ``branch`` command (``--episodes`` searches, ``--report`` reports)."""
    if args.episodes is None and not args.report:
        raise ValueError("give an EPISODE, or --episodes failed|solved|all|ID,... to search many, or --report")
    opened = runs.open_run(args.run)
    searched = None if args.report else _search(args, opened, client_of)
    chosen = run_search.select(opened, args.episodes or "all", flag=args.flag, task=args.task)
    frame = lost.of_run(opened, chosen, store=args.branches_to)
    _exports(args, chosen)
    if args.json:
        out: dict[str, Any] = {"episodes": orjson.loads(frame.to_json(orient="records")),
                               "summary": {k: orjson.loads(v.to_json(orient="records"))
                                           for k, v in lost.summary(frame).items()}}
        if searched is not None:
            out["search"] = {"new": searched.new, "tokens": searched.tokens, "counted_tokens": searched.counted_tokens,
                             "stopped": searched.stopped, "elapsed_s": searched.elapsed_s, "status": searched.status,
                             "state_file": str(searched.state_file), "calls": list(searched.calls),
                             "failures": [b.to_json() for b in searched.failures]}
        sys.stdout.buffer.write(orjson.dumps(out) + b"\n")
        return 0
    print("\n".join(_report_lines(frame)))
    if searched is not None:
        for line in searched.account():
            print(line)
        unsettled = sorted(i for i, s in searched.status.items() if s == "pending")
        if unsettled:
            print(f"{len(unsettled)} episode(s) not settled when the search stopped; a rerun continues them")
        if searched.failures:
            print(f"warning: {branching.say_failures(searched.failures)}")
    return 0
