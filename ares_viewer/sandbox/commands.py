"""Running a command in a sandbox the way ARES runs an agent's command, with every failure put into words."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from ares_viewer.container.capture import ContainerFilesError
from ares_viewer.container.engine import ENGINE_HINT, EngineError, docker_errors
from ares_viewer.container.limits import ResourceLimits
from ares_viewer.container.streams import HeadTail, StreamTimeoutError, exec_frames
from ares_viewer.sandbox import _sweep as sweep

_LOGGER = logging.getLogger(__name__)

# The one error sandbox callers catch: the engine's (unreachable, image missing) and the sandbox's own.
SandboxError = EngineError

# What the recorded agent ran under (sample_runs/generate.py and ARES's mini-swe-agent environment).
COMMAND_TIMEOUT_S = 60
ARES_ENVIRONMENT: Mapping[str, str] = {
    "PAGER": "cat",
    "MANPAGER": "cat",
    "LESS": "-R",
    "PIP_PROGRESS_BAR": "off",
    "TQDM_DISABLE": "1",
}
# Past a command's own timeout, how long the engine may take to answer before the call is given up.
ENGINE_GRACE_S = 10.0


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What one command did in a sandbox.

    Attributes:
        returncode: The exit code (None when the command could not run, see ``error``).
        output: stdout and stderr as the agent saw them (interleaved, decoded as UTF-8 with replacement).
        duration_s: Wall time of the call.
        timed_out: True when the timeout killed the command (its process group gets SIGTERM, then SIGKILL).
        error: Why the command did not run to completion (timeout, out of memory, container gone, engine
            unreachable, a container that cannot start processes any more), in words a user can act on; None
            when it ran.
        killed_leftovers: How many processes the command left running (in the background, in a new session)
            were killed when it ended.
    """

    returncode: int | None
    output: str
    duration_s: float
    timed_out: bool = False
    error: str | None = None
    killed_leftovers: int = 0

    @property
    def ok(self) -> bool:
        """True when the command ran to completion (whatever its exit code)."""
        return self.error is None



