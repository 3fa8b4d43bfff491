"""Episodes of real ARES recorded through ares_viewer.recorder, read back by ares-viewer.

ARES (martian-ares 0.1.0) needs Python >= 3.12, so it runs in its own venv (.ci/ares-venv.sh) as a
subprocess: sample_runs/ares_rollout.py runs sample plans through ARES's CodeEnvironment, DockerContainer,
MiniSWECodeAgent and harbor verifier on the real engine, with only the model scripted. These tests fail in
CI when the venv or the engine is missing.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import time
import uuid

import pytest
import sample_scripts

from ares_viewer import Outcome, container, fsdiff, load_episode, model, sandbox, snapshots
from ares_viewer.base import agent_text

REPO = pathlib.Path(__file__).resolve().parent.parent

scenarios = sample_scripts.load("scenarios")
harbor_tasks = sample_scripts.load("harbor_tasks")

pytestmark = [pytest.mark.docker, pytest.mark.ares]

ROLLOUT = REPO / "sample_runs" / "ares_rollout.py"
PREFIX = f"avtest{uuid.uuid4().hex[:8]}"  # ARES names containers (and images it builds) ares.<prefix>.…
SESSION = f"pytest-{uuid.uuid4().hex[:10]}"
PLANS = ["slugify-solved", "slugify-format-error-then-solved", "mean-truncated", "mean-errored", "pager-solved"]


def _start_rollout(python: str, out: pathlib.Path, plans: list[str], *extra: str) -> subprocess.Popen:
    """Start running plans through ARES (:func:`_rollout_results` waits for it)."""
    return subprocess.Popen(
        [python, str(ROLLOUT), "--out", str(out), "--plans", ",".join(plans), "--prefix", PREFIX, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _rollout_results(process: subprocess.Popen) -> dict[str, dict]:
    """The result of each plan a rollout ran (episode files, error, ...) by plan name, once it ended."""
    try:
        stdout, stderr = process.communicate(timeout=900)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-3000:]
    results = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {result["plan"]: result for result in results}


def _rollout(python: str, out: pathlib.Path, plans: list[str], *extra: str) -> dict[str, dict]:
    """Run plans through ARES and wait; the result of each by plan name (``_rollout_results``)."""
    return _rollout_results(_start_rollout(python, out, plans, *extra))


def _remove_leftovers(client) -> None:
    """Containers and image tags ARES made under this module's prefix (ARES leaves the images it builds)."""
    for leftover in client.containers.list(all=True, filters={"name": f"ares.{PREFIX}."}):
        leftover.remove(force=True)
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith(f"ares.{PREFIX}."):
                client.images.remove(tag)
    sandbox.cleanup(client, session=SESSION)


@pytest.fixture(scope="module")
def engine(docker_client):
    try:
        docker_client.images.get("ares-viewer/sample-base:1")
    except Exception as exc:  # the image is built by images/build-base.sh
        pytest.fail(f"ares-viewer/sample-base:1 is missing (bash images/build-base.sh --offline): {exc}")
    yield docker_client
    _remove_leftovers(docker_client)


@pytest.fixture(scope="module")
def recorded(ares_python, engine, tmp_path_factory):
    """The plans recorded into one run folder, and ARES's results by plan.

    The episode where ARES builds the task's Dockerfile itself at reset (its default way to make a container) is
    recorded at the same time, by a second rollout into a run folder of its own (the two do not write the same
    task's recipe at once). The task images both use are built first, so the two never build one at once."""
    out = tmp_path_factory.mktemp("ares-run")
    tasks = tmp_path_factory.mktemp("ares-tasks")
    for name in sorted({scenarios.PLANS[plan].task for plan in [*PLANS, "slugify-wrong-fix"]}):
        tag = harbor_tasks.task_image(scenarios.TASKS[name])
        harbor_tasks.ensure_task_image(engine, harbor_tasks.write_task(tasks, scenarios.TASKS[name], image=tag), tag)
    built = tmp_path_factory.mktemp("ares-built-run")
    running = [_start_rollout(ares_python, out, PLANS, "--jobs", "3"),
               _start_rollout(ares_python, built, ["slugify-wrong-fix"], "--ares-builds")]
    results: dict[str, dict] = {}
    try:
        for process in running:
            results.update(_rollout_results(process))
    finally:
        for process in running:
            process.kill()
    assert sorted(results) == sorted([*PLANS, "slugify-wrong-fix"])
    for plan, folder, extra in [*((p, out, ()) for p in PLANS), ("slugify-wrong-fix", built, ("--ares-builds",))]:
        if any(_reward_read_lost(path) for path in results[plan]["episode_files"]):
            for path in results[plan]["episode_files"]:
                _discard(folder, pathlib.Path(path))
            results.update(_rollout(ares_python, folder, [plan], *extra))
    return out, results


