"""Tinker rollout files decoded by msgspec into just the fields an index row reads: the rows of millions of rollouts.

A rollout-summary line is mostly its traces (prompts and responses); the index needs a dozen numbers and the first
prompt's user message. ``decode`` reads each line into the ``Rollout`` structs below: msgspec skips the fields they
do not declare in C, without building Python objects, and keeps each step's prompt as its JSON text (``Raw``). It
works out each rollout's numbers in Python and hands them on as NumPy arrays: ``builder`` runs it in its worker
processes, and DuckDB, in this process, scans the arrays (no copy, no parsing) into the index rows' SELECT and the
partition. Prompts are decoded only where a row reads them: the first prompt once per distinct text (a group's
rollouts share it) for the task, and the later prompts of a multi-step rollout, whose messages are read as their
roles and their contents' JSON text, to count the context rewrites and the commands that failed; a rollout whose
contexts are not plain extensions of each other (as structs, contents compared as JSON text) is counted by the
ordinary path's function on the decoded prompts.

Measured on 200,000 generated rollouts (2 cores, CPU seconds against single-core ``read + orjson.loads`` of the same
files): DuckDB's ``read_json`` of the needed columns with the rows computed in SQL took 1.85x at 1 worker and 2.10x
at 2 (its read alone 1.05-1.3x); this reader takes less (see docs/architecture.md for the figures). What else was
measured: handing the columns to DuckDB as query parameters (unnest of Python lists) took longer than the decoding;
as JSON (one document of column lists, or one array per column) or CSV, DuckDB's reading of them cost 0.16-0.3 s per
200,000 rollouts, against 0.02 s for NumPy arrays; rows staged the ordinary way (``store.stage``, ``commit``) cost
about 19 us a rollout, twice the parse.

Rows agree with ``tinker.summarize``. A file is left to the ordinary path when anything about it is not the regular
shape read here exactly: bytes that are not UTF-8, a file that does not start with an object or has a blank line, a
line msgspec cannot read into the structs (corrupt, a step or trace that is not an object, a value of a list or an
object where a number belongs, an integer beyond 64 bits), a text where a rollout's reward belongs (which the
ordinary path warns about), a group or trajectory index that is not an integer, an iteration or sampling step that
is not an integer or null, or a value the format's functions fail on.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import pathlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import duckdb
import msgspec
import orjson
from msgspec import UNSET, UnsetType

from ares_viewer.formats import chat
from ares_viewer.formats.adapters import tinker
from ares_viewer.runs import sources
from ares_viewer.runs.index import fast_jsonl, store

if TYPE_CHECKING:
    import numpy as np

# An integer of 64 bits (orjson reads one beyond 64 bits as a float): a larger one fails the decoding.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
# A JSON value a field may hold or lack (``UNSET``); a list or an object fails the decoding.
Field = str | _Int | float | bool | None | UnsetType
# Where a nullable integer column is NULL (a rollout whose value is this is left to the ordinary path).
_NULL = -(2**63)
_LENGTH_STOPS = ("length", "max_tokens", "max_length")
_INCOMPLETE, _TRUNCATED, _COMPLETED = 0, 1, 2


class Trace(msgspec.Struct, gc=False):
    prompt: msgspec.Raw | UnsetType = UNSET


class Step(msgspec.Struct, gc=False):
    ob_len: Field = UNSET
    ac_len: Field = UNSET
    reward: Field = UNSET
    episode_done: Field = UNSET
    stop_reason: Field = UNSET
    trace: Trace | UnsetType | None = UNSET


class Rollout(msgspec.Struct, gc=False):
    steps: list[Step]
    group_idx: Field = UNSET
    traj_idx: Field = UNSET
    iteration: Field = UNSET
    split: Field = UNSET
    tags: list[str] | Field = UNSET
    total_reward: Field = UNSET
    final_reward: Field = UNSET
    sampling_client_step: Field = UNSET


class Message(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A prompt's message as the context counts compare it: any other key fails the decoding (the rollout is then
    counted the ordinary way), so that two equal structs are two equal messages."""

    role: Any = UNSET
    content: msgspec.Raw | UnsetType = UNSET


