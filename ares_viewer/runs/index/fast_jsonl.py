"""JSON Lines files read by DuckDB's JSON reader: the plumbing every format's fast path shares.

A format's fast path (``_fast_tinker``, ``_fast_ray``) is a ``Spec``: which adapter's files it takes,
how it loads a batch of them into the temporary table ``raw`` (one row per episode, a ``path`` column, an ``odd``
column) and the SELECT of their index rows. This module picks the files (local JSON Lines files whose first line the
adapter sniffs as its own), runs a spec on a batch of them (``builder`` cuts the batches and reads one per core
side by side, in the calling process), writes each batch as one partition and sends the files it does not take to
the ordinary path: a batch DuckDB cannot read (or with a value the format's functions fail on) is retried file by file,
and a file with an odd row is left whole to the ordinary path, whose errors and warnings are then the file's. It
also holds what the specs share: reading JSON values kept as JSON text (``number``, ``integer``, ``count``,
``string``), the rewrites and command results of consecutive contexts (``context_pairs``) and the result texts that
record a failed command (``failed_results``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence

import duckdb
import orjson

from ares_viewer.base import atomic, locations
from ares_viewer.formats import base, chat, registry
from ares_viewer.runs import sources
from ares_viewer.runs.index import store

# Source data the fast path holds in memory at once (times a format's ``Spec.batches``): batches read side by side
# share it (``builder._fast``); a batch's files are read by one query and written as one partition. Each batch
# costs some 50 ms of fixed queries (planning the read, the Parquet file): the larger, the fewer.
BATCH_BYTES = 128 * 1024 * 1024
_FIRST_LINE_BYTES = 4 * 1024 * 1024
_SUFFIXES = (".jsonl", ".ndjson", ".json")

# JSON text (a column read as JSON) classified by its first character, without parsing it again.
DIGITS = "('-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9')"


def number(column: str) -> str:
    """A JSON number, true or false as a DOUBLE (``chat.number`` without its warnings); NULL for the rest."""
    return (f"CASE WHEN left({column}, 1) IN {DIGITS} THEN TRY_CAST({column} AS DOUBLE) "
            f"WHEN {column} = 'true' THEN 1.0 WHEN {column} = 'false' THEN 0.0 END")


def integer(column: str) -> str:
    """A JSON integer literal as a BIGINT (NULL for anything else: ``is_integer`` below tells them apart)."""
    return f"CASE WHEN {is_integer(column)} THEN TRY_CAST({column} AS BIGINT) END"


def is_integer(column: str) -> str:
    return f"(regexp_full_match({column}, '-?[0-9]{{1,18}}'))"


def count(column: str) -> str:
    """A token count as ``chat.count`` reads it: a non-negative number truncated, anything else NULL (unknown:
    ``list_sum`` leaves it out, and is NULL when every count is)."""
    return f"CASE WHEN left({column}, 1) BETWEEN '0' AND '9' THEN trunc(TRY_CAST({column} AS DOUBLE)) END"


def string(column: str) -> str:
    """A JSON string's value (NULL for other JSON values)."""
    return f"CASE WHEN left({column}, 1) = '\"' THEN json_extract_string({column}, '$') END"


@dataclasses.dataclass(frozen=True)
class Spec:
    """A format's fast path (a module's ``SPEC``)."""

    module: str
    """The module that holds it as ``SPEC``."""

    adapter: base.Adapter
    """The adapter whose files it takes (``registry.sniff`` of a file's first line)."""
    load: Callable[[duckdb.DuckDBPyConnection, list[str], Sequence[sources.SourceFile]], None]
    """Creates TEMP TABLE ``raw`` (``path``, ``odd`` and whatever ``rows`` needs) from these files (``read``
    runs its ``read_json`` query); raises ``duckdb.Error`` when DuckDB cannot read them."""
    rows: str
    """The index rows as one SELECT over ``raw_ok`` (``raw`` without the odd files' rows, plus ``_seq``: the
    row's place in ``raw``), with the ``model.EpisodeRow`` columns, the format's own and ``_seq``."""
    prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None
    """Run once ``raw_ok`` exists, before ``rows``: what the rows join (e.g. values worked out in Python). It may
    set ``odd`` on more rows of ``raw``."""
    tables: tuple[str, ...] = ()
    """Tables ``load`` and ``prepare`` make with ``register``, dropped after each batch."""
    batches: int = 1
    """How many times ``BATCH_BYTES`` of source data its batches may hold at once: less where ``raw`` keeps more
    of each line (Ray runner's keeps the last chat, and every chat of a trajectory whose chats do not extend each
    other as text)."""


