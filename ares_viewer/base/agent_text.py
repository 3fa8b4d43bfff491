"""The default coding agent's text protocol: commands in responses, results in observations.

The one declaration of the protocol, read by the format adapters and written by the counterfactual loop: the
submit markers, the format-error text and the result message.

ARES's bundled agent (mini-swe-agent style) answers with a THOUGHT and exactly one fenced bash
block; the command's result comes back as a user message with ``<returncode>`` and ``<output>``,
or, for outputs of 10,000 characters or more, a warning with the head, the number of elided
characters and the tail. These are pure functions so every adapter that meets the protocol
(ARES files, mini-swe-agent's older text trajectories) reads it the same way.
"""

from __future__ import annotations

import dataclasses
import json
import re

# mini-swe-agent's own action regexes: a fenced block opened with ```bash (1.x, ARES's agent) or
# ```mswea_bash_command (2.x's text-based models).
_BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_ELIDED_CHARS = re.compile(r"<elided_chars>\s*(\d+)\s*characters elided\s*</elided_chars>")
# Where an observation's return code is looked for: its opening characters.
RETURNCODE_WITHIN = 200
# What a submit command echoes first: ARES's agent (mini-swe-agent 1.x) and mini-swe-agent's own older marker.
SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
# A response without exactly one bash block gets this back, as ARES's default agent answers a format error.
FORMAT_ERROR = (
    "Please always provide EXACTLY ONE action in triple backticks, found {found} actions.\n"
    "If you want to end the task, please issue the following command: "
    f"`echo {SUBMIT_MARKERS[0]}`"
)


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedResponse:
    """What a model response says: its thought, its command and how many bash blocks it had."""

    thought: str
    command: str | None
    bash_blocks: int


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedResult:
    """What an observation message says about the command that ran."""

    returncode: int | None
    output: str | None
    elided_chars: int
    format_error: bool
    timed_out: bool
    submitted: bool


def parse_response(text: str) -> ParsedResponse:
    """Split a response into its thought and its single bash command.

    A response with zero or several bash blocks has no command: the agent did not execute it
    (the environment answered with a format error instead).
    """
    blocks = list(_BASH_BLOCK.finditer(text))
    thought = (text[: blocks[0].start()] if blocks else text).strip()
    command = blocks[0].group(1).strip() if len(blocks) == 1 else None
    return ParsedResponse(thought=thought, command=command, bash_blocks=len(blocks))


def command_from_tool_call(name: str, arguments: str) -> str:
    """The shell command of a tool call: its ``command``/``cmd`` argument, else the raw arguments."""
    try:
        args = json.loads(arguments) if arguments else {}
    except (ValueError, TypeError):
        return arguments
    if isinstance(args, dict):
        for key in ("command", "cmd", "bash", "script"):
            value = args.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return " ".join(value)
    return arguments


def _between(text: str, open_tag: str, close_tag: str) -> str | None:
    """The text between the first ``open_tag`` and the last ``close_tag`` (one newline trimmed)."""
    start = text.find(open_tag)
    if start < 0:
        return None
    start += len(open_tag)
    end = text.rfind(close_tag)
    if end < start:
        return None
    body = text[start:end]
    if body.startswith("\n"):
        body = body[1:]
    return body


def returncode(text: str) -> int | None:
    """Just the return code of an observation message (None when it records none)."""
    match = _RETURNCODE.search(text, 0, RETURNCODE_WITHIN)
    return int(match.group(1)) if match else None


def parse_result(text: str) -> ParsedResult:
    """Read the return code and output out of an observation message.

    Understands the plain form (``<returncode>``/``<output>``), the elided form
    (``<output_head>``/``<elided_chars>``/``<output_tail>``), and marks format errors (no return
    code) and timeouts.
    """
    code = returncode(text)
    elided = 0
    head = _between(text, "<output_head>", "</output_head>")
    if head is not None:
        # The elided form puts its own newline before each closing tag.
        tail = (_between(text, "<output_tail>", "</output_tail>") or "").removesuffix("\n")
        count = _ELIDED_CHARS.search(text)
        elided = int(count.group(1)) if count else 0
        output: str | None = f"{head.removesuffix(chr(10))}\n[... {elided} characters elided ...]\n{tail}"
    else:
        output = _between(text, "<output>", "</output>")
    timed_out = "timed out" in text[:400] and code is None
    format_error = code is None and output is None and not timed_out
    submitted = submitted_text(output) is not None
    return ParsedResult(
        returncode=code,
        output=output,
        elided_chars=elided,
        format_error=format_error,
        timed_out=timed_out,
        submitted=submitted,
    )


def submitted_text(output: str | None) -> str | None:
    """What the agent submitted, when ``output`` is a submit command's output: the text after the marker line.

    The submit command prints the marker and then the final output (``git diff --cached`` by default);
    None when ``output`` does not start with a marker.
    """
    if output is None:
        return None
    stripped = output.lstrip()
    if not stripped.startswith(SUBMIT_MARKERS):
        return None
    _, _, rest = stripped.partition("\n")
    return rest


def is_submit(command: str) -> bool:
    """Whether a shell command is the agent's submit command (it echoes a submit marker)."""
    return SUBMIT_MARKERS[0] in command or SUBMIT_MARKERS[1] in command


def format_error(found: int) -> str:
    """The observation a response with ``found`` bash blocks (not one) gets back."""
    return FORMAT_ERROR.format(found=found)


def result_message(returncode: int | None, output: str) -> str:
    """The observation a command's result gets back (``-1`` when it has no return code), as ARES's agent words it
    (its template closes ``</output>`` right after the output); ``parse_result`` reads ``output`` back unchanged."""
    code = returncode if returncode is not None else -1
    return f"<returncode>{code}</returncode>\n<output>\n{output}</output>"
