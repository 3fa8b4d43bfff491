"""What the commands share at the terminal: a table printed a chunk at a time, a run's reading problems on stderr,
values made JSON-safe, a run's text made safe to print, and the ``--limit`` count type."""

from __future__ import annotations

import argparse
import math
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import pandas as pd

from ares_viewer.model import render
from ares_viewer.runs import run

T = TypeVar("T")


def clean(value: object) -> object:
    """JSON-safe values: NaN becomes null (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def report_reading(opened: run.Run) -> None:
    """The files that could not be read, and a listing cut short by its bounds, on stderr."""
    for error in opened.errors:
        print(f"error: {error}", file=sys.stderr)
    if opened.listing_cut:
        print(f"warning: {opened.listing_cut}", file=sys.stderr)


# An unknown value (a cost no model call records, a missing reward) as the table prints it: never 0, never "NaN".
UNKNOWN = render.UNKNOWN


def _float(value: float) -> str:
    return f"{value:.4g}"


def _cell_widths(frame: pd.DataFrame) -> pd.DataFrame:
    """How wide each cell prints (``to_string`` with ``_float``)."""
    widths = {}
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_float_dtype(column):
            widths[name] = column.map(lambda v: len(UNKNOWN) if v != v else len(_float(v)))
        else:
            widths[name] = column.map(lambda v: len(str(v)) if v is not None and v == v else len(UNKNOWN))
    return pd.DataFrame(widths, index=frame.index)


def print_table(chunks: Iterator[pd.DataFrame]) -> int:
    """Rows as one table, printed a chunk at a time; returns how many. A chunk is laid out together with the rows
    that set each column's width so far, so the columns stay aligned unless a later row is wider (a table of one
    chunk prints exactly as pandas prints it)."""
    widest: pd.DataFrame | None = None
    printed = 0
    for chunk in chunks:
        framed = chunk if widest is None else pd.concat([widest, chunk], ignore_index=True)
        lines = framed.to_string(index=False, float_format=_float, na_rep=UNKNOWN).split("\n")
        print("\n".join(lines if widest is None else lines[1 + len(widest):]), flush=True)
        printed += len(chunk)
        widest = framed.loc[sorted(set(_cell_widths(framed).idxmax()))].reset_index(drop=True)
    return printed


# Control characters in a run's text must not drive the terminal: shown as escapes.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def as_text(text: str) -> str:
    """``text`` with its control characters shown as ``\\xNN`` escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def count(text: str) -> int:
    """A count for ``--limit``: a whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (a whole number, 0 or more)")
    return int(text)


def until_done(work: Callable[[threading.Event], T], name: str) -> T:
    """``work(cancel)`` in a thread of its own, its result (its exception re-raised here): Ctrl+C or SIGTERM (what a
    cluster's scheduler sends before it kills a job) in the main thread sets ``cancel`` and waits for the running
    branches, which are kept and their containers removed, instead of abandoning them. A second one stops the wait."""
    cancel = threading.Event()
    found: list[T] = []
    failed: list[BaseException] = []
    ended = threading.Event()  # waited on, not ``join``: a join a signal interrupts can then return before the end

    def in_thread() -> None:
        try:
            found.append(work(cancel))
        except BaseException as exc:  # re-raised in the main thread
            failed.append(exc)
        finally:
            ended.set()

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    main = threading.current_thread() is threading.main_thread()  # only the main thread may set a handler
    before = signal.signal(signal.SIGTERM, interrupt) if main else None
    worker = threading.Thread(target=in_thread, name=name)
    worker.start()
    try:
        try:
            while not ended.wait(0.5):
                pass
        except KeyboardInterrupt:  # finish the running branches, keep them, print what there is
            print("\ncancelled: waiting for the running branches to finish…", file=sys.stderr, flush=True)
            cancel.set()
            while not ended.wait(0.5):
                pass
        worker.join()
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)
    if failed:
        raise failed[0]
    return found[0]
