"""Counterfactual model calls: what would the model have done had it seen something else after step k?

From step ``k`` of a recorded episode: take the messages the model saw next (``Episode.observation(k)``), edit
them, ask a model client for a new response, run its command in a container restored at step ``k``
(``sandbox.restore``), and carry on with the same client for up to ``max_steps`` actions, the way ARES's default
agent does (one bash block per response; ``<returncode>``/``<output>`` back). The result is written as a new ARES
episode file linked to its parent (run file, episode, step, the edit) under ``out_dir``, a folder of its own,
never the parent's run folder (by default a new folder under ``counterfactuals/`` in the cache folder,
:func:`new_out_dir`); it opens like any episode and compares against the parent in Compare.

The episode is written as it happens, the way the recorder writes one (``recorder.EpisodeFile``): the file after
every action, and a per-step snapshot of the container (step 0: the restored state it starts from), so its Files
page shows what each action changed and Compare pairs its steps with the parent's by the files they changed. When
the model submits, the task's verifier runs and is recorded under ``verifier`` in the recorder's shape (its output,
exit code, reward file, the paths it changed); an :func:`openai_client`'s endpoint (password masked) and model are
recorded under ``recording.model``. A model, container or verifier failure partway leaves the actions done so
far, ended ``errored`` with the failure (:class:`CounterfactualError`). With an ``ActivationCapture`` around an
in-process model, its activations are saved beside the episode with the tokens of every call, as the recorder
saves them.

A client is any callable ``client(messages, system_prompt) -> str`` (or an awaitable of one): a scripted list,
an OpenAI-compatible endpoint (:func:`openai_client`; the endpoint the user configured is
``model_client.configured().client()``), or an ARES LLM client wrapped by :func:`ares_client`
(``HookedTransformerLLMClient`` in process, with ``ActivationCapture`` around the call when its activations are
wanted).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import inspect
import logging
import os
import pathlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import ares_viewer
from ares_viewer import container, model, sandbox
from ares_viewer.base import agent_text, locations
from ares_viewer.counterfactual import completion
from ares_viewer.counterfactual.model_client import ModelEndpointError, openai_client
from ares_viewer.recorder import activations as recorder_activations
from ares_viewer.recorder import container_state, episode_file
from ares_viewer.recorder.session import VERIFIER_SUFFIX
from ares_viewer.runs import index_cache

__all__ = ["DEFAULT_MAX_STEPS", "FORMAT_ERROR", "Client", "CounterfactualError", "Edit", "ModelEndpointError",
           "Result", "ares_client", "new_out_dir", "openai_client", "out_root", "run", "search_run",
           "without_snapshots"]

_LOGGER = logging.getLogger(__name__)

Client = Callable[[list[dict[str, Any]], str | None], "str | Awaitable[str]"]
Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | Sequence[dict[str, Any]]
DEFAULT_MAX_STEPS = 5
# Kept here too for callers that read it from the loop; the protocol's one declaration is ``agent_text``.
FORMAT_ERROR = agent_text.FORMAT_ERROR


@dataclasses.dataclass(frozen=True)
class Result:
    """A counterfactual continuation.

    Attributes:
        path: the episode file written.
        episode_id: its id.
        parent: the link to where it forked (``run_file``, ``episode_id``, ``step``, ``edit``).
        responses: the model's responses, in order.
        box: the live sandbox when ``keep_sandbox`` was asked for (the caller removes it), else None.
        status: the episode's ``end_status``: ``completed`` (the model submitted), ``truncated`` (``max_steps``),
            ``errored`` (see :class:`CounterfactualError`).
        error: the failure in one line when errored.
    """

    path: str
    episode_id: str
    parent: dict[str, Any]
    responses: tuple[str, ...]
    box: sandbox.Sandbox | None = None
    status: episode_file.EndStatus = episode_file.EndStatus.COMPLETED
    error: str | None = None


class CounterfactualError(RuntimeError):
    """The model, the container or the verifier failed partway through a counterfactual.

    The episode is written all the same, with every action done before the failure and ``end_status``
    ``errored``, its ``error`` naming the failure (a ``ModelEndpointError``'s message: the endpoint and what it
    answered, never the key). ``result`` is that episode (``result.status == "errored"``); ``__cause__`` is the
    failure itself.
    """

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result


def out_root() -> pathlib.Path:
    """Where counterfactuals go when the caller names no folder: ``counterfactuals/`` in the cache folder. Opened as
    a run, it lists them all."""
    return index_cache.cache_dir() / "counterfactuals"


def new_out_dir() -> pathlib.Path:
    """A new, empty folder name under :func:`out_root` for one counterfactual (not created yet)."""
    return out_root() / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def ares_client(client: Any, **request_fields: Any) -> Client:
    """An ARES LLM client (``async client(LLMRequest) -> LLMResponse``) as a counterfactual client. Needs ARES."""
    from ares.llms import request as ares_request  # optional: ARES runs on Python 3.12+ only

    async def call(messages: list[dict[str, Any]], system_prompt: str | None) -> str:
        response = await client(ares_request.LLMRequest(messages=messages, system_prompt=system_prompt,
                                                        **request_fields))
        return "".join(getattr(part, "content", "") or "" for part in response.data)

    return call


def _ask(client: Client, messages: list[dict[str, Any]], system_prompt: str | None) -> str:
    answer = client([dict(m) for m in messages], system_prompt)
    if inspect.isawaitable(answer):
        answer = _wait(answer)
    if not isinstance(answer, str):
        raise TypeError(f"the client answered a {type(answer).__name__}, not the response text")
    return completion.with_estimate(answer, messages, system_prompt)  # what a token budget counts without usage


async def _awaited(answer: Awaitable[str]) -> str:
    return await answer


def _wait(answer: Awaitable[str]) -> str:
    """An async client's answer, from plain code or from inside a running event loop (a notebook's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(answer))
    # asyncio.run refuses to nest in a running loop: the call gets a loop of its own in a worker thread.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(asyncio.run, _awaited(answer)).result()


