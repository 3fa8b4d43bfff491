"""Forking at a step: other commands instead of the recorded next one, and the verifier's verdict on the result."""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib
import posixpath
import re
import tarfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ares_viewer import fsdiff, snapshots
from ares_viewer.container.streams import archive_to_file
from ares_viewer.sandbox.box import Sandbox
from ares_viewer.sandbox.commands import COMMAND_TIMEOUT_S, CommandResult, SandboxError, describe_failure
from ares_viewer.sandbox.replays import compare_filesystem, join_notes, recorded_state

if TYPE_CHECKING:
    from ares_viewer import model

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


def task_recipe(episode: model.Episode) -> TaskRecipe:
    """The task's recipe, read from ``tasks/<task_name>/task.json`` beside the episode file.

    Raises:
        LookupError: When the run has no recipe for the task, or it is unusable.
    """
    name = episode.task_name or ""
    if not _SAFE_NAME_RE.match(name) or name in {".", ".."}:
        raise LookupError(f"task name {name!r} cannot name a task folder")
    folder = pathlib.Path(episode.path).parent / "tasks" / name
    path = folder / "task.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise LookupError(f"no verifier recipe for task {name}: {path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise LookupError(f"{path} is unreadable ({exc})") from exc
    verifier = data.get("verifier") if isinstance(data, dict) else None
    if not isinstance(verifier, dict) or not isinstance(verifier.get("command"), str):
        raise LookupError(f"{path} has no verifier command")
    copy_spec = verifier.get("copy") if isinstance(verifier.get("copy"), dict) else {}
    reward_path = verifier.get("reward_path") or "/logs/verifier/reward.txt"
    to = copy_spec.get("to")
    for label, value in (("reward_path", reward_path), ("verifier copy target", to)):
        if value is not None and not (isinstance(value, str) and value.startswith("/")
                                      and ".." not in value.split("/")):
            raise LookupError(f"{path}: {label} {value!r} is not a clean absolute path")
    return TaskRecipe(
        task_name=name,
        folder=str(folder),
        workdir=str(data.get("workdir") or "/testbed"),
        verifier_command=verifier["command"],
        reward_path=reward_path,
        verifier_from=copy_spec.get("from"),
        verifier_to=to,
    )


def _verifier_archive(recipe: TaskRecipe) -> bytes | None:
    """The verifier's files as a tar named relative to ``/`` (regular files only, never outside the folder)."""
    if not recipe.verifier_from or not recipe.verifier_to:
        return None
    root = pathlib.Path(recipe.folder).resolve()
    source = (root / recipe.verifier_from).resolve()
    if not source.is_relative_to(root) or not source.is_dir():
        raise LookupError(f"verifier folder {recipe.verifier_from!r} is not a folder inside {root}")
    target = posixpath.normpath(recipe.verifier_to).lstrip("/")
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
    """Run the task's verifier in the sandbox and read the reward it writes (the container is changed by it).

    Nothing the agent's (or a fork's) commands left in the container is trusted: every process still running
    in it (but the container's own) is stopped and killed, the verifier's folder, the reward file and its
    folder are removed, ``conftest.py`` and pytest configuration files in the folders above the verifier's are
    removed, and only then is a fresh copy of the hidden tests put in from the run's ``tasks/`` folder. The
    reward is read from the file the verifier's own run wrote (there is none before it runs).
    """
    archive = _verifier_archive(recipe)
    prepare = ["bash", "-c", _PREPARE, "ares-viewer", *_cleared_paths(recipe)]
    try:
        prepared = sandbox.client.api.exec_create(sandbox.container_id, prepare, user="0")
        said = sandbox.client.api.exec_start(prepared["Id"])
        code = sandbox.client.api.exec_inspect(prepared["Id"]).get("ExitCode")
        if code != 0:
            raise SandboxError(f"clearing the verifier's folders failed (exit code {code}: {said[-300:]!r})")
        if archive is not None:
            sandbox.client.api.put_archive(sandbox.container_id, "/", archive)
    except Exception as exc:  # engine failure: reported, not raised
        result = CommandResult(None, "", 0.0, error=describe_failure(sandbox.client, sandbox.container_id, exc))
        return VerifierResult(None, result, error=f"could not prepare the verifier: {result.error}")
    result = sandbox.run(recipe.verifier_command, timeout_s=timeout_s, environment={})
    if result.error:
        return VerifierResult(None, result, error=result.error)
    try:
        reward_text = _read_file(sandbox, recipe.reward_path)
    except Exception as exc:  # missing reward file or engine failure
        return VerifierResult(None, result, error=f"no reward at {recipe.reward_path} ({type(exc).__name__}: {exc})")
    try:
        reward = float(reward_text.strip())
    except ValueError:
        return VerifierResult(None, result, error=f"{recipe.reward_path} holds {reward_text[:80]!r}, not a number",
                              reward_text=reward_text)
    return VerifierResult(reward, result, reward_text=reward_text)


# Folders never removed whole before a verifier runs, even when a recipe names them.
_KEPT_FOLDERS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root",
                           "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/testbed"})
