"""A real mini-swe-agent trajectory of an episode that died on a model API timeout at its first call.

mini-swe-agent's own ``DefaultAgent`` with its own ``LitellmModel`` (litellm, a real HTTP client) asks a model endpoint
on 127.0.0.1 whose connections never complete; litellm raises its ``Timeout`` ("Connection timed out") after
``TIMEOUT`` seconds, mini-swe-agent saves the trajectory (``exit_status`` the exception's name, the traceback in the
exit message's ``extra``) and re-raises. No action runs (``LocalEnvironment``, never used), no token is spent.
Retries are off so it takes one call.

Usage: ``python tests/producers/mini_swe_agent_model_timeout.py OUT_DIR`` in an environment with ``mini-swe-agent``
(it writes ``OUT_DIR/model-timeout-run/model-timeout/model-timeout.traj.json``).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import sys
import time

RUN_ID = "model-timeout-run"
INSTANCE = "model-timeout"
TIMEOUT = 2.0  # seconds litellm waits for the endpoint
# A provider litellm calls through its own HTTP client, which words a timeout "Connection timed out after N seconds."
MODEL = "anthropic/claude-3-5-haiku-20241022"


def _unreachable_endpoint() -> tuple[list[socket.socket], int]:
    """A model endpoint whose connections never complete: a listening socket that never accepts, its backlog filled
    first, so the kernel drops further connection attempts and the client's connect times out."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    held = [server]
    for _ in range(4):  # fill the accept queue
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        held.append(filler)
    time.sleep(0.2)
    return held, port


def generate(out: pathlib.Path) -> pathlib.Path:
    os.environ["MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"] = "1"  # one call, as a run that gave up would make
    os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import get_config_path
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel

    config = yaml.safe_load(get_config_path("mini.yaml").read_text())
    held, port = _unreachable_endpoint()
    model = LitellmModel(model_name=MODEL, model_kwargs={
        "api_base": f"http://127.0.0.1:{port}", "api_key": "not-a-key", "timeout": TIMEOUT, "max_retries": 0},
        observation_template=config["model"]["observation_template"])
    path = out / RUN_ID / INSTANCE / f"{INSTANCE}.traj.json"
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(out)), system_template=config["agent"]["system_template"],
                         instance_template=config["agent"]["instance_template"], step_limit=5, cost_limit=0,
                         output_path=path)
    try:
        agent.run("Fix calc.add: it subtracts instead of adding.")
    except Exception:  # mini-swe-agent saved the trajectory, then re-raised the model's error
        pass
    finally:
        for sock in held:
            sock.close()
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.rsplit("Usage: ", 1)[1].split("\n")[0])
    print(generate(pathlib.Path(sys.argv[1])))
