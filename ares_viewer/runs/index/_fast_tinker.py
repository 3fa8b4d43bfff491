"""Tinker rollout files read by DuckDB's JSON reader: the index rows of millions of rollouts on every core.

A rollout-summary line is mostly its traces (prompts and responses); the index needs a dozen numbers and
the first prompt's user message. DuckDB parses the lines in C++, reads the numbers as JSON text (so their
JSON type stays visible without parsing them again) and computes the row in SQL, the context rewrites and
the action results of multi-step rollouts included. Python only sees distinct values (the first prompts, which
a group's rollouts share, for the task; the result texts that hold a return code) and the rare rollout whose
contexts are not plain extensions of each other, each through the function the ordinary path uses.

Rows agree with ``tinker.summarize``. A file is left to the ordinary path (``fast_jsonl``) when anything about it
is not the regular shape read here exactly: a line DuckDB cannot read (corrupt, truncated, longer than DuckDB's
default object size, a step or trace that is not an object, a prompt given as a text or a list), a text where a
rollout's number belongs (which the ordinary path warns about), a group or trajectory index that is not an
integer, a tag that is not a plain string, a step reward written as text.

Why DuckDB and not msgspec, as mini-swe-agent's reader: msgspec decodes the needed fields in about half of
``orjson.loads``'s CPU, but the Python that turns each rollout into a row (in the worker processes, handed to
DuckDB as NumPy arrays) made the whole index cost more CPU than this path, measured alternately on 200,000
rollouts (docs/index.md, "Limits known today"; the reader is in the history: "Tinker index: msgspec reader in
worker processes (measured slower)").
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import orjson

from ares_viewer.formats.adapters import tinker
from ares_viewer.runs import sources
from ares_viewer.runs.index import fast_jsonl, store
from ares_viewer.runs.index.fast_jsonl import count, integer, is_integer, number, string

_STEPS = ("STRUCT(ob_len JSON, ac_len JSON, reward JSON, episode_done JSON, stop_reason VARCHAR, "
          "trace STRUCT(prompt STRUCT(messages JSON)))[]")
# The fields DuckDB's JSON reader reads from each line, with their types (``bench_scale`` times this read alone).
COLUMNS = {"group_idx": "JSON", "traj_idx": "JSON", "iteration": "JSON", "split": "JSON", "total_reward": "JSON",
            "final_reward": "JSON", "tags": "JSON", "sampling_client_step": "JSON", "steps": _STEPS}
_PLAIN_TAGS = r"\[(\"[^\"\\]*\"(,\"[^\"\\]*\")*)?\]"


def _optional_integer_odd(column: str) -> str:
    return f"({column} IS NOT NULL AND NOT {is_integer(column)})"


_RAW = f"""
CREATE OR REPLACE TEMP TABLE raw AS
SELECT path,
    {integer("g")} AS group_idx, {integer("tr")} AS traj_idx, {integer("it")} AS iteration_field,
    {string("sp")} AS split_field, {number("tot")} AS total_field, {number("fin")} AS final_field,
    CASE WHEN left(tg, 1) = '[' THEN trim(replace(trim(tg, '[]'), '","', ', '), '"') END AS tags,
    coalesce(tg <> '[]', false) AS tagged,
    {integer("scs")} AS sampling_client_step,
    len(steps) AS num_actions,
    list_sum(list_transform(steps, lambda s: {count("s.ob_len::VARCHAR")}))::BIGINT AS prompt_tokens,
    list_sum(list_transform(steps, lambda s: {count("s.ac_len::VARCHAR")}))::BIGINT AS generated_tokens,
    list_transform(steps, lambda s: {number("s.reward::VARCHAR")}) AS rewards,
    coalesce(steps[-1].episode_done::VARCHAR = 'true', false) AS done,
    coalesce(lower(steps[-1].stop_reason) IN ('length', 'max_tokens', 'max_length'), false) AS length_stop,
    steps[1].trace.prompt.messages::VARCHAR AS first_prompt,
    CASE WHEN len(steps) > 1 THEN list_transform(steps, lambda s: s.trace.prompt.messages::JSON[]) END AS prompts,
    (steps IS NULL OR NOT coalesce({is_integer("g")}, false) OR NOT coalesce({is_integer("tr")}, false)
     OR {_optional_integer_odd("it")} OR {_optional_integer_odd("scs")}
     OR left(tot, 1) IN ('"', '[', '{{') OR left(fin, 1) = '"'
     OR (left(tg, 1) = '[' AND NOT regexp_full_match(tg, '{_PLAIN_TAGS}'))
     OR coalesce(left(first_prompt, 1) <> '[', false)
     OR list_bool_or(list_transform(steps, lambda s: s IS NULL OR left(s.reward::VARCHAR, 1) = '"'))) AS odd
FROM (SELECT filename AS path, group_idx::VARCHAR AS g, traj_idx::VARCHAR AS tr, iteration::VARCHAR AS it,
             split::VARCHAR AS sp, total_reward::VARCHAR AS tot, final_reward::VARCHAR AS fin, tags::VARCHAR AS tg,
             sampling_client_step::VARCHAR AS scs, steps
      FROM read_json($files, format = 'newline_delimited', filename = true, columns = {COLUMNS!r}))
