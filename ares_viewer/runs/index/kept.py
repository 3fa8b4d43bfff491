"""Answers of a big run's questions kept beside its index, so that a fresh process asks them once per index state.

A run of a million rollouts took about 0.8 s of queries on the first page of every fresh server (the overview's
reward bands, failure groups, sample, headline figures), while a run of a hundred took a few milliseconds: the
overview's time grew with the run. ``Run.queries`` keeps answers in memory per episode table (``runs.asked``); this
module also keeps them in the index's folder (the cache folder, never the run's), under the table's ``state``: a
digest of its partition files (never rewritten: each write makes a new one; their size and mtime are in it too),
the reports and trial results joined to them, the run's location and the code that shapes the answers. The same
state gives the same answers, so a kept answer is read instead of asked.

Answers are written as JSON, with frames as Parquet inside it: a file in the folder is only ever read as data, never
run (no pickle). What this cannot write exactly (a NaN index, a numpy scalar, an object column of mixed types) is not
kept on disk, only in memory. A kept answer that cannot be read is asked again; a folder that cannot be written only
costs the asking. Each state keeps at most ``MOST`` answers of ``MOST_BYTES`` in all (the oldest go first), none
over ``MAX_BYTES``, and a new state's first answer removes the earlier states' answers.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import math
import os
import pathlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from ares_viewer.base import atomic

_T = TypeVar("_T")

FOLDER = "answers"
# Answers kept per index state (a filter asked makes answers of its own), their bytes in all, and the largest one.
MOST = 256
MOST_BYTES = 64 * 1024 * 1024
MAX_BYTES = 4 * 1024 * 1024
# The modules whose code shapes the answers: another version of them is another state.
_SHAPERS = ("queries.py", "table.py", "joins.py", "store.py", "kept.py", "subruns.py")


class UnkeptError(ValueError):
    """A value this module does not write exactly (kept in memory only)."""


@functools.cache
def _code() -> str:
    here = pathlib.Path(__file__).parent
    digest = hashlib.sha256()
    for name in _SHAPERS:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def state(location: str, parts: Sequence[str], sidecars: Mapping[str, Any]) -> str | None:
    """The digest of one index state: these partition files as they are on disk, the location rows are listed
    under, the sidecars joined to the rows (reports, trial results) and the code that asks; None when a part
    cannot be seen."""
    try:
        stamps = [(part, (found := os.stat(part)).st_size, found.st_mtime_ns) for part in parts]
    except OSError:
        return None
    return hashlib.sha256(orjson.dumps([_code(), location, stamps, sidecars], option=orjson.OPT_SORT_KEYS)
                          ).hexdigest()[:32]


def _encoded(value: Any) -> Any:
    """``value`` as JSON data with tags for what JSON has not (tuples, dicts with keys other than text, frames,
    floats that are not finite); raises ``UnkeptError`` for anything else."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value) is int:
        if not -(2 ** 63) <= value < 2 ** 63:
            raise UnkeptError("an integer beyond 64 bits")
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if type(value) is list:
        return [_encoded(v) for v in value]
    if type(value) is tuple:
        return {"$tuple": [_encoded(v) for v in value]}
    if type(value) is dict:
        return {"$dict": [[_encoded(k), _encoded(v)] for k, v in value.items()]}
    import pandas as pd

    if type(value) is pd.DataFrame:
        return {"$frame": base64.b64encode(_parquet(value)).decode("ascii")}
    raise UnkeptError(f"a {type(value).__name__}")


def _parquet(frame: Any) -> bytes:
    import pandas as pd

    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer, index=True)
        back = pd.read_parquet(io.BytesIO(buffer.getvalue()))
    except Exception as e:  # pyarrow cannot write a column (mixed types): not kept on disk
        raise UnkeptError(f"a frame Parquet cannot hold: {e}") from e
    try:
        pd.testing.assert_frame_equal(back, frame, check_exact=True)
    except AssertionError as e:
        raise UnkeptError("a frame that does not come back the same") from e
    return buffer.getvalue()


