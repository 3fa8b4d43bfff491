"""The run index on disk: episode rows in Parquet partitions, and a manifest saying which file is where.

An index lives in a folder of its own (in the user's cache, or a shared fsspec location, never in the run):

- ``manifest.parquet``: one row per file of the run: its path, size and mtime (the key that says whether
  it changed), what it held (``read``, ``skipped``, ``verdicts``, ``trial``), the partition holding its
  episode rows and that partition's size, its errors, and an evaluation report's verdicts or a harbor trial's
  result;
- ``manifest.json``: the same rows in JSON, naming the manifest file they mirror (its size, mtime and inode),
  so that a reopen reads them with orjson and starts no DuckDB database; passed over unless it mirrors the
  manifest there now;
- ``parts/<name>.parquet``: episode rows (``EPISODE_COLUMNS``, any format's own columns, ``warnings`` and
  ``_seq``, the row's place in its file), written once by DuckDB and never changed: a partition whose file
  changed is written again without that file's rows, under a new name. One that is gone or not the size the
  manifest recorded is damaged, and the files it held are read again (``update``).

Readers never see a half-written index: partitions are written first and the manifest is replaced
atomically last. Two writers at once each leave a consistent index (the last manifest wins); partitions
no manifest names are removed once they are old enough not to belong to a writer still at work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import operator
import os
import pathlib
import threading
import time
import typing
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import duckdb
import orjson

from ares_viewer import model
from ares_viewer.base import atomic

# Bump when the row layout or the parsing rules change, so old indexes are not reused.
SCHEMA = 11

# The episode table's common columns, in order (``model.EpisodeRow``'s); formats may add their own after them.
EPISODE_COLUMNS = model.EPISODE_COLUMNS
# The DuckDB type of each kind of ``EpisodeRow`` field.
_SQL_TYPES = {str: "VARCHAR", float: "DOUBLE", int: "BIGINT", bool: "BOOLEAN"}


def _sql_type(hint: Any) -> str:
    """The column type of an ``EpisodeRow`` field (``float | None`` is a nullable double)."""
    (kind,) = [k for k in (typing.get_args(hint) or (hint,)) if k is not type(None)]
    return _SQL_TYPES[kind]


_HINTS = typing.get_type_hints(model.EpisodeRow)
# The episode columns' DuckDB types.
ROW_TYPES: dict[str, str] = {name: _sql_type(_HINTS[name]) for name in EPISODE_COLUMNS}
# Bookkeeping columns of a partition, not shown in the episode table.
WARNINGS, SEQ = "warnings", "_seq"
# What a report says of an unsolved episode (``verdicts.says``), else the failing tests its verifier's output names
# (the row's own ``model.EXPLAINED``, or a harbor trial's): read by ``why`` and the failure reasons, not shown as a
# column.
EXPLAINED = model.EXPLAINED
INTERNAL = (WARNINGS, SEQ, EXPLAINED)

# The manifest's columns and their DuckDB types.
MANIFEST_COLUMNS = {"path": "VARCHAR", "size": "BIGINT", "mtime_ns": "BIGINT", "kind": "VARCHAR", "part": "VARCHAR",
                    "rows": "BIGINT", "errors": "VARCHAR[]", "verdicts": "VARCHAR", "trial": "VARCHAR",
                    "part_size": "BIGINT"}
# Partitions no manifest names are removed after this long.
_GRACE_S = 600


@dataclasses.dataclass(frozen=True, slots=True)
class FileEntry:
    """What the index knows of one file of the run."""

    path: str
    size: int
    mtime_ns: int
    kind: str  # "read", "skipped", "verdicts" or "trial"
    part: str | None = None  # the partition holding its rows
    rows: int = 0
    errors: tuple[str, ...] = ()  # each a formats.errors.RecordError in its stored form (RecordError.to_json)
    verdicts: str | None = None  # an evaluation report's verdicts, JSON
    trial: str | None = None  # a harbor trial's result (``formats.harbor.read``), JSON
    # The partition's size in bytes when the manifest was written: a partition is never changed, so another size
    # (or none) means it was damaged or replaced, and its files are read again (``Store.damaged``).
    part_size: int | None = None

    @property
    def key(self) -> tuple[int, int]:
        return self.size, self.mtime_ns


def index_key(location: str) -> str:
    """The folder name of a run's index: the same run location gives the same index everywhere."""
    return hashlib.sha256(location.encode()).hexdigest()[:24]


