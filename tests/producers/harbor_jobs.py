"""harbor jobs written by harbor's own code (harbor 0.25.x, in a Python 3.12 venv of its own).

- ``oracle-job``: a real ``harbor.job.Job`` with the ``oracle`` agent on two tasks of the project's sample image
  (``ares-viewer/sample-base:1``): ``hello-pass`` (its solution is right: reward 1.0) and ``hello-fail`` (its
  solution writes the wrong text: reward 0.0). harbor runs the trials, the oracle agent, the verifier and writes
  every file (``config.json``, ``result.json``, ``agent/oracle.txt``, ``verifier/reward.txt``,
  ``verifier/test-stdout.txt``, the job's ``result.json``). harbor's own Docker environment drives ``docker
  compose``, which this machine lacks, so the environment is ``DockerSdkEnvironment`` below (the docker SDK, the
  same container operations), handed to harbor by its ``import_path`` option.
- ``mini-job``: harbor's ``mini-swe-agent`` agent. Its ``install`` fetches mini-swe-agent inside the container
  from the network, which the sample image has not, so the agent's run is replaced by its log: the
  ``agent/mini-swe-agent.trajectory.json`` mini-swe-agent's own code wrote (``tests/fixtures/mini-swe-agent-real``:
  ``toolcall-submitted``, reward 1.0, and ``text-timeout``, a command that timed out, reward 0.0). Everything
  else is harbor's code: ``MiniSweAgent.populate_context_post_run`` reads the log, sums its cost and tokens and
  writes the ATIF ``agent/trajectory.json`` with harbor's converter; ``TrialResult``, ``TrialConfig`` and
  ``TrialPaths`` write ``result.json`` and ``config.json`` as ``harbor.trial.Trial`` does.
- ``atif-features.json``: one trajectory built with harbor's ATIF models (``harbor.models.trajectories``) and
  written with ``Trajectory.to_json_dict``: a step with two tool calls and two observation results, a step that
  is not a model call (``llm_call_count: 0``), a copied-context step, a sub-agent trajectory embedded and
  referenced from an observation, a ``continued_trajectory_ref``, and ``final_metrics`` whose totals hold a call
  no step keeps (what harbor's converter does with a dropped format-error call).

Usage: ``/work/venvs/harbor/bin/python tests/producers/harbor_jobs.py OUT_DIR`` (needs Docker, ``harbor`` 0.25
and the ``docker`` SDK in that venv). Containers carry the label ``ares-viewer.test=harbor`` and are removed after.
"""

from __future__ import annotations

import asyncio
import io
import json
import pathlib
import shutil
import sys
import tarfile
import tempfile
from typing import Any

IMAGE = "ares-viewer/sample-base:1"
HERE = pathlib.Path(__file__).resolve().parent
MINI_LOGS = HERE.parent / "fixtures" / "mini-swe-agent-real" / "deterministic-run"
TIME = "2026-11-28T10:00:00+00:00"

try:
    from harbor.environments.base import BaseEnvironment, ExecResult
except ImportError:  # imported by the project's tests for its names only
    BaseEnvironment, ExecResult = object, None  # type: ignore[assignment,misc]


class DockerSdkEnvironment(BaseEnvironment):  # type: ignore[misc,valid-type]
    """harbor's environment interface over the docker SDK: one container of the task's image, no network."""

    @staticmethod
    def type() -> str:
        return "docker-sdk"

    @property
    def capabilities(self) -> Any:
        from harbor.environments.capabilities import EnvironmentCapabilities

        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        pass

    async def start(self, force_build: bool) -> None:
        import docker

        self._client = docker.from_env()
        self._container = self._client.containers.run(
            IMAGE, ["sleep", "600"], detach=True, network_disabled=True, labels={"ares-viewer.test": "harbor"})
        for folder in ("/logs/agent", "/logs/verifier", "/logs/artifacts", "/app"):
            self._container.exec_run(["mkdir", "-p", folder])

    async def stop(self, delete: bool) -> None:
        self._container.remove(force=True)

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> Any:
        wrapped = f"timeout {int(timeout_sec)} bash -c {json.dumps(command)}" if timeout_sec else command
        done = self._container.exec_run(["bash", "-c", wrapped], workdir=cwd or "/app", environment=env or {},
                                        demux=True, user=str(user) if user is not None else "")
        out, err = done.output
        return ExecResult(stdout=(out or b"").decode(), stderr=(err or b"").decode(), return_code=done.exit_code)

    async def upload_file(self, source_path: pathlib.Path | str, target_path: str) -> None:
        source = pathlib.Path(source_path)
        target = pathlib.PurePosixPath(target_path)
        self._container.exec_run(["mkdir", "-p", str(target.parent)])
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            tar.add(source, arcname=target.name)
        self._container.put_archive(str(target.parent), data.getvalue())

    async def upload_dir(self, source_dir: pathlib.Path | str, target_dir: str) -> None:
        self._container.exec_run(["mkdir", "-p", target_dir])
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            for item in sorted(pathlib.Path(source_dir).iterdir()):
                tar.add(item, arcname=item.name)
        self._container.put_archive(target_dir, data.getvalue())

    def _fetch(self, source: str) -> tarfile.TarFile:
        stream, _ = self._container.get_archive(source)
        return tarfile.open(fileobj=io.BytesIO(b"".join(stream)))

    async def download_file(self, source_path: str, target_path: pathlib.Path | str) -> None:
        with self._fetch(source_path) as tar:
            member = tar.getmembers()[0]
            handle = tar.extractfile(member)
            pathlib.Path(target_path).parent.mkdir(parents=True, exist_ok=True)
            pathlib.Path(target_path).write_bytes(handle.read() if handle else b"")

    async def download_dir(self, source_dir: str, target_dir: pathlib.Path | str) -> None:
        target = pathlib.Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        with self._fetch(source_dir.rstrip("/") + "/.") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    handle = tar.extractfile(member)
                    path = target / pathlib.PurePosixPath(member.name).relative_to(".") \
                        if member.name.startswith("./") else target / member.name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(handle.read() if handle else b"")