"""

# The prompts of the multi-step rollouts as contexts (``fast_jsonl.context_pairs``): prompts that are no
# conversation skipped, the system message left out, as ``tinker.context_counts`` does.
_CONTEXTS = f"""
WITH c AS (
    SELECT _seq AS rid, list_filter(prompts, lambda p: p IS NOT NULL) AS chats FROM raw_ok WHERE prompts IS NOT NULL
), r AS (
    SELECT rid, chats, {fast_jsonl.roles("chats")} AS roles FROM c
), s AS (
    SELECT rid, chats, roles, {fast_jsonl.SYSTEM_SKIPPED} AS lo FROM r
)
SELECT rid, chats, roles, lo, list_transform(chats, lambda c, k: len(c) + 1 - lo[k]) AS n, false AS irregular FROM s
"""


def _load(con: duckdb.DuckDBPyConnection, paths: list[str], files: Sequence[sources.SourceFile]) -> None:
    fast_jsonl.read(con, _RAW, paths)
    _places(con, files)


def _places(con: duckdb.DuckDBPyConnection, files: Sequence[sources.SourceFile]) -> None:
    runs, iterations, bases = [], [], []
    for f in files:
        run, iteration, base = tinker.location(f.path)
        runs.append(run)
        iterations.append(iteration)
        bases.append(base)
    fast_jsonl.register(con, "places", {"path": ("VARCHAR", [f.path for f in files]),
                                        "run_name": ("VARCHAR", runs),
                                        "folder_iteration": ("BIGINT", iterations),
                                        "base": ("VARCHAR", bases)})


def _conversation(messages: list[str | None]) -> dict:
    """A trace's prompt from its messages read as JSON text (a JSON null message is None)."""
    return {"messages": [None if m is None else orjson.loads(m) for m in messages]}


def _tasks(con: duckdb.DuckDBPyConnection) -> None:
    """The task of each distinct first prompt, worked out by the ordinary path's function."""
    prompts = [row[0] for row in con.execute("SELECT DISTINCT first_prompt FROM raw_ok").fetchall()]
    texts = [None if p is None else tinker.task_text({"messages": orjson.loads(p)}) for p in prompts]
    fast_jsonl.register(con, "task_texts", {"first_prompt": ("VARCHAR", prompts),
                                            "task_text": ("VARCHAR", texts)})


def _contexts(con: duckdb.DuckDBPyConnection) -> None:
    """Non-zero exits and context rewrites of the multi-step rollouts (one-step ones have neither); a rollout whose
    contexts are not plain extensions of each other is counted by the ordinary path's function."""
    fast_jsonl.context_pairs(con, _CONTEXTS)
    rids, nonzero, rewrites = [], [], []
    irregular = con.execute(
        "SELECT _seq, prompts FROM raw_ok WHERE _seq IN (SELECT rid FROM pairs WHERE irregular)").fetchall()
    for rid, prompts in irregular:
        counts = tinker.context_counts([None if p is None else _conversation(p) for p in prompts])
        rids.append(rid)
        nonzero.append(counts[0])
        rewrites.append(counts[1])
    fast_jsonl.register(con, "odd_contexts", {"rid": ("BIGINT", rids),
                                              "nonzero": ("BIGINT", nonzero),
                                              "rewrites": ("BIGINT", rewrites)})
    con.execute("""
        CREATE OR REPLACE TEMP TABLE context_counts AS
        SELECT rid, nonzero, 0 AS rewrites FROM pair_counts WHERE NOT irregular
        UNION ALL SELECT rid, nonzero, rewrites FROM odd_contexts""")


_ROWS = """
SELECT prefix || '/g' || group_idx || '/t' || traj_idx AS episode_id,
    coalesce(t.task_text, CASE WHEN tagged THEN r.tags ELSE 'rollout' END || ' · group ' || group_idx) AS task_name,
    CASE WHEN NOT done THEN 'incomplete' WHEN length_stop THEN 'truncated' ELSE 'completed' END AS outcome,
    coalesce(total_field, CASE WHEN list_count(rewards) > 0 THEN list_sum(rewards) + coalesce(final_field, 0.0) END)
        AS total_reward,
    num_actions::BIGINT AS num_actions, NULL::DOUBLE AS start_time, NULL::DOUBLE AS end_time,
    NULL::DOUBLE AS duration_s, CASE WHEN num_actions = 0 THEN 0.0 END::DOUBLE AS total_cost,  -- never recorded
    CASE WHEN num_actions = 0 THEN 0 ELSE prompt_tokens END::BIGINT AS prompt_tokens,  -- NULL: no step records it
    CASE WHEN num_actions = 0 THEN 0 ELSE generated_tokens END::BIGINT AS generated_tokens,
    done AND length_stop AS truncated, NULL::VARCHAR AS error,
    coalesce(c.nonzero, 0)::BIGINT AS nonzero_returncodes, coalesce(c.rewrites, 0)::BIGINT AS context_rewrites,
    r.path, 'tinker' AS format,
    prefix || '/g' || group_idx AS "group", group_idx, iteration, sampling_client_step,
    coalesce(split_field, base) AS split, r.tags, traj_idx,
    []::VARCHAR[] AS warnings, r._seq
FROM (SELECT r.*, p.base, coalesce(iteration_field, folder_iteration) AS iteration,
             p.run_name || '/it' || coalesce(coalesce(iteration_field, folder_iteration)::VARCHAR, '?') || '/' || p.base
                 AS prefix
      FROM raw_ok r JOIN places p USING (path)) r
LEFT JOIN task_texts t ON t.first_prompt IS NOT DISTINCT FROM r.first_prompt
LEFT JOIN context_counts c ON c.rid = r._seq
"""


def _prepare(con: duckdb.DuckDBPyConnection) -> None:
    _tasks(con)
    _contexts(con)


SPEC = fast_jsonl.Spec(module=__name__, adapter=tinker.ADAPTER, load=_load, rows=_ROWS, prepare=_prepare,
                       tables=("places", "task_texts", "odd_contexts"), batches=3)


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
