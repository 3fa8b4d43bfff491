"""mini-swe-agent trajectories in JSON Lines (one ``.traj.json`` document a line) read by DuckDB (``fast_jsonl``).

A trajectory's line is mostly its messages' text and raw provider responses; the index needs a few fields of
each message's ``extra``. DuckDB reads those fields as JSON text (so their JSON type stays visible), the contents,
submissions and traceback as text (``_plain``: writing them back as JSON text took half the read), and computes
the row in SQL over each line's list of messages: the model calls (assistant messages and the format errors that
stand for a rejected call) and the commands each ran, their tokens and costs, the first and last time written,
and each command's result (``mini_swe_agent._calls``, ``_call_range``, ``_actions``, ``_returncodes``, ``_time``,
``_cost``, ``_usage``).
Python only reads distinct values, each by the function the ordinary path uses: the opening of result texts
that hold a return code (``agent_text.returncode``), the exit statuses and the endings of runs an exception ended
(``summarize`` of a trajectory holding just the fields it reads for them), and each file's episode id and task
(from its path).

Rows agree with ``mini_swe_agent.summarize``. A file is left to the ordinary path when it is not the regular shape
read here exactly: a line DuckDB cannot read (corrupt, truncated, a message or ``extra`` or ``info`` that is not an
object), a message without a role (the Responses API's items, and what the reader skips), a blank line (line numbers
are part of the episode ids), a line without a ``messages`` list, a time or cost written as text (the ordinary path
reads it), a call's first result, a last message, a submission or a traceback that may not be a text (``_plain``).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import orjson

from ares_viewer import model
from ares_viewer.base import agent_text
from ares_viewer.formats.adapters import mini_swe_agent
from ares_viewer.runs import sources
from ares_viewer.runs.index import fast_jsonl, store
from ares_viewer.runs.index.fast_jsonl import count, number

_EXTRA = ("STRUCT(timestamp JSON, cost JSON, returncode JSON, interrupt_type VARCHAR, exit_status JSON, "
          "submission VARCHAR, response STRUCT(created JSON, usage JSON), actions JSON)")
# The fields DuckDB's JSON reader reads from each line, with their types (``bench_scale`` times this read alone).
COLUMNS = {"info": "STRUCT(exit_status JSON, submission VARCHAR, traceback VARCHAR, "
                    "model_stats STRUCT(instance_cost JSON))",
            "messages": f"STRUCT(role VARCHAR, content VARCHAR, extra {_EXTRA})[]"}


def _plain(column: str) -> str:
    """True for a content read as VARCHAR that ``chat.text`` gives unchanged: a text, or missing. A JSON string
    comes as its value, other values as their compact JSON text, which holds no line break (JSON escapes those
    within its strings): a content with a line break is a text; without one, what could be a list, an object, true,
    false or a number is taken for one (``chat.text`` of those is not their JSON text), so its file is read the
    ordinary way. Reading contents as text instead of JSON halves the cost of reading a trajectory."""
    return (f"({column} IS NULL OR contains({column}, chr(10)) OR NOT (left({column}, 1) IN ('[', '{{')"
            f" OR {column} IN ('true', 'false')"
            f" OR (left({column}, 1) IN {fast_jsonl.DIGITS} AND TRY_CAST({column} AS DOUBLE) IS NOT NULL)))")


def _unless_submitted(column: str) -> str:
    """A text the row's ending needs only when the run did not end submitted (``mini_swe_agent._outcome``)."""
    return f"CASE WHEN NOT submitted THEN {column} END"