class Chat(msgspec.Struct, gc=False):
    messages: list[Message]


_ROLLOUTS = msgspec.json.Decoder(list[Rollout])
# A file's lines are decoded this many bytes at a time.
_CHUNK_BYTES = 4 * 1024 * 1024
_CHAT = msgspec.json.Decoder(Chat)


class Prompt(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A first prompt whose text later prompts extend (``_text_contexts``)."""

    messages: list[msgspec.Raw]
    type: str | UnsetType = UNSET


_PROMPT = msgspec.json.Decoder(Prompt)
_MESSAGES = msgspec.json.Decoder(list[Message])
_COMMA = ord(",")


class _OddError(Exception):
    """A rollout this module does not read exactly: its file goes to the ordinary path."""


class _IrregularError(Exception):
    """Contexts that are not plain extensions of each other: counted by the ordinary path's function."""


_NAMES = ("file", "group_idx", "traj_idx", "iteration", "sampling_client_step", "num_actions", "prompt_tokens",
          "generated_tokens", "total_reward", "outcome", "nonzero", "rewrites", "split", "tags", "task")


@dataclasses.dataclass
class Decoded:
    """A batch's rollouts as columns (``_NAMES``; ``split``, ``tags`` and ``task`` as places in ``texts``, -1 for
    NULL; ``iteration`` and ``sampling_client_step`` ``_NULL`` for NULL; ``total_reward`` NaN for NULL), and the
    places in the batch of the files left to the ordinary path."""

    columns: dict[str, Any]
    texts: list[str]
    odd: list[int]


class _Batch:
    """The columns being filled, the texts and the values decoded once per batch."""

    def __init__(self) -> None:
        self.cols: tuple[list[Any], ...] = tuple([] for _ in _NAMES)
        self.ids: dict[str, int] = {}
        self.tasks: dict[bytes, str | None] = {}
        self.codes: dict[bytes, Any] = {}
        self.last: tuple[bytes, str | None] = (b"", None)

    def text(self, value: str) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.ids)
        return found

    def task(self, prompt: msgspec.Raw) -> str | None:
        """The task of a first prompt, worked out once per distinct prompt; a group's rollouts share it and come
        one after the other, so the last one is tried first (comparing bytes costs less than hashing them)."""
        key = bytes(prompt)
        if key == self.last[0]:
            return self.last[1]
        found = self.tasks.get(key, self)
        if found is self:
            found = self.tasks[key] = tinker.task_text(orjson.loads(key))
        self.last = (key, found)  # type: ignore[assignment]
        return found  # type: ignore[return-value]

    def failed(self, message: Message) -> bool:
        """Whether a result message records a command that exited non-zero (``chat.command_result``)."""
        if isinstance(message.content, UnsetType):
            return False
        key = bytes(message.content)
        if key not in self.codes:
            self.codes[key] = chat.command_result({"role": message.role, "content": orjson.loads(key)}).returncode
        return self.codes[key] not in (None, 0)


def _integer(value: object) -> int:
    """A nullable integer field (``_NULL`` for null or missing); ``_OddError`` for any other value."""
    if value is None or value is UNSET:
        return _NULL
    if type(value) is not int or value == _NULL:
        raise _OddError
    return value


def _total(doc: Rollout, steps: list[Step]) -> float:
    """``tinker._total_reward`` (NaN for None); ``_OddError`` where the ordinary path reads a text."""
    total = doc.total_reward
    if type(total) is str:
        raise _OddError
    if total is not None and total is not UNSET:
        return float(total)
    known = []
    for s in steps:
        reward = s.reward
        if type(reward) is str:
            raise _OddError
        if reward is not None and reward is not UNSET:
            known.append(float(reward))
    if not known:
        return float("nan")
    final = doc.final_reward
    if type(final) is str:
        raise _OddError
    return sum(known) + (0.0 if final is None or final is UNSET else float(final) or 0.0)


def _outcome(steps: list[Step]) -> int:
    if not steps or steps[-1].episode_done is not True:
        return _INCOMPLETE
    stop = steps[-1].stop_reason
    return _TRUNCATED if ("" if stop is UNSET else str(stop)).lower() in _LENGTH_STOPS else _COMPLETED


