"""The sample runs: the generator really runs episodes, and the committed samples are what the README says."""

from __future__ import annotations

import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import uuid

import pytest
import sample_scripts

import ares_viewer
from ares_viewer import container as containers
from ares_viewer import snapshots
from ares_viewer.snapshots import per_step

REPO = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_runs"
DEMO = SAMPLES / "demo-run"
IMAGE = "ares-viewer/sample-base:1"


scenarios = sample_scripts.load("scenarios")
generate = sample_scripts.load("generate")

TOP_KEYS = ["episode_id", "task_name", "start_time", "end_time", "total_reward", "num_steps", "truncated", "steps"]
STEP_KEYS = ["step_index", "step_type", "observation", "action", "reward", "discount", "timestamp"]
REQUEST_KEYS = [
    "messages",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "tools",
    "tool_choice",
    "metadata",
    "service_tier",
    "stop_sequences",
    "system_prompt",
    "top_k",
]
OBSERVATION_RE = re.compile(
    r"\A<returncode>-?\d+</returncode>\n(<output>\n.*</output>|<warning>\n.*</warning><output_head>\n.*\n</output_head>"
    r"\n<elided_chars>\n\d+ characters elided\n</elided_chars>\n<output_tail>\n.*\n</output_tail>)\Z",
    re.DOTALL,
)


def _episode_files(run: pathlib.Path) -> list[pathlib.Path]:
    return sorted(run.glob("*.json"))


def _load(path: pathlib.Path) -> dict:
    with open(path) as handle:
        return json.load(handle)


def _by_plan(run: pathlib.Path) -> dict[str, dict]:
    docs = {}
    for name in scenarios.PLANS:
        path = run / f"{generate.episode_id_for(name)}.json"
        if path.exists():
            docs[name] = _load(path)
    return docs


def _check_ares_format(path: pathlib.Path) -> None:
    """Everything formats.md section 1 says about an ARES episode file, checked on one file."""
    doc = _load(path)
    assert list(doc)[:8] == TOP_KEYS
    assert path.name == f"{doc['episode_id']}.json"
    assert uuid.UUID(doc["episode_id"]).version == 4
    assert path.read_text() == json.dumps(doc, indent=2), "written with json.dump(indent=2) defaults"
    steps = doc["steps"]
    assert doc["num_steps"] == len(steps)
    assert [s["step_index"] for s in steps] == list(range(len(steps)))
    for step in steps:
        assert list(step) == STEP_KEYS
    _check_step_types_and_rewards(doc, steps)
    timestamps = [s["timestamp"] for s in steps]
    assert timestamps == sorted(timestamps) and doc["start_time"] <= timestamps[0] <= doc["end_time"]
    _check_requests(steps)


def _check_step_types_and_rewards(doc: dict, steps: list[dict]) -> None:
    """The first step is the request only; the others are MID then LAST (all MID for an errored episode), each
    with the reward and discount its type says."""
    first, rest = steps[0], steps[1:]
    assert first["step_type"] == "FIRST" and first["action"] is None and first["reward"] is None
    assert first["discount"] is None and first["observation"] is not None
    errored = doc.get("end_status") == "errored"
    if errored:
        # The recorder's extra keys (docs/recording.md): why it ended, the error (and its cause), the image.
        assert {"end_status", "error", "recording"} <= set(list(doc)[8:])
        assert {"type", "message"} <= set(doc["error"])
        assert all(s["step_type"] == "MID" for s in rest) and doc["total_reward"] is None
    else:
        assert [s["step_type"] for s in rest] == ["MID"] * (len(rest) - 1) + ["LAST"]
        assert doc["total_reward"] == rest[-1]["reward"]
    for step in rest:
        if step["step_type"] == "MID" or doc["truncated"]:
            assert (step["reward"], step["discount"]) == (0.0, 1.0)
            assert step["observation"] is not None
        else:
            assert step["observation"] is None and step["discount"] == 0.0