def _client_model(client: Client) -> dict[str, str]:
    """What the client says it calls: ``{"endpoint", "model"}`` of an :func:`openai_client` (the endpoint as
    ``model_client.shown_url`` shows it: never a password), else nothing."""
    return {name: value for name in ("endpoint", "model")
            if isinstance(value := getattr(client, name, None), str) and value}


def _request(messages: list[dict[str, Any]], system_prompt: str | None, template: dict[str, Any]) -> dict[str, Any]:
    return {**template, "messages": [dict(m) for m in messages], "system_prompt": system_prompt}


def _result_message(result: sandbox.CommandResult) -> str:
    output = result.output if result.error is None else f"{result.output}\n{result.error}".strip()
    return agent_text.result_message(result.returncode, output)




class _Writer:
    """The new episode on disk as it happens: its file rewritten after every action (``recorder.EpisodeFile``, the
    recorder's writer), and a per-step snapshot of the container after each, taken while the model is asked for
    the next action (the container cannot change before the next command, which waits for it)."""

    def __init__(self, path: pathlib.Path, episode_id: str, task_name: str | None, start: float,
                 box: sandbox.Sandbox, extra: dict[str, Any]) -> None:
        self.file = episode_file.EpisodeFile(path, episode_id, task_name, start)
        self.file.extra.update(extra)
        self.box = box
        self.out = path.parent
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="cf-snapshot")
        self._pending: concurrent.futures.Future[dict[str, Any] | None] | None = None

    def add(self, record: dict[str, Any]) -> None:
        self.file.add_step(record)
        self.file.write()

    def snapshot_soon(self, index: int) -> None:
        """Capture the container now as step ``index`` (``snapshots/<episode_id>/step_NNNN/``), in the background;
        nothing for an episode written without snapshots (:func:`without_snapshots`)."""
        self.settle()
        if not self.file.extra["recording"].get("snapshots"):
            return
        self._pending = self._pool.submit(self._capture, index)

    def _capture(self, index: int) -> dict[str, Any] | None:
        try:
            container.capture_snapshot(self.box.container(), self.box.image, self.file.header["episode_id"], index,
                                       self.out, self.box.workdir)
        except Exception as exc:  # a snapshot that cannot be taken must not lose the episode itself
            _LOGGER.warning("counterfactual %s: no snapshot of step %d: %s", self.file.header["episode_id"], index,
                            exc)
            return {"step_index": index, **episode_file.error_record(exc)}
        return None

    def settle(self) -> None:
        """Wait for the snapshot under way; a failure is recorded in ``snapshot_errors``."""
        pending, self._pending = self._pending, None
        failed = pending.result() if pending is not None else None
        if failed is not None:
            self.file.extra.setdefault("snapshot_errors", []).append(failed)
            self.file.write()

    def verify(self, episode: model.Episode, step: int, say: Callable[[str], None],
               source: str | os.PathLike | None = None) -> float | None:
        """Run the task's verifier after action ``step`` (the model submitted) and record it under ``verifier`` in
        the recorder's shape, with a snapshot of the container after it (``snapshots/<episode_id>.verifier/``) and
        the paths it changed. The reward, or None when the run has no recipe for the task (nothing recorded).

        Raises:
            sandbox.SandboxError: the verifier could not run or gave no reward (recorded in ``verifier.error``).
        """
        try:
            recipe = sandbox.task_recipe(episode, source)
        except LookupError as exc:
            say(f"No verifier: {exc}; the reward stays unknown")
            self.file.extra["no_verifier"] = str(exc)  # what is missing, for the pages that show the reward
            return None
        say("The model submitted: running the task's verifier…")
        verdict = sandbox.verify(self.box, recipe)
        ran = verdict.result
        output = episode_file.cut_output(ran.output)
        failure = None if verdict.error is None else sandbox.SandboxError(f"the verifier failed: {verdict.error}")
        record = model.VerifierRecord(
            step_index=step,
            commands=(model.VerifierCommand(command=recipe.verifier_command, returncode=ran.returncode,
                                            output=output["output"], step_index=step,
                                            duration_s=round(ran.duration_s, 3),
                                            output_chars=output.get("output_chars"), error=ran.error),),
            output=output["output"], output_chars=output.get("output_chars"), returncode=ran.returncode,
            reward=verdict.reward, reward_file=verdict.reward_text,
            reward_path=recipe.reward_path if verdict.reward_text is not None else None,
            error_record=None if failure is None else episode_file.error_record(failure))
        self.file.extra["verifier"] = record.to_json()
        verifier_id = f"{self.file.header['episode_id']}{VERIFIER_SUFFIX}"
        if not self.file.extra["recording"].get("snapshots"):
            self.file.write()
            if failure is not None:
                raise failure
            return verdict.reward
        try:
            folder = container.capture_snapshot(self.box.container(), self.box.image, verifier_id, step, self.out,
                                                self.box.workdir)
        except Exception as exc:  # the verifier's record stands without its snapshot
            _LOGGER.warning("counterfactual %s: no snapshot after the verifier: %s", self.file.header["episode_id"],
                            exc)
            self.file.extra.setdefault("snapshot_errors", []).append(
                {"step_index": step, "verifier": True, **episode_file.error_record(exc)})
        else:
            record = dataclasses.replace(record, **container_state.verifier_changes(
                self.out, self.file.header["episode_id"], step, folder))
            self.file.extra["verifier"] = record.to_json()
        self.file.write()
        if failure is not None:
            raise failure
        return verdict.reward

    def end(self, status: episode_file.EndStatus, exc: BaseException | None = None) -> None:
        try:
            self.settle()
        finally:
            self._pool.shutdown(wait=True)
            self.file.header["end_time"] = time.time()
            self.file.extra["end_status"] = status
            if exc is not None:
                self.file.extra["error"] = episode_file.error_record(exc)
            self.file.write()


