"""``ares-viewer branch RUN EPISODE``: V(k) per step from branched rollouts and the decisive step (docs/decisive.md).

Without an episode (``--episodes failed|solved|all|ID,...``, ``--task``, ``--flag``, ``--report``) it searches many
episodes of the run within one budget, or reports where the run's tasks are lost: ``cli/branch_run.py``."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import orjson

from ares_viewer import counterfactual
from ares_viewer.cli import terminal
from ares_viewer.counterfactual import branching, model_client, process_rewards, values
from ares_viewer.runs import run as runs


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``branch`` command among ``commands``."""
    command = commands.add_parser(
        "branch", help="branch from an episode's steps, estimate V(k) per step and find the decisive step"
    )
    command.add_argument("run", help="the run: folder, file, glob or fsspec URL")
    command.add_argument("episode", nargs="?", help="the episode's id (none: the run's --episodes)")
    command.add_argument(
        "--episodes", help="search these episodes within one budget: failed, solved, all or ids like a,b (no EPISODE)"
    )
    command.add_argument("--task", action="append", help="only episodes of this task (repeatable; with --episodes)")
    command.add_argument("--flag", help="only episodes that show this behaviour flag (with --episodes)")
    command.add_argument(
        "--report", action="store_true", help="where the run's tasks are lost, from the stored branches (no search)"
    )
    command.add_argument(
        "--export-stepwise", metavar="PATH", help="also write TRL stepwise-supervision rows (.jsonl/.parquet)"
    )
    command.add_argument("--threshold", type=float, default=0.5, help="a stepwise label is V(k) >= this (0.5)")
    command.add_argument("--steps", default="spectrum",
                         help="spectrum (the default: on the planted suite it named the planted step most often, "
                              "at under half exhaustive's rollouts; docs/decisive.md), all (exhaustive: the whole "
                              "curve, e.g. for process-reward data), every:N, a list like 3,7,9, bisect or adaptive; "
                              "one episode only (--episodes uses its own allocation)")
    command.add_argument("--samples", type=int, default=4, help="counted branches per step (a rerun adds to them)")
    command.add_argument("--endpoint", help="an OpenAI-compatible endpoint (default: the configured one)")
    command.add_argument("--model", help="the model field of its requests (with --endpoint)")
    command.add_argument("--api-key-env", help="the environment variable holding its API key (with --endpoint)")
    command.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    command.add_argument("--max-steps", type=int, default=10, help="actions a branch may take (default 10)")
    command.add_argument("--parallel", type=int, default=2, help="branches (containers) at once (default 2)")
    command.add_argument("--max-rollouts", type=int, help="at most this many new branches")
    command.add_argument("--wall-s", type=float, help="start no new branch after this many seconds")
    command.add_argument("--no-snapshots", action="store_true",
                         help="write branches without per-step snapshots: a branch then costs about a bare restore "
                              "plus the verifier, but its steps cannot be restored or diffed")
    command.add_argument(
        "--max-model-tokens",
        type=int,
        metavar="N",
        help="start no new branch once the branches spent N model tokens (a call without reported usage counts "
        "as its size: a token per 4 bytes)",
    )
    command.add_argument("--ray", metavar="ADDRESS", help="each branch a task on this Ray cluster (local: start one)")
    command.add_argument(
        "--branches-to",
        metavar="URL",
        help="store the branches in this folder or fsspec URL (s3://...) instead of the cache folder (never inside "
        "the run); with --ray, the nodes then need no shared file system",
    )
    command.add_argument("--recipe", help="the verifier's recipe for a run without one (task.json or harbor task)")
    command.add_argument("--json", action="store_true", help="the curve and the decisive step as one JSON object")
    command.add_argument(
        "--export", metavar="PATH", help="also write the values as process-reward rows (.jsonl/.parquet)"
    )
    command.set_defaults(func=run)


def _client(args: argparse.Namespace) -> counterfactual.Client:
    if args.endpoint:
        if not args.model:
            raise ValueError("--endpoint needs --model")
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        return model_client.openai_client(args.endpoint, args.model, key, temperature=args.temperature)
    config = model_client.configured()
    if config is None:
        raise ValueError("no model endpoint: give --endpoint URL --model M, or configure one "
                         "(docs/sandbox.md, 'Configuring the endpoint')")
    return dataclasses.replace(config, request={**config.request, "temperature": args.temperature}).client()