def _task(root: pathlib.Path, name: str, written: str) -> pathlib.Path:
    """A harbor task (``harbor init``'s layout): write hello.txt; the test wants ``Hello, world!`` in it."""
    task = root / name
    for folder in ("environment", "solution", "tests"):
        (task / folder).mkdir(parents=True, exist_ok=True)
    (task / "task.toml").write_text(
        f'schema_version = "1.4"\n\n[task]\nname = "ares/{name}"\nversion = "1.0.0"\n\n'
        '[verifier]\ntimeout_sec = 60.0\nenvironment_mode = "shared"\n\n[agent]\ntimeout_sec = 60.0\n\n'
        '[environment]\nnetwork_mode = "no-network"\nbuild_timeout_sec = 60.0\nos = "linux"\n')
    (task / "instruction.md").write_text("Create /app/hello.txt holding `Hello, world!`.\n")
    (task / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\necho '{written}' > /app/hello.txt\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\necho 'test_hello ...'\n"
        "if grep -qx 'Hello, world!' /app/hello.txt; then echo 'PASSED test_hello'; echo 1 > /logs/verifier/reward.txt;"
        " else echo 'FAILED test_hello: /app/hello.txt holds' \"$(cat /app/hello.txt)\"; "
        "echo 0 > /logs/verifier/reward.txt; fi\n")
    return task


async def oracle_job(out: pathlib.Path, tasks: pathlib.Path) -> None:
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    config = JobConfig(
        job_name="oracle-job", jobs_dir=out, n_concurrent_trials=1, quiet=True,
        agents=[AgentConfig(name="oracle")],
        environment=EnvironmentConfig(import_path=f"{__name__}:DockerSdkEnvironment", delete=True),
        tasks=[TaskConfig(path=_task(tasks, "hello-pass", "Hello, world!")),
               TaskConfig(path=_task(tasks, "hello-fail", "Goodbye"))])
    job = await Job.create(config)
    await job.run()


def mini_trial(job: pathlib.Path, tasks: pathlib.Path, log: pathlib.Path, reward: float, name: str) -> None:
    """One trial of harbor's mini-swe-agent agent, its files written by harbor's own models and agent code."""
    import datetime

    from harbor.agents.installed.mini_swe_agent import MiniSweAgent
    from harbor.models.agent.context import AgentContext
    from harbor.models.task.id import LocalTaskId
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
    from harbor.models.trial.paths import TrialPaths
    from harbor.models.trial.result import AgentInfo, ModelInfo, TimingInfo, TrialResult
    from harbor.models.verifier.result import VerifierResult

    task = _task(tasks, "hello-pass", "Hello, world!")
    paths = TrialPaths(job / name)
    paths.mkdir()
    info = json.loads(log.read_text())["info"]
    model = info["config"]["model"].get("model_name", "deterministic")
    config = TrialConfig(task=TaskConfig(path=task), trial_name=name, trials_dir=job,
                         agent=AgentConfig(name="mini-swe-agent", model_name=model))
    paths.config_path.write_text(config.model_dump_json(indent=4, exclude_defaults=True))
    shutil.copyfile(log, paths.agent_dir / "mini-swe-agent.trajectory.json")
    agent = MiniSweAgent(logs_dir=paths.agent_dir, model_name=model)
    context = AgentContext()
    agent.populate_context_post_run(context)
    start = datetime.datetime.fromisoformat(TIME)
    end = start + datetime.timedelta(seconds=30)
    (paths.verifier_dir / "reward.txt").write_text(f"{reward:g}")
    (paths.verifier_dir / "test-stdout.txt").write_text(
        "PASSED test_hello\n" if reward else "FAILED test_hello: /app/hello.txt holds Goodbye\n")
    result = TrialResult(
        task_name="ares/hello-pass", trial_name=name, trial_uri=(job / name).as_uri(),
        task_id=LocalTaskId(path=task), task_checksum="0" * 16, config=config,
        agent_info=AgentInfo(name="mini-swe-agent", version=agent.version() or info["mini_version"],
                             model_info=ModelInfo(name=model)),
        agent_result=context, verifier_result=VerifierResult(rewards={"reward": reward}),
        started_at=start, finished_at=end, agent_execution=TimingInfo(started_at=start, finished_at=end))
    paths.result_path.write_text(result.model_dump_json(indent=4))


