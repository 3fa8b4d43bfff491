"""Branched rollouts from an episode's steps: V(k) per step and the decisive step (see ``docs/decisive.md``).

A branch restores step k's snapshot, asks the model again with the recorded context (``counterfactual.run`` with
the observation unedited), continues for up to ``max_steps`` actions and runs the task's verifier. Each branch is an
ordinary episode file with a snapshot per step, linked to its parent episode and step (the counterfactual layout),
so it opens, diffs and compares like any episode. :func:`search` branches from the chosen steps (every step,
every n-th, a list, or an adaptive bisection on V), within a budget (rollouts, concurrent containers, wall time,
model tokens), reporting progress and stopping on a cancel event; every finished branch is kept.

Results live in the cache folder (or a store the caller names, an object store too: ``branch_store``), never in
the run folder: ``branches/<key>/`` holds the branch episodes and ``branches.jsonl``, one line per finished branch.
A rerun reads them back and adds samples instead of starting over (:func:`search` tops steps up to ``samples``).
A branch whose model, container or verifier failed is recorded with its failure and never counted as a reward.
A branch the step budget truncated (the model did not submit) counts as reward 0: that is the policy's outcome.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import pathlib
import stat
import threading
import time
import typing
from collections.abc import Callable, Sequence
from typing import Any

from ares_viewer import counterfactual, model, sandbox
from ares_viewer.base import locations
from ares_viewer.counterfactual import branch_ray, branch_store, completion, strategies, values
from ares_viewer.runs import index_cache
from ares_viewer.runs.run import load_episode
from ares_viewer.snapshots import per_step

__all__ = [
    "Branch",
    "Budget",
    "Progress",
    "Search",
    "branchable_steps",
    "bundled_dir",
    "load",
    "parse_steps",
    "say_failures",
    "search",
    "store_dir",
]

_LOGGER = logging.getLogger(__name__)
LOG_NAME = branch_store.LOG_NAME
BUNDLED_DIRNAME = ".branches"
BISECT = strategies.BISECT


@dataclasses.dataclass(frozen=True)
class Budget:
    """What a search may spend.

    Attributes:
        max_rollouts: at most this many new branches in this call (None: no limit).
        parallel: branches running at once, each in its own container (bounded by the machine's cores).
        wall_s: start no new branch after this many seconds (running ones finish).
        token_budget: start no new branch once this call's branches spent this many model tokens (prompt and
            generated, as the endpoint reported them; running ones finish). A call whose endpoint reported no
            usage, or a total of 0, counts as its size (``completion.counted``: a token per 4 bytes of its request
            and answer), so such an endpoint never disables the budget; the search then says so
            (:attr:`Search.note`).
        snapshots: keep a snapshot of every branch step (a branch's Files page and Compare show what each action
            changed); ``False`` writes the branch episodes without them (``counterfactual.without_snapshots``): a
            branch then costs about a bare restore plus the verifier (``benchmarks/bench_branches.py``), for
            searches that want only the rewards.
    """

    max_rollouts: int | None = None
    parallel: int = 2
    wall_s: float | None = None
    token_budget: int | None = None
    snapshots: bool = True


@dataclasses.dataclass(frozen=True)
class Branch:
    """One finished branch, as ``branches.jsonl`` records it.

    Attributes:
        step: the parent's step it restored.
        episode_id, path: the branch episode (None when the restore itself failed: nothing was written).
        status: the branch episode's ``end_status`` (``completed``, ``truncated``, ``errored``, ``cancelled``), or
            ``failed`` when the restore failed.
        reward: the verifier's reward (0.0 for a truncated branch); None for a failure.
        failure: why there is no reward: ``model``, ``container``, ``verifier``, ``no_reward`` (no recipe, or the
            verifier wrote none), ``restore``; None when the branch counts.
        error: the failure in one line.
        container: the short id of the container it ran in.
        duration_s: its wall time.
        tokens: the model tokens its calls spent (prompt and generated, as the endpoint reported them); None when
            unknown (the endpoint, or a branch stored before tokens were counted, reported none).
        supplied: it came with the run (``.branches/``, :func:`bundled_dir`): a result this installation did not
            compute, read as untrusted input. Never written to a log.
        counted_tokens: what its calls count against a token budget: ``tokens`` when every call's usage was
            reported, else with each other call counted as its size (``completion.counted``); None in a log
            written before it was recorded.
    """

    step: int
    episode_id: str | None
    path: str | None
    status: str
    reward: float | None
    failure: str | None = None
    error: str | None = None
    container: str | None = None
    duration_s: float = 0.0
    tokens: int | None = None
    supplied: bool = False
    counted_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        del record["supplied"]
        return record

    @classmethod
    def from_json(cls, data: Any) -> Branch:
        """A log's record, its fields checked (it may come from a file the run shipped).

        Raises:
            ValueError: not an object, or a field of the wrong type or out of range (which, and why).
        """
        if not isinstance(data, dict):
            raise ValueError(f"a {type(data).__name__}, not a JSON object")
        fields = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data and f.name != "supplied"}
        for name, kinds in _FIELD_TYPES.items():
            value = fields.get(name)
            if name in _REQUIRED and name not in fields:
                raise ValueError(f"no {name}")
            if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
                raise ValueError(f"{name} is {type(value).__name__} {str(value)[:40]!r}, not {kinds[0].__name__}")
        if fields["step"] < 0:
            raise ValueError(f"step {fields['step']} is negative")
        for name in ("reward", "duration_s", "tokens", "counted_tokens"):
            value = fields.get(name)
            if value is not None and not (math.isfinite(value) and (value >= 0 or name == "reward")):
                raise ValueError(f"{name} {value!r} is not a finite number" + ("" if name == "reward" else " >= 0"))
        if fields.get("error") is not None:
            fields["error"] = fields["error"][:_MAX_ERROR]
        return cls(**fields)


_REQUIRED = ("step", "status")
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "step": (int,),
    "episode_id": (str,),
    "path": (str,),
    "status": (str,),
    "reward": (float, int),
    "failure": (str,),
    "error": (str,),
    "container": (str,),
    "duration_s": (float, int),
    "tokens": (int,),
    "counted_tokens": (int,),
}
_MAX_ERROR = 2000  # characters of a branch's error kept (a shipped log's may be of any length)


@dataclasses.dataclass(frozen=True)
class Progress:
    """Reported after every branch: ``done`` of at most ``planned`` (None: an adaptive search's unknown total)."""

    done: int
    planned: int | None
    branch: Branch


@dataclasses.dataclass(frozen=True)
class Search:
    """A search's results: every branch stored for the episode (earlier runs' too) and the estimates from them.

    Attributes:
        folder: where the branches are stored (in the cache folder, or the store the search was given).
        curve: V(k) per step with a branch, plus the recorded terminal step's reward; in step order.
        decisive: the step whose action changed V the most, or None.
        branches: every stored branch, oldest first.
        new: how many branches this call ran.
        stopped: why it stopped: ``done``, ``budget``, ``token budget``, ``wall time`` or ``cancelled``.
        tokens: the model tokens this call's branches spent; None when the endpoint reported no usage (unknown).
        total_tokens: the same over every stored branch; None when any is unknown.
        note: what the caller should know about the budget (usage unknown: the token budget counted calls by their
            size), or None.
        failures: this call's branches that gave no reward (each with its failure and error).
        supplied_folder: the run's ``.branches/<episode_id>/`` when branches came with it (:attr:`Branch.supplied`).
        problems: what could not be read (a log or a line of one, with the reason); those were left out.
        strategy: the rule that named ``decisive`` (``strategies``): ``all`` (the largest change between
            neighbouring steps; what :func:`load` uses unless a search wrote another rule), or the adaptive
            strategy the search ran (``spectrum`` pools the branches on either side of a step).
    """

    folder: branch_store.Folder
    curve: tuple[values.Estimate, ...]
    decisive: values.Decisive | None
    branches: tuple[Branch, ...]
    new: int = 0
    stopped: str = "done"
    tokens: int | None = 0
    total_tokens: int | None = 0
    note: str | None = None
    failures: tuple[Branch, ...] = ()
    supplied_folder: pathlib.Path | None = None
    problems: tuple[str, ...] = ()
    strategy: str = strategies.EXHAUSTIVE

    def of_step(self, step: int) -> list[Branch]:
        return [b for b in self.branches if b.step == step]

    def folder_of(self, branch: Branch) -> branch_store.Folder:
        """The folder holding ``branch``'s episode (open it as a run to list it)."""
        return self.supplied_folder if branch.supplied and self.supplied_folder is not None else self.folder

    def to_frame(self) -> Any:
        """The curve as a DataFrame indexed by step: V, low, high, n, failed, recorded, supplied (how many of the
        step's branches came with the run)."""
        import pandas

        rows = [
            {
                "step": e.step,
                "V": e.value,
                "low": e.low,
                "high": e.high,
                "n": e.n,
                "failed": e.failed,
                "recorded": e.recorded,
                "supplied": sum(1 for b in self.of_step(e.step) if b.supplied),
            }
            for e in self.curve
        ]
        columns = ["step", "V", "low", "high", "n", "failed", "recorded", "supplied"]
        return pandas.DataFrame(rows, columns=columns).set_index("step")

    def describe(self) -> str:
        """The decisive step in words, or what the branches show instead (``values.describe``; for ``spectrum``,
        its own verdict: pooled branches, the corrected test)."""
        if self.strategy != strategies.SPECTRUM or not any(e.n for e in self.curve):
            return values.describe(self.curve)
        found = self.decisive
        if found is None:
            return ("No decisive step (spectrum): no action separates the branches that succeeded from those that "
                    "failed.")
        way = "drop" if found.change < 0 else "rise"
        sure = ("the interval of the change excludes 0 at the level corrected for the splits and looks tested"
                if found.sure else "not sure: the interval of the change includes 0 at the corrected level")
        return (f"Decisive step {found.step} (spectrum): a {way} of {abs(found.change):.2f} in V between the branches "
                f"pooled before it and from it on ({sure}).")


def store_dir(
    episode: model.Episode, store: branch_store.Folder | None = None, run: str | os.PathLike | None = None
) -> branch_store.Folder:
    """The folder holding ``episode``'s branches (keyed by its file and id): in ``store`` (a folder or an fsspec
    URL such as ``s3://bucket/branches``) when given, else in the cache folder.

    ``run`` is the location the episode was opened from (``open_run(run)``), when known: a ``store`` anywhere in
    its tree is refused too, so a branch never lists as an episode of the run (episodes one folder down, and
    ``store`` the run's top folder, say).

    Raises:
        ValueError: the episode's id cannot name a folder (``..``, a separator: it comes from a file), or ``store``
            lies in the episode's folder or in ``run``'s tree (branches are never written there).
    """
    if not per_step.names_a_folder(episode.episode_id):
        raise ValueError(f"episode id {episode.episode_id!r} cannot name a folder: branches are kept only for ids "
                         "of letters, digits, '.', '_' and '-'")
    key = hashlib.sha256(f"{episode.path}\0{episode.episode_id}".encode()).hexdigest()[:16]
    name = f"{episode.episode_id[:36]}-{key}"
    if store is None:
        return index_cache.cache_dir() / "branches" / name
    local = not branch_store.is_remote(store)
    run_file, target = [os.path.realpath(os.path.expanduser(w)) if local else w for w in (episode.path, str(store))]
    folders = [os.path.dirname(run_file)]
    if run is not None:
        top = os.fspath(run)
        folders.append(os.path.realpath(os.path.expanduser(top)) if local else top)
    for folder in folders:
        run_folder = folder.rstrip("/") + "/"
        if f"{target.rstrip('/')}/".startswith(run_folder):
            raise ValueError(f"{store}: branches are never written into the run folder ({run_folder}): they would "
                             "list as the run's episodes; pick another")
    return branch_store.join(store, name)


def bundled_dir(episode: model.Episode) -> pathlib.Path | None:
    """Branches shipped with a run (read only, never written): ``.branches/<episode_id>/`` beside a local episode
    file, a hidden folder a listing does not walk into. The bundled sample carries one. None for a remote episode
    or an id that cannot name a folder."""
    if not locations.is_local(episode.path) or not per_step.names_a_folder(episode.episode_id):
        return None
    return pathlib.Path(episode.path).parent / BUNDLED_DIRNAME / episode.episode_id


def load(episode: model.Episode, store: branch_store.Folder | None = None, *, strategy: str | None = None,
         samples: int = 4, batch: int = 2) -> Search:
    """What is stored for ``episode`` (no branch run): its branches in the cache folder (or ``store``) and those
    shipped with its run (:func:`bundled_dir`, marked :attr:`Branch.supplied`), and the estimates from all of
    them. A failed branch adds to its step's failures and hides nothing. Never raises for what it reads: a log
    or a line that cannot be used is left out and named in :attr:`Search.problems`.

    ``strategy`` is the rule that names the decisive step (``strategies.verdict``; for ``spectrum``, its test
    corrected for a search of ``samples`` and ``batch``, as :func:`search` ran it). By default it is the rule of
    the search that last wrote the branches (``parent.json``, :func:`rule`; the shipped folder's when the store
    has none), else exhaustive's: the command, the Episode page, the report and the Lost tasks page all read the
    same verdict from the same branches."""
    try:
        folder = store_dir(episode, store)
    except ValueError as exc:
        return Search(index_cache.cache_dir() / "branches", (), None, (), problems=(str(exc),))
    branches, problems = _read(folder)
    shipped = bundled_dir(episode)
    supplied: list[Branch] = []
    if shipped is not None and os.path.lexists(shipped / LOG_NAME):
        supplied, more = _read(shipped, root=pathlib.Path(episode.path).parent, supplied=True)
        problems += more
    if strategy is None:
        written = branch_store.read_parent(folder) if branches else {}
        if not written.get("strategy") and supplied and shipped is not None:
            written = branch_store.read_parent(shipped, root=pathlib.Path(episode.path).parent)
        strategy, samples, batch = _rule_of(written, samples, batch)
    found = _summary(episode, folder, [*supplied, *branches], strategy=strategy,
                     looks=strategies.looks(len(branchable_steps(episode)), samples, batch))
    return dataclasses.replace(found, supplied_folder=shipped if supplied else None, problems=tuple(problems))


def rule(strategy: str, samples: int, batch: int) -> dict[str, Any]:
    """What ``parent.json`` keeps of the search that writes a folder's branches, for :func:`load`'s verdict."""
    return {"strategy": strategy, "samples": samples, "batch": batch}


def _rule_of(written: dict[str, Any], samples: int, batch: int) -> tuple[str | None, int, int]:
    strategy = written.get("strategy")
    if not isinstance(strategy, str) or strategy not in strategies.NAMES or strategy == strategies.EXHAUSTIVE:
        return None, samples, batch
    numbers = [written.get(k) for k in ("samples", "batch")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10_000 for n in numbers):
        return strategy, samples, batch
    return strategy, int(written["samples"]), int(written["batch"])


def branchable_steps(episode: model.Episode) -> list[int]:
    """The steps a branch can start from: those with an observation (what the model saw next)."""
    return [s.index for s in episode.steps if episode.observation(s.index) is not None]


def parse_steps(spec: str | Sequence[int], episode: model.Episode) -> list[int] | str:
    """``all`` (or ``exhaustive``), ``every:N`` or a list (``3,7,9``) as the steps to branch from; an adaptive
    strategy's name (``bisect``, ``adaptive``, ``spectrum``: ``strategies``) as itself.

    Raises:
        ValueError: an unknown spec, or a step the episode cannot branch from (its last step on a normal finish).
    """
    possible = branchable_steps(episode)
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in strategies.ADAPTIVE_NAMES:
            return text
        if text in (strategies.EXHAUSTIVE, "exhaustive"):
            return possible
        if text.startswith("every:"):
            try:
                every = int(text.split(":", 1)[1])
            except ValueError:
                every = 0
            if every < 1:
                raise ValueError(f"steps {spec!r}: every:N needs a whole number N >= 1")
            return possible[::every]
        try:
            spec = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise ValueError(
                f"steps {spec!r}: expected all, every:N, bisect, adaptive, spectrum or a list like 3,7,9"
            ) from None
    wrong = [s for s in spec if s not in possible]
    if wrong:
        raise ValueError(
            f"cannot branch from step(s) {wrong} of {episode.episode_id}: the branchable steps are "
            f"{possible[0] if possible else '-'}..{possible[-1] if possible else '-'}"
        )
    return sorted(set(spec))


def search(
    episode: model.Episode,
    client: counterfactual.Client,
    *,
    steps: str | Sequence[int] = "all",
    samples: int = 4,
    batch: int = 2,
    budget: Budget = Budget(),
    max_steps: int = counterfactual.DEFAULT_MAX_STEPS,
    docker_client: Any = None,
    session: str | None = None,
    limits: Any = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    recipe: str | os.PathLike | None = None,
    ray_address: str | None = None,
    store: branch_store.Folder | None = None,
) -> Search:
    """Branch from ``episode``'s chosen steps and estimate V(k) there.

    Args:
        episode: the parent (with snapshots, and a verifier recipe for rewards: ``sandbox.task_recipe``).
        client: the model (any ``counterfactual`` client; its answers should be sampled, e.g. temperature > 0).
        steps: ``all``, ``every:N``, a list of steps, or an adaptive strategy's name: ``bisect`` (the bisection on
            V, ``values.next_probe``), ``adaptive`` (a coarse pass, then samples where the largest change is unsure)
            or ``spectrum`` (FAMAS-like suspiciousness of each action over the branches); see ``strategies``.
        samples: the counted branches wanted per chosen step (stored ones included: a rerun tops up, and a rerun
            with a larger number adds samples). For an adaptive strategy, the most per step.
        batch: the samples an adaptive strategy adds to a step at a time.
        budget: rollouts, concurrent containers and wall time this call may spend.
        max_steps: the actions a branch may take before it is truncated.
        docker_client, session, limits: passed to ``sandbox.restore`` through ``counterfactual.run``.
        progress: called after every finished branch.
        cancel: set it to stop: no new branch starts; running ones finish and are kept.
        recipe: the verifier's recipe for a run that carries none (``sandbox.task_recipe``'s ``source``).
        ray_address: run each branch as a task on this Ray cluster (``local`` starts one here;
            ``counterfactual.branch_ray``).
        store: where the branches go instead of the cache folder: a folder or an fsspec URL (``s3://...``; each
            branch is staged in its machine's cache folder and uploaded, ``counterfactual.branch_store``), so Ray
            nodes need no shared file system.
    """
    chosen = parse_steps(steps, episode)
    folder = store_dir(episode, store)
    branch_store.start(folder, {"run_file": episode.path, "episode_id": episode.episode_id,
                                **rule(chosen if isinstance(chosen, str) else strategies.EXHAUSTIVE, samples, batch)})
    runner = Runner(
        episode,
        client,
        folder,
        Spend(budget, cancel),
        max_steps,
        {"docker_client": docker_client, "session": session, "limits": limits, "recipe": recipe,
         **({} if budget.snapshots else {"snapshots": False})},
        progress,
        ray_address,
    )
    if isinstance(chosen, str):  # an adaptive strategy's name, the one word parse_steps gives
        _adapt(chosen, episode, runner, samples, batch)
    else:
        jobs = [s for s in chosen for _ in range(max(0, samples - _counted(runner.branches, s)))]
        runner.run(jobs, planned=len(jobs))
    summary = _summary(episode, folder, runner.branches, strategy=chosen if isinstance(chosen, str) else None,
                       looks=strategies.looks(len(branchable_steps(episode)), samples, batch))
    spend = runner.spend
    tokens = None if spend.tokens_unknown else spend.tokens
    note = None
    if tokens is None:
        note = "the endpoint reported no token usage: tokens spent are unknown" + (
            f"; the token budget of {budget.token_budget:,} counted each such call as its size (a token per "
            f"{completion.BYTES_PER_TOKEN} bytes of its request and answer)" if budget.token_budget else ""
        )
    failures = tuple(b for b in runner.branches[runner.stored :] if b.failure is not None)
    return dataclasses.replace(
        summary, new=spend.started, stopped=spend.stopped or "done", tokens=tokens, note=note, failures=failures
    )


def _adapt(strategy: str, episode: model.Episode, runner: Runner, samples: int, batch: int) -> None:
    """Run an adaptive strategy's batches (``strategies.next_batch``) until it is done or the budget stops it."""
    possible = branchable_steps(episode)
    terminal = _terminal(episode, possible)
    while runner.spend.stopped is None:
        rewards: dict[int, list[float | None]] = {}
        for b in runner.branches:
            rewards.setdefault(b.step, []).append(b.reward)
        wanted = strategies.next_batch(strategy, strategies.Plan(rewards, possible, terminal, samples, batch))
        if not wanted:
            break
        runner.run(wanted, planned=None)


def _terminal(episode: model.Episode, possible: Sequence[int]) -> values.Estimate | None:
    """The recorded terminal step's value: the episode's reward when its last step cannot be branched from."""
    last = episode.steps[-1].index if episode.steps else None
    if last is not None and last not in possible and episode.total_reward is not None:
        return values.terminal(last, episode.total_reward)
    return None


def say_failures(failed: Sequence[Branch]) -> str:
    """Failed branches in one line: how many, and each distinct reason with its count (the CLI and the app)."""
    reasons: dict[str, int] = {}
    for b in failed:
        said = f"{b.failure}: {b.error or 'no reason recorded'}"
        reasons[said] = reasons.get(said, 0) + 1
    listed = "; ".join(f"{said}" + (f" (x{n})" if n > 1 else "") for said, n in reasons.items())
    return f"{len(failed)} branch(es) failed and are not counted: {listed}"


def _counted(branches: Sequence[Branch], step: int) -> int:
    return sum(1 for b in branches if b.step == step and b.reward is not None)


def _read(
    folder: branch_store.Folder, root: pathlib.Path | None = None, supplied: bool = False
) -> tuple[list[Branch], list[str]]:
    """The branches a log records and what could not be read, each problem naming the log (and line) and why.

    Every record is checked (:meth:`Branch.from_json`); a local one's file must lie inside ``root`` (default: the
    folder) and be a regular file. ``supplied`` marks branches shipped with a run. A half-written last line, from
    a process that died mid-write, is one of the problems.
    """
    log = branch_store.join(folder, LOG_NAME)
    try:
        records = branch_store.read_records(folder, root)
    except OSError as exc:
        return [], [f"{log}: {exc.strerror or exc}"]
    except ValueError as exc:  # names the log
        return [], [str(exc)]
    branches, problems = [], []
    for number, record in records:
        try:
            if isinstance(record, Exception):
                raise ValueError(f"not JSON ({record})")
            branch = dataclasses.replace(Branch.from_json(record), supplied=supplied)
            if branch.path is not None:  # stored relative to the folder, so a store can be moved or shipped
                branch = dataclasses.replace(branch, path=str(_branch_file(folder, branch.path, root)))
            branches.append(branch)
        except ValueError as exc:
            _LOGGER.warning("%s line %d is not a branch record, skipped: %s", log, number, exc)
            problems.append(f"{log} line {number}: {exc}; skipped")
    return branches, problems


def _branch_file(folder: branch_store.Folder, path: str, root: pathlib.Path | None) -> branch_store.Folder:
    """A record's episode file, in ``folder``; a local one checked to lie inside ``root`` (default: ``folder``)
    and to be a regular file when it exists (never a FIFO or a device a page would block on).

    Raises:
        ValueError: it lies outside, or is not a regular file.
    """
    file = branch_store.join(folder, path)
    if branch_store.is_remote(folder):
        return file
    try:
        real = branch_store.inside(file, root or folder)
    except ValueError:
        raise ValueError(f"its file {path} lies outside {root or folder}") from None
    if os.path.lexists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        raise ValueError(f"its file {path} is not a regular file")
    return file


def _summary(episode: model.Episode, folder: branch_store.Folder, branches: Sequence[Branch],
             strategy: str | None = None, looks: int = 1) -> Search:
    by_step: dict[int, list[float | None]] = {}
    for b in branches:
        by_step.setdefault(b.step, []).append(b.reward)
    curve = [values.estimate(step, rewards) for step, rewards in sorted(by_step.items())]
    terminal = _terminal(episode, branchable_steps(episode))
    if terminal is not None:
        curve.append(terminal)
    spent = [b.tokens for b in branches if not b.supplied]  # what this installation spent
    total = None if None in spent else sum(t for t in spent if t is not None)
    found = strategies.verdict(strategy or strategies.EXHAUSTIVE, curve, by_step, looks=looks)
    return Search(folder, tuple(curve), found, tuple(branches), total_tokens=total,
                  strategy=strategy or strategies.EXHAUSTIVE)


def stop_reason(budget: Budget, *, cancelled: bool, started: int, counted: int, deadline: float | None) -> str | None:
    """Why no further branch may start under ``budget`` ("cancelled", "budget", "token budget", "wall time"), or None
    when one may: ``started`` branches so far, ``counted`` tokens (the token budget's count), ``deadline`` on
    ``time.monotonic``'s clock. One search and the run-wide search stop by this one rule."""
    if cancelled:
        return "cancelled"
    if budget.max_rollouts is not None and started >= budget.max_rollouts:
        return "budget"
    if counted >= (budget.token_budget or float("inf")):
        return "token budget"
    if deadline is not None and time.monotonic() > deadline:
        return "wall time"
    return None


class Spend:
    """One budget's gate and tally: every branch asks :meth:`may_start` before it starts and is counted by
    :meth:`tally` when it ends. One search owns one; the run-wide search shares one across its episodes' runners."""

    def __init__(self, budget: Budget, cancel: threading.Event | None = None) -> None:
        self.budget = budget
        self.cancel = cancel or threading.Event()
        self.lock = threading.Lock()
        self.started = self.done = self.tokens = 0
        self.counted = 0  # what the token budget counts: reported usage, else each call's size
        self.tokens_unknown = False
        self.stopped: str | None = None
        self.start = time.monotonic()
        self.deadline = None if budget.wall_s is None else self.start + budget.wall_s

    def may_start(self) -> bool:
        """Whether one more branch may start (counting it as started), by :func:`stop_reason`."""
        with self.lock:
            self.stopped = self.stopped or stop_reason(self.budget, cancelled=self.cancel.is_set(),
                                                       started=self.started, counted=self.counted,
                                                       deadline=self.deadline)
            if self.stopped is not None:
                return False
            self.started += 1
            return True

    def tally(self, branch: Branch) -> int:
        """Count a finished branch's tokens; the number of branches finished so far."""
        with self.lock:
            self.done += 1
            self.tokens += branch.tokens or 0
            self.tokens_unknown = self.tokens_unknown or branch.tokens is None
            self.counted += branch.counted_tokens if branch.counted_tokens is not None else branch.tokens or 0
            return self.done


class Runner:
    """Runs branches on a pool of ``parallel`` threads (each branch restores its own container), appending each
    finished one to the log; stops starting new ones when ``spend`` says so (cancel, the rollout or token budget,
    the wall time)."""

    def __init__(
        self,
        episode: model.Episode,
        client: counterfactual.Client,
        folder: branch_store.Folder,
        spend: Spend,
        max_steps: int,
        restore: dict[str, Any],
        progress: Callable[[Progress], None] | None,
        ray_address: str | None = None,
    ) -> None:
        self.episode, self.client, self.folder, self.spend = episode, client, folder, spend
        self.budget = spend.budget
        self.ray_address = ray_address
        self.max_steps, self.restore, self.progress = max_steps, restore, progress
        self.branches = _read(folder)[0]
        self.stored = len(self.branches)
        self._lock = threading.Lock()

    def run(self, jobs: Sequence[int], planned: int | None) -> None:
        cores = (os.cpu_count() or 1) if self.ray_address is None else self.budget.parallel  # a cluster: its own
        workers = max(1, min(self.budget.parallel, cores, len(jobs) or 1))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="branch") as pool:
            for future in [pool.submit(self._one, step, planned) for step in jobs]:
                future.result()

    def _one(self, step: int, planned: int | None) -> None:
        if not self.spend.may_start():
            return
        remote = branch_store.is_remote(self.folder)  # staged on the machine that runs it, uploaded into the store
        function = typing.cast("Callable[..., Branch]", branch_store.staged if remote else run_branch)
        args: tuple[Any, ...] = ((run_branch, str(self.folder), self.episode, step, self.client) if remote
                                 else (self.episode, step, self.client, self.folder))
        if self.ray_address is None:
            branch = function(*args, self.max_steps, **self.restore)
        else:
            branch = branch_ray.run(self.ray_address, function, *args, self.max_steps, **self.restore)
        with self._lock:
            branch_store.append(self.folder, branch.to_json())
            self.branches.append(branch)
        done = self.spend.tally(branch)
        if self.progress is not None:
            self.progress(Progress(done, planned, branch))


