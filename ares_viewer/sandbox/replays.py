"""Replaying an episode's recorded commands in a sandbox, and comparing each step with the recording."""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ares_viewer import container, fsdiff, snapshots
from ares_viewer.base import textdiff
from ares_viewer.sandbox._box import Sandbox
from ares_viewer.sandbox.commands import COMMAND_TIMEOUT_S, CommandResult, describe_failure

if TYPE_CHECKING:
    from ares_viewer import model

# The agent saw outputs of this many characters or more as head + tail (mini-swe-agent's template).
ELIDE_AT = 10_000
_ELIDED_SIDE = 5_000
# How many file diffs a divergence report carries (every differing path is listed regardless).
MAX_FILE_DIFFS = 20


class Status(enum.StrEnum):
    """The verdict of one replayed step."""

    REPRODUCED = "reproduced"
    OUTPUT_DIVERGED = "output_diverged"
    FILESYSTEM_DIVERGED = "filesystem_diverged"
    ERROR = "error"
    SKIPPED = "skipped"  # the recorded step ran no command (a format error): nothing to rerun



# ----- replay ------------------------------------------------------------------------------------------------------

# Text that differs between two runs of the same command: (pattern, replacement), applied in order.
VOLATILE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<timestamp>"),
    (re.compile(r"\b[A-Z][a-z]{2} [ \d]\d (?:[ \d]\d:\d\d| \d{4})\b"), "<date>"),  # ls -l: "Nov 20 14:00"
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|us|µs|ns|sec|secs|seconds?)\b"), "<duration>"),
    (re.compile(r"0x[0-9a-fA-F]{4,}"), "0x<addr>"),
    (re.compile(r"/tmp/[\w.-]*?(?:tmp|pytest-)[\w.-]*"), "/tmp/<temp>"),
    (re.compile(r"\btmp[\w]{6,}\b"), "<temp>"),
    (re.compile(r"\b[0-9a-f]{12,64}\b"), "<hex>"),
)


def normalize_text(text: str) -> str:
    """``text`` with volatile parts (timestamps, durations like ``0.03s``, temp names, hex ids, memory addresses)
    replaced by placeholders, so two runs of the same command compare equal."""
    for pattern, replacement in VOLATILE_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@dataclasses.dataclass(frozen=True)
class StepReplay:
    """One recorded step rerun in a sandbox, compared with the recording.

    Attributes:
        step: The step index.
        command: The recorded command (None when the step ran none).
        status: The verdict (:class:`Status`).
        result: What the rerun did (None when nothing ran).
        recorded_returncode, recorded_output: What the episode recorded (output: as the agent saw it).
        output_matches: Whether return code and output match (None when the recording has neither).
        output_diff: Unified diff of recorded -> rerun output (normalized when asked; empty when equal).
        fs: The filesystem diff recorded step -> live container (None when not compared).
        fs_changes: The paths whose state differs from the recorded snapshot.
        file_diffs: Content diffs of the first differing files.
        note: Why a step is an error, skipped or not fully compared, or which differences it carries.
        carried: The differing paths whose difference is the same as at the previous replayed step (the step
            neither added nor changed them): a divergence carried from an earlier step, not a new one.
        carried_from: The step where the first of the ``carried`` differences appeared (None when none is).
    """

    step: int
    command: str | None
    status: Status
    result: CommandResult | None = None
    recorded_returncode: int | None = None
    recorded_output: str | None = None
    output_matches: bool | None = None
    output_diff: str = ""
    fs: fsdiff.FsDiff | None = dataclasses.field(default=None, repr=False)
    fs_changes: tuple[fsdiff.FileChange, ...] = ()
    file_diffs: tuple[fsdiff.FileDiff, ...] = dataclasses.field(default=(), repr=False)
    note: str | None = None
    carried: tuple[str, ...] = ()
    carried_from: int | None = None

    @property
    def diverged(self) -> bool:
        return self.status in (Status.OUTPUT_DIVERGED, Status.FILESYSTEM_DIVERGED, Status.ERROR)

    @property
    def new_changes(self) -> tuple[fsdiff.FileChange, ...]:
        """The differing paths this step brought (not carried from an earlier step)."""
        carried = set(self.carried)
        return tuple(change for change in self.fs_changes if change.path not in carried)

    @property
    def new_divergence(self) -> bool:
        """True when this step diverges of its own: its output, an error, or a filesystem difference that was
        not already there, the same, at the previous step."""
        if self.status == Status.FILESYSTEM_DIVERGED:
            return bool(self.new_changes)
        return self.diverged

    def row(self) -> dict[str, Any]:
        """The step's line in a results table."""
        return {
            "step": self.step,
            "status": str(self.status),
            "command": (self.command or "")[:120],
            "recorded rc": self.recorded_returncode,
            "rerun rc": self.result.returncode if self.result else None,
            "seconds": self.result.duration_s if self.result else None,
            "differing paths": len(self.fs_changes),
            "carried": f"{len(self.carried)} from step {self.carried_from}" if self.carried else "",
            "note": self.note or "",
        }