def _reward_read_lost(path: str) -> bool:
    """Whether ARES found no reward only because its read of the reward file came back empty while the file held
    one, as the recording shows (the read's output empty with return code 0, the file's content a number after the
    verifier): docker-py's ``exec_run`` sometimes returns no output of a short command (docker/docker-py#2042, seen
    under CI's load), and ARES then ends the episode on "No reward found". Such a plan is recorded again."""
    verifier = json.loads(pathlib.Path(path).read_text()).get("verifier") or {}
    reads = [c for c in verifier.get("commands") or [] if str(c.get("command", "")).endswith("/reward.txt")
             and str(c.get("command", "")).startswith("cat ")]
    content = str((verifier.get("reward_file") or {}).get("content", "")).strip()
    return (verifier.get("reward") is None and content.replace(".", "", 1).isdigit()
            and any(c.get("returncode") == 0 and c.get("output") == "" for c in reads))


def _discard(folder: pathlib.Path, episode: pathlib.Path) -> None:
    """An episode file and its snapshots, taken out of the run folder before its plan is recorded again."""
    for snapshot in (folder / "snapshots").glob(f"{episode.stem}*"):
        shutil.rmtree(snapshot)
    episode.unlink()


def _episode(recorded, plan: str) -> model.Episode:
    _, results = recorded
    [path] = results[plan]["episode_files"]
    return load_episode(path)


def _doc(episode: model.Episode) -> dict:
    return json.loads(pathlib.Path(episode.path).read_text())


def _snapshot(episode: model.Episode, step: int) -> snapshots.Snapshot:
    refs = {ref.step_index: ref for ref in snapshots.find(episode)}
    return snapshots.open(refs[step])


def _planned_commands(plan: str) -> list[str | None]:
    return [agent_text.parse_response(turn.content()).command for turn in scenarios.PLANS[plan].turns]


# ----- what ares-viewer reads -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plan", "outcome", "reward", "actions"),
    [
        ("slugify-solved", Outcome.COMPLETED, 1.0, 7),
        ("slugify-wrong-fix", Outcome.COMPLETED, 0.0, 4),
        ("slugify-format-error-then-solved", Outcome.COMPLETED, 1.0, 7),
        ("mean-truncated", Outcome.TRUNCATED, 0.0, 10),
        ("pager-solved", Outcome.COMPLETED, 1.0, 4),
    ],
)
def test_recorded_episodes_read_back_with_ares_results(recorded, plan, outcome, reward, actions):
    episode = _episode(recorded, plan)
    result = recorded[1][plan]
    assert (episode.outcome, episode.total_reward, episode.num_actions) == (outcome, reward, actions)
    assert result["reward"] == reward and result["actions"] == actions  # what ARES itself returned
    assert episode.task_name == scenarios.PLANS[plan].task
    assert [step.command for step in episode.steps[1:]] == _planned_commands(plan)[:actions]
    for step in episode.steps[1:]:
        if step.command is None:
            assert step.format_error  # two bash blocks: the agent's format error message came back
        else:
            assert isinstance(step.returncode, int), f"step {step.index} has no return code"
            assert step.output is not None
    doc = _doc(episode)
    assert doc["num_steps"] == actions + 1 and doc["end_status"] == outcome.value


def test_outputs_and_return_codes_are_the_commands_real_ones(recorded):
    episode = _episode(recorded, "slugify-solved")
    steps = episode.steps
    assert steps[3].returncode == 1 and "1 failed" in steps[3].output  # the accented test fails first
    assert steps[4].returncode == 0 and "cr-me-br-l-e-la-carte" in steps[4].output
    assert "Crème brûlée" in episode.context(1)[0].content  # non-ASCII task text, escaped in the file
    assert steps[6].returncode == 0 and "creme-brulee-a-la-carte" in steps[6].output
    last = steps[7]  # the submit command's output reaches no observation; the recorder keeps it
    assert last.returncode == 0 and last.output.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    assert "diff --git a/textkit/slug.py" in last.output
    syntax = _episode(recorded, "slugify-format-error-then-solved").steps
    assert any(step.returncode == 2 for step in syntax)  # the syntax error's exit code


# ----- snapshots and the verifier ---------------------------------------------------------------------------------


def test_every_step_has_a_snapshot_and_the_last_is_the_agents_before_the_verifier(recorded):
    episode = _episode(recorded, "slugify-solved")
    refs = snapshots.find(episode)
    assert [ref.step_index for ref in refs] == list(range(8))
    assert _snapshot(episode, 0).changed_paths() == []  # the task image as the agent first saw it
    assert _snapshot(episode, 4).read("textkit/slug.py") == _snapshot(episode, 0).read_base("/testbed/textkit/slug.py")
    final = _snapshot(episode, 7)
    assert b"unicodedata" in final.read("textkit/slug.py")
    assert not [p for p in final.entries if p.startswith(("/tests", "/logs"))], "the verifier ran before the snapshot"