# Each line: its messages' fields (``msgs``), each message's kind (``kinds``: A an assistant message, Q a rejected
# call's format error, R another result, . anything else), its model calls (``calls``, each with ``n``, the
# commands it ran: its ``extra.actions``, at least 1) and each command's result (``firsts``: the first ``n`` Rs
# after an A, marked F, or the Q itself; ``marks`` is the kinds with those marked, one segment per call), and from
# them the row's figures. A message without a role (a Responses API item) leaves the file to the ordinary path.
_RAW = f"""
CREATE OR REPLACE TEMP TABLE raw AS
WITH j AS (
    SELECT filename AS path, info, messages AS msgs, messages[-1] AS last,
        coalesce(info.exit_status::VARCHAR = '"Submitted"'
                 OR (info.exit_status IS NULL AND messages[-1].extra.exit_status::VARCHAR = '"Submitted"'), false)
            AS submitted
    FROM read_json($files, format = 'newline_delimited', filename = true, columns = {COLUMNS!r})
), c AS (
    SELECT *, list_transform(msgs, lambda m, i: CASE WHEN m.role = 'assistant' THEN 'A'
        WHEN m.role IN ('user', 'tool') AND m.extra.interrupt_type = 'FormatError'
             AND (i = 1 OR msgs[i - 1].role IS DISTINCT FROM 'assistant') THEN 'Q'
        WHEN m.role IN ('user', 'tool') THEN 'R' ELSE '.' END) AS kinds
    FROM j
), f AS (
    SELECT *, list_transform(list_filter(msgs, lambda m, i: kinds[i] IN ('A', 'Q')), lambda m: struct_pack(
            cost := m.extra.cost::VARCHAR,
            usage := json_extract(m.extra.response.usage, ['$.cost', '$.prompt_tokens', '$.input_tokens',
                                                            '$.completion_tokens', '$.output_tokens']),
            n := CASE WHEN json_type(m.extra.actions) = 'ARRAY'
                      THEN greatest(1, json_array_length(m.extra.actions)) ELSE 1 END)) AS calls,
        array_to_string(kinds, '') AS kstr
    FROM c
), s AS (
    SELECT *, CASE WHEN NOT coalesce(list_bool_or(list_transform(calls, lambda m: m.n > 1)), false)
                   THEN string_split(regexp_replace(kstr, 'A([.]*)R', 'A\\1F', 'g'), '')
                   ELSE string_split(regexp_extract(kstr, '^[^AQ]*') || array_to_string(list_transform(
            regexp_extract_all(kstr, '[AQ][^AQ]*'), lambda seg, j: CASE
                WHEN left(seg, 1) = 'Q' THEN seg
                WHEN calls[j].n = 1 THEN regexp_replace(seg, 'R', 'F')
                ELSE replace(regexp_extract(seg, '^(?:[^R]*R){{1,' || calls[j].n || '}}'), 'R', 'F')
                     || substr(seg, length(regexp_extract(seg, '^(?:[^R]*R){{1,' || calls[j].n || '}}')) + 1) END),
            ''), '') END AS marks
    FROM f
), g AS (
    SELECT *, list_filter(msgs, lambda m, i: marks[i] IN ('F', 'Q')) AS firsts
    FROM s
)
SELECT path, coalesce(list_sum(list_transform(calls, lambda m: m.n)), 0) AS num_actions,
    info.exit_status::VARCHAR AS info_status, {_unless_submitted("info.submission")} AS info_submission,
    {_unless_submitted("info.traceback")} AS traceback,
    {number("info.model_stats.instance_cost::VARCHAR")} AS instance_cost,
    last.role AS last_role, {_unless_submitted("last.content")} AS last_content,
    last.extra.exit_status::VARCHAR AS last_status, {_unless_submitted("last.extra.submission")} AS last_submission,
    coalesce(list_sum(list_transform(calls, lambda m: {count("coalesce(m.usage[2], m.usage[3])::VARCHAR")})), 0)
        AS prompt_tokens,
    coalesce(list_sum(list_transform(calls, lambda m: {count("coalesce(m.usage[4], m.usage[5])::VARCHAR")})), 0)
        AS generated_tokens,
    list_filter(list_transform(calls, lambda m: coalesce({number("m.cost")}, {number("m.usage[1]::VARCHAR")})),
                lambda x: x > 0) AS costs,
    list_filter(list_transform(msgs, lambda m: coalesce({number("m.extra.timestamp::VARCHAR")},
        CASE WHEN m.role = 'assistant' THEN {number("m.extra.response.created::VARCHAR")} END)),
                lambda x: x IS NOT NULL) AS times,
    list_transform(firsts, lambda m: struct_pack(
        code := CASE WHEN left(m.extra.returncode::VARCHAR, 1) IN {fast_jsonl.DIGITS}
                      AND TRY_CAST(m.extra.returncode::VARCHAR AS DOUBLE)
                          = trunc(TRY_CAST(m.extra.returncode::VARCHAR AS DOUBLE))
                     THEN TRY_CAST(m.extra.returncode::VARCHAR AS DOUBLE) END,
        body := left(coalesce(m.content, ''), {agent_text.RETURNCODE_WITHIN}))) AS results,
    (msgs IS NULL OR list_bool_or(list_transform(msgs, lambda m: m.role IS NULL))
     OR left(info.model_stats.instance_cost::VARCHAR, 1) = '"'
     OR list_bool_or(list_transform(msgs, lambda m: left(m.extra.timestamp::VARCHAR, 1) = '"'
                                    OR (m.role = 'assistant' AND left(m.extra.response.created::VARCHAR, 1) = '"')))
     OR list_bool_or(list_transform(calls, lambda m: left(m.cost, 1) = '"' OR left(m.usage[1]::VARCHAR, 1) = '"'))
     OR NOT (submitted OR ({_plain("last.content")} AND {_plain("last.extra.submission")}
                            AND {_plain("info.submission")} AND {_plain("info.traceback")}))
     OR list_bool_or(list_transform(firsts, lambda m: NOT {_plain("m.content")}))) AS odd
FROM g
"""

