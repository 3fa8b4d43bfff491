"""Readable faces of runs and episodes: plain text for terminals, compact HTML for notebooks.

They live beside the model because ``Episode.__str__`` and ``_repr_html_`` use them, and the model imports
nothing else of the library; a run is rendered through the few things ``RunView`` names, so this module does
not import ``ares_viewer.runs.run`` either. ``ares_viewer.model.render`` is the public name of these functions.

The HTML is self-contained (inline styles, no scripts), so it renders the same in Jupyter,
VS Code and exported notebooks.
"""

from __future__ import annotations

import datetime
import html
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ares_viewer.model import colours

if TYPE_CHECKING:
    import pandas as pd

    from ares_viewer.model.records import Episode, Message


class RunView(Protocol):
    """What rendering a run reads of it (``ares_viewer.runs.run.Run`` has all of it): its figures and its first rows
    (``queries.page``), never its whole table."""

    @property
    def location(self) -> str: ...

    @property
    def errors(self) -> Sequence[Any]: ...

    @property
    def skipped(self) -> int: ...

    @property
    def companion_kinds(self) -> Sequence[str]: ...

    @property
    def queries(self) -> Any: ...

    def stats(self) -> dict[str, Any]: ...


# A mini-swe-agent response opens its thought with this label; the heading says it already.
_THOUGHT_LABEL = re.compile(r"\A\s*THOUGHT\s*:[ \t]*\n?", re.IGNORECASE)
_ROW_COLUMNS = ["episode_id", "task_name", "outcome", "total_reward", "num_actions"]


def _first_rows(run: RunView) -> pd.DataFrame:
    return run.queries.page(limit=_TABLE_ROWS, columns=_ROW_COLUMNS)


def _more(stats: dict[str, Any]) -> int:
    """How many episodes the first rows leave out."""
    return max(0, stats["episodes"] - _TABLE_ROWS)


_MAX_TEXT = 4000
_TABLE_ROWS = 20
_STYLE = (
    "font-family:system-ui,sans-serif;font-size:13px;border-collapse:collapse;"
)
_CELL = "border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top"


# How every face shows a value the files do not give (a cost no model call records, a missing reward or return
# code): the CLI's tables, the app's figures and table cells, the notebook's text. Never 0, never "None" or "nan".
UNKNOWN = "–"


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return UNKNOWN
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def rate_text(value: float | None) -> str:
    """A share as a whole percent ("43%"), or the unknown mark when there is none (no judged episode: never 0%)."""
    return UNKNOWN if value is None or value != value else f"{value:.0%}"


def cost_text(value: float | None, digits: int = 4) -> str:
    """A cost in dollars, or "unknown" when the file records none (never $0)."""
    return "unknown" if value is None or value != value else f"${value:.{digits}f}"


def _time(value: float | None) -> str:
    if value is None:
        return UNKNOWN
    return datetime.datetime.fromtimestamp(value, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clip(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n[... {len(text) - limit} more characters]"


def _header_fields(episode: Episode) -> list[tuple[str, str]]:
    return [
        ("episode", episode.episode_id),
        ("task", episode.task_name or UNKNOWN),
        ("outcome", episode.outcome.value),
        ("reward", _fmt(episode.total_reward)),
        ("actions", str(episode.num_actions)),
        ("started", _time(episode.start_time)),
        ("duration", f"{_fmt(episode.duration_s)} s"),
        ("cost", cost_text(episode.total_cost) + steps_sum_note(episode, "cost", "${:.4f}")),
        ("tokens", f"{_fmt(episode.prompt_tokens)}{steps_sum_note(episode, 'prompt_tokens', '{:.0f}')} prompt / "
                   f"{_fmt(episode.generated_tokens)}{steps_sum_note(episode, 'generated_tokens', '{:.0f}')} "
                   "generated"),
        *([("note", episode.read_in_part)] if episode.read_in_part else []),
    ]


def steps_sum_note(episode: Episode, name: str, form: str) -> str:
    """The steps' sum beside a total the producer records, when they differ (``Episode.steps_sums``)."""
    value = episode.steps_sums().get(name)
    return "" if value is None else f" (steps' sum {form.format(value)})"


def _message_line(message: Message, limit: int = 120) -> str:
    """One message on one line: its role and the start of its text (with its length when clipped)."""
    text = " ".join(message.content.split())
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(message.content)} characters)"
    calls = f" [tool calls: {', '.join(c.name for c in message.tool_calls)}]" if message.tool_calls else ""
    return f"  [{message.role}] {text}{calls}"


