"""The fork verifier's reward cannot be forged by what a fork leaves in its container, against the real engine.

Each trick below was a working forgery when the verifier ran in the fork's own container as a login shell: it
turned the recorded wrong fix (reward 0.0) into a 1.0. The verifier now runs in a fresh container of the task's
image that receives only the task's files from the fork, so each must leave the wrong fix at 0.0, while an
honest fix still earns 1.0.
"""

from __future__ import annotations

import pathlib
import uuid

import pytest

from ares_viewer import sandbox
from ares_viewer.container import labels
from ares_viewer.runs import run

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"  # slugify-solved: reward 1.0, its fix is step 5's command
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"  # slugify-wrong-fix: reward 0.0
SESSION = f"pytest-verifier-{uuid.uuid4().hex[:10]}"

_PLUGIN_DIST = "/usr/lib/python3/dist-packages"
_PLUGIN_INFO = f"{_PLUGIN_DIST}/forged_plugin-1.0.dist-info"

# name -> a fork's command that, before, made the verifier of the wrong fix report 1.0.
TRICKS = {
    # `python3 -m pytest` run from /testbed imports this package instead of pytest: exit 0, "passed".
    "a pytest package in the work folder": (
        "mkdir -p /testbed/pytest && touch /testbed/pytest/__init__.py"
        " && printf 'raise SystemExit(0)\\n' > /testbed/pytest/__main__.py"
    ),
    # Every login shell sources /etc/profile.d: python3 becomes a function that succeeds.
    "a python3 function in /etc/profile.d": "echo 'python3() { return 0; }' > /etc/profile.d/zz-forged.sh",
    # First on the PATH: a python3 that succeeds.
    "a fake python3 in /usr/local/bin": (
        "printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3"
    ),
    # The login shell's profile: when the verifier's shell exits, overwrite the reward it wrote.
    "an EXIT trap in /root/.profile": (
        "echo 'trap \"mkdir -p /logs/verifier; echo 1.0 > /logs/verifier/reward.txt\" EXIT' >> /root/.profile"
    ),
    # An installed distribution declaring a pytest11 entry point: pytest loads it and it ends the run with 0.
    "a pytest11 entry-point plugin": (
        f"mkdir -p {_PLUGIN_INFO}"
        f" && printf 'Metadata-Version: 2.1\\nName: forged-plugin\\nVersion: 1.0\\n' > {_PLUGIN_INFO}/METADATA"
        f" && printf '[pytest11]\\nforged = forged_plugin\\n' > {_PLUGIN_INFO}/entry_points.txt"
        f" && printf 'import os\\ndef pytest_unconfigure(config):\\n    os._exit(0)\\n'"
        f" > {_PLUGIN_DIST}/forged_plugin.py"
    ),
}


def _episode(episode_id: str):
    return run.load_episode(DEMO / f"{episode_id}.json")


def _verifier_containers(engine) -> list:
    return engine.containers.list(
        all=True,
        filters={"label": [f"{labels.LABEL_ROLE}={labels.ROLE_VERIFIER}", f"{labels.LABEL_SESSION}={SESSION}"]},
    )


@pytest.mark.parametrize("trick", list(TRICKS))
def test_a_planted_trick_does_not_forge_the_reward(restore, engine, trick):
    wrong = _episode(WRONG_FIX)
    box = restore(WRONG_FIX, 4)  # the recorded wrong fix: its verifier gives 0.0
    planted = box.run(f"{TRICKS[trick]} && echo planted")
    assert planted.output.strip().endswith("planted"), planted
    verdict = sandbox.verify(box, sandbox.task_recipe(wrong))
    assert verdict.error is None, verdict
    assert verdict.reward == 0.0, verdict.result.output[-2000:]
    assert "failed" in verdict.result.output  # the task's own tests ran, and failed
    assert not _verifier_containers(engine)  # the verifier's container is removed after it


def test_an_honest_fix_earns_1_and_the_wrong_one_0_in_a_fresh_container(restore, engine):
    wrong, solved = _episode(WRONG_FIX), _episode(SOLVED)
    recipe = sandbox.task_recipe(wrong)
    recorded_end = restore(WRONG_FIX, 4)
    assert sandbox.verify(recorded_end, recipe).reward == 0.0
    box = restore(WRONG_FIX, 1)
    # The honest fix, with a new module beside it that the fix imports: new files in the task's folders count.
    fix = solved.step(5).command
    helper = (
        "printf 'import unicodedata\\n\\ndef fold(text):\\n    return unicodedata.normalize(\"NFKD\", text)\\n'"
        " > /testbed/textkit/_fold.py && sed -i '1i from textkit import _fold  # noqa' textkit/slug.py"
    )
    forked = sandbox.fork(box, wrong, [fix, helper])
    assert [r.returncode for r in forked.results] == [0, 0], forked.results
    assert forked.verifier.error is None, forked.verifier
    assert forked.reward == 1.0, forked.verifier.result.output[-2000:]
    assert "5 passed" in forked.verifier.result.output
    # The verifier's logs come back into the sandbox, as after a recorded verifier.
    assert box.run("cat /logs/verifier/reward.txt").output.strip() == "1.0"
    assert not _verifier_containers(engine)


def test_the_verifier_container_is_locked_down_and_labelled(restore, engine, monkeypatch):
    from ares_viewer.sandbox import verifier

    seen = {}
    original = verifier.start_container

    def spy(*args, **kwargs):
        made = original(*args, **kwargs)
        seen.update(engine.api.inspect_container(made.id))
        return made

    monkeypatch.setattr(verifier, "start_container", spy)
    box = restore(WRONG_FIX, 4)
    assert sandbox.verify(box, sandbox.task_recipe(_episode(WRONG_FIX))).reward == 0.0
    host, config = seen["HostConfig"], seen["Config"]
    assert host["NetworkMode"] == "none" and not host["Privileged"] and host["PidsLimit"] and host["Memory"]
    assert config["Image"] == "ares-viewer/sample-base:1"
    assert config["Labels"][labels.LABEL_ROLE] == labels.ROLE_VERIFIER
    assert config["Labels"][labels.LABEL_SESSION] == SESSION
    assert seen["Id"] != box.container_id
    assert not _verifier_containers(engine)
