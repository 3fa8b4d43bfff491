"""Ray runner trajectories in JSON Lines read by DuckDB's JSON reader (``fast_jsonl``).

A trajectory's line is mostly its chats, each repeating the conversation so far. DuckDB keeps each timestep's main
chat (its last one) as one JSON text, its reward and timestamp as JSON text, and computes the row in SQL: the
context is the main chat without its system message and its closing run of assistant messages
(``ray_runner._split_answer``), and consecutive contexts give the rewrites and command results
(``fast_jsonl.context_pairs``). When each chat's text holds the previous one whole (the usual case), only the last
chat is parsed; other trajectories have every chat parsed into messages and compared. Python only reads
distinct values: ``reset_kwargs`` for the task, ``error_info`` for the errored outcome, and result texts that
hold a return code, each by the function the ordinary path uses.

Rows agree with ``ray_runner.summarize``. A file is left to the ordinary path when it is not the regular shape
read here exactly: a line DuckDB cannot read (a timestep or chat that is not what its type says, one chat
written flat), no ``timesteps`` list, an ``episode_id`` that is not a non-empty text or integer, a reward or
timestamp written as text, a timestep without a context, or contexts that are not plain extensions of each other.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import orjson

from ares_viewer import model
from ares_viewer.formats.adapters import ray_runner
from ares_viewer.runs import sources
from ares_viewer.runs.index import fast_jsonl
from ares_viewer.runs.index.fast_jsonl import number

# The fields DuckDB's JSON reader reads from each line, with their types (``bench_scale`` times this read alone).
COLUMNS = {"episode_id": "JSON", "reset_kwargs": "JSON", "error_info": "JSON", "total_cost": "JSON",
            "timesteps": "STRUCT(chats JSON[], reward JSON, done JSON, timestamp JSON)[]"}


_RAW = f"""
CREATE OR REPLACE TEMP TABLE raw AS
SELECT * EXCLUDE (chats), CASE WHEN extends THEN NULL ELSE chats END AS chats,
    CASE WHEN extends THEN chats[-1] END AS last_chat, list_transform(chats, lambda c: strlen(c)) AS chat_sizes
FROM (SELECT *, {fast_jsonl.text_extends("chats")} AS extends FROM (
SELECT path,
    CASE WHEN left(eid, 1) = '"' THEN json_extract_string(eid, '$') ELSE eid END AS episode_id,
    kwargs, err,
    CASE WHEN left(cost, 1) IN {fast_jsonl.DIGITS} THEN TRY_CAST(cost AS DOUBLE)
         WHEN cost = 'null' OR len(timesteps) > 0 THEN NULL ELSE 0.0 END AS total_cost,  -- ray_runner._cost
    len(timesteps) AS num_actions,
    list_transform(timesteps, lambda t: {number("t.reward::VARCHAR")}) AS rewards,
    list_filter(list_transform(timesteps, lambda t: {number("t.timestamp::VARCHAR")}), lambda x: x IS NOT NULL)
        AS times,
    coalesce(timesteps[-1].done::VARCHAR = 'true', false) AS done,
    list_transform(timesteps, lambda t: t.chats[-1]::VARCHAR) AS chats,
    (timesteps IS NULL OR eid IS NULL OR eid = '""' OR NOT (left(eid, 1) = '"' OR {fast_jsonl.is_integer("eid")})
     OR list_bool_or(list_transform(timesteps, lambda t: t IS NULL
                                    OR left(t.reward::VARCHAR, 1) IN ('"', '[', '{{')
                                    OR left(t.timestamp::VARCHAR, 1) IN ('"', '[', '{{')
                                    OR list_bool_or(list_transform(t.chats, lambda c: c IS NULL
                                                                   OR left(c::VARCHAR, 1) <> '['))))) AS odd
FROM (SELECT filename AS path, episode_id::VARCHAR AS eid, reset_kwargs::VARCHAR AS kwargs,
             error_info::VARCHAR AS err, total_cost::VARCHAR AS cost, timesteps
      FROM read_json($files, format = 'newline_delimited', filename = true, columns = {COLUMNS!r}))))