# Files above the verifier's folder that pytest would pick up (conftest files, configuration choosing rootdir).
_PYTEST_FILES = ("conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _cleared_paths(recipe: TaskRecipe) -> list[str]:
    """``[verifier folder or "", reward file, reward folder or "", pytest files above the verifier...]``."""
    target = posixpath.normpath(recipe.verifier_to) if recipe.verifier_to else ""
    target = "" if target in _KEPT_FOLDERS or target == recipe.workdir else target
    reward_dir = posixpath.dirname(recipe.reward_path)
    reward_dir = "" if reward_dir in _KEPT_FOLDERS or reward_dir == recipe.workdir else reward_dir
    above = []
    folder = posixpath.dirname(target) if target else ""
    while folder:
        above.extend(posixpath.join(folder, name) for name in _PYTEST_FILES)
        folder = "" if folder == "/" else posixpath.dirname(folder)
    return [target, recipe.reward_path, reward_dir, *above]


# Stops then kills every process but the container's own (PID 1, and with the engine's init its first child),
# then removes the paths given ("" skipped). Only builtins run until the processes are gone.
_PREPARE = r"""
init=0; read -r comm < /proc/1/comm; [ "$comm" = docker-init ] && init=1
main=""; earliest=""
if [ "$init" = 1 ]; then
    for dir in /proc/[0-9]*; do
        read -r line < "$dir/stat" 2>/dev/null || continue
        rest="${line##*) }"; read -ra field <<< "$rest"
        if [ "${field[1]}" = 1 ] && { [ -z "$earliest" ] || [ "${field[19]}" -lt "$earliest" ]; }; then
            earliest="${field[19]}"; main="${dir#/proc/}"
        fi
    done
fi
declare -A stopped
for ((round = 0; round < 100; round++)); do
    found=0
    for dir in /proc/[0-9]*; do
        pid="${dir#/proc/}"
        [ "$pid" = 1 ] || [ "$pid" = "$$" ] || [ "$pid" = "$main" ] || [ -n "${stopped[$pid]}" ] && continue
        kill -STOP "$pid" 2>/dev/null && stopped[$pid]=1 && found=1
    done
    [ "$found" = 0 ] && break
done
for pid in "${!stopped[@]}"; do kill -KILL "$pid" 2>/dev/null; done
for path in "$@"; do [ -n "$path" ] && rm -rf -- "$path"; done
exit 0
"""


def _read_file(sandbox: Sandbox, path: str) -> str:
    """The start of a small file in the container (the archive streamed to a spooled file, at most 1 MiB)."""
    with archive_to_file(sandbox.container(), path, max_bytes=_MAX_REWARD_ARCHIVE_BYTES) as archive, \
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
    fs, file_diffs, note = None, (), None
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
