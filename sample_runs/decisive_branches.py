"""Precompute the bundled decisive-step sample: branches of the slugify-wrong-fix demo episode.

The policy is a seeded stochastic function (no model endpoint): it looks at the container before it acts, rewrites
``textkit/slug.py`` with the solved episode's fix unless the file already shows the wrong one (then it believes the
work done and submits), and sometimes reads the file first. From steps 0 and 1 it solves the task, from steps 2
and 3 it cannot: the planted decisive step is 2, the wrong fix. The tests serve the same policy over HTTP.

Needs a Docker engine and the sample base image::

    python3 sample_runs/decisive_branches.py          # into sample_runs/demo-run/.branches/<episode id>/
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import shutil
import sys
import tempfile
import threading

HERE = pathlib.Path(__file__).resolve().parent
DEMO = HERE / "demo-run"
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"
SUBMIT = "THOUGHT: Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached\n```"
LOOK = "THOUGHT: Let me read the module first.\n\n```bash\ncat textkit/slug.py && echo SLUG-READ\n```"


class Policy:
    """Answers from what the last message shows; a seeded coin decides whether to read the file first."""

    def __init__(self, fix_command: str, seed: int) -> None:
        self.fix = (
            "THOUGHT: Fix it unless it is fixed.\n\n```bash\n"
            "if grep -qF 'decode().lower()' textkit/slug.py; then echo SLUG-LOOKS-FIXED; else\n"
            f"{fix_command}\necho SLUG-FIXED; fi\n```"
        )
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def answer(self, messages: list[dict]) -> str:
        last = messages[-1]["content"]
        if "SLUG-FIXED" in last or "SLUG-LOOKS-FIXED" in last:
            return SUBMIT
        if "SLUG-READ" in last:
            return self.fix
        with self.lock:
            return self.fix if self.rng.random() < 0.7 else LOOK

    def __call__(self, messages: list[dict], system_prompt: str | None) -> str:
        return self.answer(messages)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=4, help="branches per step (4: the fewest that can be sure)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    from ares_viewer import load_episode
    from ares_viewer.counterfactual import branching

    os.chdir(HERE.parent)  # the branches name their parent's file relative to the checkout, not this machine's path
    parent = load_episode(f"sample_runs/demo-run/{WRONG_FIX}.json")
    policy = Policy(load_episode(DEMO / f"{SOLVED}.json").step(5).command, seed=29)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["ARES_VIEWER_CACHE"] = cache
        found = branching.search(
            parent,
            policy,
            steps="all",
            samples=args.samples,
            max_steps=4,
            progress=lambda p: print(
                f"branch {p.done}/{p.planned}: step {p.branch.step} reward {p.branch.reward}", file=sys.stderr
            ),
        )
        target = branching.bundled_dir(parent)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(found.folder, target)
    print(found.to_frame().to_string())
    print(f"decisive: {found.decisive}; written to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
