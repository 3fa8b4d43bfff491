"""Record the episodes an ARES environment runs: episode files, per-step snapshots and what ARES never surfaces.

``record(env, out_dir)`` wraps an environment (ARES's ``CodeEnvironment``, or anything with async ``reset()``
and ``step(action)`` returning dm_env ``TimeStep``s) and records every episode it runs into ``out_dir``:

- ``{episode_id}.json`` in the layout of ARES's ``JsonTrajectoryCollector``, rewritten atomically after every
  step, so a crash leaves a readable incomplete episode (``"end_status": "running"``) with every step so far;
- ``snapshots/{episode_id}/step_NNNN/``: the task container after every step (docs/snapshots.md), the last one
  taken when the agent finished and before the verifier ran; ``snapshots/{episode_id}.verifier/`` the
  container after the verifier;
- ``tasks/{task}/``: the task's verifier recipe as ARES runs it (its test files, command, reward path, image;
  ``recorder.task_recipe``), so forks, counterfactuals and branches of the run verify;
- extra keys (docs/recording.md): ``end_status``, ``error``, ``recording`` (the image the episode ran on),
  ``final_command`` (the last command's output, which no observation holds) and ``verifier`` (its commands,
  output, reward file and changed paths);
- with ``activations=`` (ARES's ``ActivationCapture``): ``activations/{episode_id}/``, the episode's capture as
  ``TrajectoryActivations.save`` writes it, with the tokens of every model call (``recorder.activations``).

No ARES import: the environment is used through its public methods plus, for ``CodeEnvironment``, its
``_container`` (for commands and snapshots) and ``_compute_reward`` (to see the verifier start).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import pathlib
import time
import uuid
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any

import ares_viewer
from ares_viewer import model
from ares_viewer.model import verifier as verifier_record
from ares_viewer.recorder import activations as activations_mod
from ares_viewer.recorder import container_state, task_recipe
from ares_viewer.recorder.episode_file import (
    EndStatus,
    EpisodeFile,
    status_of,
    step_record,
    to_jsonable,
)
from ares_viewer.recorder.episode_file import cut_output as _cut
from ares_viewer.recorder.episode_file import error_record as _error

_LOGGER = logging.getLogger(__name__)

VERIFIER_SUFFIX = ".verifier"


class _Episode:
    """The recording of one episode in progress."""

    def __init__(self, out_dir: pathlib.Path, episode_id: str, task_name: str | None, start_time: float) -> None:
        self.id = episode_id
        self.file = EpisodeFile(out_dir / f"{episode_id}.json", episode_id, task_name, start_time)
        self.file.extra["end_status"] = EndStatus.RUNNING
        self.step = 0  # actions taken so far
        self.ended = False
        self.container: Any = None  # docker SDK container, when snapshots are possible
        self.info: container_state.ContainerInfo | None = None
        self.captured: set[int] = set()
        self.pending: asyncio.Task[Any] | None = None  # the capture of the latest step, still running
        self.commands: list[dict[str, Any]] = []  # the agent's commands since the last step record
        self.last_command: dict[str, Any] | None = None
        self.in_verifier = False
        self.verifier: model.VerifierRecord | None = None


class RecordingEnv:
    """An environment whose episodes are recorded. Use it like the environment it wraps.

    Args:
        env: The environment (e.g. ``ares.environments.code_env.CodeEnvironment``).
        out_dir: The run folder episode files and snapshots go to (created if missing).
        snapshots: Capture the task container after every step (needs a Docker-backed container).
        task_name: The episodes' task name when the environment does not tell (``env._current_task.name``).
        episode_ids: The ids to give the episodes, in order (UUID4s are made up when omitted or used up).
        activations: ARES's ``ActivationCapture`` around the model that answers (e.g.
            ``automatic_activation_capture(model)``): each episode's capture steps are saved beside it with the
            tokens of every model call, and the capture is emptied after each episode (``recorder.activations``).
    """

    def __init__(
        self,
        env: Any,
        out_dir: str | os.PathLike[str],
        *,
        snapshots: bool = True,
        task_name: str | None = None,
        episode_ids: Iterable[str] = (),
        activations: Any = None,
    ) -> None:
        self.env = env
        self._ids: Iterator[str] = iter(episode_ids)
        self.out_dir = pathlib.Path(out_dir)
        self.snapshots = snapshots
        self.task_name = task_name
        self.episode: _Episode | None = None
        self.episodes: list[pathlib.Path] = []  # every episode file written, in order
        self.activations: activations_mod.CaptureRecorder | None = None
        if activations is not None:
            self.activations = activations_mod.CaptureRecorder(activations, self._answering_step)
            self.activations.install()
        compute = getattr(env, "_compute_reward", None)
        if callable(compute):
            env._compute_reward = self._verifier_hook(compute)

    # ----- the environment's interface ------------------------------------------------------------------------

    async def __aenter__(self) -> RecordingEnv:
        await self.env.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        await self._end_on_exit(exc)
        self._release_model()
        return await self.env.__aexit__(exc_type, exc, tb)

    async def close(self) -> None:
        """End a running episode (``aborted``) and close the environment."""
        await self._end_on_exit(None)
        self._release_model()
        await self.env.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    async def reset(self) -> Any:
        if self.episode is not None and not self.episode.ended:
            await self._end(self.episode, EndStatus.ABANDONED)
        episode = _Episode(self.out_dir, next(self._ids, None) or str(uuid.uuid4()), self.task_name, time.time())
        self.episode = episode
        if self.activations is not None:
            self.activations.begin_episode()
        try:
            ts = await self.env.reset()
        except BaseException as exc:
            episode.file.header["task_name"] = episode.file.header["task_name"] or self._task_name()
            await self._end(episode, status_of(exc), exc)
            raise
        observation = to_jsonable(ts.observation)  # at once: the agent's message list keeps growing
        now = time.time()
        episode.file.header["task_name"] = self._task_name()
        await self._attach(episode)
        episode.file.add_step(step_record(0, "FIRST", observation, None, None, None, now))
        episode.file.write()
        self._snapshot_soon(episode, 0)
        self.episodes.append(episode.file.path)
        return ts

    async def step(self, action: Any) -> Any:
        episode = self.episode
        if episode is None or episode.ended:
            return await self.env.step(action)  # the environment raises its own "must reset" error
        recorded_action = to_jsonable(action)
        await self._settle(episode)  # the previous step's capture ends before the action changes the container
        episode.step += 1
        try:
            ts = await self.env.step(action)
        except BaseException as exc:
            await self._end(episode, status_of(exc), exc)
            raise
        observation = to_jsonable(ts.observation)
        now = time.time()
        index = episode.step
        kind = str(ts.step_type.name if hasattr(ts.step_type, "name") else ts.step_type)
        episode.file.add_step(step_record(index, kind, observation, recorded_action, to_jsonable(ts.reward),
                                          to_jsonable(ts.discount), now))
        if kind == "LAST":
            await self._snapshot(episode, index)  # unless taken before the verifier ran; the container goes next
            if episode.last_command is not None and episode.last_command.get("step_index") == index:
                episode.file.extra["final_command"] = episode.last_command
            truncated = ts.observation is not None
            episode.file.header["truncated"] = truncated
            episode.file.header["total_reward"] = to_jsonable(ts.reward)
            await self._end(episode, EndStatus.TRUNCATED if truncated else EndStatus.COMPLETED)
        else:
            episode.file.write()
            self._snapshot_soon(episode, index)
        return ts

    # ----- episode bookkeeping --------------------------------------------------------------------------------

    def _answering_step(self) -> int | None:
        """The trajectory step a model call made now answers: its response becomes that step's action."""
        episode = self.episode
        return None if episode is None or episode.ended else episode.step + 1

    def _release_model(self) -> None:
        if self.activations is not None:
            self.activations.uninstall()

    async def _save_activations(self, episode: _Episode) -> None:
        """Save the episode's capture beside it (a failure is recorded; the episode itself is still written)."""
        if self.activations is None:
            return
        try:
            info = await asyncio.to_thread(self.activations.save, self.out_dir, episode.id)
        except Exception as exc:
            _LOGGER.warning("episode %s: its activations could not be saved: %s", episode.id, exc)
            episode.file.extra["activations_error"] = _error(exc)
            return
        if info is not None:
            episode.file.extra.setdefault("recording", {})["activations"] = info

    def _task_name(self) -> str | None:
        if self.task_name is not None:
            return self.task_name
        task = getattr(self.env, "_current_task", None)
        name = getattr(task, "name", None)
        return str(name) if name is not None else None

    async def _attach(self, episode: _Episode) -> None:
        """Watch the new episode's container: its commands, and (with snapshots) its image."""
        ares_container = getattr(self.env, "_container", None)
        if ares_container is None:
            return
        exec_run = getattr(ares_container, "exec_run", None)
        if callable(exec_run):
            ares_container.exec_run = self._command_hook(episode, exec_run)
        container = container_state.docker_container(ares_container)
        recording: dict[str, Any] = {"writer": f"ares-viewer {ares_viewer.__version__}"}
        if container is not None:
            try:
                info = await asyncio.to_thread(container_state.describe, container)
            except Exception as exc:
                _LOGGER.warning("episode %s: cannot read the container's image (%s); no snapshots", episode.id, exc)
            else:
                episode.container, episode.info = container, info
                recording.update(image=info.image, image_id=info.image_id, image_tags=list(info.image_tags),
                                 workdir=info.workdir, container=info.name)
                # What the verifier needs, beside the run: forks and branches then verify as ARES did.
                await asyncio.to_thread(task_recipe.save, self.out_dir, getattr(self.env, "_current_task", None),
                                        episode.file.header["task_name"], info.image, info.workdir)
        if self.snapshots and episode.info is not None:
            recording["snapshots"] = f"snapshots/{episode.id}"
        elif self.snapshots:
            _LOGGER.warning("episode %s: the environment's container is not a Docker container; no snapshots",
                            episode.id)
        episode.file.extra["recording"] = recording

    async def _snapshot(self, episode: _Episode, index: int, *, suffix: str = "") -> pathlib.Path | None:
        if not self.snapshots or episode.info is None or (not suffix and index in episode.captured):
            return None
        try:
            folder = await asyncio.to_thread(container_state.capture_step, episode.container, episode.info,
                                             episode.id + suffix, index, self.out_dir)
        except Exception as exc:  # a dead container must not hide the episode itself
            _LOGGER.warning("episode %s: no snapshot of step %d: %s", episode.id, index, exc)
            episode.file.extra.setdefault("snapshot_errors", []).append({"step_index": index, **_error(exc)})
            return None
        if not suffix:
            episode.captured.add(index)
        return folder

    def _snapshot_soon(self, episode: _Episode, index: int) -> None:
        """Capture step ``index`` while the caller asks its model for the next action.

        The container cannot change before the next ``step()`` hands the action over, and that call waits for
        this capture first: the snapshot is the state after action ``index``, and its cost overlaps the model's.
        """
        if self.snapshots and episode.info is not None:
            episode.pending = asyncio.ensure_future(self._snapshot(episode, index))

    async def _settle(self, episode: _Episode) -> None:
        pending, episode.pending = episode.pending, None
        if pending is not None:
            await pending
            if episode.file.extra.get("snapshot_errors") and not episode.ended:
                episode.file.write()

    async def _end(self, episode: _Episode, status: EndStatus, exc: BaseException | None = None) -> None:
        episode.ended = True
        await self._settle(episode)
        episode.file.header["end_time"] = time.time()
        episode.file.extra["end_status"] = status
        if exc is not None:
            episode.file.extra["error"] = _error(exc)
        if episode.verifier is not None:
            episode.file.extra["verifier"] = episode.verifier.to_json()
        if ("final_command" not in episode.file.extra and episode.last_command is not None
                and status != EndStatus.COMPLETED):
            episode.file.extra["final_command"] = episode.last_command
        await self._save_activations(episode)
        episode.file.write()
        if episode.file.path not in self.episodes:
            self.episodes.append(episode.file.path)

    async def _end_on_exit(self, exc: BaseException | None) -> None:
        episode = self.episode
        if episode is not None and not episode.ended:
            await self._end(episode, status_of(exc) if exc is not None else EndStatus.ABORTED, exc)

    # ----- hooks into the environment -------------------------------------------------------------------------

    def _command_hook(self, episode: _Episode, exec_run: Any) -> Any:
        """``exec_run`` that remembers each command's result (the agent's last output reaches no observation)."""

        async def recorded_exec_run(command: str, *args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            entry: dict[str, Any] = {"step_index": episode.step, "command": command}
            try:
                result = await exec_run(command, *args, **kwargs)
            except BaseException as exc:
                entry.update(returncode=None, error=type(exc).__name__, duration_s=round(time.monotonic() - began, 3))
                self._remember(episode, entry)
                raise
            entry.update(returncode=result.exit_code, **_cut(str(result.output)),
                         duration_s=round(time.monotonic() - began, 3))
            self._remember(episode, entry)
            return result

        return recorded_exec_run

    def _remember(self, episode: _Episode, entry: dict[str, Any]) -> None:
        if episode.in_verifier and episode.verifier is not None:
            episode.verifier = dataclasses.replace(
                episode.verifier, commands=(*episode.verifier.commands, model.VerifierCommand.from_json(entry)))
        else:
            episode.last_command = entry

    def _verifier_hook(self, compute_reward: Any) -> Any:
        """``_compute_reward`` that snapshots the agent's final state first and the verifier's work after."""

        async def recorded_compute_reward(*args: Any, **kwargs: Any) -> Any:
            episode = self.episode
            if episode is None or episode.ended:
                return await compute_reward(*args, **kwargs)
            # The agent is done: this is the state it submitted, before any test file reaches the container.
            await self._settle(episode)
            await self._snapshot(episode, episode.step)
            episode.verifier = model.VerifierRecord(step_index=episode.step)
            episode.in_verifier = True
            try:
                reward = await compute_reward(*args, **kwargs)
                episode.verifier = dataclasses.replace(episode.verifier,
                                                       reward=verifier_record.as_number(to_jsonable(reward)))
                return reward
            except BaseException as exc:
                episode.verifier = dataclasses.replace(episode.verifier, error_record=_error(exc))
                raise
            finally:
                episode.in_verifier = False
                await self._after_verifier(episode)

        return recorded_compute_reward

    async def _after_verifier(self, episode: _Episode) -> None:
        verifier = episode.verifier
        assert verifier is not None
        tests = [c for c in verifier.commands if c.command.startswith("bash ")]
        if tests:
            verifier = dataclasses.replace(verifier, output=tests[-1].output, returncode=tests[-1].returncode)
        if episode.container is not None:
            for path in ("/logs/verifier/reward.txt", "/logs/verifier/reward.json"):
                data = await asyncio.to_thread(container_state.read_file, episode.container, path)
                if data is not None:
                    verifier = dataclasses.replace(verifier, reward_path=path,
                                                   reward_file=data.decode("utf-8", errors="replace"))
                    break
        folder = await self._snapshot(episode, episode.step, suffix=VERIFIER_SUFFIX)
        if folder is not None:
            verifier = dataclasses.replace(
                verifier, **container_state.verifier_changes(self.out_dir, episode.id, episode.step, folder))
        episode.verifier = verifier


def record(
    env: Any,
    out_dir: str | os.PathLike[str],
    *,
    snapshots: bool = True,
    task_name: str | None = None,
    episode_ids: Iterable[str] = (),
    activations: Any = None,
) -> RecordingEnv:
    """Record every episode ``env`` runs into ``out_dir``; use the result in place of ``env``.

    >>> async with record(env, "runs/my-run") as env:
    ...     ts = await env.reset()
    ...     while not ts.last():
    ...         ts = await env.step(await llm(ts.observation))
    """
    return RecordingEnv(env, out_dir, snapshots=snapshots, task_name=task_name, episode_ids=episode_ids,
                        activations=activations)