def step_text(episode: Episode, k: int) -> str:
    """One step as readable text: reasoning, thought, command, result (with its failure, if any), tokens, times,
    and the messages new in its prompt since the previous call, matched by content (``Episode.context_change``)."""
    step = episode.step(k)
    lines = [f"step {step.index} ({step.kind.value})  reward={_fmt(step.reward)}  dt={_fmt(step.dt)} s"]
    if step.model_time is not None or step.command_time is not None:
        lines.append(f"time: model {_fmt(step.model_time)} s, command {_fmt(step.command_time)} s")
    if not step.has_action:
        lines.append(f"first request: {len(episode.links[0].added) if episode.links else 0} message(s)")
        return "\n".join(lines)
    change = episode.context_change(k)
    if episode.call_step(k) != k:
        lines.append(f"another command of step {episode.call_step(k)}'s model call (its response, tokens and cost "
                     "are there)")
    lines.append(
        f"tokens: {_fmt(step.usage.prompt_tokens)} prompt / {_fmt(step.usage.generated_tokens)} generated"
        f"  cost=${_fmt(step.cost)}  context={step.context_len} messages (+{len(change.new)} new)"
    )
    if not change.extends:
        lines.append(f"! earlier context was dropped or rewritten before this call: {change.summary()}")
    if change.new:
        lines += ["", f"NEW IN THE PROMPT ({len(change.new)}):", *(_message_line(m) for m in change.new)]
    if step.reasoning:
        lines += ["", "REASONING:", _clip(step.reasoning)]
    if step.thought:
        lines += ["", "THOUGHT:", _clip(_THOUGHT_LABEL.sub("", step.thought, count=1))]
    if step.command is not None:
        lines += ["", "$ " + step.command.replace("\n", "\n  ")]
    elif step.response:
        lines += ["", "(no single bash command in the response)"]
    if step.returncode is not None or step.output is not None:
        badge = f"  [{step.failure.upper()}]" if step.failure else ""
        lines += ["", f"returncode: {_fmt(step.returncode)}{badge}", _clip(step.output or "")]
    elif step.observation_text:
        lines += ["", "result:", _clip(step.observation_text)]
    return "\n".join(lines)


def episode_text(episode: Episode, why: str | None = None) -> str:
    """An episode as a header plus one line per action; ``why`` (the ending explained, with its sources) under
    the header when given."""
    lines = [f"{name:>9}: {value}" for name, value in _header_fields(episode)]
    if episode.error:
        lines.append(f"{'error':>9}: {episode.error}")
    if why:
        lines.append(f"{'why':>9}: {why}")
    for warning in episode.warnings:
        lines.append(f"  warning: {warning}")
    lines.append("")
    for step in episode.actions:
        command = (step.command or "(no command)").splitlines()[0] if (step.command or "").strip() else "(no command)"
        rc = "" if step.returncode is None else f" rc={step.returncode}"
        mark = " [context rewritten]" if step.context_rewritten else ""
        mark += f" [{step.failure}]" if step.failure else ""
        lines.append(f"{step.index:>4} {step.kind.value:<4}{rc:<7} {command[:100]}{mark}")
    return "\n".join(lines)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th style='{_CELL}'>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='{_CELL}'>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table style='{_STYLE}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _outcome_badge(outcome: str) -> str:
    colour = colours.outcome_colour(outcome)
    return f"<span style='color:{colour};font-weight:600'>{html.escape(outcome)}</span>"


def episode_html(episode: Episode) -> str:
    """An episode as a compact HTML card: header and a table of its actions."""
    fields = "".join(
        f"<div><span style='color:#57606a'>{html.escape(n)}</span> "
        f"{_outcome_badge(v) if n == 'outcome' else html.escape(v)}</div>"
        for n, v in _header_fields(episode)
    )
    rows = []
    for step in episode.actions[:_TABLE_ROWS]:
        command = html.escape((step.command or "")[:160])
        rc = _fmt(step.returncode) + (f" ({html.escape(step.failure)})" if step.failure else "")
        rows.append([str(step.index), step.kind.value, rc, f"<code>{command}</code>",
                     _fmt(step.usage.generated_tokens), "yes" if step.context_rewritten else ""])
    more = episode.num_actions - len(rows)
    note = f"<div style='color:#57606a'>… {more} more actions</div>" if more > 0 else ""
    error = f"<div style='color:#cf222e'>error: {html.escape(episode.error)}</div>" if episode.error else ""
    table = _table(["step", "kind", "rc", "command", "gen. tokens", "context rewritten"], rows)
    grid = f"<div style='display:grid;grid-template-columns:repeat(3,auto);gap:2px 16px'>{fields}</div>"
    return f"<div style='{_STYLE}'>{grid}{error}{table}{note}</div>"


