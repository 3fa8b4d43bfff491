"""The run index: per-file episode rows in Parquet partitions in the cache, queried with DuckDB.

``store`` keeps the partitions and the manifest; ``update`` brings them up to date (only new or changed
files are summarized, by ``builder``; Tinker and Ray runner JSON Lines files are read by DuckDB, ``fast_jsonl``
with ``_fast_tinker`` and ``_fast_ray``); ``table`` is the DuckDB
view of a run's episodes, with what ``joins`` adds beyond each file (harbor trial results, evaluation reports'
verdicts, keys for repeated episode ids); ``queries`` answers the aggregate and paging questions the overview
asks (``ares_viewer.analysis.aggregate_plots`` draws them); ``live`` follows a run that is still being written;
``shared`` copies an index to and from a folder or object store; ``ray`` builds the same index on a Ray cluster.
See docs/index.md.
"""