def _save_activations(recorder: recorder_activations.CaptureRecorder | None, writer: _Writer) -> None:
    """Save the capture beside the episode (a failure is recorded; the episode itself is still written)."""
    if recorder is None:
        return
    try:
        info = recorder.save(writer.out, writer.file.header["episode_id"])
    except Exception as exc:
        _LOGGER.warning("counterfactual %s: its activations could not be saved: %s", writer.file.header["episode_id"],
                        exc)
        writer.file.extra["activations_error"] = episode_file.error_record(exc)
        return
    if info is not None:
        writer.file.extra["recording"]["activations"] = info


def _request_template(episode: model.Episode) -> dict[str, Any]:
    """The parent's recorded request but its messages: what every new request sends beside them."""
    recorded = episode.metadata.get("request")
    template = dict(recorded or {}) if isinstance(recorded, dict) else {}
    template.pop("messages", None)
    return template


_SNAPSHOTS: contextvars.ContextVar[bool] = contextvars.ContextVar("counterfactual_snapshots", default=True)


@contextlib.contextmanager
def without_snapshots() -> Iterator[None]:
    """Inside it, :func:`run` (in this thread) writes the episode file alone: no per-step snapshots, none after the
    verifier, no ``recording.snapshots`` (as the recorder writes an episode without them). A branch whose reward is
    all a search wants costs about a bare restore plus the verifier then (``branching.search(budget=Budget(
    snapshots=False))``)."""
    token = _SNAPSHOTS.set(False)
    try:
        yield
    finally:
        _SNAPSHOTS.reset(token)


