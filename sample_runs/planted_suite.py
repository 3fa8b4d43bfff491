"""The planted suite: episodes recorded through real ARES whose decisive step is known, and the policy that makes
it so (the benchmark of the decisive-step search, ``benchmarks/bench_planted.py``, and ``tests/test_planted.py``).

Each episode is a scripted plan run by ARES's own loop (``ares_rollout.run_plan``: ``CodeEnvironment``,
``DockerContainer``, ``MiniSWECodeAgent``, the harbor verifier) and recorded by ``ares_viewer.recorder``, over five
sample tasks (``scenarios.TASKS``). Its recorded actions are read-only but one, the planted action at step ``d``:

- ``drop`` (reward 0): a wrong fix that passes the visible tests but not the hidden ones, or the deletion of a file
  the package needs (``git rm``). The ``knows-fix`` policy solves the task from any state before it and not after:
  V falls at ``d``.
- ``rise`` (reward 1): the right fix. The ``no-fix`` policy cannot find it but submits once the tests pass: V rises
  at ``d`` ("the step that made the fix").
- ``none``: no step is decisive. A wrong fix under ``no-fix`` (V is 0 everywhere: the policy fails anyway), the
  right fix under ``knows-fix`` (V is 1 everywhere: the policy would have made it), or a truncated episode of
  reads under ``coin``, whose success does not depend on the state (V is 0.5 everywhere).

The policy (:class:`Policy`) is seeded and stochastic: it sometimes reads the module before it probes; it probes the
state (``git status`` and the visible tests), then fixes, or submits when the tests pass; from a state where the
tests pass with a wrong fix, or where a needed file is gone, it recovers with probability ``RECOVER`` (the noise a
search has to see through). It is served over HTTP as an OpenAI-compatible endpoint; the model name picks its
profile and task (``knows-fix:<task>``).

Record the suite (needs the ARES venv, ``bash .ci/ares-venv.sh``, and the sample base image)::

    $(bash .ci/ares-venv.sh) sample_runs/planted_suite.py --out /tmp/planted [--only NAME,...] [--jobs 2]

It writes the episodes (on the sample base image, as the committed samples) and ``manifest.json``: per episode its
id, task, kind, planted step (null for none), position (early, middle, late) and the policy's model name.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import random
import re
import sys
import threading
import uuid

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import scenarios  # noqa: E402 - a sibling module, importable once HERE is on the path

MANIFEST = "manifest.json"
RECOVER = 0.15  # the knows-fix policy's chance to recover from a state it would otherwise submit or break
LOOK_FIRST = 0.3  # its chance to read the module before it probes
COIN = 0.5  # the coin policy's chance to write the right fix, whatever the state
MAX_STEPS = 5  # the actions a branch takes at most: look, probe, recover and fix, submit
PROBE_DONE = "PROBE-DONE"
FIX_WRITTEN = "FIX-WRITTEN"
LOOKED = "LOOKED"


def _write(path: str, text: str) -> str:
    return f"cat <<'EOF' > {path}\n{text.rstrip()}\nEOF"


@dataclasses.dataclass(frozen=True)
class Planted:
    """What the suite needs of a task: the module the fix rewrites, the right and a wrong version of it (the wrong
    one passes the visible tests), and a file the package cannot do without."""

    task: str
    module: str
    fixed: str
    wrong: str
    needed: str


_SLUG_WRONG = scenarios.SLUG_PY.replace(
    "    text = text.lower()\n",
    '    text = text.lower().translate(str.maketrans("èéêûü", "eeeuu"))\n',
)
_CORE_FIXED = scenarios.CORE_PY.replace(
    "    return sum(values) / len(values)\n",
    '    values = list(values)\n    if not values:\n        raise ValueError("mean requires at least one data point")\n'
    "    return sum(values) / len(values)\n",
    1,
)
_CORE_WRONG = scenarios.CORE_PY.replace(
    "    return sum(values) / len(values)\n",
    '    if len(values) == 0:\n        raise ValueError("mean requires at least one data point")\n'
    "    return sum(values) / len(values)\n",
    1,
)
_PAGING_WRONG = scenarios.PAGING_PY.replace("start = page * per_page", "start = (page - 1) * per_page")
_PAGING_FIXED = _PAGING_WRONG.replace("return n_items // per_page", "return -(-n_items // per_page)")
_DURATION_WRONG = scenarios.DURATION_PY.replace(
    '''    match = _PART.match(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(match.group(1)) * _SECONDS[match.group(2)]''',
    """    return sum(int(n) * _SECONDS[unit] for n, unit in _PART.findall(text))""",
)
_DURATION_FIXED = scenarios.DURATION_PY.replace(
    '''    match = _PART.match(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(match.group(1)) * _SECONDS[match.group(2)]''',
    """    compact = text.replace(" ", "")
    if not compact or _PART.sub("", compact):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * _SECONDS[unit] for n, unit in _PART.findall(compact))""",
)
_ROWS_FIXED = '''"""Read the exports the accounting team sends."""

import csv


def split_row(line):
    """The fields of one CSV line (RFC 4180 quoting)."""
    return next(csv.reader([line.rstrip("\\n")]))
'''
_ROWS_WRONG = '''"""Read the exports the accounting team sends."""


def split_row(line):
    """The fields of one CSV line: commas inside quotes do not split."""
    fields, current, quoted = [], "", False
    for char in line.rstrip("\\n"):
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            fields.append(current)
            current = ""
        else:
            current += char
    fields.append(current)
    return fields
'''

TASKS = {
    t.task: t
    for t in (
        Planted("textkit__slugify-accents", "textkit/slug.py", scenarios.SLUG_FIXED, _SLUG_WRONG,
                "textkit/__init__.py"),
        Planted("statskit__mean-empty", "statskit/core.py", _CORE_FIXED, _CORE_WRONG, "statskit/__init__.py"),
        Planted("pager__last-page", "pager/paging.py", _PAGING_FIXED, _PAGING_WRONG, "pager/__init__.py"),
        Planted("units__parse-duration", "units/duration.py", _DURATION_FIXED, _DURATION_WRONG, "units/__init__.py"),
        Planted("csvtool__quoted-fields", "csvtool/rows.py", _ROWS_FIXED, _ROWS_WRONG, "csvtool/__init__.py"),
    )
}
_ORDER = list(TASKS)


# ----- the episodes ---------------------------------------------------------------------------------------------


def _reads(t: Planted) -> list[scenarios.Turn]:
    """Read-only actions (they leave the state as it was: git and the visible tests only read it)."""
    package = t.module.split("/")[0]
    return [
        scenarios.Turn("Let me look at the repository.", "ls -la"),
        scenarios.Turn("Let me read the module.", f"cat {t.module}"),
        scenarios.Turn("Let me run the tests.", "python3 -m pytest -q -p no:cacheprovider"),
        scenarios.Turn("Let me check the history.", "git log --oneline"),
        scenarios.Turn("Let me list the functions.", f"grep -n 'def ' {t.module}"),
        scenarios.Turn("Let me read the README.", "cat README.md"),
        scenarios.Turn("Let me see the package's files.", f"ls {package}"),
        scenarios.Turn("Let me check the working tree.", "git status --short"),
    ]


def _action(t: Planted, what: str) -> scenarios.Turn:
    if what == "wrong":
        return scenarios.Turn("I'll patch the module the quick way.", _write(t.module, t.wrong))
    if what == "fix":
        return scenarios.Turn("I'll rewrite the module properly.", _write(t.module, t.fixed))
    if what == "delete":
        return scenarios.Turn(f"{t.needed} looks unused; removing it.", f"git rm -q {t.needed} && git status --short")
    raise ValueError(what)


@dataclasses.dataclass(frozen=True)
class Episode:
    """One episode of the suite: its plan name, task, kind, planted step (None: no decisive step), the action
    planted there (``wrong``, ``delete``, ``fix`` or None), the policy profile that searches it, and its length
    (actions before the submit; a truncated episode has no submit)."""

    name: str
    task: str
    kind: str  # drop, rise or none
    planted: int | None
    action: str | None
    at: int | None  # where the action is (for none episodes with an action)
    profile: str  # knows-fix, no-fix or coin
    length: int = 6
    truncated: bool = False

    @property
    def model(self) -> str:
        return f"{self.profile}:{self.task}"

    @property
    def position(self) -> str | None:
        if self.planted is None:
            return None
        third = self.length / 3
        return "early" if self.planted <= third else "middle" if self.planted <= 2 * third else "late"

    @property
    def episode_id(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"ares-viewer/planted/{self.name}"))

    def plan(self) -> scenarios.Plan:
        t = TASKS[self.task]
        reads = _reads(t)
        turns = [reads[(i + _ORDER.index(self.task)) % len(reads)] for i in range(self.length)]
        if self.at is not None:
            turns[self.at - 1] = _action(t, self.action or "")
        if not self.truncated:
            turns.append(scenarios.Turn("Done. Submitting.", scenarios.SUBMIT))
        shows = f"planted suite: {self.kind}" + (f" at step {self.planted}" if self.planted else "")
        return scenarios.Plan(name=self.name, task=self.task, turns=tuple(turns), shows=shows,
                              step_limit=self.length if self.truncated else 250)


def _suite() -> list[Episode]:
    episodes = []
    drops_wrong, drops_delete, rises = [1, 3, 6, 2, 5], [5, 1, 4, 6, 2], [3, 6, 1, 4, 2]
    for i, task in enumerate(_ORDER):
        short = task.split("__")[0]
        episodes += [
            Episode(f"{short}-drop-wrong", task, "drop", drops_wrong[i], "wrong", drops_wrong[i], "knows-fix"),
            Episode(f"{short}-drop-delete", task, "drop", drops_delete[i], "delete", drops_delete[i], "knows-fix"),
            Episode(f"{short}-rise-fix", task, "rise", rises[i], "fix", rises[i], "no-fix"),
        ]
    episodes += [
        Episode("textkit-none-wrong", _ORDER[0], "none", None, "wrong", 2, "no-fix"),
        Episode("statskit-none-fixed", _ORDER[1], "none", None, "fix", 3, "knows-fix"),
        Episode("pager-none-coin", _ORDER[2], "none", None, None, None, "coin", length=5, truncated=True),
        Episode("units-none-reads", _ORDER[3], "none", None, None, None, "no-fix"),
        Episode("csvtool-none-fixed", _ORDER[4], "none", None, "fix", 1, "knows-fix"),
        Episode("textkit-none-coin", _ORDER[0], "none", None, None, None, "coin", length=5, truncated=True),
        Episode("units-none-coin", _ORDER[3], "none", None, None, None, "coin", length=5, truncated=True),
    ]
    return episodes


SUITE = _suite()
BY_NAME = {e.name: e for e in SUITE}
# The small part the tests record (tests/conftest.py's ``planted_suite``): one planted drop, one rise, one solved
# episode with no decisive step, and one failed episode with none (``--episodes failed`` then searches a drop and a
# flat curve). Their profiles depend on the task only, so one policy serves the run (``RUN_MODEL``).
SMALL = ["statskit-drop-delete", "units-rise-fix", "statskit-none-fixed", "units-none-reads"]
# The model name that picks each request's profile by its task (``Policy(profiles=...)``): a run-wide search asks one
# model for every episode.
RUN_MODEL = "by-task"


# ----- the policy -----------------------------------------------------------------------------------------------

_SUBMIT = f"THOUGHT: The tests pass. Submitting.\n\n```bash\n{scenarios.SUBMIT}\n```"
_PROBE = (
    "THOUGHT: Let me check the working tree and the tests.\n\n```bash\n"
    f"git status --short; python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -3; echo {PROBE_DONE}\n```"
)


def _tests_pass(output: str) -> bool:
    return bool(re.search(r"\b\d+ passed\b", output)) and not re.search(r"\b\d+ (failed|error|errors)\b", output)


class Policy:
    """The suite's seeded stochastic policy: ``answer(model, messages)`` is its next response (one bash block).

    Profiles (the model name's part before ``:``; after it, the task):

    - ``knows-fix``: writes the right fix unless the tests already pass (then submits, with ``RECOVER`` chance of
      rewriting the module properly first); when a tracked file is deleted it restores it with ``RECOVER`` chance,
      else writes the fix over the broken package. ``recover=0`` makes its outcome a function of the state.
    - ``no-fix``: submits when the tests pass, else writes the wrong fix.
    - ``coin``: writes the right fix with chance ``COIN``, else the wrong one, whatever the state.

    The model name ``RUN_MODEL`` (one model for a whole run, as ``ares-viewer branch RUN --episodes`` asks) takes the
    task from the conversation (:func:`task_of`) and the profile from ``profiles`` (task -> profile,
    :func:`profiles_of`).
    """

    def __init__(self, seed: int, recover: float = RECOVER, profiles: dict[str, str] | None = None) -> None:
        self.rng = random.Random(seed)
        self.recover = recover
        self.profiles = dict(profiles or {})
        self.lock = threading.Lock()

    def _chance(self, p: float) -> bool:
        with self.lock:
            return self.rng.random() < p

    def answer(self, model: str, messages: list[dict]) -> str:
        if model == RUN_MODEL:
            task = task_of(messages)
            if task not in self.profiles:
                raise ValueError(f"{RUN_MODEL}: no profile for the conversation's task {task!r}")
            profile = self.profiles[task]
        else:
            profile, _, task = model.partition(":")
        t = TASKS[task]
        last = str(messages[-1].get("content", "")) if messages else ""
        fix = f"THOUGHT: Fixing the module.\n\n```bash\n{_write(t.module, t.fixed)}\necho {FIX_WRITTEN}\n```"
        wrong = f"THOUGHT: Patching the module.\n\n```bash\n{_write(t.module, t.wrong)}\necho {FIX_WRITTEN}\n```"
        if FIX_WRITTEN in last:
            return _SUBMIT
        if PROBE_DONE not in last:
            if LOOKED not in last and self._chance(LOOK_FIRST):
                return f"THOUGHT: Let me read the module first.\n\n```bash\ncat {t.module}; echo {LOOKED}\n```"
            return _PROBE
        if profile == "coin":
            return fix if self._chance(COIN) else wrong
        passing = _tests_pass(last)
        if profile == "no-fix":
            return _SUBMIT if passing else wrong
        deleted = re.search(r"^\s*D\s", last, re.MULTILINE) is not None
        if deleted:
            if self._chance(self.recover):
                return ("THOUGHT: A tracked file is gone; restoring it, then fixing.\n\n```bash\n"
                        f"git checkout HEAD -- . && {_write(t.module, t.fixed)}\necho {FIX_WRITTEN}\n```")
            return fix
        if passing:
            return fix if self._chance(self.recover) else _SUBMIT
        return fix

    def __call__(self, body: dict) -> str:
        """A chat-completions request's answer (``tests/chat_server.serve(policy)``)."""
        return self.answer(str(body.get("model", "")), list(body.get("messages") or []))


def task_of(messages: list[dict]) -> str | None:
    """The suite task a conversation is about: the one whose issue text its first user message holds."""
    first = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
    return next((name for name in TASKS if scenarios.TASKS[name].statement.splitlines()[0] in first), None)


def profiles_of(names: list[str]) -> dict[str, str]:
    """Task -> profile for these episodes, for ``Policy(profiles=...)`` under ``RUN_MODEL``; a task whose episodes
    need two profiles cannot share one model and is refused."""
    profiles: dict[str, str] = {}
    for name in names:
        episode = BY_NAME[name]
        if profiles.setdefault(episode.task, episode.profile) != episode.profile:
            raise ValueError(f"{episode.task}: its episodes need the {profiles[episode.task]} and {episode.profile} "
                             "profiles; search them one at a time (their manifest model)")
    return profiles


# ----- recording ------------------------------------------------------------------------------------------------


def manifest_entry(episode: Episode, result: dict) -> dict:
    [path] = result.get("episode_files") or [None]
    return {
        "name": episode.name, "episode_id": episode.episode_id, "task": episode.task, "kind": episode.kind,
        "planted": episode.planted, "action": episode.action, "position": episode.position,
        "model": episode.model, "length": episode.length, "file": pathlib.Path(path).name if path else None,
        "reward": result.get("reward"), "actions": result.get("actions"), "error": result.get("error"),
    }


async def _record(names: list[str], out: pathlib.Path, tasks_dir: pathlib.Path, jobs: int, prefix: str) -> list[dict]:
    import asyncio

    import ares_rollout

    slots = asyncio.Semaphore(jobs)

    async def one(name: str) -> dict:
        episode = BY_NAME[name]
        async with slots:
            result = await ares_rollout.run_plan(episode.plan(), tasks_dir, out, prefix=prefix, on_sample_base=True,
                                                 episode_id=episode.episode_id)
        print(json.dumps({"recorded": name, "reward": result.get("reward"), "error": result.get("error")}),
              flush=True)
        return manifest_entry(episode, result)

    return list(await asyncio.gather(*(one(name) for name in names)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, required=True, help="run folder to record into")
    parser.add_argument("--only", help="comma-separated episode names (default: the whole suite)")
    parser.add_argument("--jobs", type=int, default=2, help="episodes recorded at once")
    parser.add_argument("--prefix", default="planted", help="ARES container prefix")
    args = parser.parse_args(argv)
    import asyncio
    import tempfile

    names = [n.strip() for n in args.only.split(",")] if args.only else [e.name for e in SUITE]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown episode(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    tasks_dir = pathlib.Path(tempfile.mkdtemp(prefix="planted-tasks-"))
    entries = asyncio.run(_record(names, args.out, tasks_dir, args.jobs, args.prefix))
    (args.out / MANIFEST).write_text(json.dumps({"episodes": entries, "recover": RECOVER, "coin": COIN,
                                                 "max_steps": MAX_STEPS}, indent=1) + "\n")
    failed = [e for e in entries if e["error"] or e["file"] is None]
    for entry in failed:
        print(f"{entry['name']}: {entry['error'] or 'no episode file'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
