"""Activations captured beside an episode's steps (ARES's ``TrajectoryActivations``), read without trusting them.

    from ares_viewer import activations
    from ares_viewer.activations import views, figures

    linked = activations.find(episode)          # <run>/activations/<episode_id>/, an attached folder, or None
    capture = linked.capture                     # lazy: nothing is read yet
    views.step_summary(capture, 3)               # layers x hooks norms at trajectory step 3
    views.attention_entropy(capture, 3)          # layers x heads
    views.across_steps(capture, "hook_resid_post")   # steps x layers
    capture.array(2, "blocks.0.attn.hook_pattern")   # numpy, capture step 2 = trajectory step 3

Modules: ``ptfile`` (the restricted ``.pt`` reader: no arbitrary unpickling, bounded), ``step_file`` (one step's
file; torch's ``weights_only`` loader when torch is installed), ``capture`` (a saved folder), ``linking``
(where a capture lives beside its episode, and the step mapping), ``views`` (summaries as numpy/pandas),
``tokens`` (per-token logprobs formats record), ``prompt`` (a call's prompt tokens, whether the client clipped it,
where its messages begin), ``tokenizer`` (the capture's tokenizer, loaded offline), ``clipping`` (whether a prompt was
clipped and which end, with or without a tokenizer), ``model_input`` (what the model ran on, for exports),
``attached`` (capture folders attached to episodes, kept in the cache folder), ``figures`` (plotly and HTML).
"""

from __future__ import annotations

from ares_viewer.activations.capture import Capture, CaptureError, Error, is_capture
from ares_viewer.activations.linking import ACTIVATIONS_DIRNAME, Linked, find, folder_for, link, looked_in
from ares_viewer.activations.ptfile import PtFileError, UnsafeFileError
from ares_viewer.activations.step_file import torch_available

__all__ = ["ACTIVATIONS_DIRNAME", "Capture", "CaptureError", "Error", "Linked", "PtFileError", "UnsafeFileError",
           "find", "folder_for", "is_capture", "link", "looked_in", "torch_available"]