def _open_writer(path: pathlib.Path, episode: model.Episode, start: float, box: sandbox.Sandbox,
                 parent: dict[str, Any], asked: dict[str, Any], snapshots: bool = True) -> _Writer:
    """The new episode's file at ``path``, ``running``: which episode and step it continues with what edit, and
    how it is recorded (this writer, the container, the model ``asked``)."""
    episode_id = path.stem
    _LOGGER.info("counterfactual %s from step %d of %s: asking %s", episode_id, parent["step"], episode.episode_id,
                 " at ".join(str(v) for v in (asked.get("model"), asked.get("endpoint")) if v) or "a client")
    return _Writer(path, episode_id, episode.task_name, start, box, {
        "end_status": episode_file.EndStatus.RUNNING,
        "counterfactual": parent,
        "recording": {"writer": f"ares-viewer {ares_viewer.__version__}", "image": box.image,
                      "workdir": box.workdir, "container": box.short_id,
                      **({"snapshots": f"snapshots/{episode_id}"} if snapshots else {}),
                      **({"model": asked} if asked else {})},
    })


def _end(writer: _Writer, recorder: recorder_activations.CaptureRecorder | None, finished: bool,
         reward: float | None) -> None:
    """Write how the new episode ended: the verifier's reward on its last step, truncated unless the model
    submitted, its activations saved."""
    if reward is not None and writer.file.last_record is not None:
        writer.file.header["total_reward"] = reward
        writer.file.replace_last_step({**writer.file.last_record, "reward": reward})
    writer.file.header["truncated"] = not finished
    _save_activations(recorder, writer)
    writer.end(episode_file.EndStatus.COMPLETED if finished else episode_file.EndStatus.TRUNCATED)


