"""A sandbox: one recorded step restored into a real, locked-down container that commands can run in.

:func:`restore` opens the step's snapshot (either kind), reads and checks every byte to restore before the
engine is contacted, compares a whole-filesystem copy with its image first (``container.as_changes``), and
starts a container of the base image with the step's changes and deletions applied: no network unless asked,
``container.ResourceLimits``, never privileged, no host mounts, and labels naming the project, the episode,
the step, the owning session and the creation time (``registry`` finds them all). Nothing is ever written
into the run folder: live states are captured by this process (``container.capture_live``; content spooled
to a temporary file).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ares_viewer import container, snapshots
from ares_viewer.container import labels as container_labels
from ares_viewer.sandbox import registry
from ares_viewer.sandbox.commands import (
    ARES_ENVIRONMENT,
    COMMAND_TIMEOUT_S,
    CommandResult,
    SandboxError,
    run_command,
)

if TYPE_CHECKING:
    from ares_viewer import model

_LOGGER = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Sandbox:
    """A live container restored from one step of an episode. Remove it with :meth:`remove` (or ``with``).

    Attributes:
        container_id: The container's full id.
        episode_id: The episode it was restored from.
        step: The step whose snapshot it was restored from.
        session: The owner's session id (a label on the container).
        image: The base image.
        workdir: Where commands run.
        created_at: Unix time of the restore.
        network: Whether the container has a network.
        episode_path: The episode file.
        client: The ``docker.DockerClient`` that talks to its engine.
    """

    container_id: str
    episode_id: str
    step: int
    session: str
    image: str
    workdir: str
    created_at: float
    network: bool
    episode_path: str
    client: Any = dataclasses.field(repr=False, compare=False)

    @property
    def short_id(self) -> str:
        return self.container_id[:12]

    def container(self) -> Any:
        """The docker SDK's container object (raises ``docker.errors.NotFound`` once removed)."""
        return self.client.containers.get(self.container_id)

    def run(
        self, command: str, *, timeout_s: float = COMMAND_TIMEOUT_S, environment: Mapping[str, str] | None = None
    ) -> CommandResult:
        """Run ``command`` the way ARES runs an agent's command: ``bash -lc`` in :attr:`workdir`, under a timeout.

        Never raises for a failing command, a timeout or an engine that went away: see ``CommandResult.error``.
        """
        registry.touch(self.container_id)
        return run_command(
            self.client, self.container_id, command, workdir=self.workdir, timeout_s=timeout_s,
            environment=ARES_ENVIRONMENT if environment is None else environment,
        )

    def state(self) -> str:
        """The container's state (``running``, ``exited``, ...), ``removed`` when gone, ``unreachable`` when the
        engine does not answer."""
        try:
            return self.client.api.inspect_container(self.container_id)["State"]["Status"]
        except container.docker_errors().NotFound:
            return "removed"
        except Exception as exc:  # the engine or the connection to it failed: say so, do not raise
            _LOGGER.debug("inspect of %s failed: %s", self.short_id, exc)
            return "unreachable"

    def capture(self, recorded: snapshots.Restorable) -> snapshots.Restorable:
        """The container's filesystem now (its changed files' content in a temporary file), comparable with
        ``recorded`` (a step of its episode).

        The first capture of a sandbox this process did not restore reads the engine's change list; after that
        (and from a restore on) a ``container.ChangeTracker`` reads only what changed since the previous look.
        """
        registry.touch(self.container_id)
        tracker = registry.tracker(self.container_id)
        if tracker is not None:
            return tracker.snapshot(recorded)
        live = self.container()
        state = container.capture_live(live, recorded)
        registry.follow(live, state)
        return state

    def remove(self) -> None:
        """Stop and remove the container (nothing happens when it is already gone)."""
        registry.forget_container(self.container_id)
        errors = container.docker_errors()
        try:
            self.client.api.remove_container(self.container_id, force=True)
        except errors.NotFound:
            pass
        except errors.APIError as exc:
            if exc.status_code != 409 or "in progress" not in str(exc.explanation or ""):
                raise  # a removal already under way (a cleanup elsewhere) is as good as this one

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()



