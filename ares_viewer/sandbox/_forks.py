"""Forking at a step: other commands instead of the recorded next one, and the verifier's verdict on the result."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import pathlib
import posixpath
import re
import tarfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ares_viewer import fsdiff, snapshots
from ares_viewer.base import jsondecode
from ares_viewer.container.streams import archive_to_file
from ares_viewer.formats.sidecars import harbor_task
from ares_viewer.sandbox import verifier
from ares_viewer.sandbox._box import Sandbox
from ares_viewer.sandbox.commands import COMMAND_TIMEOUT_S, CommandResult, SandboxError, describe_failure
from ares_viewer.sandbox.replays import compare_filesystem, join_notes, recorded_state

if TYPE_CHECKING:
    from ares_viewer import model

_LOGGER = logging.getLogger(__name__)

_MAX_REWARD_BYTES = 4096
_MAX_REWARD_ARCHIVE_BYTES = 1024 * 1024
_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


@dataclasses.dataclass(frozen=True)
class TaskRecipe:
    """How to verify a task again (``tasks/<task>/task.json`` beside the run's episode files)."""

    task_name: str
    folder: str
    workdir: str
    verifier_command: str
    reward_path: str
    verifier_from: str | None
    verifier_to: str | None
    base_image: str | None = None
    setup_from: str | None = None
    setup_to: str | None = None
    setup_command: str | None = None

    def task_paths(self) -> list[str]:
        """The work folder's paths that are the task's: the top-level names of the project the setup copies in
        (``setup.copy``), where it puts them; the whole work folder when the recipe copies no project."""
        if not self.setup_from or not self.setup_to:
            return [posixpath.normpath(self.workdir)]
        source = _inside(self.folder, self.setup_from)
        return [posixpath.join(posixpath.normpath(self.setup_to), path.name) for path in sorted(source.iterdir())
                if not path.is_symlink()]


@dataclasses.dataclass(frozen=True)
class VerifierResult:
    """The verifier's verdict on a sandbox's state: the reward it wrote, and what it printed.

    Attributes:
        reward: the reward read from the reward file (None when there is none, see ``error``).
        result: the verifier command's run (its output and exit code).
        error: why there is no reward, in words.
        reward_text: the reward file's text as read (None when it could not be read).
    """

    reward: float | None
    result: CommandResult
    error: str | None = None
    reward_text: str | None = None


@dataclasses.dataclass(frozen=True)
class ForkResult:
    """What running other commands at step k would have done.

    Attributes:
        step: The step the fork starts from (the sandbox's step).
        commands: The commands run instead of the recorded step k+1's.
        results: Each command's result.
        compared_with: The recorded step the filesystem is compared with (k+1, or None when not recorded).
        fs: Filesystem diff recorded step ``compared_with`` -> the fork's state.
        file_diffs: Content diffs of the first differing files.
        verifier: The verifier's verdict on the fork's state (None when not run).
        recorded_reward: The reward the recorded episode earned.
    """

    step: int
    commands: tuple[str, ...]
    results: tuple[CommandResult, ...]
    compared_with: int | None
    fs: fsdiff.FsDiff | None = dataclasses.field(default=None, repr=False)
    file_diffs: tuple[fsdiff.FileDiff, ...] = dataclasses.field(default=(), repr=False)
    verifier: VerifierResult | None = None
    recorded_reward: float | None = None
    note: str | None = None

    @property
    def reward(self) -> float | None:
        return self.verifier.reward if self.verifier is not None else None


def task_recipe(episode: model.Episode, source: str | os.PathLike[str] | None = None) -> TaskRecipe:
    """The task's recipe: ``tasks/<task_name>/task.json`` beside the episode file, or ``source`` when given.

    ``source`` points a run that carries no recipe (mini-swe-agent, SWE-bench) at one: a recipe file
    (``task.json``), a folder holding one, or a harbor task folder (``tests/test.sh``: verified as ARES verifies
    it, ``formats.sidecars.harbor_task``, in the image the episode ran on).

    Raises:
        LookupError: When there is no recipe for the task, or it is unusable (the message names the file and why).
    """
    name = episode.task_name or ""
    if not _SAFE_NAME_RE.match(name) or name in {".", ".."}:
        if source is None:
            raise LookupError(f"task name {name!r} cannot name a task folder")
        name = "task"
    if source is not None:
        path = pathlib.Path(source).expanduser()
        if path.is_dir() and not (path / "task.json").is_file():
            if not harbor_task.is_task_folder(path):
                raise LookupError(f"{path} is neither a recipe (task.json) nor a harbor task folder (tests/test.sh)")
            recording = episode.metadata.get("recording")
            workdir = recording.get("workdir") if isinstance(recording, dict) else None
            return _recipe_of(harbor_task.recipe(name, None, workdir or _WORKDIR), path, path / "tests", name)
        path = path / "task.json" if path.is_dir() else path
        folder = path.parent
    else:
        folder = pathlib.Path(episode.path).parent / "tasks" / name
        path = folder / "task.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        hint = "" if source is not None else "; point at one (a harbor task folder or a task.json)"
        raise LookupError(f"no verifier recipe for task {name}: {path} does not exist{hint}") from exc
    except (OSError, ValueError) as exc:
        raise LookupError(f"{path} is unreadable ({exc})") from exc
    return _recipe_of(data, folder, path, name)


_WORKDIR = "/testbed"


def _recipe_of(data: Any, folder: pathlib.Path, path: pathlib.Path, name: str) -> TaskRecipe:
    verifier = data.get("verifier") if isinstance(data, dict) else None
    if not isinstance(verifier, dict) or not isinstance(verifier.get("command"), str):
        raise LookupError(f"{path} has no verifier command")
    copy_spec = jsondecode.object_at(verifier, "copy")
    setup = jsondecode.object_at(data, "setup")
    setup_copy = jsondecode.object_at(setup, "copy")
    reward_path = verifier.get("reward_path") or "/logs/verifier/reward.txt"
    workdir = data.get("workdir") or _WORKDIR
    to, setup_to = copy_spec.get("to"), setup_copy.get("to")
    for label, value in (("reward_path", reward_path), ("verifier copy target", to), ("workdir", workdir),
                         ("setup copy target", setup_to)):
        if value is not None and not (isinstance(value, str) and value.startswith("/")
                                      and ".." not in value.split("/")):
            raise LookupError(f"{path}: {label} {value!r} is not a clean absolute path")
    strings = {key: value if isinstance(value, str) and value else None for key, value in (
        ("base_image", data.get("base_image")), ("setup_from", setup_copy.get("from")),
        ("setup_command", setup.get("command")))}
    return TaskRecipe(
        task_name=name,
        folder=str(folder),
        workdir=workdir,
        verifier_command=verifier["command"],
        reward_path=reward_path,
        verifier_from=copy_spec.get("from"),
        verifier_to=to,
        setup_to=setup_to,
        **strings,
    )


def _inside(folder: str, relative: str) -> pathlib.Path:
    """``folder/relative``, a folder inside ``folder`` (links resolved).

    Raises:
        LookupError: When it is not a folder inside ``folder``.
    """
    root = pathlib.Path(folder).resolve()
    source = (root / relative).resolve()
    if not source.is_relative_to(root) or not source.is_dir():
        raise LookupError(f"{relative!r} is not a folder inside {root}")
    return source


def _recipe_archive(recipe: TaskRecipe, relative: str | None, to: str | None) -> bytes | None:
    """The recipe's folder ``relative`` as a tar named relative to ``/`` for ``to`` (regular files and folders
    only, never outside the recipe's folder)."""
    if not relative or not to:
        return None
    source = _inside(recipe.folder, relative)
    target = posixpath.normpath(to).lstrip("/")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(source.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                continue  # links and special files in a recipe folder are never copied into a sandbox
            name = posixpath.join(target, path.relative_to(source).as_posix())
            info = tarfile.TarInfo(name)
            info.mtime = int(path.stat().st_mtime)
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                data = path.read_bytes()
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def verify(sandbox: Sandbox, recipe: TaskRecipe, *, timeout_s: float = 300) -> VerifierResult:
    """Run the task's verifier on the sandbox's state and read the reward it writes.

    It runs in a fresh container of the task's image (``recipe.base_image``, else the sandbox's), never in the
    sandbox: that container gets the task's project as its setup copies it and runs its setup command; then the
    task's paths (``TaskRecipe.task_paths``) are replaced by the sandbox's versions, the hidden tests are put in
    from the run's ``tasks/`` folder, and the recipe's command runs there as ``bash -c`` (no login shell) with a
    fixed environment (``verifier.ENVIRONMENT``). The reward is read by this process from that container after
    the command ended (its image's reward file, if any, removed first). Nothing else of the sandbox (its
    interpreter, profiles, installed packages, other files) reaches the verifier. The container is removed
    after; the verifier's logs (the reward file's folder) are then copied into the sandbox, as a recorded
    verifier leaves them.
    """
    project = _recipe_archive(recipe, recipe.setup_from, recipe.setup_to)
    tests = _recipe_archive(recipe, recipe.verifier_from, recipe.verifier_to)
    task_paths = recipe.task_paths()
    client, image = sandbox.client, recipe.base_image or sandbox.image
    try:
        with verifier.fresh_container(client, image, episode_id=sandbox.episode_id, session=sandbox.session,
                                      step=sandbox.step) as live:
            if project is not None and not live.put_archive("/", project):
                raise SandboxError("the engine refused the task's project files")
            if recipe.setup_command:
                setup = verifier.run(client, live, recipe.setup_command, timeout_s=timeout_s, workdir=recipe.workdir)
                if setup.error or setup.returncode != 0:
                    return VerifierResult(None, setup, error=(
                        f"the task's setup failed in the verifier's container: {setup.error or setup.output[-300:]}"))
            cleared = [*task_paths, recipe.reward_path]
            if recipe.verifier_to and posixpath.normpath(recipe.verifier_to) not in _KEPT_FOLDERS:
                cleared.append(posixpath.normpath(recipe.verifier_to))
            verifier.remove_paths(live, cleared)
            verifier.carry(sandbox.container(), live, task_paths)
            if tests is not None and not live.put_archive("/", tests):
                raise SandboxError("the engine refused the verifier's files")
            result = verifier.run(client, live, recipe.verifier_command, timeout_s=timeout_s)
            if result.error:
                return VerifierResult(None, result, error=result.error)
            try:
                reward_text = _read_file(live, recipe.reward_path)
            except Exception as exc:  # missing reward file or engine failure
                return VerifierResult(None, result, error=(
                    f"no reward at {recipe.reward_path} ({type(exc).__name__}: {exc})"))
            _copy_logs(live, sandbox, recipe.reward_path)
    except SandboxError as exc:
        result = CommandResult(None, "", 0.0, error=str(exc))
        return VerifierResult(None, result, error=f"could not prepare the verifier: {exc}")
    except Exception as exc:  # engine failure: reported, not raised
        result = CommandResult(None, "", 0.0, error=describe_failure(client, sandbox.container_id, exc))
        return VerifierResult(None, result, error=f"could not prepare the verifier: {result.error}")
    try:
        reward = float(reward_text.strip())
    except ValueError:
        return VerifierResult(None, result, error=f"{recipe.reward_path} holds {reward_text[:80]!r}, not a number",
                              reward_text=reward_text)
    return VerifierResult(reward, result, reward_text=reward_text)


# Folders never copied or removed whole for a verifier, even when a recipe names them.
_KEPT_FOLDERS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root",
                           "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"})


