"""The decisive step of many episodes of a run, within ONE budget for the whole call (``docs/decisive.md``).

``search_run(run, client, episodes="failed", budget=Budget(max_rollouts=400, parallel=4, wall_s=8 * 3600))``
picks the run's episodes (``failed``, ``solved``, ``all`` or ids, narrowed by ``task`` and a behaviour ``flag``),
then branches from their steps in rounds whose jobs come from :mod:`ares_viewer.counterfactual.allocation` (the
``spectrum`` strategy per episode: coarse values for every episode first, then samples where a change of V is not
yet sure), through one pool of ``budget.parallel`` containers (or Ray tasks), until every episode is settled or
the budget (rollouts, model tokens, wall time) is spent or the call is cancelled. Each episode's folder records the
spectrum rule (``branching.rule``), so ``branching.load`` and every page judge its branches as this search did.

Each branch is stored the moment it ends in its episode's branch folder, exactly as ``branching.search`` stores it
(the cache folder's ``branches/<episode>-<key>/branches.jsonl``, or ``store``), so a branch opens as an ordinary
episode and a crash loses at most the branches running. The call's account (what it chose, what it spent, why it
stopped) is the JSON file :func:`state_file` in the cache folder's ``run-searches/``, rewritten after every branch;
a rerun with the same selection reads the stored branches back and carries on where the last call stopped.
Nothing is ever written into the run's folder.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import pathlib
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ares_viewer import counterfactual, model
from ares_viewer.base import atomic
from ares_viewer.counterfactual import allocation, branch_store, branching, strategies, values
from ares_viewer.runs import index_cache

__all__ = ["SELECTIONS", "RunProgress", "RunSearch", "load_state", "search_run", "select", "state_file"]

SELECTIONS = ("failed", "solved", "all")
STATE_DIRNAME = "run-searches"


def _solved(reward: Any) -> bool | None:
    """Solved (reward at least one half, as a branch's success), failed, or None when the reward is unknown."""
    if reward is None or reward != reward:  # NaN: unknown
        return None
    return float(reward) >= values.SUCCESS_AT


def select(run: Any, episodes: str | Sequence[str] = "failed", *, flag: str | None = None,
           task: str | Sequence[str] | None = None) -> list[model.Episode]:
    """The run's episodes a search covers, in the run's order.

    Args:
        episodes: ``failed`` (a known reward under 0.5), ``solved`` (at least 0.5), ``all``, or episode ids (a list
            or ``"id1,id2"``). An episode without a reward (errored before its verifier) is neither failed nor
            solved: only ``all`` or its id picks it.
        flag: only episodes that show this behaviour flag (``analysis.behaviours.FLAGS``).
        task: only episodes of this task (or these tasks).

    Raises:
        ValueError: an unknown selection or flag, or an id the run does not hold (naming them).
    """
    frame = run.episodes
    if isinstance(episodes, str) and episodes.strip().lower() in SELECTIONS:
        which = episodes.strip().lower()
        solved = [_solved(r) for r in frame["total_reward"]]
        keep = [which == "all" or (s is not None and s == (which == "solved")) for s in solved]
        ids = [i for i, k in zip(frame["episode_id"], keep, strict=True) if k]
    else:
        ids = [i.strip() for i in (episodes.split(",") if isinstance(episodes, str) else episodes) if i.strip()]
        unknown = [i for i in ids if i not in set(frame["episode_id"])]
        if unknown or not ids:
            raise ValueError(f"--episodes is failed, solved, all or episode ids of {run.location}; not in it: "
                             f"{', '.join(unknown) or '(none given)'}")
    if task is not None:
        tasks = {task} if isinstance(task, str) else set(task)
        of_task = set(frame.loc[frame["task_name"].isin(tasks), "episode_id"])
        ids = [i for i in ids if i in of_task]
    chosen = [run.episode(i) for i in dict.fromkeys(ids)]
    if flag is not None:
        chosen = [e for e in chosen if _shows(e, flag)]
    return chosen


def _shows(episode: model.Episode, flag: str) -> bool:
    from ares_viewer import fsdiff
    from ares_viewer.analysis import behaviours

    if flag not in behaviours.FLAGS:
        raise ValueError(f"no behaviour flag {flag!r}; the flags are {', '.join(sorted(behaviours.FLAGS))}")
    snapshots = behaviours.FLAGS[flag].source == behaviours.SNAPSHOTS
    found = behaviours.findings(episode, fsdiff.paths_by_step if snapshots else None)
    return any(f.flag == flag for f in found)


def state_file(run_location: str, chosen: Sequence[model.Episode], store: branch_store.Folder | None = None
               ) -> pathlib.Path:
    """The call's account in the cache folder, keyed by the run, the episodes chosen and the store."""
    key = "\0".join([os.fspath(run_location), str(store or ""), *sorted(f"{e.path}\0{e.episode_id}" for e in chosen)])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return index_cache.cache_dir() / STATE_DIRNAME / f"{digest}.json"


def load_state(path: str | os.PathLike) -> dict[str, Any]:
    """An account written by :func:`search_run` (``{}`` when there is none or it does not read)."""
    try:
        data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_state(path: pathlib.Path, data: dict[str, Any]) -> None:
    """Replace the account atomically: a crash leaves the old one or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(path, json.dumps(data, indent=1).encode("utf-8"))


@dataclasses.dataclass(frozen=True)
class RunProgress:
    """Reported after every branch.

    Attributes:
        done: branches this call finished.
        planned: about how many it will run in all (done + running + this round's rest + an estimate of the later
            rounds, capped by the rollout budget); an estimate, it moves.
        settled, episodes: episodes settled so far, of those chosen.
        eta_s: an estimate of the time left (the branches left times the median branch so far, over the
            containers at once; capped by the wall-time budget), None before the first branch ends.
        episode_id: the episode the branch came from.
        branch: the branch.
    """

    done: int
    planned: int
    settled: int
    episodes: int
    eta_s: float | None
    episode_id: str
    branch: branching.Branch


@dataclasses.dataclass(frozen=True)
class RunSearch:
    """A run-wide search's results.

    Attributes:
        searches: episode id -> its search (every stored branch, earlier calls' too), in the run's order.
        status: episode id -> ``allocation`` status (``sure``, ``no change``, ``capped``, ``failing``,
            ``no steps``, ``pending``: the budget ran out first).
        new: branches this call ran.
        tokens: model tokens this call's branches spent; None when the endpoint reported no usage.
        counted_tokens: what the token budget counted (reported usage, else each call's size).
        stopped: ``done``, ``budget``, ``token budget``, ``wall time`` or ``cancelled``.
        elapsed_s: this call's wall time.
        state_file: the account in the cache folder (every call's spending).
        calls: every call's account so far, this one last.
        failures: this call's branches that gave no reward.
    """

    searches: dict[str, branching.Search]
    status: dict[str, str]
    new: int
    tokens: int | None
    counted_tokens: int
    stopped: str
    elapsed_s: float
    state_file: pathlib.Path
    calls: tuple[dict[str, Any], ...] = ()
    failures: tuple[branching.Branch, ...] = ()

    def to_frame(self) -> Any:
        """One row per episode: episode_id, task_name, reward, status, decisive step, change, sure, branches
        stored, this call's new branches."""
        import pandas

        rows = []
        for episode_id, found in self.searches.items():
            d = found.decisive
            rows.append({
                "episode_id": episode_id, "status": self.status.get(episode_id),
                "decisive_step": None if d is None else d.step, "change": None if d is None else d.change,
                "sure": None if d is None else d.sure,
                "branches": sum(1 for b in found.branches if not b.supplied), "finding": found.describe(),
            })
        return pandas.DataFrame(rows, columns=["episode_id", "status", "decisive_step", "change", "sure",
                                               "branches", "finding"])

    def account(self) -> list[str]:
        """What was spent, in lines (the CLI prints them): this call, then every call on this selection."""
        tokens = "unknown" if self.tokens is None else f"{self.tokens:,}"
        lines = [f"this call: {self.new} branch(es), {tokens} model tokens ({self.counted_tokens:,} counted against "
                 f"the token budget), {self.elapsed_s:.0f} s; stopped: {self.stopped}"]
        total = sum(int(c.get("new", 0)) for c in self.calls)
        lines.append(f"all {len(self.calls)} call(s) on these episodes: {total} branch(es), "
                     f"{sum(float(c.get('elapsed_s', 0)) for c in self.calls):.0f} s; account in {self.state_file}")
        return lines


class _Shared(branching.Spend):
    """The one budget of the call: every episode's runner asks it before a branch starts and is counted by it after;
    it keeps the finished branches' durations (the time-left estimate) and tells ``after`` of each."""

    def __init__(self, budget: branching.Budget, cancel: threading.Event) -> None:
        super().__init__(budget, cancel)
        self.durations: list[float] = []
        self.new: list[tuple[str, branching.Branch]] = []
        self.after: Callable[[str, branching.Branch, int], None] = lambda key, branch, done: None

    def record(self, episode_id: str, done: int, branch: branching.Branch) -> None:
        """A branch of ``episode_id`` finished (already tallied, the ``done``-th of the call)."""
        with self.lock:
            self.durations.append(branch.duration_s)
            self.new.append((episode_id, branch))
        self.after(episode_id, branch, done)

    def eta(self, left: int, workers: int) -> float | None:
        if not self.durations:
            return None
        eta = left * statistics.median(self.durations) / max(1, workers)
        if self.deadline is not None:
            eta = min(eta, max(0.0, self.deadline - time.monotonic()))
        return eta


@dataclasses.dataclass
class _Call:
    """What a call needs beyond the episodes: how branches run and where they go."""

    client: counterfactual.Client
    samples: int
    batch: int
    budget: branching.Budget
    max_steps: int
    restore: dict[str, Any]
    ray_address: str | None
    store: branch_store.Folder | None
    progress: Callable[[RunProgress], None] | None


def _state_of(episode: model.Episode, branches: Sequence[branching.Branch]) -> allocation.EpisodeState:
    curve = {e.step: e for e in branching._summary(episode, "", branches).curve}
    tried: dict[int, int] = {}
    counted: dict[int, int] = {}
    for b in branches:
        tried[b.step] = tried.get(b.step, 0) + 1
        counted[b.step] = counted.get(b.step, 0) + (b.reward is not None)
    rewards: dict[int, tuple[float | None, ...]] = {}
    for b in branches:
        rewards[b.step] = (*rewards.get(b.step, ()), b.reward)
    failures = tuple(b.failure for b in branches if b.failure is not None)
    return allocation.EpisodeState(episode.episode_id, tuple(branching.branchable_steps(episode)), curve, tried,
                                   counted, failures, rewards)


_OPTIONS = ("samples", "batch", "max_steps", "docker_client", "session", "limits", "recipe", "ray_address", "store")


def search_run(
    run: Any,
    client: counterfactual.Client,
    *,
    episodes: str | Sequence[str] = "failed",
    flag: str | None = None,
    task: str | Sequence[str] | None = None,
    budget: branching.Budget | None = None,
    progress: Callable[[RunProgress], None] | None = None,
    cancel: threading.Event | None = None,
    **options: Any,
) -> RunSearch:
    """Find the decisive step of the run's chosen episodes within one budget (the module's docstring).

    Args:
        run: the run (``ares_viewer.open_run``).
        client: the model (any ``counterfactual`` client; sampled answers).
        episodes, flag, task: which episodes (:func:`select`).
        budget: ONE budget for the whole call: ``max_rollouts`` new branches, ``token_budget`` model tokens,
            ``wall_s`` seconds (no new branch after), ``parallel`` containers (or Ray tasks) at once.
        progress: called after every branch with a :class:`RunProgress` (done, planned, time left).
        cancel: set it to stop: no new branch starts; running ones finish and are kept.
        options: ``samples`` (default 4: the most counted branches per probed step; ``2 * samples`` tries at
            most), ``batch`` (2: branches a top-up adds to a step at a time after the coarse round's one a step), and
            ``branching.search``'s ``max_steps``, ``docker_client``, ``session``, ``limits``, ``recipe``,
            ``ray_address``, ``store``.

    Raises:
        ValueError: a bad selection (:func:`select`), a ``store`` inside the run's folder.
        TypeError: an option this function does not take.
    """
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"search_run() got unexpected option(s) {', '.join(unknown)}; it takes {', '.join(_OPTIONS)}")
    chosen = select(run, episodes, flag=flag, task=task)
    budget = budget or branching.Budget()
    restore = {k: options.get(k) for k in ("docker_client", "session", "limits", "recipe")}
    if not budget.snapshots:  # as branching.search passes it: the branches are written without per-step snapshots
        restore["snapshots"] = False
    call = _Call(client, int(options.get("samples", 4)), int(options.get("batch", 2)), budget,
                 int(options.get("max_steps", counterfactual.DEFAULT_MAX_STEPS)), restore,
                 options.get("ray_address"), options.get("store"), progress)
    return _drive(run, chosen, call, cancel or threading.Event())


def _runners(run: Any, chosen: Sequence[model.Episode], call: _Call, shared: _Shared
             ) -> tuple[dict[str, branching.Runner], dict[str, str]]:
    runners, refused = {}, {}
    for episode in chosen:
        try:
            folder = branching.store_dir(episode, call.store, run=run.location if call.store is not None else None)
        except ValueError as exc:
            if call.store is not None and "never written into the run" in str(exc):
                raise
            refused[episode.episode_id] = f"{allocation.NO_STEPS}: {exc}"
            continue
        branch_store.start(folder, {"run_file": episode.path, "episode_id": episode.episode_id,
                                    **branching.rule(strategies.SPECTRUM, call.samples, call.batch)})

        def report(p: branching.Progress, key: str = episode.episode_id) -> None:
            shared.record(key, p.done, p.branch)

        runners[episode.episode_id] = branching.Runner(episode, call.client, folder, shared, call.max_steps,
                                                       call.restore, report, call.ray_address)
    return runners, refused


def _drive(run: Any, chosen: Sequence[model.Episode], call: _Call, cancel: threading.Event) -> RunSearch:
    shared = _Shared(call.budget, cancel)
    runners, refused = _runners(run, chosen, call, shared)
    by_id = {e.episode_id: e for e in chosen}
    account_path = state_file(run.location, chosen, call.store)
    previous = load_state(account_path).get("calls", [])
    calls = [c for c in previous if isinstance(c, dict)]
    this: dict[str, Any] = {"started": time.time(), "ended": None, "new": 0, "tokens": 0, "counted_tokens": 0,
                            "elapsed_s": 0.0, "stopped": "running", "budget": dataclasses.asdict(call.budget),
                            "samples": call.samples, "batch": call.batch}
    header = {"run": run.location, "episodes": [e.episode_id for e in chosen], "store": str(call.store or ""),
              "calls": [*calls, this]}
    _write_state(account_path, header)
    cores = (os.cpu_count() or 1) if call.ray_address is None else call.budget.parallel
    workers = max(1, min(call.budget.parallel, cores))
    status: dict[str, str] = dict(refused)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run-branch") as pool:
        while shared.stopped is None:
            states = [_state_of(by_id[i], r.branches) for i, r in runners.items()]
            round_ = allocation.plan(states, samples=call.samples, batch=call.batch)
            status.update(round_.status)
            if not round_.jobs:
                break
            later = allocation.estimate_left(states, samples=call.samples, batch=call.batch)
            planned = shared.done + len(round_.jobs) + later
            if call.budget.max_rollouts is not None:
                planned = min(planned, call.budget.max_rollouts)

            def after(key: str, branch: branching.Branch, done: int, planned: int = planned) -> None:
                _account(account_path, header, this, shared)
                if call.progress is not None:
                    settled = sum(1 for s in status.values() if s in allocation.SETTLED)
                    total = max(planned, done)
                    call.progress(RunProgress(done, total, settled, len(chosen), shared.eta(total - done, workers),
                                              key, branch))

            shared.after = after
            futures = [pool.submit(runners[key]._one, step, None) for key, step in round_.jobs]
            try:
                for future in futures:
                    future.result()
            except BaseException:  # the driver fails: no new branch starts, the running ones end and are kept
                cancel.set()
                raise
    final = {i: _state_of(by_id[i], r.branches) for i, r in runners.items()}
    status.update({i: allocation.status(s, call.samples, call.batch) for i, s in final.items()})
    stopped = shared.stopped or "done"
    this["stopped"], this["ended"] = stopped, time.time()
    _account(account_path, header, this, shared)
    searches = {e.episode_id: branching.load(e, call.store) for e in chosen}
    failures = tuple(b for _, b in shared.new if b.failure is not None)
    return RunSearch(searches, {e.episode_id: status.get(e.episode_id, allocation.PENDING) for e in chosen},
                     shared.done, None if shared.tokens_unknown else shared.tokens, shared.counted, stopped,
                     time.monotonic() - shared.start, account_path, tuple(header["calls"]), failures)


def _account(path: pathlib.Path, header: dict[str, Any], this: dict[str, Any], shared: _Shared) -> None:
    """This call's spending so far into the account file (after every branch: a crash loses none of it)."""
    with shared.lock:
        this.update(new=shared.done, tokens=None if shared.tokens_unknown else shared.tokens,
                    counted_tokens=shared.counted, elapsed_s=round(time.monotonic() - shared.start, 3))
        per: dict[str, int] = {}
        for key, _ in shared.new:
            per[key] = per.get(key, 0) + 1
        this["per_episode"] = per
        _write_state(path, header)