def test_the_verifier_is_recorded_apart(recorded):
    out, _ = recorded
    doc = _doc(_episode(recorded, "slugify-solved"))
    verifier = doc["verifier"]
    assert verifier["reward"] == 1.0 and verifier["step_index"] == 7
    assert verifier["reward_file"] == {"path": "/logs/verifier/reward.txt", "content": "1.0\n"}
    assert verifier["returncode"] == 0 and "passed" in verifier["output"]
    assert "/logs/verifier/reward.txt" in verifier["changed_paths"]
    assert any(path.startswith("/tests/") for path in verifier["changed_paths"])
    assert not any(path.startswith("/testbed/textkit") for path in verifier["changed_paths"])
    after = snapshots.open_step(out / verifier["snapshot"])
    assert after.read("/logs/verifier/reward.txt") == b"1.0\n"
    wrong = _doc(_episode(recorded, "slugify-wrong-fix"))["verifier"]
    assert wrong["reward"] == 0.0 and wrong["reward_file"]["content"] == "0.0\n" and wrong["returncode"] != 0


def test_the_image_each_episode_ran_on_is_recorded(recorded, engine):
    for plan in ("slugify-solved", "slugify-wrong-fix"):  # a prebuilt task image; an image ARES built at reset
        recording = _doc(_episode(recorded, plan))["recording"]
        assert recording["image"] == "ares-viewer/task-textkit__slugify-accents:latest"
        assert engine.images.get(recording["image"]).id == recording["image_id"]
        assert recording["workdir"] == "/testbed"
        assert _snapshot(_episode(recorded, plan), 0).base_image == recording["image"]


def test_a_restored_step_equals_its_snapshot(recorded, engine):
    episode = _episode(recorded, "slugify-format-error-then-solved")
    step = 5
    recorded_state = _snapshot(episode, step)
    assert recorded_state.changed_paths(), "the step should have changes to restore"
    box = sandbox.restore(episode, step, client=engine, session=SESSION)
    try:
        live = container.capture_live(box.container(), recorded_state)
        assert not fsdiff.diff_snapshots(recorded_state, live).changes
        for path in recorded_state.changed_paths():
            assert live.read(path) == recorded_state.read(path), path
    finally:
        box.remove()


# ----- failures ---------------------------------------------------------------------------------------------------


def test_an_environment_that_raises_gives_an_errored_episode_with_every_earlier_step(recorded):
    episode = _episode(recorded, "mean-errored")
    assert recorded[1]["mean-errored"]["error"] == "RuntimeError: Code agent task failed"
    assert episode.outcome is Outcome.ERRORED and episode.num_actions == 3
    assert [step.command for step in episode.steps[1:]] == _planned_commands("mean-errored")[:3]
    assert all(isinstance(step.returncode, int) for step in episode.steps[1:])
    doc = _doc(episode)
    assert doc["error"]["type"] == "RuntimeError" and doc["error"]["cause"]["type"] == "APIError"
    assert doc["final_command"]["step_index"] == 4 and doc["final_command"]["error"] == "APIError"
    assert [ref.step_index for ref in snapshots.find(episode)] == [0, 1, 2, 3]
    assert "Code agent task failed" in (episode.error or "")
    # the wrapper hides what went wrong inside the agent: the page's one line names the innermost error too
    assert episode.error_record is not None and episode.error_record.root.type != "RuntimeError"
    assert f"(root cause: {episode.error_record.root.type}" in (episode.error or "")


def test_a_killed_recording_leaves_a_readable_incomplete_episode(ares_python, engine, tmp_path):
    out = tmp_path / "run"
    process = subprocess.Popen(
        [ares_python, str(ROLLOUT), "--out", str(out), "--plans", "slugify-solved",
         "--prefix", PREFIX, "--pause-after", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once two actions are recorded
        assert json.loads(line) == {"paused": "slugify-solved"}
        # Step 2's snapshot is taken while the rollout asks its model for the next action.
        deadline = time.monotonic() + 60
        while not list(out.glob("snapshots/*/step_0002/manifest.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        process.kill()
        process.wait(timeout=60)
    [path] = out.glob("*.json")
    episode = load_episode(path)
    assert episode.outcome is Outcome.INCOMPLETE and episode.num_actions == 2
    assert _doc(episode)["end_status"] == "running" and _doc(episode)["end_time"] is None
    assert [step.command for step in episode.steps[1:]] == _planned_commands("slugify-solved")[:2]
    assert [ref.step_index for ref in snapshots.find(episode)] == [0, 1, 2]
    assert _snapshot(episode, 2).changed_paths() == []  # two read-only commands