def run_command(
    client: Any,
    container_id: str,
    command: str,
    *,
    workdir: str,
    timeout_s: float = COMMAND_TIMEOUT_S,
    environment: Mapping[str, str] | None = None,
    limits: ResourceLimits | None = None,
    login: bool = True,
) -> CommandResult:
    """Run ``bash -lc command`` in a container under ``timeout_s``; every failure becomes ``CommandResult.error``.

    With ``login=False`` the command runs as ``bash -c``: no profile (``/etc/profile``, ``~/.profile``) is read.

    The timeout is enforced twice: coreutils ``timeout`` inside the container signals the command's whole
    process group (TERM, then KILL 5 s later), and the call itself is abandoned when the engine has not
    answered ``ENGINE_GRACE_S`` after that, so a hung engine cannot hang the caller. When the command ends,
    every process it started and left running (in the background, in a new session, with a cleared
    environment, a fork bomb) is stopped and killed: every process that was not running before the command and
    descends from it, or was orphaned while it ran (see ``sweep``). The wrapper sweeps, then this process sweeps
    again from a separate exec, so a command that kills or stops its wrapper leaves nothing behind either, and
    its result says so (``error``).

    The output is read as it comes: the first and last ``limits.command_output_bytes / 2`` bytes are kept and
    the bytes between only counted, so an endless stream costs bounded memory.
    """
    limits = limits or ResourceLimits()
    seconds = max(1, math.ceil(timeout_s))
    # stderr joins stdout at the source: the engine reads two pipes concurrently, so kept apart, their lines
    # could interleave in any order and identical runs would differ. The wrapper's own stderr carries only what
    # it says about itself (see ``sweep``).
    argv = ["bash", "-c", sweep.WRAPPER, "ares-viewer", str(seconds), command, "-lc" if login else "-c"]
    began = time.monotonic()
    wall_start = time.time()
    # The wrapper ends by then (``timeout``'s TERM, KILL 5 s later, then its own sweep); past it, it is stuck.
    due = began + seconds + 5 + _WRAPPER_GRACE_S
    limit_s = seconds + 5 + _WRAPPER_GRACE_S + sweep.SWEEP_GRACE_S + ENGINE_GRACE_S
    output = HeadTail(limits.command_output_bytes)
    status = HeadTail(_STATUS_BYTES)
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = _exec(client, container_id, argv, workdir, environment, began + limit_s, output,
                                     status, outcome)
        except BaseException as exc:  # reported to the caller below, whatever it is
            outcome["error"] = exc

    worker = threading.Thread(target=call, name=f"sandbox-exec-{container_id[:12]}", daemon=True)
    worker.start()
    overdue = _wait(client, worker, outcome, due)
    said = sweep.intro(status.parts()[0])
    swept = sweep.from_outside(client, container_id, said) if said is not None else None
    worker.join(max(0.0, began + limit_s + 1 - time.monotonic()) if swept is None else ENGINE_GRACE_S)
    duration = round(time.monotonic() - began, 3)
    text = _decode(output)
    outside = swept.killed if swept is not None else 0
    if swept is not None and swept.wrapper == "T":
        return CommandResult(None, text, duration, killed_leftovers=outside, error=(
            "the command stopped its wrapper (SIGSTOP to the process that runs it and cleans up after it): the "
            f"wrapper, the command and what it left running ({outside} processes) were killed from outside"))
    if swept is not None and overdue and swept.wrapper != "gone":
        return CommandResult(None, text, duration, killed_leftovers=outside, error=(
            f"the command's wrapper did not end within {due - began:.0f} s (its state: {swept.wrapper}): it "
            f"and what the command left running ({outside} processes) were killed from outside"))
    if worker.is_alive() or isinstance(outcome.get("error"), StreamTimeoutError):
        return CommandResult(None, text, duration, killed_leftovers=outside, error=(
            f"the Docker engine did not answer within {limit_s:.0f} s; the call was abandoned ({ENGINE_HINT})"))
    if "error" in outcome:
        return CommandResult(None, text, duration, killed_leftovers=outside,
                             error=describe_failure(client, container_id, outcome["error"]))
    returncode = outcome["value"]
    wrapper_said = b"".join(status.parts()).decode("utf-8", "replace")
    swept_inside = sweep.KILLED_RE.search(wrapper_said)
    killed = (int(swept_inside.group(1)) if swept_inside else 0) + outside
    if said is None or (swept_inside is None and "fork" in wrapper_said):
        # The engine could not start the wrapper, or the wrapper could not start the command: the container
        # cannot run commands any more (processes that escaped the sweep hold every slot, or it is stopping).
        return CommandResult(returncode, text, duration, error=_cannot_run(
            client, container_id, returncode, _without_intro(wrapper_said) or text, limits))
    if swept_inside is None:  # the wrapper died before its own clean-up
        if returncode == 137 and _oom_since(client, container_id, wall_start):
            return CommandResult(returncode, text, duration, killed_leftovers=killed, error=_OUT_OF_MEMORY)
        gone = _not_running(client, container_id)
        return CommandResult(returncode, text, duration, killed_leftovers=killed, error=gone or (
            f"the command killed its wrapper (the process that runs it and cleans up after it; exit code "
            f"{returncode}): its output may be cut short; what it left running ({outside} processes) was killed "
            "from outside"))
    if returncode in (124, 137) and duration >= seconds - 0.05:
        return CommandResult(returncode, text, duration, timed_out=True, killed_leftovers=killed,
                             error=f"timed out after {seconds} s; the command and its children were killed")
    if returncode == 137 and _oom_since(client, container_id, wall_start):
        return CommandResult(returncode, text, duration, killed_leftovers=killed, error=_OUT_OF_MEMORY)
    return CommandResult(returncode, text, duration, killed_leftovers=killed)


_OUT_OF_MEMORY = "killed by the kernel: the container ran out of memory (raise the sandbox's memory limit to retry)"
# How long past ``timeout``'s own KILL the wrapper may take to sweep and end before it counts as stuck.
_WRAPPER_GRACE_S = 5.0
# The wrapper's stderr kept: its first words list every process running before the command (pid:start each).
_STATUS_BYTES = 1 << 20
# The wrapper's own lines on its stderr (bash's errors there start with its $0, "ares-viewer:", too).
_MARKER_RE = re.compile(r"ares-viewer:(started|before|killed)\b")
# How often a running command's exec is looked at (has its wrapper gone while the output stays open?).
_POLL_S = 1.0


def _wait(client: Any, worker: threading.Thread, outcome: dict[str, Any], due: float) -> bool:
    """Wait for the command's exec to end; stop waiting early when its wrapper is gone (a leftover keeps the output
    open). True when it was still running at ``due``."""
    while worker.is_alive():
        left = due - time.monotonic()
        if left <= 0:
            return True
        worker.join(min(_POLL_S, left))
        exec_id = outcome.get("exec_id")
        if worker.is_alive() and exec_id is not None:
            try:
                if not client.api.exec_inspect(exec_id).get("Running", True):
                    return False
            except Exception as exc:  # the engine did not answer this look: keep waiting for the exec itself
                _LOGGER.debug("exec inspect of %s failed: %s", exec_id[:12], exc)
    return False


def _without_intro(said: str) -> str:
    lines = [line for line in said.splitlines() if not _MARKER_RE.match(line)]
    return "\n".join(lines).strip()


def _decode(output: HeadTail) -> str:
    head, tail = output.parts()
    if not output.dropped:
        return (head + tail).decode("utf-8", errors="replace")
    # Kept bounded for the caller's memory (the agent saw 10,000 characters).
    return (head.decode("utf-8", errors="replace") + f"\n[... {output.dropped} more bytes not kept ...]\n"
            + tail.decode("utf-8", errors="replace"))


