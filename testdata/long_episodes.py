"""Long mini-swe-agent episodes written by mini-swe-agent's own code, shaped like real SWE-bench runs.

What costs on real episodes is not what costs on generated ones: long, distinct outputs (a file read, a traceback,
a test run), a context that grows by a different message at every step, heredocs and scripts inside commands, many
failed steps. This module has mini-swe-agent write such episodes: its own agent loop (``DefaultAgent``), its
deterministic tool-calling model (``DeterministicToolcallModel``, the protocol of the public real run in
``../shared/real-runs/``), the templates of its bundled ``benchmarks/swebench.yaml`` and its trajectory writer; the
commands really run in its ``LocalEnvironment``, in a scratch folder holding a small generated Python package of its
own (so every output is what the command printed: ``cat -n`` of a module, ``grep``, a script's traceback, a failing
test run). The commands are this module's own, fixed (no model writes them): reads, scripts and edits inside the
scratch folder, removed after.

Each episode is a seeded walk through a debugging session: explore, read modules (whole or by line range), grep,
write a reproduction script with a heredoc and run it (it fails, rc 1, with a traceback), run inline
``python3 - <<'EOF'`` scripts, edit with ``sed -i`` and look at ``git diff``, run the tests (some fail), and in the
end submit. Thoughts are distinct sentences. No network, no model: a benchmark writes them at its start (a few
seconds per 100 steps) rather than committing megabytes.

    python3 -m testdata.long_episodes OUT        # the figures' runs: OUT/long (188, 176, 115 steps), OUT/small-a,
                                                 # OUT/small-b (11 episodes each, of the same tasks)
"""

from __future__ import annotations

import json
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
from typing import Any

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
_WORDS = ("parse", "render", "config", "schema", "value", "field", "token", "record", "buffer", "offset", "index",
          "column", "segment", "rule", "frame", "header", "payload", "cache", "loader", "dialect", "layout", "node",
          "visitor", "scope", "unit", "series", "window", "stream", "tag", "element", "context", "registry")
_VERBS = ("check", "inspect", "verify", "trace", "compare", "look at", "read", "confirm", "narrow down", "test")
_NOUNS = ("the failing branch", "how the value is normalised", "the edge case with empty input", "the caller",
          "where the offset is computed", "the error message", "the regression", "the default", "the conversion",
          "the test that covers it", "the traceback", "the return type", "the fallback path")


def _ident(rng: random.Random) -> str:
    return "_".join(rng.sample(_WORDS, 2))


def _module(rng: random.Random, name: str, functions: int) -> str:
    """A plausible Python module: a docstring, imports, functions and a class, every line its own."""
    lines = [f'"""Helpers for {name.replace("_", " ")}: {rng.choice(_NOUNS)}."""', "", "import math",
             "import re", "", f"PATTERN = re.compile(r'{rng.choice(_WORDS)}[_-]?(\\d+)')", ""]
    for _ in range(functions):
        fn, arg = _ident(rng), rng.choice(_WORDS)
        lines += ["", f"def {fn}({arg}, limit={rng.randint(2, 99)}):",
                  f'    """Return the {rng.choice(_WORDS)} of ``{arg}`` ({rng.choice(_NOUNS)})."""']
        for k in range(rng.randint(4, 14)):
            other = rng.choice(_WORDS)
            lines.append(rng.choice((
                f"    {other}_{k} = [x for x in {arg} if x] if isinstance({arg}, list) else {arg}",
                f"    if {arg} is None:\n        raise ValueError('{fn}: no {arg} given (step {k})')",
                f"    {other}_{k} = math.floor(len(str({arg})) / max(1, limit - {k}))",
                f"    match = PATTERN.search(str({arg}))\n    {other}_{k} = int(match.group(1)) if match else {k}",
                f"    # {rng.choice(_VERBS)} {rng.choice(_NOUNS)}",
            )))
        lines.append(f"    return {arg}")
    cls = "".join(w.title() for w in rng.sample(_WORDS, 2))
    lines += ["", "", f"class {cls}:", f'    """A {rng.choice(_WORDS)} holder."""', "",
              "    def __init__(self, items):", "        self.items = list(items)", "",
              "    def total(self):", "        return sum(len(str(i)) for i in self.items)"]
    return "\n".join(lines) + "\n"