def run_branch(
    episode: model.Episode,
    step: int,
    client: counterfactual.Client,
    out_dir: pathlib.Path,
    max_steps: int,
    **restore: Any,
) -> Branch:
    """One branch from ``step`` with the recorded context, its outcome classified (never raises for a failure).
    ``snapshots=False`` among ``restore`` writes it without per-step snapshots (``Budget.snapshots``)."""
    start = time.monotonic()
    quiet = contextlib.nullcontext() if restore.pop("snapshots", True) else counterfactual.without_snapshots()
    try:
        with quiet:
            result = counterfactual.run(
                episode, step, edit=lambda messages: messages, client=client, out_dir=out_dir, max_steps=max_steps,
                **restore,
            )
    except counterfactual.CounterfactualError as exc:
        cause = exc.__cause__
        if isinstance(cause, sandbox.SandboxError):
            kind = "verifier" if str(cause).startswith("the verifier failed") else "container"
        else:
            kind = "model"
        return _made(step, exc.result, None, kind, exc.result.error or str(cause), start)
    except (LookupError, OSError, RuntimeError, ValueError) as exc:  # the restore failed: nothing was written
        elapsed = round(time.monotonic() - start, 3)
        return Branch(step, None, None, "failed", None, "restore", f"{type(exc).__name__}: {exc}", None, elapsed, 0)
    branch = load_episode(result.path)
    if result.status == "truncated":
        return _made(step, result, 0.0, None, None, start)
    if branch.total_reward is None:
        missing = branch.metadata.get("no_verifier")
        return _made(step, result, None, "no_reward", f"no reward: {missing or 'the verifier gave none'}", start)
    return _made(step, result, float(branch.total_reward), None, None, start)


def _made(
    step: int, result: counterfactual.Result, reward: float | None, failure: str | None, error: str | None, start: float
) -> Branch:
    """The record of a branch whose episode was written (``result``), however it ended."""
    elapsed = round(time.monotonic() - start, 3)
    return Branch(
        step, result.episode_id, result.path, result.status, reward, failure, error, _container(result.path), elapsed,
        _tokens(result.responses), counted_tokens=sum(completion.counted(r) for r in result.responses),
    )  # fmt: skip


def _tokens(responses: Sequence[str]) -> int | None:
    """The model tokens the responses' calls spent, or None when any call's usage is unknown."""
    usages = [completion.usage_of(r) for r in responses]
    return None if None in usages else sum(u["total_tokens"] for u in usages if u is not None)


def _container(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        recording = json.loads(pathlib.Path(path).read_text()).get("recording") or {}
    except (OSError, ValueError):
        return None
    return recording.get("container") if isinstance(recording, dict) else None