def _check_requests(steps: list[dict]) -> None:
    """Each action as generated (a thought, one bash block), each request as the sample's agent sends it, and
    each context the one before extended by the last action and its result (or a drop)."""
    previous = None
    for step in steps:
        request = step["observation"]
        if step["action"] is not None:
            action = step["action"]
            assert set(action) == {"data", "cost", "usage"} and action["cost"] > 0
            assert action["usage"]["prompt_tokens"] > 0 and action["usage"]["generated_tokens"] > 0
            content = action["data"][0]["content"]
            blocks = generate.ACTION_RE.findall(content)
            assert content.startswith("THOUGHT: ") or len(blocks) != 1
        if request is None:
            continue
        assert list(request) == REQUEST_KEYS
        assert request["temperature"] == 0.0 and request["system_prompt"] and request["stream"] is False
        messages = request["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"] * ((len(messages) - 1) // 2) + ["user"]
        assert messages[0]["content"].startswith("<pr_description>")
        if step["action"] is not None:
            # Step k's messages end with action k's text, then the result of running it.
            assert messages[-2]["content"] == step["action"]["data"][0]["content"]
            result = messages[-1]["content"]
            assert OBSERVATION_RE.match(result) or result.startswith(("_FormatError(", "_ExecutionTimeoutError("))
        if previous is not None and messages[: len(previous)] != previous:
            assert len(messages) < len(previous) + 2, "a context that is not an extension must be a drop"
        previous = messages


# ----- the generator, run for real ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_image(docker_client):
    import docker.errors

    try:
        docker_client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        message = f"{IMAGE} missing: run `bash images/build-base.sh --offline`"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return IMAGE


@pytest.mark.docker
def test_generator_runs_episodes_that_load(tmp_path, base_image, docker_client):
    out = tmp_path / "run"
    command = [sys.executable, str(SAMPLES / "generate.py"), "--out", str(out), "--only", "pager-solved,mean-errored"]
    subprocess.run(command, check=True, timeout=300, capture_output=True)

    solved = ares_viewer.load_episode(str(out / f"{generate.episode_id_for('pager-solved')}.json"))
    assert solved.outcome == ares_viewer.Outcome.COMPLETED
    assert solved.total_reward == 1.0
    errored = ares_viewer.load_episode(str(out / f"{generate.episode_id_for('mean-errored')}.json"))
    assert errored.outcome == ares_viewer.Outcome.ERRORED
    assert errored.total_reward is None
    for path in _episode_files(out):
        _check_ares_format(path)
        doc = _load(path)
        refs = per_step.find_for_episode(path, doc["episode_id"])
        assert [ref.step_index for ref in refs] == list(range(doc["num_steps"]))
        for ref in refs:
            snapshots.open(ref)
    assert (out / "tasks" / "pager__last-page" / "task.json").is_file()
    # None of the generator's containers is left behind: its tasks' (ARES names them after the generator's prefix)
    # and its snapshots' helpers (labelled with its episodes); other work may share the engine.
    mine = {generate.episode_id_for(plan) for plan in ("pager-solved", "mean-errored")}
    leftovers = docker_client.containers.list(all=True, filters={"label": f"{containers.LABEL_PROJECT}=1"})
    assert [c for c in leftovers if c.labels.get(containers.LABEL_ROLE) in {"sample-task", "base-reader"}
            and (c.labels.get(containers.LABEL_EPISODE) in mine or c.name.startswith("ares.ares_viewer_samples."))
            ] == []


@pytest.mark.docker
@pytest.mark.parametrize("plan", ["pager-solved", "pager-explorer-partial-fix"])
def test_restored_final_state_verifies_to_the_recorded_reward(plan, base_image, docker_client):
    """A committed episode's last snapshot, restored into a container, earns the reward the episode records."""
    doc = _load(DEMO / f"{generate.episode_id_for(plan)}.json")
    recipe = json.loads((DEMO / "tasks" / doc["task_name"] / "task.json").read_text())
    last = per_step.find_for_episode(DEMO / "x.json", doc["episode_id"])[-1]
    container = containers.restore_container(docker_client, snapshots.open(last))
    try:
        verifier_dir = DEMO / "tasks" / doc["task_name"] / "verifier"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(verifier_dir, arcname="verifier")
        container.put_archive("/", buffer.getvalue())
        assert container.exec_run(["bash", "-lc", recipe["verifier"]["command"]]).exit_code == 0
        reward = container.exec_run(["cat", recipe["verifier"]["reward_path"]]).output.decode().strip()
    finally:
        container.remove(force=True)
    assert float(reward) == doc["total_reward"]


# ----- the committed samples -------------------------------------------------------------------------------------


def test_committed_samples_are_small_and_complete():
    size = sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert size <= 15 * 1024 * 1024
    assert set(_by_plan(DEMO)) == set(scenarios.PLANS), "every plan has its committed episode"
    assert len(_episode_files(DEMO)) == len(scenarios.PLANS)


@pytest.mark.parametrize("path", _episode_files(DEMO), ids=lambda p: p.stem[:8])
def test_committed_episode_follows_the_ares_format(path):
    _check_ares_format(path)


@pytest.mark.parametrize("path", _episode_files(DEMO), ids=lambda p: p.stem[:8])
def test_committed_episode_snapshots_resolve(path):
    doc = _load(path)
    refs = per_step.find_for_episode(path, doc["episode_id"])
    assert [ref.step_index for ref in refs] == list(range(doc["num_steps"]))
    for ref in refs:
        snap = snapshots.open(ref)
        assert snap.base_image == IMAGE and snap.workdir == "/testbed"
        for changed in snap.changed_paths():
            entry = snap.stat(changed)
            if entry.type == snapshots.FILE:
                assert len(snap.read(changed)) == entry.size
    project = DEMO / "tasks" / doc["task_name"] / "project"
    first = snapshots.open(refs[0])
    for file in project.rglob("*"):
        if file.is_file():
            assert first.read(str(file.relative_to(project))) == file.read_bytes()


def test_committed_samples_cover_what_the_readme_lists():
    docs = _by_plan(DEMO)
    loaded = {name: ares_viewer.load_episode(str(DEMO / f"{doc['episode_id']}.json")) for name, doc in docs.items()}
    outcomes = {name: (str(ep.outcome), ep.total_reward) for name, ep in loaded.items()}
    assert outcomes["slugify-solved"] == ("completed", 1.0)
    assert outcomes["slugify-wrong-fix"] == ("completed", 0.0)
    assert outcomes["mean-truncated"] == ("truncated", 0.0)
    assert outcomes["mean-errored"] == ("errored", None)
    assert docs["mean-truncated"]["truncated"] is True and docs["mean-truncated"]["steps"][-1]["observation"]
    by_task: dict[str, set] = {}
    for doc in docs.values():
        by_task.setdefault(doc["task_name"], set()).add(doc["total_reward"])
    assert all({0.0, 1.0} <= rewards for rewards in by_task.values()), "success and failure side by side per task"
    assert docs["pager-long"]["num_steps"] - 1 >= 60

    texts = {name: json.dumps(doc, ensure_ascii=False) for name, doc in docs.items()}
    assert "characters elided" in texts["pager-explorer-partial-fix"]
    assert "日本語" in texts["slugify-solved"] and "brûlée" in texts["slugify-solved"]
    assert "<returncode>1</returncode>" in texts["mean-solved"]
    assert "_FormatError(" in texts["slugify-format-error-then-solved"]

    long_steps = docs["pager-long"]["steps"]
    drops = [
        k
        for k in range(2, len(long_steps) - 1)
        if long_steps[k]["observation"]["messages"][: len(long_steps[k - 1]["observation"]["messages"])]
        != long_steps[k - 1]["observation"]["messages"]
    ]
    assert drops == [scenarios.PAGER_LONG.drop_context_at]

    explorer = docs["pager-explorer-partial-fix"]
    last = snapshots.open(per_step.find_for_episode(DEMO / "x.json", explorer["episode_id"])[-1])
    assert last.deleted_paths() == ["/usr/lib/python3.11/EXTERNALLY-MANAGED"]
    assert last.stat("/testbed/pager/legacy.py").type == snapshots.ABSENT  # a project file the agent removed
    assert last.stat("/testbed/tests/data").link_target == "../data"
    assert b"\0" in last.read("/testbed/data/items.csv.gz")


def test_observation_template_is_mini_swe_agents():
    assert generate.render_observation(0, "hello\n") == "<returncode>0</returncode>\n<output>\nhello\n</output>"
    long = "".join(f"{i:05d}\n" for i in range(2000))  # 12,000 characters
    rendered = generate.render_observation(2, long)
    assert rendered.startswith("<returncode>2</returncode>\n<warning>\nThe output of your last command was too long.")
    assert f"</warning><output_head>\n{long[:5000]}\n</output_head>\n" in rendered
    assert rendered.endswith(
        f"<elided_chars>\n2000 characters elided\n</elided_chars>\n<output_tail>\n{long[-5000:]}\n</output_tail>"
    )
