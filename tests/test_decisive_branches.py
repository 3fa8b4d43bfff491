"""Finding the decisive step of a real episode with real containers, the real verifier and a policy over HTTP.

The parent is the bundled slugify-wrong-fix episode: action 2 strips accents with ``encode("ascii", "ignore")``
and the episode earns 0. The policy, a seeded stochastic chat-completions server on 127.0.0.1, looks at the
container before it acts: it rewrites ``textkit/slug.py`` with the right fix unless the file already shows the
wrong one, in which case it believes the work done and submits. Sometimes it first reads the file (the seeded
coin), so branches differ in length but not in outcome: from steps 0 and 1 every branch is solved, from steps 2 and
3 none is. The planted decisive step is 2.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import uuid

import chat_server
import pytest
import sample_scripts
from test_counterfactual import DEMO, SOLVED, WRONG_FIX

from ares_viewer import cli, counterfactual, sandbox
from ares_viewer.counterfactual import branching, value_curve
from ares_viewer.runs.run import load_episode

REPO = pathlib.Path(__file__).resolve().parent.parent
SESSION = f"pytest-{uuid.uuid4().hex[:10]}"
decisive_sample = sample_scripts.load("decisive_branches")


def Policy(seed: int):  # noqa: N802 - reads as the class it builds
    """The sample's seeded policy (``sample_runs/decisive_branches.py``) as a chat-completions server's answers."""
    policy = decisive_sample.Policy(load_episode(DEMO / f"{SOLVED}.json").step(5).command, seed)
    return lambda body: policy.answer(body["messages"])


@pytest.fixture
def parent():
    return load_episode(DEMO / f"{WRONG_FIX}.json")


def test_exhaustive_and_adaptive_searches_both_find_the_planted_step_and_adaptive_uses_fewer_rollouts(
    engine, parent, tmp_path, monkeypatch
):
    with chat_server.serve(Policy(seed=29)) as server:
        client = counterfactual.openai_client(server.base_url, "policy")
        monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "exhaustive"))
        seen = []
        every = branching.search(
            parent,
            client,
            steps="all",
            samples=4,
            budget=branching.Budget(parallel=2, snapshots=False),  # the default, with snapshots, runs below
            max_steps=4,
            docker_client=engine,
            session=SESSION,
            progress=seen.append,
        )
        monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "adaptive"))
        bisect = branching.search(
            parent,
            client,
            steps="bisect",
            samples=4,
            batch=2,
            budget=branching.Budget(parallel=2, snapshots=False),
            max_steps=4,
            docker_client=engine,
            session=SESSION,
        )
    frame = every.to_frame()
    assert list(frame.index) == [0, 1, 2, 3, 4] and list(frame["V"]) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert list(frame["n"]) == [4, 4, 4, 4, 0] and bool(frame.loc[4, "recorded"])  # the parent's own reward
    assert frame.loc[1, "low"] > frame.loc[2, "high"]
    assert (every.decisive.step, every.decisive.change, every.decisive.sure) == (2, -1.0, True)
    assert every.new == 16 and [p.done for p in seen] == list(range(1, 17)) and seen[-1].planned == 16
    assert (bisect.decisive.step, bisect.decisive.change, bisect.decisive.sure) == (2, -1.0, True)
    assert bisect.new < every.new and 3 not in {b.step for b in bisect.branches}
    # Every branch ran in a container of its own, and each is an episode linked to its parent's step.
    branches = [*every.branches, *bisect.branches]
    assert len({b.container for b in branches}) == len(branches) and None not in {b.container for b in branches}
    one = load_episode(every.of_step(2)[0].path)
    assert one.metadata["counterfactual"]["episode_id"] == WRONG_FIX and one.metadata["counterfactual"]["step"] == 2
    assert one.metadata["verifier"]["reward"] == 0.0
    assert str(every.folder).startswith(str(tmp_path / "exhaustive")) and DEMO not in every.folder.parents


def test_model_errors_are_not_rewards_and_a_cancelled_search_resumes_with_what_it_kept(engine, parent, tmp_path):
    with chat_server.serve(Policy(seed=7)) as server:
        client = counterfactual.openai_client(server.base_url, "policy")
        server.status = 500
        broken = branching.search(
            parent,
            client,
            steps=[1],
            samples=2,
            budget=branching.Budget(parallel=2),
            max_steps=4,
            docker_client=engine,
            session=SESSION,
        )
        assert [b.failure for b in broken.branches] == ["model", "model"]
        assert broken.curve[0].value is None and broken.curve[0].failed == 2 and broken.decisive is None
        server.status = 200
        cancel = threading.Event()
        stopped = branching.search(
            parent,
            client,
            steps=[1],
            samples=2,
            budget=branching.Budget(parallel=1),
            max_steps=4,
            docker_client=engine,
            session=SESSION,
            progress=lambda p: cancel.set(),
            cancel=cancel,
        )
        assert stopped.stopped == "cancelled" and stopped.new == 1
        kept = stopped.of_step(1)[-1]
        assert kept.reward == 1.0 and load_episode(kept.path).metadata["end_status"] == "completed"
        resumed = branching.search(
            parent, client, steps=[1], samples=2, max_steps=4, docker_client=engine, session=SESSION
        )
    assert resumed.new == 1 and resumed.stopped == "done"
    [v1] = [e for e in resumed.curve if e.step == 1]
    assert (v1.value, v1.n, v1.failed) == (1.0, 2, 2)  # two errors, not two zeros: V stays 1
    stored = branching.load(parent).branches  # with the 16 the sample run ships, marked as such
    assert [b for b in stored if not b.supplied] == list(resumed.branches) and sum(b.supplied for b in stored) == 16


def test_bad_step_choices_are_refused_with_the_reason(parent):
    with pytest.raises(ValueError, match="cannot branch from step"):
        branching.parse_steps("3,4", parent)
    with pytest.raises(ValueError, match="every:N needs"):
        branching.parse_steps("every:0", parent)
    assert branching.parse_steps("every:2", parent) == [0, 2]


def _run_without_recipe(root):
    """The wrong-fix episode and its snapshots in a run of their own, with no ``tasks/`` folder (as a
    mini-swe-agent or SWE-bench run has none)."""
    root.mkdir()
    shutil.copy(DEMO / f"{WRONG_FIX}.json", root)
    shutil.copytree(DEMO / "snapshots" / WRONG_FIX, root / "snapshots" / WRONG_FIX)
    return load_episode(root / f"{WRONG_FIX}.json")


def _harbor_task(folder):
    """A harbor task folder for the slugify task: ``tests/test.sh`` runs its hidden tests and writes the reward."""
    tests = folder / "tests"
    shutil.copytree(DEMO / "tasks" / "textkit__slugify-accents" / "verifier" / "tests", tests)
    (tests / "test.sh").write_text(
        "cd /testbed && python3 -m pytest -q -p no:cacheprovider /tests\n"
        "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (folder / "task.toml").write_text('version = "1.0"\n')
    return folder


def test_a_run_without_a_recipe_says_what_is_missing_and_verifies_with_a_harbor_task_folder(engine, tmp_path):
    episode = _run_without_recipe(tmp_path / "run")
    with pytest.raises(LookupError, match=r"tasks/textkit__slugify-accents/task\.json does not exist; point at one"):
        sandbox.task_recipe(episode)
    with pytest.raises(LookupError, match="neither a recipe"):
        sandbox.task_recipe(episode, tmp_path)
    harbor = _harbor_task(tmp_path / "harbor-task")
    with chat_server.serve(Policy(seed=3)) as server:
        client = counterfactual.openai_client(server.base_url, "policy")
        bare = branching.search(
            episode, client, steps=[1], samples=1, max_steps=4, docker_client=engine, session=SESSION
        )
        pointed = branching.search(
            episode, client, steps=[1], samples=1, max_steps=4, docker_client=engine, session=SESSION, recipe=harbor
        )
    [missing] = bare.branches
    assert missing.failure == "no_reward" and "does not exist" in missing.error and missing.reward is None
    [verified] = [b for b in pointed.branches if b.failure is None]
    assert verified.reward == 1.0
    assert load_episode(verified.path).metadata["verifier"]["commands"][0]["command"] == (
        "mkdir -p /logs/verifier && bash /tests/test.sh"
    )


def test_the_branch_command_prints_the_curve_and_the_decisive_step_and_a_rerun_adds_nothing_done(engine, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "ARES_VIEWER_CACHE": str(tmp_path / "cache")}
    with chat_server.serve(Policy(seed=5)) as server:
        command = [
            sys.executable,
            "-m",
            "ares_viewer.cli",
            "branch",
            str(DEMO),
            WRONG_FIX,
            "--steps",
            "1",
            "--samples",
            "1",
            "--endpoint",
            server.base_url,
            "--model",
            "policy",
            "--max-steps",
            "4",
            "--max-model-tokens",
            "100000",
        ]
        first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
        spent = 2 * len(server.requests)  # the server reports 2 tokens a call
        again = subprocess.run(
            [*command, "--json", "--export", str(tmp_path / "labels.jsonl")],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    assert first.returncode == 0, first.stderr
    assert f"branch 1/1 from step 1: reward 1.0, {spent} model tokens" in first.stderr
    assert f"1 new branch(es), {spent} model tokens, 1 stored in" in first.stdout
    # The curve as the Episode page shows it: the run's 16 shipped branches with this one (step 1: 5 of 5).
    assert "   1   1.00  [0.57, 1.00]    5       0" in first.stdout
    assert "Decisive step 2: a drop of 1.00 in V from step 1 (the intervals separate)." in first.stdout
    shipped = DEMO / ".branches" / WRONG_FIX
    assert f"16 branch(es) supplied with the run in {shipped} (not computed here)" in first.stdout
    assert again.returncode == 0, again.stderr
    shown = json.loads(again.stdout)
    assert shown["new"] == 0 and (shown["branches"], shown["supplied"]) == (1, 16) and shown["decisive"]["step"] == 2
    assert (shown["tokens"], shown["total_tokens"], shown["note"]) == (0, spent, None)
    assert [e["step"] for e in shown["curve"]] == [0, 1, 2, 3, 4] and shown["curve"][4]["recorded"]
    # The export labels every step with a value: the run ships 4 branches a step, step 1 has this one more.
    labels = {row["step"]: row for row in map(json.loads, (tmp_path / "labels.jsonl").read_text().splitlines())}
    label = labels[1]
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    assert (label["V"], label["n"], label["supplied"]) == (1.0, 5, 4) and label["action"] == parent.step(1).response


def test_the_bundled_sample_shows_its_curve_without_an_endpoint_and_its_branches_open(parent):
    found = branching.load(parent)
    assert found.supplied_folder == DEMO / ".branches" / WRONG_FIX and all(b.supplied for b in found.branches)
    assert (found.decisive.step, found.decisive.change, found.decisive.sure) == (2, -1.0, True)
    assert list(found.to_frame()["n"]) == [4, 4, 4, 4, 0]
    for branch in found.branches:
        opened = load_episode(branch.path)
        assert opened.metadata["counterfactual"]["step"] == branch.step and opened.total_reward == branch.reward
    figure = value_curve.figure(found)
    [band] = figure.layout.shapes
    assert (band.x0, band.x1) == (1, 2) and "decisive step 2" in figure.layout.annotations[0].text
    axis = figure.layout.xaxis  # ticks on whole steps: 0, 1, 2, 3, 4, never 0.5
    assert (axis.tickmode, axis.tick0, axis.dtick, axis.tickformat) == ("linear", 0, 1, "d")
    assert list(figure.data[0].error_y.arrayminus) == [
        pytest.approx(1 - e.low) if e.value else 0.0 for e in found.curve if not e.recorded
    ]


def test_a_token_budget_stops_new_branches_once_spent_and_unknown_usage_is_counted_by_size(
    engine, parent, tmp_path, monkeypatch
):
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    with chat_server.serve(Policy(seed=11)) as server:
        client = counterfactual.openai_client(server.base_url, "policy")
        server.usage = {"prompt_tokens": 700, "completion_tokens": 50, "total_tokens": 750}

        def three_branches_under_1000_tokens() -> branching.Search:
            # Without per-step snapshots (what a budget counts does not depend on them): a branch costs about half.
            return branching.search(parent, client, steps=[1], samples=3, max_steps=4, docker_client=engine,
                                    budget=branching.Budget(parallel=1, token_budget=1000, snapshots=False),
                                    session=SESSION)

        spent = three_branches_under_1000_tokens()
        calls = len(server.requests)
        server.usage = None  # an endpoint that reports no usage
        unknown = three_branches_under_1000_tokens()
    # The first branch spent more than the budget: no second one started, and the partial estimate is saved.
    assert spent.stopped == "token budget" and spent.new == 1 and spent.note is None
    [first] = spent.branches
    assert first.tokens == spent.tokens == spent.total_tokens == 750 * calls
    assert load_episode(first.path).generated_tokens == 50 * calls  # the branch episode carries its usage
    saved = next(b for b in branching.load(parent).branches if not b.supplied)
    assert saved.tokens == 750 * calls  # saved with the branch
    # Without usage the tokens are unknown, never 0, and the budget counts each call by its size.
    assert unknown.new == 1 and unknown.stopped == "token budget"
    assert unknown.tokens is None and unknown.total_tokens is None and unknown.branches[-1].tokens is None
    assert unknown.branches[-1].counted_tokens > 1000
    assert "reported no token usage" in unknown.note and "token budget of 1,000 counted each such call" in unknown.note


def test_the_branch_command_refuses_to_store_branches_in_the_run_folder(capsys):
    before = sorted(p.name for p in DEMO.iterdir())
    relative = os.path.relpath(DEMO / "my-branches")
    argv = ["branch", str(DEMO), WRONG_FIX, "--branches-to", relative, "--endpoint", "http://127.0.0.1:9/v1"]
    assert cli.main([*argv, "--model", "policy"]) == 1
    error = capsys.readouterr().err
    assert "my-branches: branches are never written into the run folder" in error and "pick another" in error
    assert sorted(p.name for p in DEMO.iterdir()) == before
