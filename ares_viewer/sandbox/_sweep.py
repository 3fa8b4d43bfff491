"""The command wrapper, and the clean-up after a command that runs where the command cannot stop it.

Every sandbox command runs under :data:`WRAPPER`: it notes every process running in the container and when it
started (a reused PID is a new process), says so on its stderr before the command starts (the command cannot
change what was already sent), runs the command under ``timeout``, then sweeps. The sweep stops every process
that was not running before and is the command's: its chain of parents leads to the wrapper, or to PID 1
(orphaned: a parent that exited, ``setsid``, ``nohup``, a double fork), whatever it did to its environment.
Processes of another exec (parent 0) and new children of processes that were running before (a server the
container runs) are left alone. Stopping goes in rounds until nothing new is found (so a fork bomb cannot outrun
it), then everything stopped is killed. Only shell builtins run after the command: the sweep needs no free
process slot. The engine's init (PID 1, see ``ResourceLimits.run_options``) reaps what was killed.

The command runs as root beside its wrapper, so it can kill or stop it. So the same sweep runs again from
outside (:func:`from_outside`): a separate exec this process starts once the command's exec has ended, its
wrapper has died, or its time is up, given what the wrapper said before the command started. That sweep kills the
wrapper too when it is still there (stopped, say), and says in what state it found it.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

from ares_viewer.container.streams import HeadTail, exec_frames

# How long a sweep from outside may take before it is given up.
SWEEP_GRACE_S = 10.0

_FUNCTIONS = r"""
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
sweep() {  # stops, then kills, every process new since `before` whose parents lead to $1 or to PID 1
    local root="$1" round found pid up hops
    for ((round = 0; round < 100; round++)); do
        look
        found=0
        for pid in "${!started[@]}"; do
            [ "$pid" = "$$" ] || [ -n "${stopped[$pid]}" ] || [ "${before[$pid]}" = "${started[$pid]}" ] && continue
            up="${parent[$pid]}"
            for ((hops = 0; hops < 4096; hops++)); do
                [ -z "$up" ] || [ "$up" = "$root" ] || [ "$up" = 1 ] || [ "$up" = 0 ] && break
                [ -n "${before[$up]}" ] && [ "${before[$up]}" = "${started[$up]}" ] && break
                up="${parent[$up]}"
            done
            if [ "$up" = "$root" ] || [ "$up" = 1 ]; then
                kill -STOP "$pid" 2>/dev/null && stopped[$pid]=1 && found=1
            fi
        done
        [ "$found" = 0 ] && break
    done
    for pid in "${!stopped[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    printf 'ares-viewer:killed %d\n' "${#stopped[@]}" >&2
}
"""

# argv: seconds, command, the shell's flag (-lc or -c).
WRAPPER = (
    _FUNCTIONS
    + r"""
seconds="$1"; command="$2"; flag="$3"
look
for pid in "${!started[@]}"; do before[$pid]="${started[$pid]}"; done
list=""; for pid in "${!before[@]}"; do list+=" $pid:${before[$pid]}"; done
printf 'ares-viewer:started %s %s\nares-viewer:before%s\n' "$$" "${before[$$]}" "$list" >&2
timeout -k 5 "$seconds" bash -c 'exec bash "$2" "$1" 2>&1' bash "$command" "$flag"
rc=$?
sweep "$$"
exit "$rc"
"""
)

# argv: the wrapper's pid and start time, then pid:start of every process running before the command.
_OUTSIDE = (
    _FUNCTIONS
    + r"""
root="$1"; root_start="$2"; shift 2
for pair in "$@"; do before[${pair%%:*}]="${pair#*:}"; done
look
state=gone
if [ "${started[$root]}" = "$root_start" ]; then
    read -r stat 2>/dev/null < "/proc/$root/stat" && { set -f; fields=(${stat##*) }); set +f; state="${fields[0]}"; }
    kill -KILL "$root" 2>/dev/null  # its children are orphans now: the sweep finds them through PID 1
fi
printf 'ares-viewer:wrapper %s\n' "$state" >&2
sweep "$root"
"""
)

_INTRO_RE = re.compile(rb"ares-viewer:started (\d+) (\d+)\nares-viewer:before((?: \d+:\d+)*)\n")
KILLED_RE = re.compile(r"ares-viewer:killed (\d+)")
_WRAPPER_RE = re.compile(r"ares-viewer:wrapper (\S+)")


@dataclasses.dataclass(frozen=True)
class Intro:
    """What the wrapper said before the command started: its pid and start time, the processes running then."""

    pid: int
    start: int
    before: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Swept:
    """What a sweep from outside did: how many of the command's processes it killed, and the wrapper's state when
    it came (``gone``; ``T`` stopped; another ``/proc`` state letter: still running, killed then)."""

    killed: int
    wrapper: str


def intro(status: bytes) -> Intro | None:
    """The wrapper's first words on its stderr (None before they are complete, or when it never started)."""
    found = _INTRO_RE.search(status)
    if found is None:
        return None
    return Intro(int(found.group(1)), int(found.group(2)), tuple(found.group(3).decode().split()))


def from_outside(client: Any, container_id: str, said: Intro) -> Swept | None:
    """Sweep the command's processes from a separate exec (None when the engine or the container cannot run it)."""
    argv = ["bash", "-c", _OUTSIDE, "ares-viewer", str(said.pid), str(said.start), *said.before]
    output = HeadTail(4096)
    try:
        _, frames = exec_frames(client.api, container_id, argv, deadline=time.monotonic() + SWEEP_GRACE_S)
        for stdout, stderr in frames:
            for data in (stdout, stderr):
                if data:
                    output.write(data)
    except Exception:  # the engine or the container failed: the caller reports the command's own outcome
        return None
    text = b"".join(output.parts()).decode("utf-8", "replace")
    killed, wrapper = KILLED_RE.search(text), _WRAPPER_RE.search(text)
    if killed is None or wrapper is None:
        return None
    return Swept(int(killed.group(1)), wrapper.group(1))