def run(args: argparse.Namespace) -> int:
    if args.episode is None:
        from ares_viewer.cli import branch_run

        return branch_run.run(args, _client)
    if args.episodes or args.report or args.flag or args.task:
        raise ValueError("--episodes, --task, --flag and --report search or report many episodes: give no EPISODE")
    episode = runs.open_run(args.run).episode(args.episode)
    if args.branches_to is not None:  # never inside the run's tree, where a branch would list as its episode
        branching.store_dir(episode, args.branches_to, run=args.run)
    client = _client(args)
    budget = branching.Budget(
        max_rollouts=args.max_rollouts, parallel=args.parallel, wall_s=args.wall_s, token_budget=args.max_model_tokens,
        snapshots=not args.no_snapshots,
    )

    def progress(p: branching.Progress) -> None:
        b = p.branch
        said = f"reward {b.reward}" if b.failure is None else f"failed ({b.failure}): {b.error}"
        said += f", {_tokens(b.tokens)} model tokens"
        print(
            f"branch {p.done}{'/' + str(p.planned) if p.planned else ''} from step {b.step}: {said}",
            file=sys.stderr,
            flush=True,
        )

    searched = terminal.until_done(lambda cancel: branching.search(
        episode, client, steps=args.steps, samples=args.samples, budget=budget, max_steps=args.max_steps,
        progress=progress, cancel=cancel, recipe=args.recipe, ray_address=args.ray, store=args.branches_to,
    ), "branch-search")
    # The curve as the Episode page shows it: with the branches the run ships, judged by the rule this search wrote
    # beside them (branching.load), this call's figures kept.
    result = dataclasses.replace(
        branching.load(episode, args.branches_to),
        new=searched.new, stopped=searched.stopped, tokens=searched.tokens, note=searched.note,
        failures=searched.failures,
    )
    if args.export:
        written = process_rewards.write([episode], args.export, args.branches_to)
        print(f"{written} process-reward row(s) written to {args.export}", file=sys.stderr)
    if args.export_stepwise:
        written = process_rewards.write_stepwise([episode], args.export_stepwise, args.branches_to, args.threshold)
        print(f"{written} stepwise row(s) written to {args.export_stepwise}", file=sys.stderr)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(to_dict(result)) + b"\n")
    else:
        print("\n".join(text(result)))
    return 0


def to_dict(result: branching.Search) -> dict:
    """The search as JSON: its folder, the curve, the decisive step, how many branches ran and why it stopped."""
    return {
        "folder": str(result.folder),
        "curve": [vars(e) for e in result.curve],
        "decisive": None if result.decisive is None else vars(result.decisive),
        "branches": sum(1 for b in result.branches if not b.supplied),
        "supplied": sum(1 for b in result.branches if b.supplied),
        "problems": list(result.problems),
        "new": result.new,
        "stopped": result.stopped,
        "tokens": result.tokens,
        "total_tokens": result.total_tokens,
        "note": result.note,
        "finding": result.describe(),
        "failures": [b.to_json() for b in result.failures],
    }


def _tokens(count: int | None) -> str:
    return "unknown" if count is None else f"{count:,}"


def _value(e: values.Estimate) -> str:
    if e.value is None:
        return "    –  (no counted branch)"
    return f"{e.value:5.2f}  [{e.low:.2f}, {e.high:.2f}]"


def text(result: branching.Search) -> list[str]:
    """The curve, one step a line, then the decisive step."""
    lines = ["step      V   95% interval      n  failed"]
    for e in result.curve:
        n = "recorded" if e.recorded else f"{e.n:>3}  {e.failed:>6}"
        lines.append(f"{e.step:>4}  {_value(e)}  {n}")
    lines.append(result.describe())
    supplied = sum(1 for b in result.branches if b.supplied)
    lines.append(
        f"{result.new} new branch(es), {_tokens(result.tokens)} model tokens, {len(result.branches) - supplied} "
        f"stored in {result.folder} ({result.stopped})"
    )
    if supplied:
        lines.append(f"{supplied} branch(es) supplied with the run in {result.supplied_folder} (not computed here)")
    for problem in result.problems:
        lines.append(f"warning: left out: {problem}")
    if result.note:
        lines.append(f"note: {result.note}")
    if result.failures:
        lines.append(f"warning: {branching.say_failures(result.failures)}")
    return lines