def _package(folder: pathlib.Path, rng: random.Random, modules: int) -> list[str]:
    """A git repository with a package ``pkg`` of ``modules`` modules and a test file; the module names."""
    names = [f"{_ident(rng)}_{k}" for k in range(modules)]
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("")
    for name in names:
        (folder / "pkg" / f"{name}.py").write_text(_module(rng, name, rng.randint(6, 16)))
    tests = ["import unittest", *(f"from pkg import {n}" for n in names), "", "", "class TestAll(unittest.TestCase):"]
    for k, name in enumerate(names):
        tests += [f"    def test_{name}(self):", f"        self.assertEqual(len({name}.__doc__) % 3, {k % 3})", ""]
    (folder / "tests").mkdir()
    (folder / "tests" / "test_pkg.py").write_text("\n".join(tests))
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=folder, check=True)
    return names


def _thought(rng: random.Random, k: int) -> str:
    sentences = [f"I need to {rng.choice(_VERBS)} {rng.choice(_NOUNS)}." for _ in range(rng.randint(1, 4))]
    if k % 5 == 0:
        sentences.append(f"The {rng.choice(_WORDS)} handling in `{_ident(rng)}` looks suspicious; "
                         f"it may explain why {rng.choice(_NOUNS)} differs.")
    return " ".join(sentences)


def _command(rng: random.Random, k: int, names: list[str]) -> str:
    """One step's command: a read, a search, a heredoc script (failing often), an edit, a test run."""
    mod = rng.choice(names)
    kind = rng.choices(("cat", "range", "grep", "repro", "inline", "edit", "tests", "ls", "missing"),
                       weights=(3, 3, 2, 4, 2, 2, 2, 1, 1))[0]
    if kind == "cat":
        return f"cat -n pkg/{mod}.py"
    if kind == "range":
        start = rng.randint(1, 80)
        return f"sed -n '{start},{start + rng.randint(20, 90)}p' pkg/{mod}.py"
    if kind == "grep":  # rc 1 when nothing matches
        return f"grep -rn '{rng.choice(_WORDS)}_{rng.choice(_WORDS)}' pkg tests"
    if kind == "repro":
        arg = rng.choice(("None", "[]", "'x-12'", "[1, 0, None]", "{'a': 1}"))
        return (f"cat <<'EOF' > reproduce_{k}.py\nimport sys\nsys.path.insert(0, '.')\nfrom pkg import {mod}\n\n"
                f"for name in sorted(dir({mod})):\n    fn = getattr({mod}, name)\n"
                f"    if callable(fn) and not name[0].isupper() and fn.__module__ == {mod}.__name__:\n"
                f"        print(name, '->', fn({arg}, limit=len(name) - {rng.randint(8, 20)}))\n"
                f"EOF\npython3 reproduce_{k}.py")
    if kind == "inline":
        return (f"python3 - <<'EOF'\nimport ast, pathlib\nsource = pathlib.Path('pkg/{mod}.py').read_text()\n"
                "tree = ast.parse(source)\nfor node in ast.walk(tree):\n"
                "    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):\n"
                f"        print(node.lineno, node.name, len(ast.dump(node)) % {rng.randint(50, 500)})\nEOF")
    if kind == "edit":
        a, b = rng.sample(_WORDS, 2)
        return f"sed -i 's/{a}/{b}/g' pkg/{mod}.py && git diff --stat && git diff pkg/{mod}.py | head -n 60"
    if kind == "tests":
        return "python3 -m unittest discover -s tests -v > .tests.log 2>&1; rc=$?; tail -n 40 .tests.log; exit $rc"
    if kind == "missing":
        return f"cat pkg/{mod}_old.py"
    return f"ls -la pkg && wc -l pkg/*.py | sort -n | tail -n {rng.randint(4, 12)}"