def run(
    episode: model.Episode,
    step: int,
    *,
    edit: Edit,
    client: Client,
    out_dir: str | os.PathLike | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    docker_client: Any = None,
    session: str | None = None,
    limits: Any = None,
    keep_sandbox: bool = False,
    verify: bool = True,
    activations: Any = None,
    progress: Callable[[str], None] | None = None,
    recipe: str | os.PathLike | None = None,
) -> Result:
    """Continue ``episode`` from step ``step`` with edited messages and a model client, in a restored container.

    The new episode is written as it happens: its file after every action (``end_status`` ``running`` until it
    ends), and a per-step snapshot of the container (``<out_dir>/snapshots/<episode_id>/step_NNNN/``, the
    recorder's layout) at step 0 (the restored state of the parent's step ``step``) and after every action, so its
    Files page shows what each action changed and Compare pairs its steps with the parent's by the files they
    changed.

    Args:
        episode: the parent episode (with snapshots: the container is restored from step ``step``'s).
        step: the step whose observation is edited (0: the first request).
        edit: the messages the model sees instead (a list of ``{"role", "content"}``), or a function of the
            recorded ones returning them.
        client: the model (see the module's docstring).
        out_dir: the folder the new episode file goes to (created; must not be the parent's run folder); by
            default a new folder under the cache folder's ``counterfactuals/`` (:func:`new_out_dir`).
        max_steps: at most this many actions (the episode is then truncated, as at ARES's step limit).
        docker_client, session, limits: passed to ``sandbox.restore``.
        keep_sandbox: return the live sandbox in ``Result.box`` instead of removing it.
        verify: when the model submits, run the task's verifier (``sandbox.verify``) for the reward, where the
            run records how (``sandbox.task_recipe``); the reward stays unknown otherwise. Its run is recorded under
            ``verifier`` as the recorder records one (its command, output, exit code, reward file and reward, a
            snapshot after it and the paths it changed), so the episode's ending reads it like a recorded one's.
        activations: ARES's ``ActivationCapture`` around the model the client runs (an in-process
            ``HookedTransformerLLMClient`` through :func:`ares_client`): its capture steps are saved beside the new
            episode (``<out_dir>/activations/<episode_id>/``) with the tokens of every model call, as the recorder
            saves a recorded episode's (``recorder.activations``), and the capture is emptied.
        progress: called with a line of text at each stage (the restore's, each model call, each command).
        recipe: the verifier's recipe for a run that carries none (``sandbox.task_recipe``'s ``source``).

    Raises:
        ValueError: the step has no observation (a finished episode's last step), or ``out_dir`` is the parent's
            run folder.
        LookupError, snapshots.SnapshotError, sandbox.SandboxError: from ``sandbox.restore``; nothing is written.
        CounterfactualError: the model (``ModelEndpointError``, or what the client raised), the container or the
            verifier failed after the restore: the episode is written with the actions done so far and
            ``end_status`` ``errored``, its ``error`` naming the failure; ``.result`` says where, ``__cause__`` is
            the failure. The container is removed unless ``keep_sandbox``.
    """
    plan = _plan(episode, step, edit, out_dir)
    box = sandbox.restore(episode, step, client=docker_client, session=session, limits=limits, progress=progress)
    start = time.time()
    going = _Continuation(episode, box, client, plan.template, start, progress or (lambda line: None),
                          _open_writer(plan.path, episode, start, box, plan.parent, _client_model(client),
                                       _SNAPSHOTS.get()))
    recorder = None if activations is None else recorder_activations.CaptureRecorder(activations,
                                                                                      lambda: going.action or None)
    try:
        _record(going, recorder, plan.messages, max_steps, verify=verify, recipe=recipe)
    except BaseException as exc:
        result = _abandon(going, recorder, plan, exc, keep_sandbox=keep_sandbox)
        if not isinstance(exc, Exception):
            raise
        actions = max(going.writer.file.num_steps - 1, 0)
        raise CounterfactualError(f"{exc} (after {actions} action(s); the episode so far is {result.path})",
                                  result) from exc
    finally:
        if recorder is not None:
            recorder.uninstall()
    if not keep_sandbox:
        box.remove()
    status = going.writer.file.extra["end_status"]
    return Result(str(going.writer.file.path), plan.episode_id, plan.parent, tuple(going.responses),
                  box if keep_sandbox else None, status)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a counterfactual will do, settled before any container starts: the new episode's id and file, the
    messages the model sees first, the parent's request beside them, and the link to the parent."""

    episode_id: str
    path: pathlib.Path
    messages: list[dict[str, Any]]
    template: dict[str, Any]
    parent: dict[str, Any]


def _plan(episode: model.Episode, step: int, edit: Edit, out_dir: str | os.PathLike | None) -> _Plan:
    """The first stage of :func:`run`: the step's observation edited, where the new episode goes (never the
    parent's run folder) and its link to the parent. Raises ValueError as :func:`run` says."""
    seen = episode.observation(step)
    if seen is None:
        raise ValueError(f"step {step} of {episode.episode_id} has no observation to edit: the episode ended there")
    out = new_out_dir() if out_dir is None else pathlib.Path(out_dir)
    if locations.is_local(episode.path) and out.resolve() == pathlib.Path(episode.path).resolve().parent:
        raise ValueError(f"{out} is the parent's run folder; counterfactuals go to a folder of their own")
    before = [m.to_dict() for m in seen]
    messages = list(edit(list(before))) if callable(edit) else [dict(m) for m in edit]
    template = _request_template(episode)
    episode_id = str(uuid.uuid4())
    parent = {"run_file": episode.path, "episode_id": episode.episode_id, "step": step,
              "edit": {"before": before, "after": messages}}
    return _Plan(episode_id, out / f"{episode_id}.json", messages, template, parent)


@dataclasses.dataclass
class _Continuation:
    """A counterfactual under way, once its container is restored: what each stage reads, and what they add (the
    responses, the action the model is being asked for, which the activation capture's notes name)."""

    episode: model.Episode
    box: sandbox.Sandbox
    client: Client
    template: dict[str, Any]
    start: float
    say: Callable[[str], None]
    writer: _Writer
    responses: list[str] = dataclasses.field(default_factory=list)
    action: int = 0