# The largest integer a BIGINT column holds (and the smallest is -_INT_LIMIT - 1).
_INT_LIMIT = 2**63 - 1


def _column_type(values: list[Any]) -> str:
    """The DuckDB type of a format's own column: one kind of value keeps its type, a mix of kinds is text."""
    kinds = {type(v) for v in values if v is not None}
    if kinds == {bool}:
        return "BOOLEAN"
    if kinds == {int}:
        return "BIGINT"
    if kinds and kinds <= {int, float}:
        return "DOUBLE"
    return "VARCHAR"


def unfit(row: Mapping[str, Any]) -> str | None:
    """Why an episode row cannot be stored in the index (a number out of its columns' range), or None.

    A file written by anyone may say that a count is ``1e19``: that is its file's error, never the run's.
    """
    for name, value in row.items():
        kind = type(value)
        if kind is str or kind is bool or value is None:  # the usual cases first: a run has millions of rows
            continue
        if kind is not float and kind is not int and (isinstance(value, bool) or not isinstance(value, int | float)):
            continue
        if (isinstance(value, int) or ROW_TYPES.get(name) == "BIGINT") and not -_INT_LIMIT - 1 <= value <= _INT_LIMIT:
            return f"{name} is {value!r}, out of the range the index holds (a 64-bit integer)"
    return None


# The episode columns of integers, and a getter of their values in a row.
_BIGINTS = tuple(name for name, kind in ROW_TYPES.items() if kind == "BIGINT")
_BIGINT_VALUES = operator.itemgetter(*_BIGINTS)
# The kinds of value an integer column may hold without a row being looked at by ``unfit``: bounded by orjson as it
# writes the row (``Store.stage_fitting``).
_PLAIN_INTS = frozenset({int, bool, type(None)})