def _copy_logs(live: Any, sandbox: Sandbox, reward_path: str) -> None:
    """The verifier's logs (the reward file's folder, or the file alone in a system folder) into the sandbox, as a
    recorded verifier leaves them; a failure is logged (the verdict stands without them)."""
    folder = posixpath.dirname(reward_path)
    try:
        verifier.carry(live, sandbox.container(), [reward_path if folder in _KEPT_FOLDERS else folder])
    except Exception as exc:  # the sandbox may be gone or full: the reward is already read
        _LOGGER.warning("the verifier's logs were not copied into %s: %s", sandbox.short_id, exc)


def _read_file(live: Any, path: str) -> str:
    """The start of a small file in a container (the archive streamed to a spooled file, at most 1 MiB)."""
    with archive_to_file(live, path, max_bytes=_MAX_REWARD_ARCHIVE_BYTES) as archive, \
            tarfile.open(fileobj=archive) as tar:
        member = tar.next()
        handle = tar.extractfile(member) if member is not None and member.isreg() else None
        if handle is None:
            raise SandboxError(f"{path} is not a regular file")
        return handle.read(_MAX_REWARD_BYTES).decode("utf-8", errors="replace")


def fork(
    sandbox: Sandbox,
    episode: model.Episode,
    commands: str | Sequence[str],
    *,
    run_verifier: bool = True,
    timeout_s: float = COMMAND_TIMEOUT_S,
) -> ForkResult:
    """Run ``commands`` at the sandbox's step instead of the recorded next one, and see what would have happened.

    Args:
        sandbox: A sandbox restored at step k (its state is changed by the fork: restore again to retry).
        episode: Its episode.
        commands: One command, or several run in order (each ``bash -lc``, like the agent's).
        run_verifier: Rerun the task's verifier afterwards for the reward the fork would have earned.
        timeout_s: Each command's timeout.
    """
    commands = (commands,) if isinstance(commands, str) else tuple(commands)
    results = tuple(sandbox.run(command, timeout_s=timeout_s) for command in commands)
    refs = {ref.step_index: ref for ref in snapshots.find(episode)}
    compared_with = sandbox.step + 1 if sandbox.step + 1 in refs else None
    fs: fsdiff.FsDiff | None = None
    file_diffs: tuple[fsdiff.FileDiff, ...] = ()
    note: str | None = None
    if compared_with is not None:
        try:
            fs, _, file_diffs = compare_filesystem(sandbox, recorded_state(sandbox, refs[compared_with]))
        except snapshots.SnapshotError as exc:
            note = f"recorded snapshot unreadable: {exc.reason}"
        except Exception as exc:  # engine failure during the capture
            note = f"filesystem capture failed: {describe_failure(sandbox.client, sandbox.container_id, exc)}"
    verifier = None
    if run_verifier:
        try:
            verifier = verify(sandbox, task_recipe(episode))
        except LookupError as exc:
            note = join_notes(note, f"verifier not run: {exc}")
    return ForkResult(step=sandbox.step, commands=commands, results=results, compared_with=compared_with, fs=fs,
                      file_diffs=file_diffs, verifier=verifier, recorded_reward=episode.total_reward, note=note)