# The first results' return codes: ``extra.returncode`` when it is an integer, else the one the text holds
# (``mini_swe_agent._observation``), found for each distinct opening of a text in Python.
_RESULTS = """
CREATE OR REPLACE TEMP TABLE results AS SELECT _seq AS rid, r.code, r.body FROM (
    SELECT _seq, unnest(results) AS r FROM raw_ok)
"""

_NONZERO = f"""
CREATE OR REPLACE TEMP TABLE nonzero AS
SELECT rid, count(*) FILTER (WHERE CASE WHEN code IS NOT NULL THEN code <> 0
                                        ELSE left(body, {agent_text.RETURNCODE_WITHIN}) IN
                                             (SELECT body FROM failed_results) END) AS nonzero
FROM results GROUP BY rid
"""


def _lines(path: str) -> int:
    """The lines of a file (a last one without its newline included), counted in place (no copy of the file)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return 0
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            lines, end = 0, data.find(b"\n")
            while end >= 0:
                lines += 1
                end = data.find(b"\n", end + 1)
            return lines + (data[-1:] != b"\n")


def _load(con: duckdb.DuckDBPyConnection, paths: list[str], files: Sequence[sources.SourceFile]) -> None:
    fast_jsonl.read(con, _RAW, paths)
    ids, tasks, lines = [], [], []
    for f in files:
        row = mini_swe_agent.summarize({"messages": []}, f.path)[0]  # the id and task a file's path gives
        ids.append(row["episode_id"])
        tasks.append(row["task_name"])
        lines.append(_lines(f.path))
    fast_jsonl.register(con, "places", {"path": ("VARCHAR", [f.path for f in files]),
                                        "base_id": ("VARCHAR", ids),
                                        "task_name": ("VARCHAR", tasks),
                                        "lines": ("BIGINT", lines)})
    # A blank line (or anything else that is no record) would shift the line numbers of the records after it.
    con.execute("""
        UPDATE raw SET odd = true WHERE path IN (
            SELECT path FROM (SELECT path, count(*) AS n FROM raw GROUP BY path) JOIN places USING (path)
            WHERE n <> lines)""")


# Fields read as text, not JSON text.
_TEXTS = ("last_role", "last_content", "info_submission", "traceback", "last_submission")


def _summary(values: dict[str, str | None]) -> model.EpisodeRow:
    """``summarize`` of a trajectory that holds only these fields (JSON text) of ``_ENDING``."""
    v = {k: value if value is None or k in _TEXTS else orjson.loads(value) for k, value in values.items()}
    doc = {"info": {"exit_status": v.get("info_status"), "submission": v.get("info_submission"),
                    "traceback": v.get("traceback")},
           "messages": [{"role": v.get("last_role"), "content": v.get("last_content"),
                         "extra": {"exit_status": v.get("last_status"), "submission": v.get("last_submission")}}]}
    return mini_swe_agent.summarize(doc, "")[0]


def _table(con: duckdb.DuckDBPyConnection, name: str, keys: tuple[str, ...], where: str, fields: tuple[str, ...]
           ) -> None:
    """Table ``name``: for each distinct value of ``keys`` among the rows ``where`` holds, these ``fields`` of its
    ``_summary``."""
    found = con.execute(f"SELECT DISTINCT {', '.join(keys)} FROM raw_ok r WHERE {where}").fetchall()
    rows: list[Mapping[str, Any]] = [_summary(dict(zip(keys, row, strict=True))) for row in found]
    columns = {k: ("VARCHAR", [row[n] for row in found]) for n, k in enumerate(keys)}
    fast_jsonl.register(con, name, {**columns, **{f: (_TYPES.get(f, "VARCHAR"), [r[f] for r in rows])
                                                  for f in fields}})


_TYPES = {"truncated": "BOOLEAN"}


def _join(table: str, keys: tuple[str, ...]) -> str:
    return " AND ".join(f"{table}.{k} IS NOT DISTINCT FROM r.{k}" for k in keys)


# The fields ``summarize`` reads for a run's exit status and outcome (``mini_swe_agent._exit``), and for the error
# of a run an exception ended (``_outcome``).
_EXIT = ("info_status", "last_status")
_ENDING = (*_EXIT, "info_submission", "traceback", "last_role", "last_content", "last_submission")


def _prepare(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(_RESULTS)
    fast_jsonl.failed_results(con, f"""
        SELECT DISTINCT left(body, {agent_text.RETURNCODE_WITHIN}) FROM results
        WHERE code IS NULL AND contains(left(body, {agent_text.RETURNCODE_WITHIN}), '<returncode>')""")
    con.execute(_NONZERO)
    _table(con, "endings", _EXIT, "true", ("exit_status", "outcome", "truncated"))
    _table(con, "exception_errors", _ENDING,
           f"EXISTS (SELECT 1 FROM endings x WHERE x.outcome = 'errored' AND {_join('x', _EXIT)})", ("error",))


_ROWS = f"""
SELECT CASE WHEN p.lines = 1 THEN p.base_id ELSE p.base_id || '#' || r.line END AS episode_id, p.task_name,
    x.outcome, NULL::DOUBLE AS total_reward, num_actions::BIGINT AS num_actions,
    times[1] AS start_time, times[-1] AS end_time, times[-1] - times[1] AS duration_s,
    CASE WHEN coalesce(list_sum(costs), 0.0) = 0 THEN coalesce(instance_cost, 0.0) ELSE list_sum(costs) END
        AS total_cost,
    prompt_tokens::BIGINT AS prompt_tokens, generated_tokens::BIGINT AS generated_tokens,
    x.truncated, e.error, coalesce(c.nonzero, 0)::BIGINT AS nonzero_returncodes,
    0::BIGINT AS context_rewrites, r.path, {store.literal(mini_swe_agent.NAME)} AS format,
    x.exit_status, []::VARCHAR[] AS warnings, r._seq
FROM (SELECT *, row_number() OVER (PARTITION BY path ORDER BY _seq) AS line FROM raw_ok) r
JOIN places p USING (path)
JOIN endings x ON {_join("x", _EXIT)}
LEFT JOIN exception_errors e ON {_join("e", _ENDING)}
LEFT JOIN nonzero c ON c.rid = r._seq
"""

SPEC = fast_jsonl.Spec(module=__name__, adapter=mini_swe_agent.ADAPTER, load=_load, rows=_ROWS, prepare=_prepare,
                       tables=("places", "endings", "exception_errors", "failed_results"), batches=4)