def first_line_adapter(file: sources.SourceFile, max_bytes: int) -> base.Adapter | None:
    """The adapter of a local JSON Lines file's first line (None: not one, or left to the ordinary path).

    A file over the size bound (``sources.Limits``) is left to the ordinary path, which reports it."""
    if (not locations.is_local(file.path) or file.size == 0 or file.size > max_bytes
            or not file.path.lower().endswith(_SUFFIXES)):
        return None
    try:
        with open(file.path, "rb") as handle:
            first = handle.readline(_FIRST_LINE_BYTES)
    except OSError:
        return None
    if not first.endswith(b"\n"):
        return None
    try:
        doc = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    return registry.sniff(doc)


def connect(threads: int) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"SET threads = {max(1, int(threads))}")
    con.execute("SET preserve_insertion_order = true")
    con.execute("SET enable_progress_bar = false")  # a batch of seconds would draw one on stderr
    return con


def _drop_tables(con: duckdb.DuckDBPyConnection, spec: Spec) -> None:
    for table in spec.tables:
        with contextlib.suppress(duckdb.Error):
            drop(con, table)


def _odd(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The files with an odd row; ``raw_ok`` becomes the other files' rows."""
    con.execute("CREATE OR REPLACE TEMP TABLE odd_paths AS SELECT DISTINCT path FROM raw WHERE odd")
    con.execute("CREATE OR REPLACE TEMP VIEW raw_ok AS SELECT *, rowid AS _seq FROM raw "
                "WHERE path NOT IN (SELECT path FROM odd_paths)")
    return {row[0] for row in con.execute("SELECT path FROM odd_paths").fetchall()}


def read(con: duckdb.DuckDBPyConnection, query: str, paths: list[str]) -> None:
    """Run a query whose ``read_json`` reads ``$files``: these paths."""
    con.execute(query, {"files": paths})


def read_batch(con: duckdb.DuckDBPyConnection, spec: Spec, files: list[sources.SourceFile], target: store.Store
               ) -> tuple[list[store.FileEntry], list[sources.SourceFile]]:
    """One partition from these files; their entries, and the files left for the ordinary path."""
    try:
        spec.load(con, [f.path for f in files], files)
        odd = _odd(con)
        if spec.prepare is not None:
            spec.prepare(con)  # may find more odd rows
            odd = _odd(con)
    except Exception:  # DuckDB cannot read them, or the format's Python fails on a value: the ordinary path reads
        # these files and reports each one's problem
        _drop_tables(con, spec)
        if len(files) == 1:
            return [], files
        taken: list[store.FileEntry] = []
        rest: list[sources.SourceFile] = []
        for f in files:  # one unreadable file must not send the whole batch the slow way
            t, r = read_batch(con, spec, [f], target)
            taken += t
            rest += r
        return taken, rest
    counts = dict(con.execute("SELECT path, count(*) FROM raw_ok GROUP BY path").fetchall())
    name = target.new_part_name()
    if counts:
        target.parts.mkdir(parents=True, exist_ok=True)
        with atomic.written(target.parts / name) as tmp:
            con.execute(f"COPY ({spec.rows}) TO {store.literal(str(tmp))} (FORMAT parquet, COMPRESSION zstd)")
    _drop_tables(con, spec)
    entries = [store.FileEntry(f.path, f.size, f.mtime_ns, "read", name if counts.get(f.path) else None,
                               counts.get(f.path, 0)) for f in files if f.path not in odd]
    return entries, [f for f in files if f.path in odd]


def choose(files: Sequence[sources.SourceFile], specs: Sequence[Spec]
           ) -> tuple[dict[Spec, list[sources.SourceFile]], list[sources.SourceFile]]:
    """The files each spec takes, and the rest (for the ordinary path)."""
    max_bytes = sources.Limits.from_env().max_file_bytes
    by_adapter = {spec.adapter: spec for spec in specs}
    mine: dict[Spec, list[sources.SourceFile]] = {}
    rest: list[sources.SourceFile] = []
    for f in files:
        adapter = first_line_adapter(f, max_bytes)
        spec = by_adapter.get(adapter) if adapter is not None else None
        if spec is None:
            rest.append(f)
        else:
            mine.setdefault(spec, []).append(f)
    return mine, rest


# Consecutive contexts of an episode, compared in place: ``$contexts`` gives one row per episode (``rid``), with
# ``chats`` (each model call's message list, messages as JSON text), ``roles`` (their roles), ``lo`` and ``n`` (where
# each call's context starts in its list, from 1, and how many messages it has) and ``irregular`` (a call this
# module cannot read). A context that extends the previous one unchanged (compared as JSON text) is no rewrite, and
# the previous action's result is the first user or tool message after the last assistant message among the added
# ones (``chat.kept`` and ``chat.result_message``). Anything else marks the episode irregular, for its format to
# count the ordinary way. One row per pair of consecutive calls (one for an episode of a single call): the lists are
# sliced where they lie, neither copied per call nor sorted by a window.
_PAIRS = """
CREATE OR REPLACE TEMP TABLE pairs AS
WITH p AS (
    SELECT rid, irregular,
           unnest(CASE WHEN len(chats) > 1 THEN list_transform(range(2, len(chats) + 1), lambda k: {
               'extends': n[k] >= n[k - 1] AND chats[k][lo[k]:lo[k] + n[k - 1] - 1]
                                                = chats[k - 1][lo[k - 1]:lo[k - 1] + n[k - 1] - 1],
               'added': chats[k][lo[k] + n[k - 1]:lo[k] + n[k] - 1],
               'roles': roles[k][lo[k] + n[k - 1]:lo[k] + n[k] - 1]}) ELSE [NULL] END) AS pair
    FROM ($contexts)
), a AS (
    SELECT rid, irregular OR (pair IS NOT NULL AND NOT pair.extends) AS irregular, pair.added AS added,
           pair.roles AS roles,
           coalesce(len(pair.roles) + 1 - list_position(list_reverse(pair.roles), 'assistant'), 0) AS last_said
    FROM p
), m AS (
    SELECT rid, irregular,
           json_extract(added[last_said + list_position(list_transform(roles[last_said + 1:],
                                                                      lambda q: q IN ('user', 'tool')), true)],
                        '$.content') AS content
    FROM a
)
SELECT rid, irregular OR (content IS NOT NULL AND left(content::VARCHAR, 1) <> '"') AS irregular,
       CASE WHEN left(content::VARCHAR, 1) = '"' THEN json_extract_string(content, '$') END AS body
FROM m
"""


# Where each context starts in a row's ``roles`` (``_PAIRS``' ``lo``): after a first system or developer message.
SYSTEM_SKIPPED = "list_transform(roles, lambda r: CASE WHEN r[1] IN ('system', 'developer') THEN 2 ELSE 1 END)"


# Roles read without parsing the message: a message that DuckDB wrote back as JSON text starting with one of these
# has that role as its first key (the rest are parsed).
_ROLES = ("system", "developer", "user", "assistant", "tool")


def _role(message: str) -> str:
    known = " ".join(f"""WHEN starts_with({message}, '{{"role":"{r}",') THEN '{r}'""" for r in _ROLES)
    return f"CASE {known} ELSE json_extract_string({message}, '$.role') END"


def roles(chats: str) -> str:
    """The roles of a list of message lists in JSON text (NULL where a message has none)."""
    return f"list_transform({chats}, lambda c: list_transform(c, lambda m: {_role('m')}))"


def kinds(roles: str) -> str:
    """A list of roles as a string: A an assistant message, R a user or tool message, . any other."""
    return (f"array_to_string(list_transform({roles}, lambda q: CASE WHEN q = 'assistant' THEN 'A' "
            "WHEN q IN ('user', 'tool') THEN 'R' ELSE '.' END), '')")


def context_length(kinds: str) -> str:
    """How many messages of a chat (its ``kinds`` string) come before its answer, the last run of A's
    (``ray_runner._split_answer``): found by trimming; the whole chat when it has no A."""
    return (f"CASE WHEN contains({kinds}, 'A') THEN length(rtrim(rtrim({kinds}, '.R'), 'A')) "
            f"ELSE length({kinds}) END")


def text_extends(chats: str) -> str:
    """Whether each of a list of chats (JSON array texts as DuckDB writes them back: compact) holds the whole
    previous one and more, compared as text: ``[a,b]`` then ``[a,b,c,...]``. Such chats are read by
    ``_TEXT_PAIRS`` without parsing what they repeat. (The previous chat is cut by bytes, as a BLOB: cutting a
    text counts its characters.)"""
    return (f"(len({chats}) > 0 AND list_count({chats}) = len({chats}) AND coalesce(list_bool_and(list_transform("
            f"range(2, len({chats}) + 1), lambda k: starts_with({chats}[k], "
            f"decode(encode({chats}[k - 1])[1:strlen({chats}[k - 1]) - 1]) || ','))), true))")


# ``_PAIRS`` for an episode whose chats each extend the previous one as text (``text_extends``): ``$texts`` gives one
# row per episode (``rid``) with ``sizes`` (each call's message list, its context then its answer, as JSON text:
# its length in bytes, ``strlen``) and ``last_chat`` (the last one's text). The last chat holds every message, so it
# alone is parsed; each chat is its first messages, as many as its length in bytes says (DuckDB writes a list back
# as ``[`` + messages joined by ``,`` + ``]``, each message as it writes it alone). The roles after a first system
# or developer message become one string (``kinds``); a chat's context ends where its last run of A's starts
# (``ray_runner._split_answer``), so contexts extend each other unchanged (no rewrite), and a call's added messages
# run from the previous context's end to its own: the result is the first R after the last A among them.
_TEXT_PAIRS = f"""
INSERT INTO pairs
WITH f AS (
    SELECT rid, sizes, last_chat::JSON[] AS messages FROM ($texts)
), g AS (
    SELECT rid, sizes, messages, list_transform(messages, lambda m: {_role('m')}) AS roles,
           list_transform(messages, lambda m: strlen(m) + 1) AS widths
    FROM f
), h AS (
    SELECT rid, sizes, messages, CASE WHEN roles[1] IN ('system', 'developer') THEN 1 ELSE 0 END AS skipped,
           {kinds("roles")} AS kinds,
           list_transform(range(1, len(widths) + 1), lambda i: list_sum(widths[1:i]) + 1) AS ends
    FROM g
), i AS (
    SELECT rid, messages, skipped, list_transform(sizes, lambda b: coalesce(list_position(ends, b), 0)) AS counts, kinds
    FROM h
), j AS (
    SELECT rid, messages, skipped, list_bool_or(list_transform(counts, lambda c: c <= skipped)) AS irregular,
           list_transform(counts, lambda c: substr(kinds, skipped + 1, c - skipped)) AS ks
    FROM i
), k AS (
    SELECT rid, messages, skipped, irregular, list_transform(ks, lambda x: {context_length("x")}) AS n, ks
    FROM j
), p AS (
    SELECT rid, irregular OR n[1] = 0 AS irregular, messages, skipped, list_transform(range(2, len(ks) + 1),
        lambda q: substr(ks[q], n[q - 1] + 1, n[q] - n[q - 1])) AS added, n
    FROM k
), a AS (
    SELECT rid, irregular, messages, skipped, added, n, list_transform(added, lambda x: CASE WHEN contains(x, 'A')
        THEN length(x) + 1 - strpos(reverse(x), 'A') ELSE 0 END) AS said
    FROM p
), m AS (
    SELECT rid, irregular, unnest(CASE WHEN len(added) > 0 THEN list_transform(range(1, len(added) + 1),
        lambda q: CASE WHEN contains(substr(added[q], said[q] + 1), 'R') THEN json_extract(
            messages[skipped + n[q] + said[q] + strpos(substr(added[q], said[q] + 1), 'R')], '$.content') END)
        ELSE [NULL] END) AS content
    FROM a
)
SELECT rid, irregular OR (content IS NOT NULL AND left(content::VARCHAR, 1) <> '"') AS irregular,
       CASE WHEN left(content::VARCHAR, 1) = '"' THEN json_extract_string(content, '$') END AS body
FROM m
"""


def context_pairs(con: duckdb.DuckDBPyConnection, contexts: str, texts: str | None = None) -> None:
    """Tables ``pairs`` (see ``_PAIRS``) and ``pair_counts`` (``rid``, ``irregular``, ``nonzero``: the results
    whose return code is not 0) from the SELECT ``contexts`` (one row per episode, see ``_PAIRS``) and the SELECT
    ``texts`` of other episodes, whose chats extend each other as text (see ``_TEXT_PAIRS``).

    Only the distinct result texts that hold a return code are read in Python, by ``chat.command_result``."""
    con.execute(_PAIRS.replace("$contexts", contexts))
    if texts is not None:
        con.execute(_TEXT_PAIRS.replace("$texts", texts))
    failed_results(con, "SELECT DISTINCT body FROM pairs WHERE contains(body, '<returncode>')")
    con.execute("""
        CREATE OR REPLACE TEMP TABLE pair_counts AS
        SELECT rid, bool_or(irregular) AS irregular,
               count(*) FILTER (WHERE body IN (SELECT body FROM failed_results)) AS nonzero
        FROM pairs GROUP BY rid""")
    drop(con, "failed_results")


def failed_results(con: duckdb.DuckDBPyConnection, bodies: str) -> None:
    """Table ``failed_results`` (``body``): the result texts among those the SELECT ``bodies`` gives (one column,
    distinct) whose return code is not 0, read by ``chat.command_result``; ``drop`` it when done."""
    texts = [row[0] for row in con.execute(bodies).fetchall()]
    failed = [b for b in texts if chat.command_result({"content": b}).returncode not in (None, 0)]
    register(con, "failed_results", {"body": ("VARCHAR", failed)})


def register(con: duckdb.DuckDBPyConnection, name: str, columns: store.Columns) -> None:
    """Temporary table ``name`` of these columns (``(DuckDB type, values)``, all of one length)."""
    select, params = store.select_of(columns)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {select}", params)


def drop(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop a table ``register`` made."""
    con.execute(f"DROP TABLE IF EXISTS {name}")