_UUID = re.compile(r"[0-9a-fA-F]{8}(-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}")
_SHORT_CHARS = 40


def short_id(episode_id: str, among: Iterable[str] = ()) -> str:
    """An episode id short enough for a label, still telling it apart: a UUID by its first 8 characters; an id
    made of a path (``runs/deepseek-v3/trajs/astropy__astropy-12907``) by as many of its last parts as fit in 40
    characters, and at least as many as tell it apart from the other ids of ``among``; any other id whole, or its
    end when long. Never a prefix that every episode of a run shares."""
    if _UUID.fullmatch(episode_id):
        return episode_id[:8]
    if "/" in episode_id.strip("/"):
        parts = episode_id.strip("/").split("/")
        others = [o for o in among if o != episode_id]
        k = 1  # as many last parts as fit, and at least as many as tell it apart from the others
        while k < len(parts) and (len("/".join(parts[-(k + 1):])) <= _SHORT_CHARS
                                  or any(o.endswith("/".join(parts[-k:])) for o in others)):
            k += 1
        return "/".join(parts[-k:]) if k == len(parts) else "…/" + "/".join(parts[-k:])
    return episode_id if len(episode_id) <= _SHORT_CHARS else f"…{episode_id[-(_SHORT_CHARS - 1):]}"


def run_text(run: RunView) -> str:
    """A run as headline figures and its first episodes."""
    stats = run.stats()
    lines = [
        f"run: {run.location}",
        f"episodes: {stats['episodes']}  errors: {stats['errors']}  other files: {run.skipped}"
        + (f"  beside them: {', '.join(run.companion_kinds)}" if run.companion_kinds else ""),
        f"success rate: {_fmt(stats['success_rate'])} of {stats.get('judged', '?')} judged"
        + (f" ({stats['infrastructure_failures']} infrastructure failures beside it)"
           if stats.get("infrastructure_failures") else "")
        + f"  mean reward: {_fmt(stats['mean_reward'])}"
        f"  mean actions: {_fmt(stats['mean_actions'])}  cost: {cost_text(stats['total_cost'])}",
        "outcomes: " + ", ".join(f"{k} {v}" for k, v in stats["outcomes"].items()),
    ]
    for _, row in _first_rows(run).iterrows():
        lines.append(
            f"  {row['episode_id'][:36]:<36} {_fmt(row['task_name'])[:30]:<30} {row['outcome']:<11}"
            f" reward={_fmt(row['total_reward'])} actions={row['num_actions']}"
        )
    if _more(stats):
        lines.append(f"  … and {_more(stats):,} more episodes")
    for error in run.errors[:_TABLE_ROWS]:
        lines.append(f"  error: {error}")
    return "\n".join(lines)


def run_html(run: RunView) -> str:
    """A run as a compact HTML card: figures, the first episodes and the load errors."""
    stats = run.stats()
    figures = (
        f"<b>{stats['episodes']}</b> episodes · success <b>{_fmt(stats['success_rate'])}</b> · "
        f"mean reward <b>{_fmt(stats['mean_reward'])}</b> · mean actions <b>{_fmt(stats['mean_actions'])}</b> · "
        f"cost <b>{cost_text(stats['total_cost'])}</b> · "
        + ", ".join(f"{html.escape(str(k))} {v}" for k, v in stats["outcomes"].items())
    )
    rows = [
        [f"<code>{html.escape(r['episode_id'])}</code>", html.escape(_fmt(r["task_name"])),
         _outcome_badge(r["outcome"]), _fmt(r["total_reward"]), str(r["num_actions"])]
        for _, r in _first_rows(run).iterrows()
    ]
    table = _table(["episode", "task", "outcome", "reward", "actions"], rows)
    if _more(stats):
        table += f"<div style='color:#57606a'>… and {_more(stats):,} more episodes</div>"
    errors = "".join(f"<li>{html.escape(str(e))}</li>" for e in run.errors[:_TABLE_ROWS])
    errors_html = f"<div style='color:#cf222e'>load errors:<ul>{errors}</ul></div>" if errors else ""
    return (f"<div style='{_STYLE}'><div>{html.escape(run.location)}</div><div>{figures}</div>"
            f"{table}{errors_html}</div>")
