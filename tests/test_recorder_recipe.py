"""A run recorded through real ARES carries its verifier recipe: its episodes verify again as ARES verified them."""

from __future__ import annotations

import json

import pytest
from test_recorder_ares import PREFIX, _remove_leftovers, _rollout

from ares_viewer import load_episode, open_run, sandbox

pytestmark = [pytest.mark.docker, pytest.mark.ares]

SESSION = f"pytest-recipe-{PREFIX}"
TASK = "textkit__slugify-accents"


@pytest.fixture(scope="module")
def recorded(ares_python, docker_client, tmp_path_factory):
    docker_client.images.get("ares-viewer/sample-base:1")
    out = tmp_path_factory.mktemp("ares-run")
    try:
        yield out, _rollout(ares_python, out, ["slugify-solved", "slugify-wrong-fix"], "--jobs", "2")
    finally:
        sandbox.cleanup(docker_client, session=SESSION)
        _remove_leftovers(docker_client)


def test_the_recorder_saves_the_tests_command_reward_path_and_image_as_ares_ran_them(recorded):
    out, results = recorded
    recipe = json.loads((out / "tasks" / TASK / "task.json").read_text())
    assert recipe["verifier"]["command"] == "mkdir -p /logs/verifier && bash /tests/test.sh"
    assert recipe["verifier"]["reward_path"] == "/logs/verifier/reward.txt"
    assert (out / "tasks" / TASK / "tests" / "test.sh").is_file()
    [path] = results["slugify-solved"]["episode_files"]
    episode = load_episode(path)
    assert recipe["base_image"] == episode.metadata["recording"]["image"]
    assert sandbox.task_recipe(episode).verifier_command == recipe["verifier"]["command"]


@pytest.mark.parametrize(("plan", "reward"), [("slugify-solved", 1.0), ("slugify-wrong-fix", 0.0)])
def test_a_recorded_episodes_last_step_restored_verifies_to_the_reward_ares_gave(recorded, docker_client, plan, reward):
    _, results = recorded
    [path] = results[plan]["episode_files"]
    episode = load_episode(path)
    assert episode.total_reward == reward
    box = sandbox.restore(episode, episode.steps[-1].index, client=docker_client, session=SESSION)
    try:
        verdict = sandbox.verify(box, sandbox.task_recipe(episode))
    finally:
        box.remove()
    assert verdict.error is None and verdict.reward == reward


def test_the_recipes_are_part_of_the_run_not_other_files(recorded):
    out, _ = recorded
    opened = open_run(str(out))
    assert (
        opened.files_found() == "0 unreadable file(s), 0 other file(s); beside them: per-step snapshots, "
        "verifier recipes"
    )
