"""Record ARES's ``ActivationCapture`` beside the episodes: one capture folder per episode, with the tokens.

``record(env, out_dir, activations=capture)`` hands the recorder an ``ares.contrib.mech_interp.ActivationCapture``
(usually ``automatic_activation_capture(model)``: a capture step per ``model.generate`` call, as ARES's
``HookedTransformerLLMClient`` makes one per request). For every model call the recorder notes what ARES does
not: the tokens the model ran on and the ones it produced, and the model's log-probability of each produced
token. When an episode ends, its capture steps are saved with ``TrajectoryActivations.save`` to
``<out_dir>/activations/<episode_id>/`` (``ares_viewer.activations.linking``'s layout), the notes merged into
``step_metadata``, and the capture is emptied (``capture.clear()``) so that memory holds one episode at a time.

``step_metadata[i]`` (capture step ``i``, the model call whose response is the action of trajectory step
``i + 1``) then holds, besides whatever the caller recorded itself:

- ``step``: the trajectory step whose action the call produced (``i + 1``);
- ``token_ids``: the sequence the model ran on, from its first position: the prompt (after the client's
  truncation) and then the tokens it generated;
- ``tokens``: the same as text, one string per token (``tokenizer.decode`` of each id);
- ``prompt_length``: how many of them are the prompt; the rest is the response;
- ``logprobs``: per response token, its log-probability under the model's logits (before temperature, top-k or
  top-p), from the forward pass that produced it;
- ``n_ctx`` and ``max_new_tokens``: the model's context window and the call's generation budget (ARES's client
  cuts the prompt from the left to ``n_ctx - max_new_tokens`` tokens: ``ares_viewer.activations.prompt`` tells
  from them whether it did);
- ``tokenizer``: the model tokenizer's ``name_or_path`` when it is a folder on this machine, so that the viewer
  can decode the ids offline (``ares_viewer.activations.tokenizer``).

Torch, TransformerLens and ARES are never imported: the model, its tensors and the capture are used through
their methods, as the environment is.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import shutil
from collections.abc import Callable
from typing import Any

from ares_viewer.activations import linking
from ares_viewer.base import atomic

_LOGGER = logging.getLogger(__name__)

# The keys the recorder writes into step_metadata (they replace the caller's keys of the same name).
KEYS = ("step", "token_ids", "tokens", "prompt_length", "logprobs", "n_ctx", "max_new_tokens", "tokenizer")


def _token_row(tensor: Any) -> list[int] | None:
    """The ids of a ``[1, n]`` integer tensor (one sequence of tokens), else None (text, embeddings, a batch)."""
    shape = getattr(tensor, "shape", None)
    dtype = getattr(tensor, "dtype", None)
    if shape is None or len(shape) != 2 or shape[0] != 1 or getattr(dtype, "is_floating_point", True):
        return None
    return [int(i) for i in tensor[0].tolist()]


class _Scorer:
    """The log-probability of each token ``generate`` samples, read from its forward passes as they run.

    A pre-hook on the token embedding sees each pass's input, whose last token is the one the previous pass
    sampled; a hook on the unembedding keeps the last position's log-softmax of the current pass. One
    vocabulary row is held at a time. Plain PyTorch module hooks: TransformerLens's own hooks (the capture's)
    are left alone.
    """

    def __init__(self, model: Any) -> None:
        self.logprobs: list[float] = []
        self._row: Any = None
        self._handles: list[Any] = []
        embed, unembed = getattr(model, "embed", None), getattr(model, "unembed", None)
        if embed is not None and unembed is not None:
            self._handles = [embed.register_forward_pre_hook(self._on_input),
                             unembed.register_forward_hook(self._on_logits)]

    def _on_input(self, _module: Any, args: tuple[Any, ...]) -> None:
        tokens: Any = args[0] if args else None  # a torch tensor of token ids
        if self._row is not None and getattr(tokens, "ndim", 0) == 2:
            self.logprobs.append(float(self._row[int(tokens[0, -1])]))
            self._row = None

    def _on_logits(self, _module: Any, _args: Any, logits: Any) -> None:
        if getattr(logits, "ndim", 0) == 3 and logits.shape[0] == 1:
            self._row = logits[0, -1].detach().float().log_softmax(-1).cpu()

    def finish(self, last_token: int) -> list[float]:
        """The logprobs of every generated token (the last one's row was never fed back in)."""
        for handle in self._handles:
            handle.remove()
        if self._row is not None:
            self.logprobs.append(float(self._row[last_token]))
            self._row = None
        return self.logprobs


class CaptureRecorder:
    """Notes the tokens of every model call an ``ActivationCapture`` watches, and saves each episode's capture.

    Args:
        capture: ARES's ``ActivationCapture`` (its ``model`` is the ``HookedTransformer`` the client runs).
        trajectory_step: returns the trajectory step the current model call answers (None outside an episode).
    """

    def __init__(self, capture: Any, trajectory_step: Callable[[], int | None]) -> None:
        self.capture = capture
        self.model = capture.model
        self._trajectory_step = trajectory_step
        self._calls: list[dict[str, Any]] = []  # the current episode's model calls, in order
        self._first = 0  # capture steps taken before the current episode began
        self._first_meta = 0  # and step_metadata entries the caller recorded before it
        self._generate: Any = None
        self._own_attribute = False

    def install(self) -> None:
        """Wrap the model's ``generate`` (around any wrapper ARES's ``automatic_activation_capture`` put there)."""
        if self._generate is not None:
            return
        self._own_attribute = "generate" in vars(self.model)  # ARES's automatic capture sets one
        original = self._generate = self.model.generate

        def generate(*args: Any, **kwargs: Any) -> Any:
            return self._recorded_call(original, args, kwargs)

        vars(generate)["__wrapped__"] = original  # what inspect.unwrap and the restore find
        self.model.generate = generate

    def uninstall(self) -> None:
        """Give the model its ``generate`` back."""
        if self._generate is not None:
            if getattr(self.model.generate, "__wrapped__", None) is self._generate:
                if self._own_attribute:
                    self.model.generate = self._generate
                else:
                    del self.model.generate  # the class's method again
            self._generate = None

    def begin_episode(self) -> None:
        self._calls = []
        self._first = len(self.capture.step_activations)
        self._first_meta = len(self.capture.step_metadata)

    def _recorded_call(self, original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        prompt = _token_row(args[0] if args else kwargs.get("input"))
        scorer = _Scorer(self.model) if prompt is not None else None
        try:
            output = original(*args, **kwargs)
        except BaseException:
            if scorer is not None:
                scorer.finish(0)
            raise
        note: dict[str, Any] = {"step": self._trajectory_step(), **self._limits(kwargs)}
        sequence = _token_row(output) if prompt is not None else None
        if scorer is not None:
            logprobs = scorer.finish(sequence[-1] if sequence else 0)
            if sequence is not None and prompt is not None and sequence[: len(prompt)] == prompt:
                note.update(token_ids=sequence, tokens=self._strings(sequence), prompt_length=len(prompt))
                if len(logprobs) == len(sequence) - len(prompt):
                    note["logprobs"] = logprobs
        self._calls.append(note)
        return output

    def _limits(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The context window, the call's generation budget and the tokenizer's folder, where known."""
        n_ctx = getattr(getattr(self.model, "cfg", None), "n_ctx", None)
        budget = kwargs.get("max_new_tokens")
        path = getattr(getattr(self.model, "tokenizer", None), "name_or_path", None)
        return {"n_ctx": n_ctx if isinstance(n_ctx, int) else None,
                "max_new_tokens": budget if isinstance(budget, int) else None,
                "tokenizer": os.path.abspath(path) if isinstance(path, str) and path and os.path.isdir(path) else None}

    def _strings(self, ids: list[int]) -> list[str] | None:
        tokenizer = getattr(self.model, "tokenizer", None)
        if tokenizer is None:
            return None
        return list(tokenizer.batch_decode([[i] for i in ids], clean_up_tokenization_spaces=False))

    def save(self, out_dir: pathlib.Path, episode_id: str) -> dict[str, Any] | None:
        """Save the episode's capture steps to ``<out_dir>/activations/<episode_id>/`` and empty the capture.

        Returns what the episode file records about it (``None`` when the episode made no captured call). The
        folder appears whole: ARES writes it under a temporary name, renamed when complete.
        """
        steps = list(self.capture.step_activations[self._first:])
        own = list(self.capture.step_metadata[self._first_meta:])
        calls, self._calls = self._calls, []
        if not steps:
            self.capture.clear()
            return None
        metadata = []
        for i in range(len(steps)):
            entry = dict(own[i]) if i < len(own) and isinstance(own[i], dict) else {}
            entry["step"] = i + 1
            if i < len(calls):
                entry.update({k: v for k, v in calls[i].items() if v is not None})
            metadata.append(entry)
        trajectory = dataclasses.replace(self.capture.get_trajectory(), step_activations=steps,
                                         step_metadata=metadata)
        relative = pathlib.PurePosixPath(linking.ACTIVATIONS_DIRNAME, episode_id)
        folder = out_dir / relative
        atomic.sweep(folder.parent)
        staging = atomic.staging(folder)
        shutil.rmtree(staging, ignore_errors=True)
        try:
            trajectory.save(staging)
            atomic.replace_dir(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            self.capture.clear()
        info: dict[str, Any] = {"folder": relative.as_posix(), "model_name": trajectory.model_name,
                                "steps": len(steps), "model_calls": len(calls)}
        if len(calls) != len(steps):
            info["warning"] = (f"{len(calls)} model calls but {len(steps)} capture steps: the tokens may not "
                               "belong to the capture steps they are saved with")
            _LOGGER.warning("episode %s: %s", episode_id, info["warning"])
        return info
