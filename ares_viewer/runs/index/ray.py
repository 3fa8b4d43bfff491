"""Building a run's index on a Ray cluster with Ray Data (``ares-viewer index LOCATION --ray [ADDRESS]``).

The driver lists the run's files once; Ray Data hands batches of them to the workers, which summarize them
exactly as ``open_run`` does (``builder.build``) and write each batch's partition straight to the index's
destination; the driver writes the manifest last. The destination is the run's index folder under a shared
root (an fsspec URL such as ``s3://bucket/indexes`` given with ``--index-to``, read by ``open_run(...,
shared_index=...)`` and the app through ``ARES_VIEWER_SHARED_INDEX``), or the local cache when the cluster is
this machine. Never the run. Ray does the distribution: there is no scheduler here.

Ray is optional (``pip install 'ares-viewer[ray]'``) and imported only here.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any

import fsspec

from ares_viewer.runs import sources
from ares_viewer.runs.index import builder, store, update


def _batches(files: list[sources.SourceFile], workers: int) -> list[list[sources.SourceFile]]:
    return builder.batches(files, max(1, workers) * 2)


def _summarize(batch: dict[str, Any], destination: str) -> dict[str, list]:
    """One Ray Data batch (a group of files): summarized, its partitions written to ``destination``."""
    files = [sources.SourceFile(p, int(s), int(m)) for p, s, m in
             zip(batch["path"], batch["size"], batch["mtime_ns"], strict=True)]
    fs, base = fsspec.core.url_to_fs(destination)
    local = getattr(fs, "protocol", None) in ("file", ("file", "local"), "local")
    with tempfile.TemporaryDirectory(prefix="ares-viewer-ray-") as scratch:
        target = store.Store(base if local else scratch)
        entries = builder.build(files, target, workers=1)
        if not local:
            for part in sorted({e.part for e in entries if e.part}):
                fs.put(target.part_path(part), f"{base}/parts/{part}")
    columns: dict[str, list] = {name: [] for name in store.MANIFEST_COLUMNS}
    for entry in entries:
        for name in columns:
            value = getattr(entry, name)
            columns[name].append(list(value) if name == "errors" else value)
    return columns


def destination_for(location: str, index_to: str | None) -> str:
    """The folder a run's index is written to: under ``index_to`` when given, else the local cache."""
    key = update.canonical(location)
    if index_to:
        return f"{index_to.rstrip('/')}/{store.index_key(key)}"
    return str(update.cache_root() / store.index_key(key))


def build_on_ray(location: str, *, address: str | None = None, index_to: str | None = None,
                 workers: int | None = None) -> str:
    """Index ``location`` on a Ray cluster; the index folder written.

    Args:
        location: the run (a folder, file, glob or fsspec URL the workers can read).
        address: the cluster (``ray.init(address)``: ``auto``, ``ray://host:10001``); None or ``local:N``
            starts a local cluster of N workers (2 by default) for this call.
        index_to: a shared root (folder or fsspec URL) to write the index under; None: this machine's cache.
        workers: how many batches to aim for per worker (the cluster's CPUs by default).
    """
    import ray  # optional: only this command needs it
    import ray.data

    files = sources.list_files(location)  # listed once, here
    destination = destination_for(location, index_to)
    fs, base = fsspec.core.url_to_fs(destination)
    fs.makedirs(f"{base}/parts", exist_ok=True)
    started = False
    if not ray.is_initialized():
        if address is None or address.startswith("local"):
            cpus = int(address.split(":", 1)[1]) if address and ":" in address else 2
            ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": _forwarded_env()})
        else:
            ray.init(address=address, runtime_env={"env_vars": _forwarded_env()})
        started = True
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        groups = _batches(files, workers or cpus)
        items = [{"path": f.path, "size": f.size, "mtime_ns": f.mtime_ns} for group in groups for f in group]
        entries: list[store.FileEntry] = []
        if items:
            dataset = ray.data.from_items(items, override_num_blocks=len(groups))
            # ray types the function as taking the batch alone; fn_kwargs passes it the rest
            result = dataset.map_batches(_summarize, fn_kwargs={"destination": destination},  # type: ignore[arg-type]
                                         batch_size=None, batch_format="numpy", zero_copy_batch=False)
            for row in result.iter_rows():
                entries.append(store.FileEntry(
                    path=str(row["path"]), size=int(row["size"]), mtime_ns=int(row["mtime_ns"]),
                    kind=str(row["kind"]), part=row["part"] or None, rows=int(row["rows"]),
                    errors=tuple(row["errors"] if row["errors"] is not None else ()),
                    verdicts=row["verdicts"] or None, trial=row["trial"] or None))
    finally:
        if started:
            ray.shutdown()
    _write_manifest(destination, entries)
    return destination


def _forwarded_env() -> dict[str, str]:
    """What workers need to reach the same storage as the driver (object-store endpoints and credentials)."""
    prefixes = ("AWS_", "FSSPEC_", "ARES_VIEWER_")
    return {k: v for k, v in os.environ.items() if k.startswith(prefixes)}


def _write_manifest(destination: str, entries: list[store.FileEntry]) -> None:
    fs, base = fsspec.core.url_to_fs(destination)
    with tempfile.TemporaryDirectory(prefix="ares-viewer-ray-") as scratch:
        local = store.Store(scratch)
        local.write_manifest([dataclasses.replace(e) for e in entries])
        fs.put(str(local.manifest_path), f"{base}/manifest.parquet")