def _plain_ints(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the integer columns of ``rows`` hold nothing but integers, booleans and nulls, looked at in bulk (the
    values gathered and their kinds counted in C): a float there may be out of their range (``unfit``)."""
    try:
        kinds = set(map(type, itertools.chain.from_iterable(map(_BIGINT_VALUES, rows))))
    except KeyError:  # a row without one of them
        kinds = {type(row.get(name)) for row in rows for name in _BIGINTS}
    return kinds <= _PLAIN_INTS


@dataclasses.dataclass(frozen=True, slots=True)
class Staged:
    """Episode rows written out as a JSON array (``Store.stage``), to become a partition (``Store.commit``)."""

    name: str  # the partition's name
    rows_path: str
    types: dict[str, str]  # column -> DuckDB type, in the partition's order
    rows: int = 0


@dataclasses.dataclass(slots=True)
class _Shared:
    """This process's database for the index's short jobs, and how many of them use it now."""

    pid: int
    con: duckdb.DuckDBPyConnection
    users: int = 0


_shared: _Shared | None = None
_shared_lock = threading.Lock()


@contextlib.contextmanager
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of its own, for a ``with`` block, to this process's DuckDB database for the index's short jobs:
    reading and writing a manifest, making or rewriting a partition. Starting a database costs 90 to 120 million
    instructions (20 to 40 ms: DuckDB registers its functions and extensions), a connection to one next to nothing.
    Temporary tables are the connection's own; settings are the database's (none is set)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.pid != os.getpid():  # a forked child never uses its parent's database
            _shared = _Shared(os.getpid(), duckdb.connect())
        mine = _shared
        mine.users += 1
        cursor = mine.con.cursor()
    try:
        with cursor:
            yield cursor
    finally:
        with _shared_lock:
            mine.users -= 1


def database() -> duckdb.DuckDBPyConnection:
    """A DuckDB database for the caller alone (an episode table's, closed with it): this process's database for the
    short jobs when it has one that no job uses now (a cold index has just written its partitions and manifest with
    it), handed over so that no second database is started; the next short job starts another. Else a new one."""
    global _shared
    with _shared_lock:
        if _shared is not None and _shared.pid == os.getpid() and not _shared.users:
            taken, _shared = _shared.con, None
            return taken
    return duckdb.connect()


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


# Columns of a small table made in Python: name -> (DuckDB type, values), all of one length.
Columns = dict[str, tuple[str, Sequence[Any]]]


def select_of(columns: Columns) -> tuple[str, dict[str, list[Any]]]:
    """A SELECT of these columns (``(DuckDB type, values)``, all of one length) and its query parameters: Python
    values handed to DuckDB as they are (making Arrow arrays of them would import pandas, a tenth of a second of
    every cold index)."""
    select = ", ".join(f"unnest($c{n}::{kind}[]) AS {name}" for n, (name, (kind, _)) in enumerate(columns.items()))
    return f"SELECT {select}", {f"c{n}": list(values) for n, (_, values) in enumerate(columns.values())}


# What tells one manifest file from another: its size, mtime (ns) and inode.
ManifestKey = tuple[int, int, int]


def _entries(names: Sequence[str], rows: Iterable[Sequence[Any]]) -> dict[str, FileEntry]:
    """Manifest rows (``names``: their columns) as entries by path."""
    known = [n for n in names if n in MANIFEST_COLUMNS]  # a manifest from before a column existed lacks it
    entries = {}
    for row in rows:
        fields = {n: v for n, v in zip(names, row, strict=True) if n in known}
        fields["errors"] = tuple(fields.get("errors") or ())
        entries[fields["path"]] = FileEntry(**fields)
    return entries


class Store:
    """One run's index folder on the local disk."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = pathlib.Path(folder)
        self.parts = self.folder / "parts"

    @property
    def manifest_path(self) -> pathlib.Path:
        return self.folder / "manifest.parquet"

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def part_path(self, name: str) -> str:
        return str(self.parts / name)

    def new_part_name(self) -> str:
        return f"{uuid.uuid4().hex}.parquet"

    def stage(self, rows: Sequence[Mapping[str, Any]], seqs: Sequence[int]) -> Staged:
        """Write episode rows (as adapters make them, each ``unfit``-free) and their places in their files as one JSON
        array beside the partitions: a worker process does this, and this process makes the partition (``commit``),
        so DuckDB runs only here and neither pyarrow nor pandas is imported to index a run. The rows are taken over:
        each gets its ``_seq``."""
        return self._staged(rows, seqs, 0)

    def stage_fitting(self, rows: Sequence[Mapping[str, Any]], seqs: Sequence[int]) -> Staged | None:
        """``stage`` of rows not looked at by ``unfit`` yet: None, and nothing written, when one of them may not
        fit, told in bulk (a float in an integer column; an integer beyond 53 bits anywhere, which orjson refuses as
        it writes them): each row is then looked at (``unfit``) and ``stage`` given the rows that fit. The same
        rows and errors as ``unfit`` of each row first, without a pass over every value of every row in Python."""
        if not _plain_ints(rows):
            return None
        try:
            return self._staged(rows, seqs, orjson.OPT_STRICT_INTEGER)
        except orjson.JSONEncodeError:
            return None

    def _staged(self, rows: Sequence[Mapping[str, Any]], seqs: Sequence[int], option: int) -> Staged:
        extra = sorted(set().union(*rows) - set(ROW_TYPES) - {WARNINGS, SEQ})
        types = dict(ROW_TYPES)
        text = []
        for column in extra:
            values = [row.get(column) for row in rows]
            types[column] = _column_type(values)
            if types[column] == "VARCHAR" and {type(v) for v in values} - {str, type(None)}:
                text.append(column)  # a column of mixed kinds is text
        if text or len(set(map(id, rows))) < len(rows):  # the rows given are never changed but for their ``_seq``
            rows = [{**row, **{c: str(row[c]) for c in text if row.get(c) is not None}} for row in rows]
        for row, seq in zip(rows, seqs, strict=True):
            typing.cast(dict, row)[SEQ] = seq
        # One ``orjson.dumps`` of the batch: 0.6 us a row, against 3 to 8 for a line per row.
        data = orjson.dumps(rows, option=option)
        self.parts.mkdir(parents=True, exist_ok=True)
        name = self.new_part_name()
        path = self.parts / f".{name}.json.tmp"
        path.write_bytes(data)
        return Staged(name, str(path), {**types, WARNINGS: "VARCHAR[]", SEQ: "BIGINT"}, len(rows))

    def commit(self, staged: Sequence[Staged]) -> str:
        """One partition of the rows of staged batches, written with DuckDB (named as the first batch); its name.

        Batches are committed together so that a run has few partitions: a reopen reads each one.
        """
        types: dict[str, str] = {}
        for batch in staged:
            for column, kind in batch.types.items():
                types[column] = kind if types.get(column, kind) == kind else "VARCHAR"  # a mix of kinds is text
        spec = "{" + ", ".join(f"{literal(c)}: {literal(t)}" for c, t in types.items()) + "}"
        chosen = ", ".join(f'"{c}"' for c in types)
        paths = "[" + ", ".join(literal(b.rows_path) for b in staged) + "]"
        name = staged[0].name
        try:
            with connection() as own, atomic.written(self.parts / name) as tmp:
                own.execute(f"COPY (SELECT {chosen} FROM read_json({paths}, format = 'array', "
                            f"columns = {spec}, maximum_object_size = {1 << 30})) TO {literal(str(tmp))} "
                            "(FORMAT parquet, COMPRESSION zstd)")
        finally:
            for batch in staged:
                with contextlib.suppress(OSError):
                    os.unlink(batch.rows_path)
        return name

    def write_part(self, rows: Sequence[dict[str, Any]], seqs: Sequence[int]) -> str:
        """Write a partition of episode rows (``stage`` then ``commit``); its name."""
        return self.commit([self.stage(rows, seqs)])

    @property
    def mirror_path(self) -> pathlib.Path:
        return self.folder / "manifest.json"

    def manifest_key(self, path: str | os.PathLike | None = None) -> ManifestKey | None:
        """What tells one manifest file from another (its size, mtime and inode), or None when there is none."""
        try:
            found = os.stat(path or self.manifest_path)
        except OSError:
            return None
        return found.st_size, found.st_mtime_ns, found.st_ino

    def read_manifest(self, path: str | os.PathLike | None = None) -> dict[str, FileEntry]:
        """The files the index knows, by path (empty when there is no index yet or it cannot be read).

        ``path``: read this manifest file instead (one copied from a shared index).
        """
        return self.read_keyed(path)[0]

    def read_keyed(self, path: str | os.PathLike | None = None) -> tuple[dict[str, FileEntry], ManifestKey | None]:
        """``read_manifest``, and the key of the manifest file read (None when there is none, or ``path`` is given).

        The manifest's mirror in JSON (``manifest.json``, naming the key of the manifest it mirrors) is read when it
        mirrors the manifest there now: with orjson, without starting DuckDB (a reopen's largest cost otherwise).
        """
        key = None
        if path is None:
            key = self.manifest_key()
            if key is None:
                return {}, None
            mirrored = self._read_mirror(key)
            if mirrored is not None:
                return mirrored, key
        try:
            with connection() as con:
                result = con.execute(f"SELECT * FROM read_parquet({literal(str(path or self.manifest_path))})")
                names = [column[0] for column in result.description]
                rows = result.fetchall()
        except (OSError, duckdb.Error):
            return {}, None
        entries = _entries(names, rows)
        if path is None:  # written by a version without mirrors: mirrored now (for a manifest replaced since
            self._write_mirror(key, entries.values())  # the stat above, under a key that never comes again)
        return entries, key

    def _read_mirror(self, key: ManifestKey) -> dict[str, FileEntry] | None:
        try:
            mirror = orjson.loads(self.mirror_path.read_bytes())
            if tuple(mirror["manifest"]) != key:
                return None
            return _entries(mirror["columns"], mirror["rows"])
        except (OSError, ValueError, TypeError, KeyError):  # none, or not ours: the manifest itself is read
            return None

    def _write_mirror(self, key: ManifestKey | None, entries: Iterable[FileEntry]) -> None:
        if key is None:
            return
        mirror = {"manifest": key, "columns": list(MANIFEST_COLUMNS),
                  "rows": [[getattr(e, name) for name in MANIFEST_COLUMNS] for e in entries]}
        # without its mirror, the manifest is read with DuckDB
        with contextlib.suppress(OSError), atomic.written(self.mirror_path) as tmp:
            tmp.write_bytes(orjson.dumps(mirror))

    def write_manifest(self, entries: Iterable[FileEntry], previous: dict[str, FileEntry] | None = None
                       ) -> ManifestKey | None:
        """Replace the manifest atomically (then its mirror), then drop partitions nothing names any more
        (``previous``: the manifest this one replaces). Returns the key of the manifest written (None: its
        file could not be stat'ed)."""
        sizes: dict[str, int | None] = {}
        for part in {e.part for e in entries if e.part}:
            try:
                sizes[part] = os.stat(self.part_path(part)).st_size
            except OSError:  # written elsewhere (``ray``): checked only for being there
                sizes[part] = None
        entries = sorted((dataclasses.replace(e, part_size=sizes[e.part] if e.part else None) for e in entries),
                         key=lambda e: e.path)
        columns: Columns = {name: (kind, [getattr(e, name) for e in entries])
                            for name, kind in MANIFEST_COLUMNS.items()}
        columns["errors"] = ("VARCHAR[]", [list(e.errors) for e in entries])
        select, params = select_of(columns)
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic.written(self.manifest_path) as tmp:
            with connection() as con:
                con.execute(f"COPY ({select}) TO {literal(str(tmp))} (FORMAT parquet)", params)
            key = self.manifest_key(tmp)  # a rename keeps size, mtime and inode: the key of the file as it is replaced
        self._write_mirror(key, entries)
        named = {e.part for e in entries if e.part}
        self._collect(named, {e.part for e in (previous or {}).values() if e.part})
        return key

    def _collect(self, named: set[str], dropped: set[str]) -> None:
        # A partition stays a while after no manifest names it: another process may still be reading it, or
        # may have written it and not committed its manifest yet. Dropping one marks the moment (its mtime).
        for name in dropped - named:
            with contextlib.suppress(OSError):
                os.utime(self.parts / name)
        try:
            found = list(os.scandir(self.parts))
        except OSError:
            return
        now = time.time()
        for entry in found:
            if entry.name in named:
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > _GRACE_S:
                    os.unlink(entry.path)

    def damaged(self, entries: dict[str, FileEntry]) -> set[str]:
        """The partitions these entries name that are gone, or not the size the manifest recorded (truncated,
        replaced by another file): cheap enough for every open (a ``stat`` each)."""
        found = set()
        for part, size in {(e.part, e.part_size) for e in entries.values() if e.part and e.rows}:
            try:
                actual = os.stat(self.part_path(part)).st_size
            except OSError:
                actual = None
            if actual is None or (size is not None and actual != size):
                found.add(part)
        return found

    def unreadable(self, entries: dict[str, FileEntry]) -> set[str]:
        """The partitions these entries name that DuckDB cannot read as this index's: not Parquet, cut short, or
        without the rows and columns the manifest says they hold (slower than ``damaged``: each one is read)."""
        expected: dict[str, int] = {}
        for e in entries.values():
            if e.part and e.rows:
                expected[e.part] = expected.get(e.part, 0) + e.rows
        found = set()
        with connection() as con:
            for part, rows in expected.items():
                try:
                    count = con.execute(f"SELECT count(path), count({SEQ}), count(*) FROM read_parquet("
                                        f"{literal(self.part_path(part))})").fetchone()
                except duckdb.Error:
                    found.add(part)
                    continue
                if count != (rows, rows, rows):
                    found.add(part)
        return found

    def live_parts(self, entries: Mapping[str, FileEntry]) -> list[str]:
        """The partition files holding the rows of these entries."""
        return sorted({self.part_path(e.part) for e in entries.values() if e.part and e.rows})