"""

# Each timestep's context (``fast_jsonl.context_pairs``): its main chat without the system message and the answer
# (``ray_runner._split_answer``: from the start of the last run of assistant messages on). The roles after the
# system message become a string (``fast_jsonl.kinds``), whose last run of A's is found by trimming
# (``fast_jsonl.context_length``): the context is what comes before it, the whole chat when there is no A. A
# timestep without a context is irregular (the ordinary path pairs its results across it). Only trajectories whose
# chats do not extend each other as text come here (``extends``; the others go to ``fast_jsonl._TEXT_PAIRS``).
_CONTEXTS = f"""
WITH q AS (
    SELECT _seq AS rid, list_transform(chats, lambda c: c::JSON[]) AS chats FROM raw_ok WHERE NOT extends
), r AS (
    SELECT rid, chats, {fast_jsonl.roles("chats")} AS roles FROM q
), s AS (
    SELECT rid, chats, roles, {fast_jsonl.SYSTEM_SKIPPED} AS lo FROM r
), k AS (
    SELECT rid, chats, roles, lo, list_transform(roles, lambda r, i: {fast_jsonl.kinds("r[lo[i]:]")}) AS kinds
    FROM s
), c AS (
    SELECT rid, chats, roles, lo, list_transform(kinds, lambda x: coalesce({fast_jsonl.context_length("x")}, 0)) AS n
    FROM k
)
SELECT rid, chats, roles, lo, n, coalesce(list_bool_or(list_transform(n, lambda x: x = 0)), true) AS irregular
FROM c
"""


def _load(con: duckdb.DuckDBPyConnection, paths: list[str], files: Sequence[sources.SourceFile]) -> None:
    fast_jsonl.read(con, _RAW, paths)


def _prepare(con: duckdb.DuckDBPyConnection) -> None:
    kwargs = [row[0] for row in con.execute("SELECT DISTINCT kwargs FROM raw_ok").fetchall()]
    tasks = [ray_runner.task_name({} if k is None else {"reset_kwargs": orjson.loads(k)}) for k in kwargs]
    fast_jsonl.register(con, "tasks", {"kwargs": ("VARCHAR", kwargs),
                                       "task_name": ("VARCHAR", tasks)})
    errs = [row[0] for row in con.execute("SELECT DISTINCT err FROM raw_ok").fetchall()]
    found = [ray_runner.error_of(None if e is None else orjson.loads(e)) for e in errs]
    fast_jsonl.register(con, "errors", {"err": ("VARCHAR", errs),
                                        "errored": ("BOOLEAN", [f is not None for f in found]),
                                        "error": ("VARCHAR", [model.describe_error(f) for f in found])})
    fast_jsonl.context_pairs(con, _CONTEXTS,
                             "SELECT _seq AS rid, chat_sizes AS sizes, last_chat FROM raw_ok WHERE extends")
    con.execute("UPDATE raw SET odd = true WHERE path IN "
                "(SELECT path FROM raw_ok JOIN pair_counts ON rid = _seq WHERE irregular)")


_ROWS = """
SELECT r.episode_id, coalesce(k.task_name, '') AS task_name,
    CASE WHEN e.errored THEN 'errored' WHEN done THEN 'completed' ELSE 'incomplete' END AS outcome,
    CASE WHEN list_count(rewards) > 0 THEN list_sum(rewards) END AS total_reward,
    num_actions::BIGINT AS num_actions, times[1] AS start_time, times[-1] AS end_time,
    times[-1] - times[1] AS duration_s, total_cost,
    CASE WHEN num_actions = 0 THEN 0 END::BIGINT AS prompt_tokens,  -- none recorded: unknown with timesteps
    CASE WHEN num_actions = 0 THEN 0 END::BIGINT AS generated_tokens,
    false AS truncated, e.error, coalesce(c.nonzero, 0)::BIGINT AS nonzero_returncodes,
    0::BIGINT AS context_rewrites, r.path, 'ray' AS format, []::VARCHAR[] AS warnings, r._seq
FROM raw_ok r
LEFT JOIN tasks k ON k.kwargs IS NOT DISTINCT FROM r.kwargs
LEFT JOIN errors e ON e.err IS NOT DISTINCT FROM r.err
LEFT JOIN pair_counts c ON c.rid = r._seq
"""

SPEC = fast_jsonl.Spec(module=__name__, adapter=ray_runner.ADAPTER, load=_load, rows=_ROWS, prepare=_prepare,
                       tables=("tasks", "errors"), batches=2)