def _exec(
    client: Any, container_id: str, argv: list[str], workdir: str, environment: Mapping[str, str] | None,
    deadline: float, output: HeadTail, status: HeadTail, outcome: dict[str, Any],
) -> int:
    api = client.api
    # The output may pause as long as the command's timeout, longer than the client's own timeout allows.
    exec_id, frames = exec_frames(api, container_id, argv, deadline=deadline, workdir=workdir,
                                  environment=dict(environment or {}))
    outcome["exec_id"] = exec_id
    for stdout, stderr in frames:
        if stdout:
            output.write(stdout)
        if stderr:
            status.write(stderr)
    code = api.exec_inspect(exec_id).get("ExitCode")
    if code is None:
        raise SandboxError("the engine reported no exit code")
    return int(code)


def _cannot_run(client: Any, container_id: str, returncode: int | None, text: str, limits: ResourceLimits) -> str:
    """Why a container could not start a command (the engine's exit code 125-127, or the wrapper's 254)."""
    attrs = _inspect(client, container_id)
    gone = _not_running(client, container_id, attrs)
    if gone is not None:
        return gone
    said = text.strip().splitlines()[-1][:300] if text.strip() else "no message"
    hint = ""
    pids = (attrs.get("HostConfig") or {}).get("PidsLimit") or limits.pids_limit
    if ("resource temporarily unavailable" in text.lower() or "fork" in text.lower()
            or _processes(client, container_id) >= pids):
        hint = (f" it has reached its process limit ({pids}): processes that are no command's (the container's "
                "own, or started outside the sandbox's commands) hold every slot;")
    return (f"the container could not start the command (exit code {returncode}: {said});{hint} "
            "restore the step again")


def _inspect(client: Any, container_id: str) -> dict[str, Any]:
    try:
        return client.api.inspect_container(container_id)
    except Exception:  # the engine failed again: go by what is known
        return {"State": {"Running": True}, "HostConfig": {}}


def _not_running(client: Any, container_id: str, attrs: dict[str, Any] | None = None) -> str | None:
    """Why the container is not running, in words (None when it runs, or the engine cannot tell)."""
    state = (attrs or _inspect(client, container_id)).get("State") or {}
    if state.get("Running"):
        return None
    if state.get("OOMKilled"):
        return "the container ran out of memory and was killed (OOM); restore the step again"
    return (f"the container is not running (it {state.get('Status', 'stopped')} with exit code "
            f"{state.get('ExitCode')}); restore the step again")


def _processes(client: Any, container_id: str) -> int:
    """How many processes the container holds (the engine's one-shot stats; 0 when it cannot say)."""
    try:
        stats = client.api.stats(container_id, stream=False, one_shot=True)
        return int((stats.get("pids_stats") or {}).get("current") or 0)
    except Exception as exc:  # an older engine, or none: the hint is left out
        _LOGGER.debug("stats of %s failed: %s", container_id[:12], exc)
        return 0


def describe_failure(client: Any, container_id: str, exc: BaseException) -> str:
    if isinstance(exc, ContainerFilesError):  # a limit or a refusal while reading the container: already in words
        return str(exc)
    errors = docker_errors()
    if isinstance(exc, errors.NotFound):
        return f"the container {container_id[:12]} is gone (removed)"
    if isinstance(exc, errors.APIError):
        try:
            state = client.api.inspect_container(container_id)["State"]
        except Exception:  # the engine failed again: report the first error
            state = None
        if state is not None and not state.get("Running"):
            if state.get("OOMKilled"):
                return "the container ran out of memory and was killed (OOM)"
            return (f"the container is not running (it {state.get('Status', 'stopped')} with exit code "
                    f"{state.get('ExitCode')}): it was stopped or killed; restore the step again")
        return f"the engine refused the command ({exc})"
    name = type(exc).__name__
    if "Timeout" in name:
        return f"the Docker engine did not answer in time ({name}); {ENGINE_HINT}"
    if isinstance(exc, (errors.DockerException, OSError)) or "Connection" in name:
        return f"the Docker engine is unreachable ({name}: {exc}); {ENGINE_HINT}"
    return f"the command could not run ({name}: {exc})"


def _oom_since(client: Any, container_id: str, since: float) -> bool:
    """Whether the engine reported an out-of-memory kill in the container since ``since`` (unix time)."""
    try:
        events = client.events(since=int(since), until=int(time.time()) + 1, decode=True,
                               filters={"container": container_id, "event": "oom"})
        return any(True for _ in events)
    except Exception as exc:  # no events API: report the plain exit code rather than guess
        _LOGGER.debug("oom lookup for %s failed: %s", container_id[:12], exc)
        return False

