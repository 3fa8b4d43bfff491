"""Counterfactual model calls: what would the model have done had it seen something else after step k?

From step ``k`` of a recorded episode: take the messages the model saw next (``Episode.observation(k)``), edit
them, ask a model client for a new response, run its command in a container restored at step ``k``
(``sandbox.restore``), and carry on with the same client for up to ``max_steps`` actions, the way ARES's default
agent does (one bash block per response; ``<returncode>``/``<output>`` back). The result is written as a new ARES
episode file linked to its parent (run file, episode, step, the edit) under ``out_dir``, a folder of its own,
never the parent's run folder (by default a new folder under ``counterfactuals/`` in the cache folder,
:func:`new_out_dir`); it opens like any episode and compares against the parent in Compare.

A client is any callable ``client(messages, system_prompt) -> str`` (or an awaitable of one): a scripted list,
an OpenAI-compatible endpoint (:func:`openai_client`; the endpoint the user configured is
``model_client.configured().client()``), or an ARES LLM client wrapped by :func:`ares_client`
(``HookedTransformerLLMClient`` in process, with ``ActivationCapture`` around the call when its activations are
wanted).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import json
import os
import pathlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ares_viewer import activations, agent_text, index_cache, model, sandbox
from ares_viewer.model_client import ModelEndpointError, openai_client

__all__ = ["DEFAULT_MAX_STEPS", "FORMAT_ERROR", "Client", "Edit", "ModelEndpointError", "Result", "ares_client",
           "new_out_dir", "openai_client", "out_root", "run"]

Client = Callable[[list[dict[str, Any]], str | None], "str | Awaitable[str]"]
Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | Sequence[dict[str, Any]]
DEFAULT_MAX_STEPS = 5
# A response without exactly one bash block gets this back, as ARES's default agent answers a format error.
FORMAT_ERROR = ("Please always provide EXACTLY ONE action in triple backticks, found {found} actions.\n"
                "If you want to end the task, please issue the following command: "
                "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`")
_SUBMIT = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")


@dataclasses.dataclass(frozen=True)
class Result:
    """A counterfactual continuation.

    Attributes:
        path: the episode file written.
        episode_id: its id.
        parent: the link to where it forked (``run_file``, ``episode_id``, ``step``, ``edit``).
        responses: the model's responses, in order.
        box: the live sandbox when ``keep_sandbox`` was asked for (the caller removes it), else None.
    """

    path: str
    episode_id: str
    parent: dict[str, Any]
    responses: tuple[str, ...]
    box: sandbox.Sandbox | None = None


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
    return answer


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


def _request(messages: list[dict[str, Any]], system_prompt: str | None, template: dict[str, Any]) -> dict[str, Any]:
    return {**template, "messages": [dict(m) for m in messages], "system_prompt": system_prompt}


def _result_message(result: sandbox.CommandResult) -> str:
    code = result.returncode if result.returncode is not None else -1
    output = result.output if result.error is None else f"{result.output}\n{result.error}".strip()
    return f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"


def _verified_reward(box: sandbox.Sandbox, episode: model.Episode) -> float | None:
    try:
        recipe = sandbox.task_recipe(episode)
    except LookupError:
        return None
    return sandbox.verify(box, recipe).reward


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
    save_activations: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Continue ``episode`` from step ``step`` with edited messages and a model client, in a restored container.

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
            run records how (``sandbox.task_recipe``); the reward stays unknown otherwise.
        save_activations: called with the folder where the new episode's activations belong
            (``<out_dir>/activations/<episode_id>/``, ``activations.linking``'s layout) once the episode is written,
            e.g. ``lambda folder: capture.get_trajectory().save(folder)`` around an in-process HookedTransformer.
        progress: called with a line of text at each stage (the restore's, each model call, each command).

    Raises:
        ValueError: the step has no observation (a finished episode's last step), or ``out_dir`` is the parent's
            run folder.
        LookupError, snapshots.SnapshotError, sandbox.SandboxError: from ``sandbox.restore``.
        ModelEndpointError (or what the client raises): the model did not answer; nothing is written and the
            container is removed.
    """
    seen = episode.observation(step)
    if seen is None:
        raise ValueError(f"step {step} of {episode.episode_id} has no observation to edit: the episode ended there")
    out = new_out_dir() if out_dir is None else pathlib.Path(out_dir)
    say = progress or (lambda line: None)
    if "://" not in episode.path and out.resolve() == pathlib.Path(episode.path).resolve().parent:
        raise ValueError(f"{out} is the parent's run folder; counterfactuals go to a folder of their own")
    before = [m.to_dict() for m in seen]
    messages = list(edit(list(before))) if callable(edit) else [dict(m) for m in edit]
    template = dict(episode.metadata.get("request") or {}) if isinstance(episode.metadata.get("request"), dict) \
        else {}
    template.pop("messages", None)
    episode_id = str(uuid.uuid4())
    parent = {"run_file": episode.path, "episode_id": episode.episode_id, "step": step,
              "edit": {"before": before, "after": messages}}
    start = time.time()
    steps: list[dict[str, Any]] = [{"step_index": 0, "step_type": "FIRST", "observation": _request(
        messages, episode.system_prompt, template), "action": None, "reward": None, "discount": None,
        "timestamp": start}]
    responses: list[str] = []
    box = sandbox.restore(episode, step, client=docker_client, session=session, limits=limits, progress=progress)
    try:
        finished = False
        for k in range(1, max_steps + 1):
            say(f"Action {k} of at most {max_steps}: asking the model…")
            text = _ask(client, messages, episode.system_prompt)
            responses.append(text)
            action = {"data": [{"content": text}], "cost": 0.0, "usage": None}
            parsed = agent_text.parse_response(text)
            if parsed.command is None:
                say(f"Action {k}: the response holds {parsed.bash_blocks} bash blocks, not one (a format error)")
                feedback = FORMAT_ERROR.format(found=parsed.bash_blocks)
            else:
                say(f"Action {k}: running {parsed.command.splitlines()[0][:200] if parsed.command else '(empty)'}")
                result = box.run(parsed.command)
                if any(marker in parsed.command for marker in _SUBMIT) and result.error is None:
                    steps.append({"step_index": k, "step_type": "LAST", "observation": None, "action": action,
                                  "reward": None, "discount": 0.0, "timestamp": time.time()})
                    finished = True
                    break
                feedback = _result_message(result)
            messages = [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": feedback}]
            steps.append({"step_index": k, "step_type": "LAST" if k == max_steps else "MID",
                          "observation": _request(messages, episode.system_prompt, template), "action": action,
                          "reward": 0.0, "discount": 1.0, "timestamp": time.time()})
        if finished and verify:
            say("The model submitted: running the task's verifier…")
        reward = _verified_reward(box, episode) if finished and verify else None
    except BaseException:
        box.remove()
        raise
    if reward is not None:
        steps[-1]["reward"] = reward
    doc = {
        "episode_id": episode_id,
        "task_name": episode.task_name,
        "start_time": start,
        "end_time": time.time(),
        "total_reward": reward,
        "num_steps": len(steps),
        "truncated": not finished,
        "steps": steps,
        "end_status": "completed" if finished else "truncated",
        "counterfactual": parent,
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{episode_id}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    tmp.replace(path)
    if not keep_sandbox:
        box.remove()
    if save_activations is not None:
        save_activations(str(out / activations.ACTIVATIONS_DIRNAME / episode_id))
    return Result(str(path), episode_id, parent, tuple(responses), box if keep_sandbox else None)
