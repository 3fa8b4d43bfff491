"""Real mini-swe-agent trajectories, written by mini-swe-agent's own code against a real Docker engine.

mini-swe-agent (PyPI ``mini-swe-agent`` 2.x) ships deterministic test models
(``minisweagent.models.test_models.DeterministicModel`` for the text protocol and
``DeterministicToolcallModel`` for tool calling): they replay scripted responses instead of calling a
provider, and everything else is the real agent (``DefaultAgent``), the real environment
(``DockerEnvironment``, ``docker exec`` into a container of our sample base image), the real
observation and format-error templates of its bundled configs, and its real trajectory writer.

Scenarios (one run folder in ``run-batch``'s layout, ``{out}/{run_id}/{instance}/{instance}.traj.json``):

- ``text-submitted``: text protocol; a listing, an edit, a failing command (rc 3), a submission.
- ``text-timeout``: text protocol; a command that exceeds the environment's timeout, a response with two
  bash blocks (a format error, raised by mini-swe-agent's own parser), then a submission.
- ``toolcall-submitted``: tool calling; two commands, then a submission.
- ``toolcall-exception``: tool calling; a command, then the model raises (the run exits with the
  exception's name).
- ``toolcall-limits``: tool calling; the step limit ends the run (``LimitsExceeded``).
- ``responses-submitted``: the Responses API (``DeterministicResponseAPIToolcallModel``, the scripted twin of
  ``LitellmResponseModel``): assistant turns are ``{"object": "response", "output": [...]}`` objects with
  ``function_call`` items, results are ``function_call_output`` items. Two model calls: the first makes two
  function calls (the setup and the fix), the second submits.
- ``toolcall-two-calls``: tool calling; one response with two tool calls, the second of which fails
  (``cat missing.txt``, rc 1), then a submission.
- ``text-two-commands``: text protocol; one response whose ``extra.actions`` holds two commands (two bash
  blocks). mini-swe-agent's own text parser (``parse_regex_actions``) accepts exactly one block per response, so
  the scripted response carries both actions as a model that parsed them would; the agent runs both and writes
  one observation message per command, as it does for every model.

Usage: ``python3 tests/producers/mini_swe_agent_runs.py OUT_DIR [--multi]`` (needs Docker and ``mini-swe-agent``;
``--multi`` writes only the last three scenarios). The kept fixtures were written by mini-swe-agent 2.4.6 in a venv
of its own: ``/path/to/venv/bin/python tests/producers/mini_swe_agent_runs.py OUT --multi``.
Containers carry the label ``ares-viewer.test=mini-swe-agent``, run without network and are removed after.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
from typing import Any

IMAGE = "ares-viewer/sample-base:1"
RUN_ID = "deterministic-run"
COMMAND_TIMEOUT = 2  # seconds; the ``text-timeout`` scenario's command sleeps longer
MODEL_SECONDS = 0.3  # simulated model latency before each response (mini-swe-agent's ``/sleep`` test action)
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cd /tmp/repo && git add -A && git diff --cached"
SETUP = ("mkdir -p /tmp/repo && cd /tmp/repo && git init -q && printf 'def add(a, b):\\n    return a - b\\n' > calc.py"
         " && git add calc.py && git -c user.email=a@b -c user.name=t commit -qm init && cat calc.py")
EDIT = "cd /tmp/repo && sed -i 's/a - b/a + b/' calc.py && python3 -c 'import calc; print(calc.add(2, 3))'"


def _stamped(base: type) -> type:
    """The deterministic model, stamping ``extra.timestamp`` when it answers, as mini-swe-agent's real models do.

    ``make_output`` stamps the time a scripted response is built; ``LitellmModel.query`` stamps the time the
    provider answered. The stamp is taken after the simulated latency, like the real one.
    """

    class Stamped(base):
        def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
            output = super().query(messages, **kwargs)
            output.setdefault("extra", {})["timestamp"] = time.time()
            return output

        def serialize(self) -> dict:
            # The scripted responses stay out of the file: a real model's config has none, and the ones that
            # raise hold exception objects, which JSON cannot hold.
            return {"info": {"config": {"model": self.config.model_dump(mode="json", exclude={"outputs"}),
                                        "model_type": f"{base.__module__}.{base.__name__}"}}}

    Stamped.__name__ = base.__name__
    Stamped.__qualname__ = base.__qualname__
    return Stamped


def _text_output(thought: str, command: str, cost: float = 0.01) -> list[dict]:
    from minisweagent.models.test_models import make_output

    latency = make_output("", [{"command": f"/sleep {MODEL_SECONDS}"}])
    content = f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```"
    return [latency, make_output(content, [{"command": command}], cost=cost)]


def _tool_output(n: int, thought: str, command: str) -> list[dict]:
    from minisweagent.models.test_models import make_output, make_toolcall_output

    call_id = f"call_{n}"
    call = {"id": call_id, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
    latency = make_output("", [{"command": f"/sleep {MODEL_SECONDS}"}])
    out = make_toolcall_output(thought, [call], [{"command": command, "tool_call_id": call_id}])
    out["extra"]["cost"] = 0.02
    return [latency, out]


def _tool_calls(n: int, thought: str, commands: list[str]) -> list[dict]:
    """One tool-calling response making a tool call per command (ids ``call_{n}a``, ``call_{n}b``, ...)."""
    from minisweagent.models.test_models import make_output, make_toolcall_output

    ids = [f"call_{n}{chr(ord('a') + i)}" for i in range(len(commands))]
    calls = [{"id": i, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": c})}}
             for i, c in zip(ids, commands, strict=True)]
    latency = make_output("", [{"command": f"/sleep {MODEL_SECONDS}"}])
    out = make_toolcall_output(thought, calls, [{"command": c, "tool_call_id": i} for i, c in zip(ids, commands,
                                                                                                   strict=True)])
    out["extra"]["cost"] = 0.02
    return [latency, out]


def _text_commands(thought: str, commands: list[str]) -> list[dict]:
    """One text-protocol response with a bash block per command, its ``extra.actions`` holding every command."""
    from minisweagent.models.test_models import make_output

    blocks = "\n\n".join(f"```mswea_bash_command\n{c}\n```" for c in commands)
    latency = make_output("", [{"command": f"/sleep {MODEL_SECONDS}"}])
    return [latency, make_output(f"THOUGHT: {thought}\n\n{blocks}", [{"command": c} for c in commands], cost=0.01)]


def _response_output(n: int, thought: str, commands: list[str], tokens: tuple[int, int]) -> list[dict]:
    """One Responses API response (``make_response_api_output``'s shape, with the arguments JSON-encoded and the
    ``id``, ``created_at``, ``status`` and ``usage`` a real response's ``model_dump()`` holds)."""
    from minisweagent.models.test_models import make_output, make_response_api_output

    ids = [f"fc_{n}{chr(ord('a') + i)}" for i in range(len(commands))]
    actions = [{"command": c, "tool_call_id": i} for i, c in zip(ids, commands, strict=True)]
    out = make_response_api_output(thought, actions)
    for item in out["output"]:
        if item["type"] == "function_call":
            item["arguments"] = json.dumps({"command": next(a["command"] for a in actions
                                                            if a["tool_call_id"] == item["call_id"])})
    out = {"id": f"resp_{n}", "object": "response", "created_at": int(time.time()), "model": "deterministic",
           "status": "completed", **out,
           "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1], "total_tokens": sum(tokens)}}
    out["extra"]["cost"] = 0.03
    latency = make_output("", [{"command": f"/sleep {MODEL_SECONDS}"}])
    return [latency, out]


def _format_error(content: str, template: str) -> dict:
    """A scripted response that mini-swe-agent's own text parser rejects (the error it raises is replayed)."""
    from minisweagent.exceptions import FormatError
    from minisweagent.models.test_models import make_output
    from minisweagent.models.utils.actions_text import parse_regex_actions

    try:
        parse_regex_actions(content, action_regex=r"```mswea_bash_command\s*\n(.*?)\n```",
                            format_error_template=template)
    except FormatError as exc:
        exc.messages[0]["extra"]["cost"] = 0.01
        return make_output(content, [{"raise": exc}])
    raise AssertionError("the parser accepted a response with two actions")


def _config(name: str) -> dict[str, Any]:
    import yaml
    from minisweagent.config import get_config_path

    return yaml.safe_load(get_config_path(name).read_text())


def _run(out: pathlib.Path, instance: str, *, toolcall: bool, outputs: list[dict], step_limit: int = 0,
         responses: bool = False) -> pathlib.Path:
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.docker import DockerEnvironment
    from minisweagent.models.test_models import (
        DeterministicModel,
        DeterministicResponseAPIToolcallModel,
        DeterministicToolcallModel,
    )

    config = _config("mini.yaml" if toolcall else "mini_textbased.yaml")
    model_class = _stamped(DeterministicResponseAPIToolcallModel if responses else
                           DeterministicToolcallModel if toolcall else DeterministicModel)
    model = model_class(outputs=outputs, observation_template=config["model"]["observation_template"],
                        cost_per_call=0.01)
    env = DockerEnvironment(
        image=IMAGE, cwd="/testbed", timeout=COMMAND_TIMEOUT,
        env={**config["environment"]["env"], "PYTHONDONTWRITEBYTECODE": "1"},
        run_args=["--rm", "--network", "none", "--memory", "512m", "--pids-limit", "256",
                  "--label", "ares-viewer.test=mini-swe-agent"],
        container_timeout="10m",
    )
    path = out / RUN_ID / instance / f"{instance}.traj.json"
    agent = DefaultAgent(model, env, system_template=config["agent"]["system_template"],
                         instance_template=config["agent"]["instance_template"], step_limit=step_limit,
                         cost_limit=0, max_consecutive_format_errors=3, output_path=path)
    try:
        agent.run("Fix calc.add: it subtracts instead of adding.")
    except Exception:  # the exception scenario: mini-swe-agent saved the trajectory, then re-raised
        pass
    finally:
        # Removed at once (``env.cleanup`` stops it in the background, which takes ``docker stop``'s 10 s).
        subprocess.run([env.config.executable, "rm", "-f", env.container_id], capture_output=True, check=False)
        env.container_id = None
    return path


def generate(out: pathlib.Path) -> dict[str, pathlib.Path]:
    """Write every scenario's trajectory under ``out``; scenario name -> file."""
    from minisweagent.models.test_models import make_output

    text_template = _config("mini_textbased.yaml")["model"]["format_error_template"]
    written = {}
    written["text-submitted"] = _run(out, "text-submitted", toolcall=False, outputs=[
        *_text_output("Look at the code first.", SETUP),
        *_text_output("Fix the operator.", EDIT),
        *_text_output("Check that nothing else is broken.", "cd /tmp/repo && python3 -c 'import sys; sys.exit(3)'"),
        *_text_output("Submit.", SUBMIT),
    ])
    written["text-timeout"] = _run(out, "text-timeout", toolcall=False, outputs=[
        *_text_output("Install something slow.", f"sleep {COMMAND_TIMEOUT + 3}; echo done"),
        _format_error("Two at once:\n\n```mswea_bash_command\nls\n```\n\n```mswea_bash_command\npwd\n```",
                      text_template),
        *_text_output("Set up and submit.", SETUP),
        *_text_output("Submit.", SUBMIT),
    ])
    written["toolcall-submitted"] = _run(out, "toolcall-submitted", toolcall=True, outputs=[
        *_tool_output(1, "Look at the code first.", SETUP),
        *_tool_output(2, "Fix the operator.", EDIT),
        *_tool_output(3, "Submit.", SUBMIT),
    ])
    written["toolcall-exception"] = _run(out, "toolcall-exception", toolcall=True, outputs=[
        *_tool_output(1, "Look around.", "ls -la /testbed; uname -s"),
        make_output("", [{"raise": RuntimeError("provider connection reset")}]),
    ])
    written["toolcall-limits"] = _run(out, "toolcall-limits", toolcall=True, step_limit=2, outputs=[
        *_tool_output(1, "Look around.", "pwd"),
        *_tool_output(2, "Keep looking.", "ls /"),
        *_tool_output(3, "Never runs.", "true"),
    ])
    written.update(generate_multi(out))
    return written


def generate_multi(out: pathlib.Path) -> dict[str, pathlib.Path]:
    """The scenarios of several actions in one model call, and the Responses API's; scenario name -> file."""
    written = {}
    written["responses-submitted"] = _run(out, "responses-submitted", toolcall=True, responses=True, outputs=[
        *_response_output(1, "Set up, then fix the operator.", [SETUP, EDIT], (1200, 80)),
        *_response_output(2, "Submit.", [SUBMIT], (1500, 20)),
    ])
    written["toolcall-two-calls"] = _run(out, "toolcall-two-calls", toolcall=True, outputs=[
        *_tool_calls(1, "Set up and read the notes.", [SETUP, "cd /tmp/repo && cat missing.txt"]),
        *_tool_calls(2, "Fix the operator.", [EDIT]),
        *_tool_output(3, "Submit.", SUBMIT),
    ])
    written["text-two-commands"] = _run(out, "text-two-commands", toolcall=False, outputs=[
        *_text_commands("Set up and read the notes.", [SETUP, "cd /tmp/repo && cat missing.txt"]),
        *_text_output("Fix the operator.", EDIT),
        *_text_output("Submit.", SUBMIT),
    ])
    return written


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--multi"]):
        sys.exit(__doc__.rsplit("Usage: ", 1)[1].split("\n")[0])
    produce = generate_multi if sys.argv[2:] == ["--multi"] else generate
    for name, file in produce(pathlib.Path(sys.argv[1])).items():
        print(f"{name}: {file}")