def replay(
    sandbox: Sandbox,
    episode: model.Episode,
    *,
    until: int | None = None,
    stop_at_divergence: bool = False,
    normalize: bool = False,
    compare_filesystem: bool = True,
    timeout_s: float = COMMAND_TIMEOUT_S,
) -> Iterator[StepReplay]:
    """Rerun the recorded commands after the sandbox's step, in order, yielding a verdict per step.

    For each step: the command's return code and output are compared with the recording (head and tail only
    when the recording elided the output), then the container's filesystem is captured in memory and compared
    with the step's recorded snapshot. Errors (timeouts, a killed container, a vanished engine) are reported
    per step; nothing raises once the replay runs, and no snapshot file is ever written.

    Args:
        sandbox: A sandbox restored from ``episode`` (at step k); its container's state advances as steps run.
        episode: The episode to replay.
        until: The last step to rerun (default: the episode's last).
        stop_at_divergence: Stop after the first step that is not reproduced.
        normalize: Compare outputs with :func:`normalize_text` applied to both sides.
        compare_filesystem: Compare the filesystem after each step (the cost of a capture per step).
        timeout_s: Each command's timeout.
    """
    if sandbox.episode_id != episode.episode_id:
        raise ValueError(f"the sandbox was restored from episode {sandbox.episode_id}, not {episode.episode_id}")
    last = len(episode.steps) - 1 if until is None else min(until, len(episode.steps) - 1)
    refs = {ref.step_index: ref for ref in snapshots.find(episode)} if compare_filesystem else None
    seen: dict[str, tuple[tuple, int]] = {}  # path -> (its difference at the previous compared step, first step)
    for index in range(sandbox.step + 1, last + 1):
        ref = refs.get(index) if refs is not None else None
        result = _replay_step(sandbox, episode.step(index), ref, normalize, timeout_s, compare_filesystem)
        if result.fs is not None:
            result, seen = mark_carried(result, seen)
        yield result
        if stop_at_divergence and result.status not in (Status.REPRODUCED, Status.SKIPPED):
            return


def _replay_step(
    sandbox: Sandbox,
    step: model.Step,
    ref: Any,
    normalize: bool,
    timeout_s: float,
    check_filesystem: bool,
) -> StepReplay:
    recorded: dict[str, Any] = {"recorded_returncode": step.returncode, "recorded_output": step.output}
    if not step.command:
        return StepReplay(step.index, None, Status.SKIPPED, note="the recorded step ran no command", **recorded)
    result = sandbox.run(step.command, timeout_s=timeout_s)
    matches, diff, note = compare_output(step, result, normalize=normalize)
    if result.error and not (result.timed_out and matches):
        return StepReplay(step.index, step.command, Status.ERROR, result, output_matches=matches, output_diff=diff,
                          note=result.error, **recorded)
    fs = None
    changes: tuple[fsdiff.FileChange, ...] = ()
    file_diffs: tuple[fsdiff.FileDiff, ...] = ()
    if not check_filesystem:
        pass
    elif ref is None:
        note = join_notes(note, "no recorded snapshot for this step: filesystem not compared")
    else:
        try:
            fs, changes, file_diffs = compare_filesystem(sandbox, recorded_state(sandbox, ref))
        except snapshots.SnapshotError as exc:
            note = join_notes(note, f"recorded snapshot unreadable: {exc.reason}")
        except Exception as exc:  # the engine failed during the capture: this step's error, not the caller's
            message = describe_failure(sandbox.client, sandbox.container_id, exc)
            return StepReplay(step.index, step.command, Status.ERROR, result, output_matches=matches,
                              output_diff=diff, note=f"filesystem capture failed: {message}", **recorded)
    if matches is False:
        status = Status.OUTPUT_DIVERGED
    elif changes:
        status = Status.FILESYSTEM_DIVERGED
    else:
        status = Status.REPRODUCED
    return StepReplay(step.index, step.command, status, result, output_matches=matches, output_diff=diff, fs=fs,
                      fs_changes=changes, file_diffs=file_diffs, note=note, **recorded)


