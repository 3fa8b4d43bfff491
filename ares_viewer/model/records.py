"""The normalized model every format adapter produces and every view reads.

Records are frozen dataclasses. Cumulative observations are stored once per episode: a pool of
unique messages plus, per model call, a link saying how much of the previous context it kept and
which pool messages it appended. ``Episode.context(k)`` rebuilds the exact list on demand, so an
episode's memory grows with its number of distinct messages, not with the square of its steps.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ares_viewer.model import context_diff, render
from ares_viewer.model.errors import RecordedError, describe_error
from ares_viewer.model.row import EpisodeRow
from ares_viewer.model.verifier import VerifierRecord, explain

if TYPE_CHECKING:
    import pandas as pd

class Outcome(enum.StrEnum):
    """Why an episode ended (or that it did not)."""

    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ERRORED = "errored"
    ABORTED = "aborted"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    INCOMPLETE = "incomplete"


class StepKind(enum.StrEnum):
    """ARES's step types: the first request, the steps in between, and the last one."""

    FIRST = "FIRST"
    MID = "MID"
    LAST = "LAST"


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call made by the model."""

    call_id: str | None
    name: str
    arguments: str


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """One chat message as the model saw it."""

    role: str
    content: str
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    # The message exactly as the file held it, so an exported prompt is byte-for-byte the original.
    raw: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The message as a plain dict, exactly as the file held it when it was read from one."""
        if self.raw is not None:
            return dict(self.raw)
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [
                {"call_id": c.call_id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one model call; ``None`` where the client did not know them."""

    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    cached_prompt_tokens: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ContextLink:
    """How one model call's context relates to the previous call's context.

    Attributes:
        kept: how many messages of the previous context it starts with.
        added: pool indices of the messages that follow them.
        rewritten: True when the previous context was not kept whole (messages dropped or changed).
    """

    kept: int
    added: tuple[int, ...]
    rewritten: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One step record of an episode.

    Step 0 (FIRST) holds only the first request. Every later step holds the model response that
    was executed (the action) and, when the file records it, the result of running its command.

    Attributes:
        index: the step index (0 for FIRST).
        kind: FIRST, MID or LAST.
        reward: the step's reward (None where the file has none).
        discount: the step's discount.
        timestamp: unix seconds.
        dt: seconds since the previous step's timestamp (None for the first step or unknown times).
        response: the model's full response text (empty for FIRST).
        thought: the response text before the command block.
        command: the shell command extracted from the response (bash block or tool call), if any.
        tool_calls: tool calls in the response.
        returncode: the command's return code, when the next message records it.
        output: the command's output, when recorded; for elided output, head + marker + tail.
        output_elided: number of characters the recording elided from the output (0 if none).
        observation_text: the raw text of the message that carried the result (or an error).
        format_error: True when the result message reports a format error instead of output.
        usage: token counts of the model call.
        cost: USD cost of the model call.
        context_index: which model call's context this action answered (index into ``Episode.links``).
        context_len: number of messages in the context the model answered (0 for FIRST).
        context_rewritten: True when that context does not extend the previous call's context.
        new_message_count: how many messages follow the part of the previous call's context that this one kept
            as its prefix (by position; ``Episode.context_change(k)`` says which messages are new by content).
        extra: format-specific fields that have no column of their own.
        reasoning: the model's reasoning for this response (reasoning/thinking text the provider returned apart
            from the answer), "" when the file records none.
        model_time: seconds the model took to answer (from the previous result to this response), when the file
            records both times.
        command_time: seconds the command took (from this response to its result), when the file records both.
        failure: how the command failed to finish, when it did not: ``"timed out"``, ``"exception"`` or
            ``"killed"``, or ``"parsing error"`` when it was refused before it ran (its arguments could not be
            read); its ``output`` then holds the failure's text.
    """

    index: int
    kind: StepKind
    reward: float | None = None
    discount: float | None = None
    timestamp: float | None = None
    dt: float | None = None
    response: str = ""
    thought: str = ""
    command: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    returncode: int | None = None
    output: str | None = None
    output_elided: int = 0
    observation_text: str | None = None
    format_error: bool = False
    usage: Usage = Usage()
    cost: float | None = None
    context_index: int | None = None
    context_len: int = 0
    context_rewritten: bool = False
    new_message_count: int = 0
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reasoning: str = ""
    model_time: float | None = None
    command_time: float | None = None
    failure: str | None = None

    @property
    def duration(self) -> float | None:
        """Seconds this step took: its model time plus its command time where the file records them, else ``dt``
        (the time since the previous step, which charges the previous command to this step)."""
        if self.model_time is None and self.command_time is None:
            return self.dt
        return (self.model_time or 0.0) + (self.command_time or 0.0)

    @property
    def has_action(self) -> bool:
        """True for steps that carry a model response (every step but FIRST)."""
        return self.kind is not StepKind.FIRST


STEP_COLUMNS = (
    "index",
    "kind",
    "reward",
    "discount",
    "timestamp",
    "dt",
    "command",
    "returncode",
    "output_chars",
    "output_elided",
    "format_error",
    "prompt_tokens",
    "generated_tokens",
    "cost",
    "context_len",
    "new_messages",
    "context_rewritten",
    "model_time",
    "command_time",
    "duration",
    "failure",
    "reasoning_chars",
)


READ_IN_PART = "read in part: skipped "
"""How a warning that an episode was read in part begins (``read_in_part``; pages find those warnings by it)."""
_NAMED = 5  # skipped parts named in the line; the rest counted


def read_in_part(skipped: Sequence[str]) -> list[str]:
    """The warning that a file was read in part, naming what the reader skipped (none when it skipped nothing):
    a reader puts it in its index rows' ``warnings`` and passes ``skipped`` to its episode."""
    if not skipped:
        return []
    more = f" and {len(skipped) - _NAMED} more" if len(skipped) > _NAMED else ""
    return [f"{READ_IN_PART}{', '.join(skipped[:_NAMED])}{more}"]


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Episode:
    """One episode, normalized.

    Attributes:
        episode_id: the episode's id.
        task_name: the task it attempted.
        outcome: why it ended.
        total_reward: the episode's reward (the last step's reward), or None.
        start_time, end_time: unix seconds, or None.
        truncated: True when the step limit ended it.
        system_prompt: the system text of its requests (None when absent).
        steps: every step record, FIRST included.
        path: where it was read from.
        format: the adapter that read it (e.g. ``"ares"``).
        metadata: other top-level fields (end status, error details, request settings, ...).
        warnings: things the loader repaired or could not read, in plain words.
        messages: the pool of distinct messages, in order of first appearance.
        links: per model call (one per observation), how its context was built.
        skipped: the parts of the file the reader could not read, each named where it sits in the file
            (``messages[3] (type 'web_search_call')``): the episode was read in part (``read_in_part``).

    A model call that ran several commands (several tool calls in one response) is one step per command, each
    with its own output and return code; they share the call's ``context_index``, and the call's response, usage
    and cost are on its first step only (a format may note the call in ``extra["model_call"]``).
    """

    episode_id: str
    task_name: str
    outcome: Outcome
    total_reward: float | None
    start_time: float | None
    end_time: float | None
    truncated: bool
    system_prompt: str | None
    steps: tuple[Step, ...]
    path: str
    format: str
    metadata: Mapping[str, Any]
    warnings: tuple[str, ...]
    messages: tuple[Message, ...]
    links: tuple[ContextLink, ...]
    skipped: tuple[str, ...] = ()

    @property
    def read_in_part(self) -> str | None:
        """``read in part: skipped ...`` naming what of the file the reader skipped, or None when it read it all
        (the line the Episode page shows; the index row's ``warnings`` carry it too: ``read_in_part(skipped)``)."""
        line = read_in_part(self.skipped)
        return line[0] if line else None

    # ----- totals -------------------------------------------------------------------------------

    @property
    def actions(self) -> tuple[Step, ...]:
        """The steps that carry a model response."""
        return tuple(s for s in self.steps if s.kind is not StepKind.FIRST)  # ``has_action``, inlined: asked often

    @property
    def verifier(self) -> VerifierRecord | None:
        """The verifier's recorded run: the episode's ``verifier`` key, else its last action's; None without one."""
        record = VerifierRecord.from_json(self.metadata.get("verifier"))
        actions = self.actions
        if record is None and actions:
            record = VerifierRecord.from_json(actions[-1].extra.get("verifier"))
        return record

    @property
    def num_actions(self) -> int:
        """Number of model responses executed (the FIRST record is not an action)."""
        return sum(1 for s in self.steps if s.has_action)

    def landmarks(self) -> list[tuple[int, str]]:
        """The steps a reader of an episode usually looks at first, as ``(step index, why)`` in step order: the
        first and the last command that failed (non-zero return code), the first context rewrite, the slowest
        step when it took three times the median or more, and the last action (what the episode ended on)."""
        found: dict[int, list[str]] = {}

        def mark(step: Step | None, why: str) -> None:
            if step is not None:
                found.setdefault(step.index, []).append(why)

        failed = [s for s in self.steps if s.returncode not in (None, 0) or s.failure]
        if failed:
            mark(failed[0], f"first failed command ({failed[0].failure or f'rc {failed[0].returncode}'})")
            if len(failed) > 1:
                mark(failed[-1], f"last failed command ({failed[-1].failure or f'rc {failed[-1].returncode}'})")
        mark(next((s for s in self.steps if s.context_rewritten), None), "context rewritten")
        timed = sorted((s.duration, s.index, s) for s in self.steps if s.duration is not None and s.has_action)
        if len(timed) > 2 and timed[-1][0] >= 3 * timed[len(timed) // 2][0]:  # far slower than the median
            mark(timed[-1][2], f"slowest step ({timed[-1][0]:.0f} s)")
        actions = self.actions
        if actions:
            mark(actions[-1], "last action")
        return [(index, ", ".join(whys)) for index, whys in sorted(found.items())]

    @property
    def duration_s(self) -> float | None:
        """Wall time from start to end (or to the last step when the end is unknown)."""
        end = self.end_time
        if end is None:
            end = next((s.timestamp for s in reversed(self.steps) if s.timestamp is not None), None)
        if end is None or self.start_time is None:
            return None
        return end - self.start_time

    def recorded_total(self, name: str) -> float | None:
        """The producer's own total of ``name`` (``cost``, ``prompt_tokens``, ``generated_tokens``) where it keeps
        one apart from the steps (``metadata["totals"]``: ATIF's ``final_metrics``, harbor's ``result.json``),
        else None. It counts calls no step keeps (a format error harbor's converter dropped)."""
        totals = self.metadata.get("totals")
        value = totals.get(name) if isinstance(totals, Mapping) else None
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def steps_sums(self) -> dict[str, float]:
        """The steps' sums of the totals the producer records apart (``recorded_total``) that differ from them:
        shown beside the totals."""
        sums = {"cost": self._steps_cost(), "prompt_tokens": float(self._steps_tokens("prompt_tokens")),
                "generated_tokens": float(self._steps_tokens("generated_tokens"))}
        return {name: value for name, value in sums.items()
                if (total := self.recorded_total(name)) is not None and abs(total - value) > 1e-9}

    def _steps_cost(self) -> float:
        return float(sum(s.cost for s in self.steps if s.cost is not None and s.cost > 0))

    def _steps_tokens(self, name: str) -> int:
        return sum(n for s in self.steps if (n := getattr(s.usage, name)) and n > 0)

    @property
    def total_cost(self) -> float | None:
        """The producer's total cost (USD) where it records one (``recorded_total``), else the sum of the costs the
        model calls record; a format that records only an episode's total keeps it in ``metadata["total_cost"]``,
        one whose file records no cost says so there (``metadata["total_cost"]`` None). None (unknown, never 0)
        then, when the episode has model calls and none records a cost, and when the producer keeps totals apart
        and says nothing of the cost and no call has one (a harbor trial whose ``agent_result.cost_usd`` is null).
        An episode with no model call costs 0 (docs/formats.md, "Totals")."""
        recorded = self.recorded_total("cost")
        if recorded is not None:
            return recorded
        fallback = self.metadata.get("total_cost")
        costs = self._steps_cost()
        if costs:
            return costs
        if "total_cost" in self.metadata and fallback is None:
            return None
        if isinstance(fallback, int | float) and not isinstance(fallback, bool):
            return float(fallback)
        unknown = self._unknown_total("cost") or (self.actions and all(s.cost is None for s in self.actions))
        return None if unknown else costs

    def _unknown_total(self, name: str) -> bool:
        """Whether the producer keeps totals apart and says nothing of ``name`` (``metadata["totals"]`` holds it
        as None): with no step's figure either, the episode's is unknown, never 0."""
        totals = self.metadata.get("totals")
        return isinstance(totals, Mapping) and name in totals and totals[name] is None

    @property
    def prompt_tokens(self) -> int | None:
        """The producer's total where it records one (``recorded_total``), else the sum of the prompt tokens the
        model calls record; None (unknown, never 0) when the episode has model calls and none records them, or the
        producer keeps totals, says nothing of these and no step has any (docs/formats.md, "Totals")."""
        return self._tokens("prompt_tokens")

    @property
    def generated_tokens(self) -> int | None:
        """The producer's total where it records one (``recorded_total``), else the sum of the generated tokens the
        model calls record; None when the episode has model calls and none records them (as ``prompt_tokens``)."""
        return self._tokens("generated_tokens")

    def _tokens(self, name: str) -> int | None:
        recorded = self.recorded_total(name)
        if recorded is not None:
            return int(recorded)
        summed = self._steps_tokens(name)
        if summed:
            return summed
        unknown = self._unknown_total(name) or (
            self.actions and all(getattr(s.usage, name) is None for s in self.actions))
        return None if unknown else 0

    @property
    def error(self) -> str | None:
        """The error that ended the episode in one line (root cause included), if the file records one."""
        return describe_error(self.metadata.get("error"))

    @property
    def error_record(self) -> RecordedError | None:
        """The error that ended the episode with its chain of causes and traceback, if the file records one."""
        return RecordedError.from_json(self.metadata.get("error"))

    # ----- contexts -----------------------------------------------------------------------------

    def _call(self, k: int) -> int | None:
        """Index into ``links`` of the context action ``k`` answered (None when unrecorded)."""
        if not 1 <= k < len(self.steps):
            raise IndexError(f"episode {self.episode_id} has actions 1..{len(self.steps) - 1}; there is no action {k}")
        return self.steps[k].context_index

    def _context_ids(self, call: int) -> list[int]:
        """Pool indices of the context of model call ``call`` (0-based, one per observation)."""
        ids: list[int] = []
        for link in self.links[: call + 1]:
            del ids[link.kept :]
            ids.extend(link.added)
        return ids

    def context(self, k: int) -> list[Message]:
        """The exact message list the model answered when it produced action ``k`` (1-based).

        The system prompt is not part of it (ARES keeps it apart): see ``system_prompt``.
        """
        call = self._call(k)
        return [] if call is None else [self.messages[i] for i in self._context_ids(call)]

    def observation(self, k: int) -> list[Message] | None:
        """The messages of step ``k``'s own observation: the request sent after action ``k`` ran.

        Step 0's is the first request; for ``k >= 1`` it is ``context(k + 1)``, the conversation right after
        action ``k`` and its result. A LAST step on a normal finish records none (None); a truncated one
        records the pending request.
        """
        self.step(k)  # range check
        if k + 1 < len(self.steps):
            call = self.steps[k + 1].context_index
            if call is not None and k >= 1 and self.steps[k].context_index == call:
                call = None  # step k recorded no observation: action k + 1 answered an older one
        else:
            referenced = max((s.context_index for s in self.steps if s.context_index is not None), default=-1)
            call = len(self.links) - 1 if len(self.links) - 1 > referenced else None
        return None if call is None else [self.messages[i] for i in self._context_ids(call)]

    def new_messages(self, k: int) -> list[Message]:
        """The messages that entered the context since the previous model call (all of it for k=1), matched by
        content as the app counts them: a message the previous context held too is not new wherever it sits,
        and an edited version of an earlier message is a rewrite (``context_change(k).rewritten``)."""
        return list(self.context_change(k).new)

    def dropped_messages(self, k: int) -> list[Message]:
        """Messages of the previous call's context that are gone from action ``k``'s context, neither kept nor
        rewritten (matched by content, as ``new_messages``)."""
        return list(self.context_change(k).dropped)

    def appended_messages(self, k: int) -> list[Message]:
        """How action ``k``'s context was built: the messages after the prefix of the previous call's context
        that it kept (by position). Equal to ``new_messages(k)`` unless the context was rewritten
        (``step(k).context_rewritten``), where it also holds messages the model had seen before."""
        call = self._call(k)
        return [] if call is None else [self.messages[i] for i in self.links[call].added]

    def context_change(self, k: int) -> context_diff.ContextChange:
        """How action ``k``'s context differs from the previous model call's, matched by content.

        A message counts as new only when the previous context held no equal message, and as dropped only when
        the current one holds none, so a context rewrite counts right (``appended_messages`` is the positional
        view: what followed the kept prefix).
        """
        if self._call(k) is None:
            return context_diff.ContextChange()
        if self.call_step(k) != k:  # another command of the call step ``call_step(k)`` made: the same context
            return context_diff.ContextChange(kept=tuple(self.context(k)))
        return context_diff.compare(self.previous_context(k), self.context(k))

    def call_step(self, k: int) -> int:
        """The first step of the model call action ``k`` belongs to: ``k`` itself, unless the call ran several
        commands and ``k`` is one after its first (it then answered the same context, and the call's response,
        usage and cost are on that first step)."""
        call = self._call(k)
        while call is not None and k > 1 and self.steps[k - 1].context_index == call:
            k -= 1
        return k

    def previous_context(self, k: int) -> list[Message]:
        """The messages of the model call before the one action ``k`` answered (empty for the first call)."""
        call = self._call(k)
        return [self.messages[i] for i in self._context_ids(call - 1)] if call else []

    def step(self, k: int) -> Step:
        """The step with index ``k``."""
        if not 0 <= k < len(self.steps):
            raise IndexError(f"episode {self.episode_id} has steps 0..{len(self.steps) - 1}; there is no step {k}")
        return self.steps[k]

    # ----- tables and display -------------------------------------------------------------------

    def steps_frame(self) -> pd.DataFrame:
        """One row per step record."""
        rows = [
            (
                s.index,
                str(s.kind),
                s.reward,
                s.discount,
                s.timestamp,
                s.dt,
                s.command,
                s.returncode,
                len(s.output) if s.output is not None else None,
                s.output_elided,
                s.format_error,
                s.usage.prompt_tokens,
                s.usage.generated_tokens,
                s.cost,
                s.context_len,
                len(self.context_change(s.index).new) if s.context_rewritten and s.has_action
                else s.new_message_count,
                s.context_rewritten,
                s.model_time,
                s.command_time,
                s.duration,
                s.failure,
                len(s.reasoning),
            )
            for s in self.steps
        ]
        import pandas as pd
        frame = pd.DataFrame.from_records(rows, columns=list(STEP_COLUMNS))
        return frame.astype({"returncode": "Int64", "output_chars": "Int64", "prompt_tokens": "Int64",
                             "generated_tokens": "Int64"})

    def summary(self) -> EpisodeRow:
        """The episode's row in a run's episode table."""
        return explain(EpisodeRow(
            episode_id=self.episode_id,
            task_name=self.task_name,
            outcome=str(self.outcome),
            total_reward=self.total_reward,
            num_actions=self.num_actions,
            start_time=self.start_time,
            end_time=self.end_time,
            duration_s=self.duration_s,
            total_cost=self.total_cost,
            prompt_tokens=self.prompt_tokens,
            generated_tokens=self.generated_tokens,
            truncated=self.truncated,
            error=self.error,
            nonzero_returncodes=sum(1 for s in self.steps if s.returncode not in (None, 0)),
            context_rewrites=sum(1 for s in self.steps if s.context_rewritten),
            path=self.path,
            format=self.format,
        ), self.verifier)

    def __repr__(self) -> str:
        return (
            f"Episode({self.episode_id!r}, task={self.task_name!r}, outcome={self.outcome.value}, "
            f"reward={self.total_reward}, actions={self.num_actions})"
        )

    def __str__(self) -> str:
        return render.episode_text(self)

    def _repr_html_(self) -> str:
        return render.episode_html(self)
