"""Reading one file: bytes in, episodes (or index rows), per-file errors, or "something else" out.

``read_file`` and ``summarize_file`` are the entry points (handed on by ``ares_viewer.formats``): the file's records
come from ``decoding``, ``registry`` tells whose format it is, and every record is read by the adapter that claims
the file's first one; a one-record file no adapter claims may be a sidecar (``sidecars.verdicts``,
``sidecars.harbor``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

import orjson

from ares_viewer import model
from ares_viewer.base import jsondecode
from ares_viewer.formats import base, decoding, registry, zipped
from ares_viewer.formats import errors as read_errors
from ares_viewer.formats.sidecars import harbor, verdicts
from ares_viewer.model import EpisodeRow

_JSON_SUFFIXES = (".json",)
_ZIP_SUFFIXES = (".eval",)  # Inspect AI logs
# What reading a record of hostile content may raise besides an adapter's ValueError: a field of the wrong type
# the adapter did not foresee, or nesting deep enough to exhaust the stack. Each is that record's error.
_CONTENT_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)


@dataclasses.dataclass(frozen=True, slots=True)
class FileResult:
    """What one file yielded: episodes (or their index rows), errors, or nothing: it is something else.

    A file can yield both: a JSONL file with one corrupt line loads every other line and reports
    the bad line in ``errors``. An evaluation report holds no episodes but ``verdicts`` (instance id ->
    verdict, see :mod:`ares_viewer.formats.sidecars.verdicts`); a harbor trial's ``result.json`` holds
    ``trial`` (what it says about the trajectory of its folder, see :mod:`ares_viewer.formats.sidecars.harbor`).
    """

    episodes: tuple[model.Episode, ...] = ()
    rows: tuple[EpisodeRow, ...] = ()
    record_errors: tuple[read_errors.RecordError, ...] = ()
    skipped: bool = False
    verdicts: tuple[tuple[str, str], ...] = ()
    trial: dict[str, Any] | None = None

    @property
    def errors(self) -> tuple[str, ...]:
        """The errors in words (``record_errors`` says of what kind each is and on which line)."""
        return tuple(str(error) for error in self.record_errors)


def _failed(kind: str, message: str) -> FileResult:
    return FileResult(record_errors=(read_errors.RecordError(kind, message),))


def is_candidate(path: str) -> bool:
    """True for files that may hold episodes (judged by name; content decides)."""
    return path.lower().endswith(_JSON_SUFFIXES + decoding.JSONL_SUFFIXES + _ZIP_SUFFIXES)


def _misnamed(path: str, records: list[decoding.Record]) -> str | None:
    reason = registry.misnamed(path)
    if not reason:
        return None
    doc = records[0].value if len(records) == 1 else [r.value for r in records]
    if isinstance(records[0].value, zipped.Member):
        found = "a zip archive of " + ", ".join(r.value.name for r in records[:6])
    else:
        found = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else f"a JSON {type(doc).__name__}"
    return f"{reason} (found: {found})"


def _content_error(exc: Exception) -> str:
    if isinstance(exc, ValueError):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    return f"unexpected content ({type(exc).__name__}: {exc})"


def _read(path: str, data: bytes, summaries: bool, wanted: str | None = None,
          lines: Collection[int] | None = None) -> FileResult:
    try:
        records, problems = decoding.decode(path, data, lines)
    except jsondecode.DecodeError as exc:
        return FileResult(record_errors=(read_errors.RecordError.of(exc),))
    except RecursionError:
        return _failed(read_errors.TOO_DEEP, "JSON nested too deeply to read")
    try:
        adapter = registry.sniff(records[0].value)
        sidecar = _sidecar(records[0].value, path, summaries, wanted) if adapter is None and len(records) == 1 \
            else None
    except _CONTENT_ERRORS as exc:
        return _failed(read_errors.FORMAT, f"cannot tell what the file holds: {_content_error(exc)}")
    if sidecar is not None:
        return sidecar
    if adapter is None:
        reason = _misnamed(path, records)
        return _failed(read_errors.FORMAT, reason) if reason else FileResult(skipped=True)
    rows: list[EpisodeRow] = []
    episodes: list[model.Episode] = []
    for record in _candidates(adapter, records, path, wanted):
        if lines is not None and record.unit == "line" and record.number not in lines:
            continue  # read only to tell the format
        try:
            found = adapter.episode_id(record.value, path, record.number) if wanted is not None else None
            if found is not None and found != wanted:  # None: the record holds several; parsing finds the one
                continue
            if summaries:
                rows.extend(_rows(adapter, record, path))
            else:
                episodes.extend(_episodes(adapter, record, path))
        except _CONTENT_ERRORS as exc:
            problems.append(read_errors.RecordError(read_errors.CONTENT, f"not a readable {adapter.NAME} episode: "
                                               f"{_content_error(exc)}", record.number, record.unit))
    # In line order: decoding and reading errors are found in two passes.
    problems.sort(key=lambda error: error.line or 0)
    return FileResult(episodes=tuple(episodes), rows=tuple(rows), record_errors=tuple(problems))


def _candidates(adapter: base.Adapter, records: list[decoding.Record], path: str,
                wanted: str | None) -> list[decoding.Record]:
    """The records that may hold episode ``wanted`` (all of them when None): of a zip archive, its members by id,
    worked out once per archive (one sample of a log of thousands is opened without asking each member)."""
    first = records[0].value
    if wanted is None or not isinstance(first, zipped.Member):
        return records

    def by_id() -> dict[str | None, list[decoding.Record]]:
        found: dict[str | None, list[decoding.Record]] = {}
        for record in records:
            try:
                key = adapter.episode_id(record.value, path, record.number)
            except _CONTENT_ERRORS:
                key = None  # read in the loop, which reports its error
            found.setdefault(key, []).append(record)
        return found

    index = first.archive.memo(("records by id", adapter.NAME, path), by_id)
    return sorted([*index.get(wanted, ()), *index.get(None, ())], key=lambda record: record.number or 0)


def _rows(adapter: base.Adapter, record: decoding.Record, path: str) -> list[EpisodeRow]:
    """One record's index rows, the record's decoding warnings first among theirs."""
    rows = adapter.summarize(record.value, path, record.number)
    for row in rows:
        row["warnings"] = [*record.warnings, *row["warnings"]]
    return rows


def _episodes(adapter: base.Adapter, record: decoding.Record, path: str) -> list[model.Episode]:
    """One record's episodes, the record's decoding warnings first among theirs."""
    episodes = adapter.parse(record.value, path, record.number)
    if not record.warnings:
        return episodes
    return [dataclasses.replace(e, warnings=(*record.warnings, *e.warnings)) for e in episodes]


def _sidecar(doc: object, path: str, summaries: bool, wanted: str | None) -> FileResult | None:
    """A one-record file that holds no episode but what the run's episodes are joined with: a verdicts file, or
    a harbor trial's ``result.json``; None for anything else."""
    if verdicts.sniff(doc):
        return FileResult(skipped=True, verdicts=tuple(verdicts.read(doc, path).items()))
    if harbor.sniff(doc):
        # Only result.json is the trial's result: another file of its shape is something else.
        if not harbor.is_result(path):
            return FileResult(skipped=True)
        return _trial(harbor.read(doc, path), summaries, wanted)
    return None