def _record(going: _Continuation, recorder: recorder_activations.CaptureRecorder | None,
            messages: list[dict[str, Any]], max_steps: int, *, verify: bool,
            recipe: str | os.PathLike | None) -> None:
    """The stages in the container: the first step (the edited request) and its snapshot, the actions
    (:func:`_continue`), the verifier when the model submitted, and the episode's end."""
    if recorder is not None:
        recorder.install()
        recorder.begin_episode()
    writer, episode = going.writer, going.episode
    writer.add(episode_file.step_record(0, "FIRST", _request(messages, episode.system_prompt, going.template), None,
                                        None, None, going.start))
    writer.snapshot_soon(0)  # the parent's step, restored: where the counterfactual starts from
    finished = _continue(going, messages, max_steps)
    reward = writer.verify(episode, going.action, going.say, recipe) if finished and verify else None
    _end(writer, recorder, finished, reward)


def _abandon(going: _Continuation, recorder: recorder_activations.CaptureRecorder | None, plan: _Plan,
             exc: BaseException, *, keep_sandbox: bool) -> Result:
    """The stage after a failure: the episode so far ended with the failure's status and error, its activations
    saved, the container removed unless kept (and still running); what it is as a :class:`Result`."""
    status = episode_file.status_of(exc)
    _save_activations(recorder, going.writer)
    going.writer.end(status, exc)
    kept = keep_sandbox and going.box.state() == "running"
    if not kept:
        going.box.remove()
    return Result(str(going.writer.file.path), plan.episode_id, plan.parent, tuple(going.responses),
                  going.box if kept else None, status, model.describe_error(going.writer.file.extra.get("error")))


def _continue(going: _Continuation, messages: list[dict[str, Any]], max_steps: int) -> bool:
    """Ask for and run up to ``max_steps`` actions, each written as it is done. True when the model submitted (the
    reward is the verifier's, asked by the caller). Raises what the client raises, and ``SandboxError`` when the
    container is gone."""
    writer, box, system_prompt = going.writer, going.box, going.episode.system_prompt
    messages = list(messages)
    for k in range(1, max_steps + 1):
        going.action = k
        going.say(f"Action {k} of at most {max_steps}: asking the model…")
        text = _ask(going.client, messages, system_prompt)
        going.responses.append(text)
        usage = completion.usage_of(text)
        usage = None if usage is None else {k: usage[k] for k in ("prompt_tokens", "generated_tokens")}
        action = {"data": [{"content": text}], "cost": 0.0, "usage": usage}
        parsed = agent_text.parse_response(text)
        if parsed.command is None:
            going.say(f"Action {k}: the response holds {parsed.bash_blocks} bash blocks, not one (a format error)")
            feedback = agent_text.format_error(parsed.bash_blocks)
            result = None
        else:
            going.say(f"Action {k}: running {parsed.command.splitlines()[0][:200] if parsed.command else '(empty)'}")
            writer.settle()  # the previous step's snapshot is taken before the command changes the container
            result = box.run(parsed.command)
            if agent_text.is_submit(parsed.command) and result.error is None:
                writer.file.extra["final_command"] = {
                    "step_index": k, "command": parsed.command, "returncode": result.returncode,
                    **episode_file.cut_output(result.output), "duration_s": round(result.duration_s, 3)}
                writer.add(episode_file.step_record(k, "LAST", None, action, None, 0.0, time.time()))
                writer.snapshot_soon(k)
                writer.settle()  # the state the model submitted, before the verifier changes anything
                return True
            feedback = _result_message(result)
        messages = [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": feedback}]
        writer.add(episode_file.step_record(k, "LAST" if k == max_steps else "MID",
                                            _request(messages, system_prompt, going.template), action, 0.0, 1.0,
                                            time.time()))
        writer.snapshot_soon(k)
        if result is not None and result.error is not None:
            state = box.state()
            if state != "running":
                raise sandbox.SandboxError(f"the sandbox's container is {state}: {result.error}")
    return False


def search_run(run_: Any, client: Client, **options: Any) -> Any:
    """The decisive step of many episodes of a run within one budget: ``run_search.search_run`` (its docstring;
    docs/decisive.md, "A run at once"). ``counterfactual.search_run(run, client, episodes="failed",
    budget=branching.Budget(max_rollouts=200, parallel=4))``."""
    from ares_viewer.counterfactual import run_search  # it imports this module: imported when called

    return run_search.search_run(run_, client, **options)