def _decoded(data: Any) -> Any:
    if isinstance(data, list):
        return [_decoded(v) for v in data]
    if not isinstance(data, dict):
        return data
    if set(data) == {"$tuple"}:
        return tuple(_decoded(v) for v in data["$tuple"])
    if set(data) == {"$dict"}:
        return {_decoded(k): _decoded(v) for k, v in data["$dict"]}
    if set(data) == {"$float"} and data["$float"] in ("nan", "inf", "-inf"):
        return float(data["$float"])
    if set(data) == {"$frame"}:
        import pandas as pd

        return pd.read_parquet(io.BytesIO(base64.b64decode(data["$frame"], validate=True)))
    raise ValueError("not a kept answer")


def encode(value: Any) -> bytes:
    """The bytes ``decode`` gives ``value`` back from (raises ``UnkeptError``)."""
    return orjson.dumps(_encoded(value))


def decode(data: bytes) -> Any:
    return _decoded(orjson.loads(data))


def answer(folder: pathlib.Path, at: str | None, name: str, ask: Callable[[], _T]) -> _T:
    """The answer kept in ``folder`` for state ``at`` under ``name`` (a file name), else ``ask()`` kept there.
    With no state (a part that cannot be seen), just ``ask()``."""
    if at is None:
        return ask()
    home = folder / FOLDER / at
    kept = home / name
    try:
        with open(kept, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
        if len(data) <= MAX_BYTES:
            return decode(data)
    except Exception:  # missing, unreadable or not an answer: asked again, and written over
        pass
    value = ask()
    try:
        data = encode(value)
    except UnkeptError:
        return value
    if len(data) > MAX_BYTES:
        return value
    try:
        fresh = not home.is_dir()
        home.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(kept, data)
        if fresh:  # the earlier states' answers are never asked again
            for old in (folder / FOLDER).iterdir():
                if old.name != at and not old.name.startswith("."):
                    shutil.rmtree(old, ignore_errors=True)
        _trim(home)
    except OSError:
        atomic.staging(kept).unlink(missing_ok=True)
    return value


def _trim(home: pathlib.Path) -> None:
    """At most ``MOST`` answers of ``MOST_BYTES`` in all in ``home``: the least recently written go first."""
    found = []
    for entry in os.scandir(home):
        if not entry.name.startswith("."):
            try:
                stat = entry.stat()
            except OSError:
                continue
            found.append((stat.st_mtime_ns, stat.st_size, entry.path))
    kept = total = 0
    for _, size, path in sorted(found, reverse=True):  # newest first
        kept, total = kept + 1, total + size
        if kept > MOST or total > MOST_BYTES:
            pathlib.Path(path).unlink(missing_ok=True)


def beside(folder: pathlib.Path, prefix: str, state: str | None, work: Callable[[], _T],
           encode: Callable[[_T], Any], decode: Callable[[Any], _T]) -> _T:
    """``work()``'s answer, kept as JSON in the index's ``folder`` (``{prefix}{state}.json``) for this index ``state``
    (``state``: its parts, never rewritten), so a fresh process does not work it out again; a new state's file
    removes the earlier states' files of ``prefix``. With no state (a part that cannot be seen), worked out. A kept
    file that cannot be read (``decode`` raising ``KeyError``, ``TypeError`` or ``ValueError``), or a folder that
    cannot be written, only costs the work."""
    if state is None:
        return work()
    kept = folder / f"{prefix}{state}.json"
    try:
        return decode(orjson.loads(kept.read_bytes()))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        pass
    answer = work()
    try:  # staged and renamed in; what a killed writer left is swept at the next write
        atomic.write_bytes(kept, orjson.dumps(encode(answer)))
        for old in folder.glob(f"{prefix}*.json"):  # the answers for earlier parts: never asked again
            if old != kept:
                old.unlink(missing_ok=True)
    except OSError:  # a folder that cannot be written: no staging left behind
        atomic.staging(kept).unlink(missing_ok=True)
    return answer
