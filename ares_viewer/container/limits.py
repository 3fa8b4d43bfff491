"""The resource limits and lock-down of every container ares-viewer starts, and the bounds on what it reads back
from one: one set of them, here (their defaults and variables are declared in ``base.settings``).

Each figure can be changed for a whole process with an environment variable (read when a ``ResourceLimits`` is
made, so a test or a notebook may set it late), or for one call by passing ``limits=ResourceLimits(...)``
(``dataclasses.replace(ResourceLimits(), pids_limit=64)``). ``docs/sandbox.md`` lists them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ares_viewer.base import settings

GIB = settings.GIB

# Field name -> the setting (``base.settings``) that holds its default; each is read when a ``ResourceLimits`` is made.
SETTINGS: dict[str, settings.Setting[Any]] = {
    "mem_limit": settings.MEM_LIMIT,
    "nano_cpus": settings.NANO_CPUS,
    "pids_limit": settings.PIDS_LIMIT,
    "command_output_bytes": settings.COMMAND_OUTPUT_BYTES,
    "capture_timeout_s": settings.CAPTURE_TIMEOUT_S,
    "capture_max_bytes": settings.CAPTURE_MAX_BYTES,
    "restore_timeout_s": settings.RESTORE_TIMEOUT_S,
    "restore_max_bytes": settings.RESTORE_MAX_BYTES,
    "engine_timeout_s": settings.ENGINE_TIMEOUT_S,
}
# Field name -> the environment variable that overrides its default.
ENVIRONMENT = {field: setting.name for field, setting in SETTINGS.items()}


def _default(name: str) -> Any:
    return dataclasses.field(default_factory=SETTINGS[name].get)


@dataclasses.dataclass(frozen=True)
class ResourceLimits:
    """What a container ares-viewer starts may use, and how much ares-viewer reads back from one.

    Every restore, sandbox and probe starts from these defaults; each has an environment variable
    (``ENVIRONMENT``, declared in ``base.settings``) that changes it for the whole process.

    Attributes:
        mem_limit: Memory limit in the engine's notation. 1 GiB fits a test suite of a typical task repository
            (the recorded agents ran their commands under the same); swap is held to the same figure, so running
            out of memory is a visible kill, not a slow crawl.
        nano_cpus: CPU limit in billionths of a CPU: one CPU, so a runaway command cannot starve the machine.
        pids_limit: At most this many processes: enough for a test run with workers, stops a fork bomb (what a
            command leaves running is killed when it ends, so the room comes back).
        command_output_bytes: A command's output kept: this many bytes in all, the first half and the last half;
            the bytes between are counted, never held (the agent saw 10,000 characters).
        capture_timeout_s: Wall-clock limit of one read out of a container (a capture's listing, an archive).
        capture_max_bytes: At most this many bytes read out of a container by one such read (spooled to disk,
            not memory, as it comes).
        restore_timeout_s: Wall-clock limit of putting a snapshot's files into a new container; past it the
            container is removed and the restore fails.
        restore_max_bytes: At most this many bytes of file content one restore writes into a container (a
            blob referenced by N paths counts N times), checked before anything is read.
        engine_timeout_s: How long the client waits for the engine to answer one call.
    """

    mem_limit: str = _default("mem_limit")
    nano_cpus: int = _default("nano_cpus")
    pids_limit: int = _default("pids_limit")
    command_output_bytes: int = _default("command_output_bytes")
    capture_timeout_s: float = _default("capture_timeout_s")
    capture_max_bytes: int = _default("capture_max_bytes")
    restore_timeout_s: float = _default("restore_timeout_s")
    restore_max_bytes: int = _default("restore_max_bytes")
    engine_timeout_s: float = _default("engine_timeout_s")

    def run_options(self) -> dict[str, Any]:
        """The ``containers.run`` keyword arguments for these limits: never privileged, without new privileges,
        and with the engine's init as PID 1 (it reaps what commands leave behind, so killed processes free
        their slots under ``pids_limit``)."""
        return {
            "mem_limit": self.mem_limit,
            "memswap_limit": self.mem_limit,
            "nano_cpus": self.nano_cpus,
            "pids_limit": self.pids_limit,
            "privileged": False,
            "security_opt": ["no-new-privileges"],
            "init": True,
        }
