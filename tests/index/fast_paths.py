"""What the JSON Lines fast-path tests share: reading a batch the fast way, and comparing with the ordinary path."""

from __future__ import annotations

import duckdb
import pandas as pd

from ares_viewer.runs import sources
from ares_viewer.runs.index import builder, fast_jsonl, store


def frame(folder) -> pd.DataFrame:
    """An index folder's rows in file and line order."""
    parts = sorted(str(p) for p in (folder / "parts").glob("*.parquet"))
    return duckdb.sql(f"SELECT * EXCLUDE (_seq) FROM read_parquet({parts!r}, union_by_name = true) "
                      "ORDER BY path, _seq").df()


def read(spec: fast_jsonl.Spec, files: list[sources.SourceFile], target: store.Store, threads: int = 2
         ) -> tuple[list[store.FileEntry], list[sources.SourceFile]]:
    """The files as one fast-path batch of ``spec``: their entries, and the files it left to the ordinary path."""
    chosen, rest = fast_jsonl.choose(files, [spec])
    assert not rest, "the fast path should claim every file"
    con = fast_jsonl.connect(threads)
    try:
        return fast_jsonl.read_batch(con, spec, chosen[spec], target)
    finally:
        con.close()


def same_rows(tmp_path, spec: fast_jsonl.Spec, files: list[sources.SourceFile], *, exact: bool = False
              ) -> tuple[list[store.FileEntry], list[sources.SourceFile], list[store.FileEntry]]:
    """Reads ``files`` both ways (into ``tmp_path/fast`` and ``tmp_path/ordinary``) and checks that the rows the fast
    path took equal the ordinary path's (``exact``: the same columns and values to the bit). Returns the fast
    path's entries, the files it left, and the ordinary path's entries."""
    taken, left = read(spec, files, store.Store(tmp_path / "fast"))
    entries = builder.summarize_batch(files, store.Store(tmp_path / "ordinary"))
    if taken:
        ordinary, fast = frame(tmp_path / "ordinary"), frame(tmp_path / "fast")
        if exact:
            assert list(fast.columns) == list(ordinary.columns)
        pd.testing.assert_frame_equal(fast, ordinary[list(fast.columns)], check_dtype=False, check_exact=exact)
    return taken, left, entries