def _prompt(step: Step) -> msgspec.Raw | None:
    trace = step.trace
    if not isinstance(trace, Trace):
        return None
    prompt = trace.prompt
    return None if isinstance(prompt, UnsetType) else prompt


def _result(added: list[Message]) -> Message | None:
    """``chat.result_message`` of messages read as ``Message``."""
    start = 0
    for n, message in enumerate(added):
        if message.role == "assistant":
            start = n + 1
    for message in added[start:]:
        if message.role in ("user", "tool"):
            return message
    return None


def _plain_contexts(batch: _Batch, prompts: list[msgspec.Raw | None]) -> tuple[int, int]:
    """``tinker.context_counts`` of contexts that extend each other (no rewrite); ``_IrregularError`` for others, and
    for a prompt that is not a ``{messages}`` object of plain messages."""
    nonzero = 0
    previous: list[Message] | None = None
    for prompt in prompts:
        if prompt is None or bytes(prompt) == b"null":
            continue
        try:
            messages = _CHAT.decode(prompt).messages
        except (msgspec.MsgspecError, RecursionError) as exc:
            raise _IrregularError from exc
        if messages and messages[0].role in ("system", "developer"):
            messages = messages[1:]
        if previous is not None:
            n = len(previous)
            if len(messages) < n or messages[:n] != previous:
                raise _IrregularError
            result = _result(messages[n:])
            nonzero += result is not None and batch.failed(result)
        previous = messages
    return nonzero, 0


def _text_contexts(batch: _Batch, prompts: list[bytes]) -> tuple[int, int]:
    """``tinker.context_counts`` of prompts (none of them null) each of which is the previous one's text with
    messages added at the end of its list: ``{"type": ..., "messages": [a, b]}`` then ``{..., "messages": [a, b,
    c, d]}``. The first is decoded as ``Prompt`` (its only other key a text: the list it ends with is its
    messages), each later one only where it adds messages, which must be JSON of plain messages: the contexts
    extend each other unchanged (no rewrite), and a call's result is the first user or tool message after the last
    assistant message among the added ones. ``_IrregularError`` for any other prompts."""
    previous = prompts[0]
    try:
        _PROMPT.decode(previous)
    except (msgspec.MsgspecError, RecursionError) as exc:
        raise _IrregularError from exc
    nonzero = 0
    for prompt in prompts[1:]:
        cut = len(previous) - 2
        if not (previous.endswith(b"]}") and prompt.endswith(b"]}") and len(prompt) > len(previous)
                and prompt[cut] == _COMMA and prompt.startswith(previous[:cut])):
            raise _IrregularError
        try:
            added = _MESSAGES.decode(b"[" + prompt[cut + 1:-2] + b"]")
        except (msgspec.MsgspecError, RecursionError) as exc:
            raise _IrregularError from exc
        result = _result(added)
        nonzero += result is not None and batch.failed(result)
        previous = prompt
    return nonzero, 0


def _contexts(batch: _Batch, steps: list[Step]) -> tuple[int, int]:
    prompts = [_prompt(s) for s in steps]
    texts = [bytes(p) for p in prompts if p is not None]
    texts = [t for t in texts if t != b"null"]
    try:
        return _text_contexts(batch, texts) if texts else (0, 0)
    except _IrregularError:
        pass
    try:
        return _plain_contexts(batch, prompts)
    except _IrregularError:
        return tinker.context_counts([None if p is None else orjson.loads(bytes(p)) for p in prompts])


def _tokens(steps: list[Step]) -> tuple[int, int]:
    prompt = generated = 0
    for s in steps:
        prompt += chat.count(s.ob_len) or 0
        generated += chat.count(s.ac_len) or 0
    if prompt >= 2**63 or generated >= 2**63:
        raise _OddError
    return prompt, generated