def new_session() -> str:
    """A fresh session id for labelling the containers one user (or one app session) owns."""
    return uuid.uuid4().hex[:16]


def restore(
    episode: model.Episode,
    step: int,
    *,
    client: Any = None,
    network: bool = False,
    session: str | None = None,
    limits: container.ResourceLimits | None = None,
    mem_limit: str | None = None,
    nano_cpus: int | None = None,
    pids_limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Sandbox:
    """Restore step ``step`` of ``episode`` into a new, live container.

    The snapshot is opened and every byte to restore is read and validated first: a snapshot with traversal
    paths, links or device files is refused before anything reaches the engine.

    Args:
        episode: An episode with recorded snapshots.
        step: The step whose state to restore (0 = what the agent first saw; k = after action k). Its snapshot
            may be a per-step one or an episode-boundary one (a whole-filesystem copy: it is compared with its
            image first, and restored as the changes found).
        client: A ``docker.DockerClient``; one from the environment when omitted.
        network: Give the container a network (bridge). Off by default: the agent's commands are untrusted.
        session: The owner's session id, labelled on the container (a fresh one when omitted).
        limits: Resource limits (``container.ResourceLimits()``, documented there, when omitted).
        mem_limit, nano_cpus, pids_limit: Override one of ``limits``.
        progress: Called with a line of text as each stage starts (the app shows them).

    Raises:
        LookupError: When the episode has no snapshot for ``step``.
        snapshots.SnapshotError: When the snapshot is unsafe or corrupt.
        SandboxError: When the engine is unreachable or the base image is missing (with how to fix either).
    """
    say = progress or (lambda _line: None)
    overrides: dict[str, Any] = {"mem_limit": mem_limit, "nano_cpus": nano_cpus, "pids_limit": pids_limit}
    limits = dataclasses.replace(limits or container.ResourceLimits(),
                                 **{name: value for name, value in overrides.items() if value is not None})
    say(f"Reading the snapshot of step {step}")
    snapshot = snapshots.for_step(episode, step)
    # Every byte to restore read and checked (and the total held to the budget) before the engine is contacted.
    snapshot.check_restorable(max_bytes=limits.restore_max_bytes)
    say("Connecting to the Docker engine")
    client = container.connect(client, timeout=limits.engine_timeout_s)
    container.require_image(client, snapshot.base_image)
    snapshot = container.as_changes(client, snapshot, progress=say)
    session = session or new_session()
    created = time.time()
    labels = {
        container_labels.LABEL_PROJECT: "1",
        container_labels.LABEL_ROLE: registry.ROLE,
        container_labels.LABEL_EPISODE: episode.episode_id,
        container_labels.LABEL_STEP: str(step),
        container_labels.LABEL_SESSION: session,
        container_labels.LABEL_CREATED: f"{created:.3f}",
        container_labels.LABEL_SOURCE: str(episode.path)[:1000],
    }
    say(f"Starting a container of {snapshot.base_image} and applying the recorded changes")
    try:
        live = container.restore_container(
            client,
            snapshot,
            labels=labels,
            network_mode="bridge" if network else "none",
            working_dir=snapshot.workdir,
            volumes={},
            limits=limits,
        )
    except (container.ContainerFilesError, snapshots.SnapshotError):
        raise
    except Exception as exc:
        raise SandboxError(f"the engine could not start the sandbox ({type(exc).__name__}: {exc})") from exc
    registry.touch(live.id, created)
    registry.follow(live, snapshot)
    say(f"Container {live.short_id} is ready")
    return Sandbox(
        container_id=live.id,
        episode_id=episode.episode_id,
        step=step,
        session=session,
        image=snapshot.base_image,
        workdir=snapshot.workdir,
        created_at=created,
        network=network,
        episode_path=str(episode.path),
        client=client,
    )