def _outputs(rng: random.Random, steps: int, names: list[str]) -> list[dict]:
    """The scripted responses of an episode of ``steps`` steps, the last a submission."""
    from minisweagent.models.test_models import make_toolcall_output

    outputs = []
    for k in range(1, steps + 1):
        command = SUBMIT if k == steps else _command(rng, k, names)
        call = {"id": f"call_{k}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
        out = make_toolcall_output(_thought(rng, k), [call], [{"command": command, "tool_call_id": f"call_{k}"}])
        out["extra"]["cost"] = round(0.0004 * k, 6)
        outputs.append(out)
    return outputs


def write_episode(path: pathlib.Path, task: str, steps: int, seed: int) -> pathlib.Path:
    """One episode of ``steps`` steps at ``task``, written by mini-swe-agent to ``path`` (a ``.traj.json``)."""
    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import get_config_path
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.test_models import DeterministicToolcallModel

    config = yaml.safe_load(get_config_path("benchmarks/swebench.yaml").read_text())
    rng = random.Random(f"{task}/{seed}")
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="ares-long-"))
    try:
        names = _package(scratch / "repo", random.Random(task), modules=12)  # the task's repository: same per task
        model = DeterministicToolcallModel(outputs=_outputs(rng, steps, names),
                                           observation_template=config["model"]["observation_template"],
                                           cost_per_call=0.0)
        env = LocalEnvironment(cwd=str(scratch / "repo"), timeout=20,
                               env={**{k: v for k, v in config["environment"]["env"].items() if k != "BASH_ENV"},
                                    "PYTHONDONTWRITEBYTECODE": "1"})
        agent = DefaultAgent(model, env, system_template=config["agent"]["system_template"],
                             instance_template=config["agent"]["instance_template"], step_limit=0, cost_limit=0,
                             output_path=path)
        agent.run(f"Fix {task}: {rng.choice(_NOUNS)} is wrong when the {rng.choice(_WORDS)} is empty.")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path


# The figures' runs: (run, folder, task, steps, seed). ``long`` holds two attempts at one task (Compare) and a
# 115-step episode (the Episode page); ``small-a`` and ``small-b`` hold 11 episodes of the same 11 tasks each
# (the Overview, Compare runs).
_SMALL_TASKS = [f"proj{k}__proj{k}-{100 + 7 * k}" for k in range(11)]
RUNS: list[tuple[str, str, str, int, int]] = [
    ("long", "attempt-1", "acme__widgets-4127", 188, 1),
    ("long", "attempt-2", "acme__widgets-4127", 176, 2),
    ("long", "acme__parser-2210", "acme__parser-2210", 115, 3),
    *(("small-a", task, task, 20 + 4 * k, 10 + k) for k, task in enumerate(_SMALL_TASKS)),
    *(("small-b", task, task, 24 + 3 * k, 40 + k) for k, task in enumerate(_SMALL_TASKS)),
]


def write_report(folder: pathlib.Path, tasks: list[str]) -> pathlib.Path:
    """A SWE-bench summary report of a run (what its harness writes after a run): every other task resolved."""
    resolved = sorted(tasks)[::2]
    report = {"total_instances": len(tasks), "submitted_instances": len(tasks), "resolved_instances": len(resolved),
              "resolved_ids": resolved, "unresolved_ids": sorted(set(tasks) - set(resolved))}
    path = folder / f"deterministic.{folder.name}.json"
    path.write_text(json.dumps(report, indent=2))
    return path


def write_runs(out: pathlib.Path, runs: list[tuple[str, str, str, int, int]] | None = None) -> dict[str, Any]:
    """Write the runs under ``out`` (``out/<run>/<folder>/<task>.traj.json``), each with its report; run name ->
    its folder."""
    written: dict[str, Any] = {}
    tasks: dict[str, list[str]] = {}
    for run, folder, task, steps, seed in RUNS if runs is None else runs:
        write_episode(out / run / folder / f"{task}.traj.json", task, steps, seed)
        written[run] = out / run
        tasks.setdefault(run, []).append(task)
    for run, names in tasks.items():
        write_report(out / run, sorted(set(names)))
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.rsplit("    python3 -m ", 1)[1].split("\n")[0])
    for name, folder in write_runs(pathlib.Path(sys.argv[1])).items():
        print(f"{name}: {folder}")
