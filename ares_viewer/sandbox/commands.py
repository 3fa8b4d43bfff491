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

from ares_viewer.container.capture import CaptureError
from ares_viewer.container.engine import ENGINE_HINT, EngineError, docker_errors
from ares_viewer.container.limits import ResourceLimits
from ares_viewer.container.streams import HeadTail, StreamTimeoutError, exec_frames

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
    descends from it, or was orphaned while it ran (see ``_WRAPPER``).

    The output is read as it comes: the first and last ``limits.command_output_bytes / 2`` bytes are kept and
    the bytes between only counted, so an endless stream costs bounded memory.
    """
    limits = limits or ResourceLimits()
    seconds = max(1, math.ceil(timeout_s))
    # stderr joins stdout at the source: the engine reads two pipes concurrently, so kept apart, their lines
    # could interleave in any order and identical runs would differ. The wrapper's own stderr carries only its
    # start sentinel and how many processes it killed.
    argv = ["bash", "-c", _WRAPPER, "ares-viewer", str(seconds), command, "-lc" if login else "-c"]
    began = time.monotonic()
    wall_start = time.time()
    limit_s = seconds + 5 + _SWEEP_GRACE_S + ENGINE_GRACE_S
    output = HeadTail(limits.command_output_bytes)
    status = HeadTail(4096)
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = _exec(client, container_id, argv, workdir, environment, began + limit_s, output,
                                     status)
        except BaseException as exc:  # reported to the caller below, whatever it is
            outcome["error"] = exc

    worker = threading.Thread(target=call, name=f"sandbox-exec-{container_id[:12]}", daemon=True)
    worker.start()
    worker.join(limit_s + 1)
    duration = round(time.monotonic() - began, 3)
    if worker.is_alive() or isinstance(outcome.get("error"), StreamTimeoutError):
        return CommandResult(None, _decode(output), duration, error=(
            f"the Docker engine did not answer within {limit_s:.0f} s; the call was abandoned ({ENGINE_HINT})"))
    if "error" in outcome:
        return CommandResult(None, _decode(output), duration,
                             error=describe_failure(client, container_id, outcome["error"]))
    returncode = outcome["value"]
    text = _decode(output)
    said = b"".join(status.parts()).decode("utf-8", "replace")
    started = _STARTED in said
    killed = int(match.group(1)) if (match := _KILLED_RE.search(said)) else 0
    if not started or (_KILLED_RE.search(said) is None and "fork" in said):
        # The engine could not start the wrapper, or the wrapper could not start the command: the container
        # cannot run commands any more (processes that escaped the sweep hold every slot, or it is stopping).
        return CommandResult(returncode, text, duration, error=_cannot_run(
            client, container_id, returncode, said.replace(_STARTED, "").strip() or text, limits))
    if returncode in (124, 137) and duration >= seconds - 0.05:
        return CommandResult(returncode, text, duration, timed_out=True, killed_leftovers=killed,
                             error=f"timed out after {seconds} s; the command and its children were killed")
    if returncode == 137 and _oom_since(client, container_id, wall_start):
        return CommandResult(returncode, text, duration, killed_leftovers=killed, error=(
            "killed by the kernel: the container ran out of memory (raise the sandbox's memory limit to retry)"))
    return CommandResult(returncode, text, duration, killed_leftovers=killed)


# The wrapper notes every process running in the container and when it started (a reused PID is a new process),
# runs the command under ``timeout``, then stops every process that was not running before and is this
# command's: its chain of parents leads to the wrapper, or to PID 1 (orphaned: a parent that exited, ``setsid``,
# ``nohup``, a double fork), whatever it did to its environment. Processes of another exec (parent 0) and new
# children of processes that were running before (a server the container runs) are left alone. Stopping goes in
# rounds until nothing new is found (so a fork bomb cannot outrun it), then everything stopped is killed. Only
# shell builtins run after the command: no fork is needed, so the sweep works even when the command used up the
# process limit. The engine's init (PID 1, see ``ResourceLimits.run_options``) reaps what was killed.
_WRAPPER = r"""
seconds="$1"; command="$2"; flag="$3"
printf 'ares-viewer:started\n' >&2
declare -A before parent started stopped
look() {  # parent[pid] and started[pid] of every live process now (zombies left out)
    parent=(); started=()
    local dir stat fields
    for dir in /proc/[0-9]*; do
        read -r stat 2>/dev/null < "$dir/stat" || continue
        set -f; fields=(${stat##*) }); set +f
        [ "${fields[0]}" = Z ] && continue
        parent[${dir#/proc/}]="${fields[1]}"; started[${dir#/proc/}]="${fields[19]}"
    done
}
look
for pid in "${!started[@]}"; do before[$pid]="${started[$pid]}"; done
timeout -k 5 "$seconds" bash -c 'exec bash "$2" "$1" 2>&1' bash "$command" "$flag"
rc=$?
for ((round = 0; round < 100; round++)); do
    look
    found=0
    for pid in "${!started[@]}"; do
        [ "$pid" = "$$" ] || [ -n "${stopped[$pid]}" ] || [ "${before[$pid]}" = "${started[$pid]}" ] && continue
        up="${parent[$pid]}"
        for ((hops = 0; hops < 4096; hops++)); do
            [ -z "$up" ] || [ "$up" = "$$" ] || [ "$up" = 1 ] || [ "$up" = 0 ] && break
            [ -n "${before[$up]}" ] && [ "${before[$up]}" = "${started[$up]}" ] && break
            up="${parent[$up]}"
        done
        if [ "$up" = "$$" ] || [ "$up" = 1 ]; then
            kill -STOP "$pid" 2>/dev/null && stopped[$pid]=1 && found=1
        fi
    done
    [ "$found" = 0 ] && break
done
for pid in "${!stopped[@]}"; do kill -KILL "$pid" 2>/dev/null; done
printf 'ares-viewer:killed %d\n' "${#stopped[@]}" >&2
exit "$rc"
"""
_STARTED = "ares-viewer:started"
_KILLED_RE = re.compile(r"ares-viewer:killed (\d+)")
# How long the sweep after a command may take, on top of the command's timeout.
_SWEEP_GRACE_S = 10.0


def _decode(output: HeadTail) -> str:
    head, tail = output.parts()
    if not output.dropped:
        return (head + tail).decode("utf-8", errors="replace")
    # Kept bounded for the caller's memory (the agent saw 10,000 characters).
    return (head.decode("utf-8", errors="replace") + f"\n[... {output.dropped} more bytes not kept ...]\n"
            + tail.decode("utf-8", errors="replace"))


def _exec(
    client: Any, container_id: str, argv: list[str], workdir: str, environment: Mapping[str, str] | None,
    deadline: float, output: HeadTail, status: HeadTail,
) -> int:
    api = client.api
    # The output may pause as long as the command's timeout, longer than the client's own timeout allows.
    exec_id, frames = exec_frames(api, container_id, argv, deadline=deadline, workdir=workdir,
                                  environment=dict(environment or {}))
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
    try:
        attrs = client.api.inspect_container(container_id)
    except Exception:  # the engine failed again: go by its message
        attrs = {"State": {"Running": True}, "HostConfig": {}}
    state = attrs.get("State") or {}
    if not state.get("Running"):
        if state.get("OOMKilled"):
            return "the container ran out of memory and was killed (OOM); restore the step again"
        return (f"the container is not running (it {state.get('Status', 'stopped')} with exit code "
                f"{state.get('ExitCode')}); restore the step again")
    said = text.strip().splitlines()[-1][:300] if text.strip() else "no message"
    hint = ""
    if "resource temporarily unavailable" in text.lower() or "fork" in text.lower():
        pids = (attrs.get("HostConfig") or {}).get("PidsLimit") or limits.pids_limit
        hint = (f" it has reached its process limit ({pids}): processes that are no command's (the container's "
                "own, or started outside the sandbox's commands) hold every slot;")
    return (f"the container could not start the command (exit code {returncode}: {said});{hint} "
            "restore the step again")


def describe_failure(client: Any, container_id: str, exc: BaseException) -> str:
    if isinstance(exc, CaptureError):  # a limit or a refusal while reading the container: already in words
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