def _rollouts(batch: _Batch, file: int, docs: list[Rollout]) -> None:  # noqa: PLR0912, PLR0915
    """The rows of these rollouts into ``batch``'s columns: one loop with the common case inline (it runs a
    million times; each call or lookup saved is measured), the rest through the functions above."""
    (files, groups, trajs, iterations, client_steps, actions, prompts, generated, totals, outcomes, nonzeros,
     rewrite_counts, splits, tag_ids, tasks) = (c.append for c in batch.cols)
    ids, texts, task_of = batch.ids, batch.text, batch.task
    for doc in docs:
        group, traj, steps = doc.group_idx, doc.traj_idx, doc.steps
        if type(group) is not int or type(traj) is not int or group == _NULL or traj == _NULL:
            raise _OddError
        count = len(steps)
        if count == 1 and type(ob := steps[0].ob_len) is int and type(ac := steps[0].ac_len) is int \
                and ob >= 0 and ac >= 0:
            prompts(ob)
            generated(ac)
        else:
            tokens = _tokens(steps)
            prompts(tokens[0])
            generated(tokens[1])
        tags = doc.tags
        tag_text = ", ".join(tags) if type(tags) is list else None
        task = None
        if count:
            trace = steps[0].trace
            if type(trace) is Trace and (first := trace.prompt) is not UNSET:
                task = task_of(first)
            last = steps[-1]
            if last.episode_done is True:
                stop = last.stop_reason
                outcomes(_TRUNCATED if stop is not UNSET and str(stop).lower() in _LENGTH_STOPS else _COMPLETED)
            else:
                outcomes(_INCOMPLETE)
        else:
            outcomes(_INCOMPLETE)
        if task is None:
            task = f"{tag_text if tags else 'rollout'} · group {group}"
        if count > 1:
            counts = _contexts(batch, steps)
            nonzeros(counts[0])
            rewrite_counts(counts[1])
        else:
            nonzeros(0)
            rewrite_counts(0)
        files(file)
        groups(group)
        trajs(traj)
        value = doc.iteration
        iterations(value if type(value) is int and value != _NULL else _integer(value))
        value = doc.sampling_client_step
        client_steps(value if type(value) is int and value != _NULL else _integer(value))
        actions(count)
        value = doc.total_reward
        totals(float(value) if type(value) is float or type(value) is int else _total(doc, steps))
        value = doc.split
        if type(value) is str:
            found = ids.get(value)
            splits(found if found is not None else texts(value))
        else:
            splits(-1)
        if tag_text is None:
            tag_ids(-1)
        else:
            found = ids.get(tag_text)
            tag_ids(found if found is not None else texts(tag_text))
        found = ids.get(task)
        tasks(found if found is not None else texts(task))


def _all(values: Sequence[Any], kind: type) -> bool:
    """Whether every value is exactly of this type (``map`` and ``set`` run in C: no Python per value)."""
    return set(map(type, values)) == {kind}


def _ints(values: Sequence[Any]) -> bool:
    return _all(values, int) and min(values) != _NULL


_MISSING = object()
_FIRST, _LAST = operator.itemgetter(0), operator.itemgetter(-1)
_astuple = msgspec.structs.astuple
_GET = {name: operator.attrgetter(name) for name in ("ob_len", "ac_len", "episode_done", "stop_reason", "trace",
                                                      "prompt")}