def _difference(change: fsdiff.FileChange) -> tuple:
    """What makes a path differ, without times: the kind and each side's type, mode, size, hash and link."""
    def side(entry: snapshots.Entry | None) -> tuple | None:
        return None if entry is None else (entry.type, entry.mode, entry.size, entry.sha256, entry.link_target)

    return change.kind, side(change.old), side(change.new)


def mark_carried(
    result: StepReplay, seen: dict[str, tuple[tuple, int]]
) -> tuple[StepReplay, dict[str, tuple[tuple, int]]]:
    """Mark the differences of ``result`` that the previous compared step had already, unchanged.

    Args:
        result: A step whose filesystem was compared.
        seen: Path -> (its difference, the step it first appeared) at the previous compared step.

    Returns:
        The step with ``carried``/``carried_from`` set (and a note saying so when it has no other), and ``seen``
        for the next step.
    """
    now: dict[str, tuple[tuple, int]] = {}
    carried = []
    for change in result.fs_changes:
        difference = _difference(change)
        before = seen.get(change.path)
        if before is not None and before[0] == difference:
            carried.append(change.path)
            now[change.path] = before
        else:
            now[change.path] = (difference, result.step)
    if not carried:
        return result, now
    since = min(now[path][1] for path in carried)
    fresh = len(result.fs_changes) - len(carried)
    note = (f"{len(carried)} filesystem difference(s) carried from step {since}"
            + (f"; {fresh} new" if fresh else ": nothing new at this step"))
    return dataclasses.replace(result, carried=tuple(carried), carried_from=since,
                               note=join_notes(result.note, note)), now


def file_diff_text(diff: fsdiff.FileDiff) -> str:
    """One file's difference as text that names the file: its unified diff (headers name it), else the path and
    why there are no lines (binary content by size and hash, too large, not recorded)."""
    if diff.unified:
        return diff.unified
    return f"{diff.path}: {diff.note or 'same content, other metadata (mode, type or times)'}"


def recorded_state(sandbox: Sandbox, ref: snapshots.SnapshotRef) -> snapshots.Restorable:
    """The recorded state of a step as changes against its base image, whichever kind of snapshot holds it."""
    return container.as_changes(sandbox.client, snapshots.open(ref))


