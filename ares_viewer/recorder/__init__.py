"""Record episodes of ARES environments: ``{episode_id}.json`` files and a container snapshot per step.

>>> from ares_viewer.recorder import record
>>> async with record(env, "runs/my-run") as env:     # env: e.g. ARES's CodeEnvironment
...     ts = await env.reset()
...     while not ts.last():
...         ts = await env.step(await llm(ts.observation))

``record(env, out, activations=capture)`` also saves ARES's ``ActivationCapture`` beside each episode, with the
tokens of every model call (``recorder.activations``).

Needs no ARES to import (the environment is used through its methods); ARES itself needs Python >= 3.12
(``pip install 'ares-viewer[ares]'``). See docs/recording.md.
"""

from ares_viewer.recorder.episode_file import EpisodeFile, to_jsonable
from ares_viewer.recorder.offline import use_local_harbor_registry
from ares_viewer.recorder.session import RecordingEnv, record

__all__ = ["EpisodeFile", "RecordingEnv", "record", "to_jsonable", "use_local_harbor_registry"]