def _columns(batch: _Batch, file: int, docs: list[Rollout]) -> bool:
    """``_rollouts`` of rollouts of the common shape, column by column (the loops over the rollouts run in C:
    ``map``, ``zip``, ``set``); False, with nothing added, when any of them is of another shape."""
    (steps, groups, trajs, iterations, splits, tags, totals, _, client_steps) = zip(*map(_astuple, docs), strict=True)
    if not (_ints(groups) and _ints(trajs) and _ints(iterations) and _ints(client_steps) and _all(splits, str)
            and _all(tags, list) and set(map(type, totals)) <= {float, int}):
        return False
    counts = list(map(len, steps))
    if min(counts) == 0:
        return False
    firsts = list(map(_FIRST, steps))
    lasts = list(map(_LAST, steps))
    prompt_tokens, generated = list(map(_GET["ob_len"], firsts)), list(map(_GET["ac_len"], firsts))
    stops = list(map(_GET["stop_reason"], lasts))
    traces = list(map(_GET["trace"], firsts))
    if not (_all(prompt_tokens, int) and _all(generated, int) and min(prompt_tokens) >= 0 and min(generated) >= 0
            and _all(stops, str) and _all(traces, Trace)):
        return False
    prompts = list(map(_GET["prompt"], traces))
    if not _all(prompts, msgspec.Raw):
        return False
    nonzero, rewrites = [0] * len(docs), [0] * len(docs)
    for n in [n for n, count in enumerate(counts) if count > 1]:
        prompt_tokens[n], generated[n] = _tokens(steps[n])
        nonzero[n], rewrites[n] = _contexts(batch, steps[n])
    outcomes = [(_TRUNCATED if stop in _LENGTH_STOPS else _COMPLETED) if done is True else _INCOMPLETE
                for done, stop in zip(map(_GET["episode_done"], lasts), map(str.lower, stops), strict=True)]
    tag_texts = list(map(", ".join, tags))
    found = list(map(batch.tasks.get, map(bytes, prompts), itertools.repeat(_MISSING)))
    tasks: list[Any] = [batch.task(prompt) if task is _MISSING else task
                        for task, prompt in zip(found, prompts, strict=True)]
    if None in tasks:
        tasks = [task if task is not None else f"{text if listed else 'rollout'} · group {group}"
                 for task, text, listed, group in zip(tasks, tag_texts, tags, groups, strict=True)]
    ids = batch.ids
    for value in {*splits, *tag_texts, *tasks} - ids.keys():
        ids[value] = len(ids)
    for column, values in zip(batch.cols, (
            [file] * len(docs), groups, trajs, iterations, client_steps, counts, prompt_tokens, generated, totals,
            outcomes, nonzero, rewrites, [ids[v] for v in splits], list(map(ids.__getitem__, tag_texts)),
            [ids[v] for v in tasks]), strict=True):
        column.extend(values)
    return True


def _chunks(data: bytes) -> list[bytes]:
    """The lines of a file as JSON arrays of about ``_CHUNK_BYTES`` each (cut at line ends), each decoded by one
    call; a blank line makes two commas in a row, which fail the decoding."""
    out = []
    start = 0
    while start < len(data):
        end = data.find(b"\n", min(start + _CHUNK_BYTES, len(data)))
        end = len(data) if end < 0 else end
        out.append(b"[" + data[start:end].rstrip().replace(b"\n", b",") + b"]")
        start = end + 1
    return out


def _plain_bytes(data: bytes) -> bool:
    """UTF-8 JSON Lines that start with an object (msgspec does not check the strings it skips)."""
    if not data.startswith(b"{"):
        return False
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _file(batch: _Batch, file: int, data: bytes) -> None:
    """The rollouts of one file into ``batch``; ``_OddError`` (or a decoding error) for a file left to the ordinary
    path."""
    if not _plain_bytes(data):
        raise _OddError
    for chunk in _chunks(data):
        docs = _ROLLOUTS.decode(chunk)
        if docs and not _columns(batch, file, docs):
            _rollouts(batch, file, docs)


def decode(files: Sequence[sources.SourceFile]) -> Decoded:
    """The rollouts of a batch of local files as columns (run in ``builder``'s worker processes)."""
    import numpy as np

    batch = _Batch()
    odd: list[int] = []
    for n, f in enumerate(files):
        mark = len(batch.cols[0])
        try:
            _file(batch, n, pathlib.Path(f.path).read_bytes())
        except (_OddError, msgspec.MsgspecError, RecursionError, OSError, ValueError, TypeError, AttributeError,
                KeyError, IndexError, orjson.JSONDecodeError):
            for column in batch.cols:
                del column[mark:]
            odd.append(n)
    columns = {name: np.array(values, dtype=np.float64 if name == "total_reward" else np.int64)
               for name, values in zip(_NAMES, batch.cols, strict=True)}
    return Decoded(columns, list(batch.ids), odd)


