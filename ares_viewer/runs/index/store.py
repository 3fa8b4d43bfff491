"""The run index on disk: episode rows in Parquet partitions, and a manifest saying which file is where.

An index lives in a folder of its own (in the user's cache, or a shared fsspec location, never in the run):

- ``manifest.parquet``: one row per file of the run: its path, size and mtime (the key that says whether
  it changed), what it held (``read``, ``skipped``, ``verdicts``, ``trial``), the partition holding its
  episode rows, its errors, and an evaluation report's verdicts or a harbor trial's result;
- ``parts/<name>.parquet``: episode rows (``EPISODE_COLUMNS``, any format's own columns, ``warnings`` and
  ``_seq``, the row's place in its file), written once and never changed: a partition whose file changed is
  written again without that file's rows, under a new name.

Readers never see a half-written index: partitions are written first and the manifest is replaced
atomically last. Two writers at once each leave a consistent index (the last manifest wins); partitions
no manifest names are removed once they are old enough not to belong to a writer still at work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import pathlib
import time
import typing
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import duckdb

from ares_viewer import model

if TYPE_CHECKING:
    import pyarrow as pa

# Bump when the row layout or the parsing rules change, so old indexes are not reused.
SCHEMA = 8

# The episode table's common columns, in order (``model.EpisodeRow``'s); formats may add their own after them.
EPISODE_COLUMNS = model.EPISODE_COLUMNS
# The DuckDB type of each kind of ``EpisodeRow`` field (pyarrow, with numpy, is imported only to write a partition
# the ordinary way: a fifth of ``import ares_viewer`` otherwise).
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
INTERNAL = (WARNINGS, SEQ)

# The manifest's columns and their DuckDB types.
MANIFEST_COLUMNS = {"path": "VARCHAR", "size": "BIGINT", "mtime_ns": "BIGINT", "kind": "VARCHAR", "part": "VARCHAR",
                    "rows": "BIGINT", "errors": "VARCHAR[]", "verdicts": "VARCHAR", "trial": "VARCHAR"}
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

    @property
    def key(self) -> tuple[int, int]:
        return self.size, self.mtime_ns


def index_key(location: str) -> str:
    """The folder name of a run's index: the same run location gives the same index everywhere."""
    return hashlib.sha256(location.encode()).hexdigest()[:24]


def _coerce(values: list[Any]) -> list[Any]:
    """A column of one type: mixed values (a number here, a text there) become text."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) <= 1 or kinds <= {int, float}:
        return values
    return [None if v is None else str(v) for v in values]


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type of one of ``ROW_TYPES``' column types."""
    import pyarrow as pa

    return {"VARCHAR": pa.string(), "DOUBLE": pa.float64(), "BIGINT": pa.int64(), "BOOLEAN": pa.bool_()}[sql_type]


def rows_table(rows: Sequence[dict[str, Any]], seqs: Sequence[int]) -> pa.Table:
    """Episode rows (as adapters make them) as a partition's table."""
    import pyarrow as pa

    extra = sorted({key for row in rows for key in row} - set(ROW_TYPES) - {WARNINGS})
    arrays, fields = [], []
    for name, sql_type in ROW_TYPES.items():
        kind = arrow_type(sql_type)
        values = [row.get(name) for row in rows]
        if kind == pa.float64():  # NaN (ARES writes it) is "no value", as pandas reads it
            values = [None if v is None or v != v else float(v) for v in values]
        arrays.append(pa.array(values, type=kind))
        fields.append(pa.field(name, kind))
    for name in extra:
        array = pa.array(_coerce([row.get(name) for row in rows]))
        if pa.types.is_null(array.type):
            array = array.cast(pa.string())
        arrays.append(array)
        fields.append(pa.field(name, array.type))
    arrays.append(pa.array([list(row.get(WARNINGS) or ()) for row in rows], type=pa.list_(pa.string())))
    fields.append(pa.field(WARNINGS, pa.list_(pa.string())))
    arrays.append(pa.array(seqs, type=pa.int64()))
    fields.append(pa.field(SEQ, pa.int64()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


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

    def write_part(self, table: pa.Table) -> str:
        """Write a partition; its name."""
        self.parts.mkdir(parents=True, exist_ok=True)
        name = self.new_part_name()
        tmp = self.parts / f".{name}.tmp"
        import pyarrow.parquet as pq

        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, self.parts / name)
        return name

    def read_manifest(self, path: str | os.PathLike | None = None) -> dict[str, FileEntry]:
        """The files the index knows, by path (empty when there is no index yet or it cannot be read).

        ``path``: read this manifest file instead (one copied from a shared index).
        """
        try:
            with duckdb.connect() as con:
                result = con.execute(f"SELECT * FROM read_parquet({literal(str(path or self.manifest_path))})")
                names = [column[0] for column in result.description]
                rows = result.fetchall()
        except (OSError, duckdb.Error):
            return {}
        known = [n for n in names if n in MANIFEST_COLUMNS]  # a manifest from before a column existed lacks it
        entries = {}
        for row in rows:
            fields = {n: v for n, v in zip(names, row, strict=True) if n in known}
            fields["errors"] = tuple(fields.get("errors") or ())
            entries[fields["path"]] = FileEntry(**fields)
        return entries

    def write_manifest(self, entries: Iterable[FileEntry], previous: dict[str, FileEntry] | None = None) -> None:
        """Replace the manifest atomically, then drop partitions nothing names any more (``previous``: the
        manifest this one replaces)."""
        entries = sorted(entries, key=lambda e: e.path)
        columns = {name: (kind, [getattr(e, name) for e in entries]) for name, kind in MANIFEST_COLUMNS.items()}
        columns["errors"] = ("VARCHAR[]", [list(e.errors) for e in entries])
        select, params = select_of(columns)
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".manifest-{uuid.uuid4().hex}.tmp"
        with duckdb.connect() as con:
            con.execute(f"COPY ({select}) TO {literal(str(tmp))} (FORMAT parquet)", params)
        os.replace(tmp, self.manifest_path)
        named = {e.part for e in entries if e.part}
        self._collect(named, {e.part for e in (previous or {}).values() if e.part})

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

    def live_parts(self, entries: dict[str, FileEntry]) -> list[str]:
        """The partition files holding the rows of these entries."""
        return sorted({self.part_path(e.part) for e in entries.values() if e.part and e.rows})