def _trial(trial: dict[str, Any], summaries: bool, wanted: str | None) -> FileResult:
    """A harbor trial's result: the trial, and the trial as an episode (``harbor.trial_episode``; the run lists
    it when no agent trajectory of the trial is: ``runs.index.joins``)."""
    episode = harbor.trial_episode(trial)
    if summaries:
        return FileResult(rows=(EpisodeRow(**{**episode.summary(), "warnings": []}),), trial=trial)
    return FileResult(episodes=(episode,) if wanted in (None, episode.episode_id) else (), trial=trial)


def read_file(path: str, data: bytes, *, episode_id: str | None = None,
              lines: Collection[int] | None = None) -> FileResult:
    """Read one file's bytes into episodes (only the one named ``episode_id`` when given; of a JSON Lines file,
    only the records on ``lines``, 1-based line numbers, when given: the other lines are not decoded).

    Undecodable JSON is an error (the file may be a half-written episode); valid JSON that no
    adapter recognizes is skipped, unless its name is that of a format's files, which makes it an error.
    """
    return _read(path, data, summaries=False, wanted=episode_id, lines=lines)


def summarize_file(path: str, data: bytes) -> FileResult:
    """Like ``read_file`` but yields only the episodes' index rows (``FileResult.rows``), faster.

    A built-in adapter may read a whole file's rows quicker than decoding it (``Adapter.summarize_bytes``: an
    ARES file in its writer's layout is read with its context lists set aside as bytes); anything unexpected
    there reads the file the ordinary way, so errors and warnings are always the ordinary path's. Formats added
    through entry points are read the ordinary way (their entry points are read only when a file needs them).
    """
    for adapter in registry.ADAPTERS:
        try:
            rows = adapter.summarize_bytes(path, data)
        except _CONTENT_ERRORS:  # the fast path gives up on anything unexpected: the ordinary path says why
            rows = None
        if rows is not None:
            return FileResult(rows=tuple(rows))
    rows = _line_rows(path, data) if decoding.is_json_lines(data) else None
    return FileResult(rows=tuple(rows)) if rows is not None else _read(path, data, summaries=True)


def _line_rows(path: str, data: bytes) -> list[EpisodeRow] | None:
    """The rows of a JSON Lines file as ``_read`` gives them, each line decoded and summarized in turn, so that
    only one line's document is alive at a time (a file's documents held at once make the collector walk them
    all, again and again: that took more time than the decoding). None at the first line that is not plain (a
    blank one, one orjson cannot read, a record its adapter cannot read) or a file of no adapter's: ``_read``
    then reads the whole file and reports each problem on its line."""
    view = memoryview(data)
    adapter: base.Adapter | None = None
    rows: list[EpisodeRow] = []
    start, number = 0, 1
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        try:
            doc = orjson.loads(view[start:end])
            adapter = adapter or registry.sniff(doc)
            if adapter is None:
                return None
            rows.extend(adapter.summarize(doc, path, number))
        except (orjson.JSONDecodeError, *_CONTENT_ERRORS):
            return None
        start, number = end + 1, number + 1
    return rows