def join_notes(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def as_agent_saw(output: str, elided_chars: int | None = None) -> str:
    """An output as the recording renders it: outputs of ``ELIDE_AT`` characters or more become head + tail."""
    if len(output) < ELIDE_AT:
        return output
    count = len(output) - ELIDE_AT if elided_chars is None else elided_chars
    return f"{output[:_ELIDED_SIDE]}\n[... {count} characters elided ...]\n{output[-_ELIDED_SIDE:]}"


def compare_output(
    step: model.Step, result: CommandResult, *, normalize: bool = False
) -> tuple[bool | None, str, str | None]:
    """Whether a rerun's return code and output match the recorded step's.

    Returns:
        ``(matches, unified_diff, note)``: ``matches`` is None when the recording holds neither a return code
        nor an output (a submitting LAST step); for an elided recording only the head and tail are compared.
    """
    recorded_timeout = step.returncode is None and "timed out" in (step.observation_text or "")[:400]
    if recorded_timeout or result.timed_out:
        same = recorded_timeout and result.timed_out
        return same, "", None if same else ("the recording timed out" if recorded_timeout else "the rerun timed out")
    if step.returncode is None and step.output is None:
        return None, "", "the recording has no output for this step (not compared)"
    # Rendered as the agent saw it; for an elided recording, with the recorded count, so only head and tail
    # are compared (the number of elided characters may differ without the agent seeing a difference).
    live = as_agent_saw(result.output, step.output_elided or None)
    recorded = step.output or ""
    a, b = (normalize_text(recorded), normalize_text(live)) if normalize else (recorded, live)
    notes = []
    if step.returncode is not None and result.returncode != step.returncode:
        notes.append(f"return code {result.returncode}, recorded {step.returncode}")
    same_output = a == b
    if not same_output:
        notes.append("output differs" + (" (after normalisation)" if normalize else ""))
    diff = "" if same_output else textdiff.unified(a, b, a_name="recorded", b_name="rerun")
    return (not notes), diff, "; ".join(notes) or None


def compare_filesystem(
    sandbox: Sandbox, recorded: snapshots.Restorable
) -> tuple[fsdiff.FsDiff, tuple[fsdiff.FileChange, ...], tuple[fsdiff.FileDiff, ...]]:
    """How the sandbox's filesystem differs from a recorded snapshot: the diff, the changes and file diffs."""
    live = sandbox.capture(recorded)
    diff = fsdiff.diff_snapshots(recorded, live)
    changes = tuple(change for change in diff.changes if not _same_git_index(change, diff))
    file_diffs = tuple(
        diff.file_diff(change.path)
        for change in changes[:MAX_FILE_DIFFS]
        if snapshots.FILE in (change.old_type, change.new_type)
    )
    return diff, changes, file_diffs


def _same_git_index(change: fsdiff.FileChange, diff: fsdiff.FsDiff) -> bool:
    """True for a ``.git/index`` whose tracked entries are the same on both sides.

    Git's index caches each file's stat data (times, inode, device), which a restored container cannot
    reproduce, and any ``git status`` rewrites it (invalidating the tree cache as it goes). What the agent
    could observe is what is staged: the entries' paths, modes, object ids and stages, and the extensions
    that are not caches; those are compared.
    """
    if not change.path.endswith("/.git/index") or not change.old_type == change.new_type == snapshots.FILE:
        return False
    old, new = _git_index_key(diff.read_old(change.path)), _git_index_key(diff.read_new(change.path))
    return old is not None and old == new


def _git_index_key(data: bytes | None) -> bytes | None:
    """A git index (versions 2 and 3) without its stat cache and checksum; None when it is not one."""
    if data is None or len(data) < 32 or data[:4] != b"DIRC":
        return None
    version, count = int.from_bytes(data[4:8], "big"), int.from_bytes(data[8:12], "big")
    if version not in (2, 3):
        return None
    key, offset = [data[:12]], 12
    for _ in range(count):
        if offset + 62 > len(data):
            return None
        fixed = data[offset : offset + 62]
        flags = int.from_bytes(fixed[60:62], "big")
        header = 64 if flags & 0x4000 else 62
        end = data.find(b"\0", offset + header)
        if end < 0:
            return None
        # mode (bytes 24-28), object id (40-60), flags and the path: the parts that are not stat data.
        key.append(fixed[24:28] + fixed[40:62] + data[offset + 62 : end])
        offset += (end - offset + 8) // 8 * 8
    # Extensions, less the caches (the tree cache is invalidated by any stat refresh) and the trailing checksum.
    end = len(data) - 20
    while offset + 8 <= end:
        signature, size = data[offset : offset + 4], int.from_bytes(data[offset + 4 : offset + 8], "big")
        if signature not in _GIT_INDEX_CACHES:
            key.append(data[offset : offset + 8 + size])
        offset += 8 + size
    return b"\0".join(key)


_GIT_INDEX_CACHES = frozenset({b"TREE", b"UNTR", b"FSMN", b"EOIE", b"IEOT"})