def features(out: pathlib.Path) -> None:
    """An ATIF trajectory with the newer fields, built and written by harbor's ATIF models."""
    from harbor.models.trajectories import (
        Agent,
        FinalMetrics,
        Metrics,
        Observation,
        ObservationResult,
        Step,
        SubagentTrajectoryRef,
        ToolCall,
        Trajectory,
    )

    helper = Trajectory(
        trajectory_id="helper-1", agent=Agent(name="helper", version="1.0"),
        steps=[Step(step_id=1, source="user", message="List /app."),
               Step(step_id=2, source="agent", message="Listing.", llm_call_count=1,
                    tool_calls=[ToolCall(tool_call_id="h1", function_name="bash", arguments={"command": "ls /app"})],
                    observation=Observation(results=[ObservationResult(source_call_id="h1", content="hello.txt\n")]),
                    metrics=Metrics(prompt_tokens=10, completion_tokens=5, cost_usd=0.001))],
        final_metrics=FinalMetrics(total_prompt_tokens=10, total_completion_tokens=5, total_cost_usd=0.001,
                                   total_steps=2))
    trajectory = Trajectory(
        schema_version="ATIF-v1.8", session_id="features-1", trajectory_id="root-1",
        agent=Agent(name="terminus-2", version="2.0.0", model_name="deterministic"),
        steps=[
            Step(step_id=1, source="system", message="You solve command-line tasks."),
            Step(step_id=2, source="user", message="Earlier: the task was set up.", is_copied_context=True),
            Step(step_id=3, source="user", message="Create hello.txt, then show two files."),
            Step(step_id=4, source="agent", message="Two commands at once.", llm_call_count=1,
                 tool_calls=[ToolCall(tool_call_id="c1", function_name="bash", arguments={"command": "echo one"}),
                             ToolCall(tool_call_id="c2", function_name="bash", arguments={"command": "echo two"})],
                 observation=Observation(results=[ObservationResult(source_call_id="c1", content="one\n"),
                                                  ObservationResult(source_call_id="c2", content="two\n")]),
                 metrics=Metrics(prompt_tokens=100, completion_tokens=20, cost_usd=0.01)),
            Step(step_id=5, source="agent", message="Hand the listing to a helper.", llm_call_count=0,
                 tool_calls=[ToolCall(tool_call_id="d1", function_name="delegate", arguments={"task": "list"})],
                 observation=Observation(results=[ObservationResult(
                     source_call_id="d1", content="hello.txt\n",
                     subagent_trajectory_ref=[SubagentTrajectoryRef(trajectory_id="helper-1")])])),
            Step(step_id=6, source="agent", message="Done.", llm_call_count=1,
                 metrics=Metrics(prompt_tokens=150, completion_tokens=5, cost_usd=0.005)),
        ],
        # 3 calls, one of them (a format error) kept by no step: the totals are more than the steps' sum.
        final_metrics=FinalMetrics(total_prompt_tokens=380, total_completion_tokens=40, total_cost_usd=0.02,
                                   total_steps=6),
        continued_trajectory_ref="atif-features.cont.json",
        subagent_trajectories=[helper])
    (out / "atif-features.json").write_text(json.dumps(trajectory.to_json_dict(), indent=2))
    continued = Trajectory(
        schema_version="ATIF-v1.8", session_id="features-1", trajectory_id="root-1-cont",
        agent=Agent(name="terminus-2", version="2.0.0", model_name="deterministic"),
        steps=[Step(step_id=1, source="user", message="Summary of the earlier part.", is_copied_context=True),
               Step(step_id=2, source="agent", message="Checked again.", llm_call_count=1,
                    metrics=Metrics(prompt_tokens=50, completion_tokens=3, cost_usd=0.002))],
        final_metrics=FinalMetrics(total_prompt_tokens=50, total_completion_tokens=3, total_cost_usd=0.002,
                                   total_steps=2))
    (out / "atif-features.cont.json").write_text(json.dumps(continued.to_json_dict(), indent=2))


def main(out: pathlib.Path) -> None:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        tasks = pathlib.Path(scratch)
        asyncio.run(oracle_job(out, tasks))
        job = out / "mini-job"
        job.mkdir(exist_ok=True)
        mini_trial(job, tasks, MINI_LOGS / "toolcall-submitted" / "toolcall-submitted.traj.json", 1.0,
                   "hello-pass__mini0001")
        mini_trial(job, tasks, MINI_LOGS / "text-timeout" / "text-timeout.traj.json", 0.0, "hello-pass__mini0002")
    features(out)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