def _load(con: duckdb.DuckDBPyConnection, paths: list[str], files: Sequence[sources.SourceFile],
          decoded: object = None) -> None:
    found = decoded if isinstance(decoded, Decoded) else decode(files)
    runs, iterations, bases = [], [], []
    for f in files:
        run, iteration, base = tinker.location(f.path)
        runs.append(run)
        iterations.append(iteration)
        bases.append(base)
    odd = set(found.odd)
    fast_jsonl.register(con, "places", {"file": ("BIGINT", list(range(len(files)))),
                                        "path": ("VARCHAR", paths),
                                        "run_name": ("VARCHAR", runs),
                                        "folder_iteration": ("BIGINT", iterations),
                                        "base": ("VARCHAR", bases),
                                        "odd": ("BOOLEAN", [n in odd for n in range(len(files))])})
    fast_jsonl.register(con, "texts", {"id": ("BIGINT", list(range(len(found.texts)))),
                                       "text": ("VARCHAR", found.texts)})
    arrays: dict[str, np.ndarray] = found.columns
    con.register("rollouts", arrays)
    try:  # each rollout's path by its file's place in the list: no join, the rollouts stay in order
        con.execute("CREATE OR REPLACE TEMP TABLE raw AS SELECT *, ($paths::VARCHAR[])[file + 1] AS path, "
                    "false AS odd FROM rollouts", {"paths": paths})
    finally:
        con.unregister("rollouts")
    con.execute("INSERT INTO raw (path, odd) SELECT path, true FROM places WHERE odd")


_ROWS = f"""
SELECT prefix || '/g' || group_idx || '/t' || traj_idx AS episode_id,
    t.text AS task_name,
    CASE outcome WHEN {_INCOMPLETE} THEN 'incomplete' WHEN {_TRUNCATED} THEN 'truncated' ELSE 'completed' END
        AS outcome,
    CASE WHEN NOT isnan(total_reward) THEN total_reward END AS total_reward,
    num_actions::BIGINT AS num_actions, NULL::DOUBLE AS start_time, NULL::DOUBLE AS end_time,
    NULL::DOUBLE AS duration_s, 0.0::DOUBLE AS total_cost,
    prompt_tokens::BIGINT AS prompt_tokens, generated_tokens::BIGINT AS generated_tokens,
    outcome = {_TRUNCATED} AS truncated, NULL::VARCHAR AS error,
    nonzero::BIGINT AS nonzero_returncodes, rewrites::BIGINT AS context_rewrites,
    r.path, 'tinker' AS format,
    prefix || '/g' || group_idx AS "group", group_idx, iteration, sampling_client_step,
    coalesce(sp.text, base) AS split, tg.text AS tags, traj_idx,
    []::VARCHAR[] AS warnings, r._seq
FROM (SELECT r.* EXCLUDE (iteration, sampling_client_step), p.base,
             coalesce(nullif(r.iteration, {_NULL}), p.folder_iteration) AS iteration,
             nullif(r.sampling_client_step, {_NULL}) AS sampling_client_step,
             p.run_name || '/it' || coalesce(coalesce(nullif(r.iteration, {_NULL}), p.folder_iteration)::VARCHAR, '?')
                 || '/' || p.base AS prefix
      FROM raw_ok r JOIN places p USING (file)) r
JOIN texts t ON t.id = r.task
LEFT JOIN texts sp ON sp.id = r.split
LEFT JOIN texts tg ON tg.id = r.tags
"""


SPEC = fast_jsonl.Spec(module=__name__, adapter=tinker.ADAPTER, load=_load, rows=_ROWS, decode=decode,
                       tables=("places", "texts"), batches=3)


def build(files: Sequence[sources.SourceFile], target: store.Store, *, threads: int
          ) -> tuple[list[store.FileEntry], list[sources.SourceFile]]:
    """Index the Tinker files among ``files`` as one batch (``builder.build`` cuts a run into batches); their
    entries, and the files left for the ordinary path."""
    chosen, rest = fast_jsonl.choose(files, [SPEC])
    if SPEC not in chosen:
        return [], rest
    con = fast_jsonl.connect(threads)
    try:
        taken, left = fast_jsonl.read_batch(con, SPEC, chosen[SPEC], target)
    finally:
        con.close()
    return taken, sorted(rest + left, key=lambda f: f.path)
