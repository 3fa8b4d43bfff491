"""mini-swe-agent trajectories decoded by msgspec into just the fields an index row reads (``summarize_bytes``).

A trajectory is mostly its messages' texts and raw provider responses; the index row needs a few fields of ``info``
and of each message's ``extra``. msgspec decodes a line into the ``Trajectory`` structs below: the fields they do not
declare are skipped without building Python objects, and each message's content is kept as its JSON text (``Raw``),
decoded only where the row reads it. That costs less CPU than ``orjson.loads`` of the line (146k instructions
against 269k for a benchmark trajectory of 12 messages), but the row built from the structs in Python
(``mini_swe_agent._plain_row``, 89k) and the index's work after it leave the cold index at 1.9 to 2.1
times orjson's CPU (issue #46; figures and what was tried in docs/index.md, "Limits known today").

The structs are strict where the ordinary path is lenient: a value of another JSON type than the one declared (an
``extra`` that is no object, a cost that is a list, a message without a role: the Responses API's items) fails the
decoding, and the file is then read the ordinary way, whose warnings and errors are the file's. So are bytes that
orjson would read otherwise: bytes that are not UTF-8 (msgspec does not check the strings it skips), an integer
beyond 64 bits (orjson reads it as a float), a blank line, a file that starts with a blank.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

# An integer of 64 bits (orjson reads one beyond 64 bits as a float; msgspec bounds only signed ones): a larger one
# fails the decoding.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
# A JSON value the row reads as it is: any but a list or an object (those fail the decoding).
Scalar = str | _Int | float | bool | None
# A JSON value a field may also lack (``UNSET``): where the ordinary path's ``dict.get`` tells a missing key from
# null, or its format is told by which keys are there.
Field = Scalar | UnsetType


class Usage(msgspec.Struct, gc=False):
    prompt_tokens: Field = UNSET
    input_tokens: Field = UNSET
    completion_tokens: Field = UNSET
    output_tokens: Field = UNSET
    cost: Field = UNSET


class Response(msgspec.Struct, gc=False):
    created: Field = UNSET
    usage: Usage | UnsetType | None = UNSET


class Extra(msgspec.Struct, gc=False):
    timestamp: Field = UNSET
    cost: Field = UNSET
    returncode: Field = UNSET
    interrupt_type: Field = UNSET
    exit_status: Field = UNSET
    submission: Field = UNSET
    traceback: Field = UNSET
    response: Response | UnsetType | None = UNSET
    actions: list[msgspec.Raw] | UnsetType | None = UNSET


EMPTY_EXTRA = Extra()


class Message(msgspec.Struct, gc=False):
    role: Field = UNSET
    content: msgspec.Raw | UnsetType = UNSET
    extra: Extra | UnsetType | None = UNSET


class ModelStats(msgspec.Struct, gc=False):
    instance_cost: Field = UNSET


class Info(msgspec.Struct, gc=False):
    exit_status: Field = UNSET
    submission: Field = UNSET
    traceback: Field = UNSET
    model_stats: ModelStats | UnsetType | None = UNSET
    mini_version: Any = UNSET


class Trajectory(msgspec.Struct, gc=False):
    messages: list[Message]
    info: Info | UnsetType | None = UNSET
    trajectory_format: Field = UNSET
    # ARES's sniff, asked before mini-swe-agent's, claims a record with these.
    steps: Any = UNSET
    episode_id: Any = UNSET
    task_name: Any = UNSET


_DECODER = msgspec.json.Decoder(Trajectory)
_BLANK = re.compile(rb"[ \t\r\n]*")


def decode_value(raw: msgspec.Raw | UnsetType) -> Any:
    """A content kept as JSON text, decoded (None when missing); an integer beyond 64 bits raises ``ValueError``."""
    if raw is UNSET:
        return None
    value = msgspec.json.decode(raw)
    _check_ints(value)
    return value


def _check_ints(value: Any) -> None:
    if type(value) is int and not -(2**63) <= value < 2**64:
        raise ValueError("an integer orjson reads as a float")
    if type(value) is list:
        for item in value:
            _check_ints(item)
    elif type(value) is dict:
        for item in value.values():
            _check_ints(item)


def _sniffed(doc: Trajectory) -> bool:
    """``registry.sniff`` of the record is mini-swe-agent's: ARES's does not claim it, mini-swe-agent's does."""
    if doc.steps is not UNSET and (doc.episode_id is not UNSET or doc.task_name is not UNSET):
        return False
    if isinstance(doc.trajectory_format, str) and doc.trajectory_format.startswith("mini-swe-agent"):
        return True
    info = doc.info
    return isinstance(info, Info) and (info.exit_status is not UNSET or info.model_stats is not UNSET
                                       or info.mini_version is not UNSET)


def records(data: bytes) -> Iterator[tuple[int | None, Trajectory]] | None:
    """The file's trajectories, one at a time, and their record numbers (None for a whole document, else the
    line), as the ordinary path numbers them; None when the file is not read here: its first record is not
    mini-swe-agent's, or the file is not the plain shape read here (see the module's docstring). A later line that
    is not raises ``msgspec.MsgspecError``. Trajectories are decoded as they are read: held all at once, they would
    make the garbage collector walk them again and again."""
    if not data or data[:1] in (b" ", b"\t", b"\r", b"\n", b"\xef") or (
            not data.isascii() and not _utf8(data)):
        return None
    first_end = data.find(b"\n")
    # JSON Lines for the ordinary path (``decoding.is_json_lines``): a first line that ends an object, and more
    whole = (first_end < 0 or _BLANK.match(data, first_end).end() == len(data)  # type: ignore[union-attr]
             or not data[:first_end].rstrip().endswith(b"}"))
    try:
        first = _DECODER.decode(data if whole else data[:first_end])
    except (msgspec.MsgspecError, RecursionError):
        return None  # of a first line that ends like an object but is none, the ordinary path reads the whole file
    if not _sniffed(first):
        return None
    return iter([(None, first)]) if whole else _lines(data, first, first_end)


def _lines(data: bytes, first: Trajectory, first_end: int) -> Iterator[tuple[int | None, Trajectory]]:
    yield 1, first
    view = memoryview(data)
    start, number = first_end + 1, 2
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        try:
            doc = _DECODER.decode(view[start:end])
        except RecursionError as exc:
            raise msgspec.DecodeError("nested too deeply") from exc
        yield number, doc
        start, number = end + 1, number + 1


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
