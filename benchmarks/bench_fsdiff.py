"""Speed of filesystem diffs, printed against baselines measured in the same run.

    python3 -m benchmarks.bench_fsdiff

- listing the changes between two snapshots with 10,000 changed files (target < 1 s), vs a bare
  ``json.loads`` of the two manifests;
- the same for two episode-boundary snapshots (whole-filesystem folder copies, equal sizes, new mtimes);
- a unified diff of two 20,000-line files with scattered edits (target < 0.5 s), vs a bare
  ``difflib.SequenceMatcher.ratio`` of the same lines.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import pathlib
import random
import tempfile
import time

from ares_viewer import fsdiff, snapshots
from ares_viewer.base import textdiff
from ares_viewer.snapshots import episode_boundary
from testdata import synthetic


def _best(n, fn):
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _entry(path, data, stored_in, change="modified"):
    return snapshots.Entry(path=path, type=snapshots.FILE, mode=0o644, size=len(data),
                           sha256=hashlib.sha256(data).hexdigest(), change=change, stored_in=stored_in)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--lines", type=int, default=20_000)
    args = parser.parse_args()
    _per_step_snapshots(args.files)
    _boundary_snapshots(args.files)
    _text_diff(args.lines)


def _per_step_snapshots(files: int) -> None:
    """Listing the changes between two per-step snapshots that rewrite every file, and building the Files
    page's folder tree of them, against a bare json.loads of both manifests."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "snapshots" / "e1"
        common = {"episode_id": "e1", "base_image": "img", "image_id": None}
        base_entries, step1, step2, blobs1, blobs2 = [], [], [], {}, {}
        for i in range(files):
            path = f"/testbed/pkg{i % 50}/mod{i}.py"
            old, new1, new2 = f"v0 {i}\n".encode(), f"v1 {i}\n".encode(), f"v2 {i}\n".encode()
            base_entries.append(snapshots.Entry(path=path, type=snapshots.FILE, mode=0o644, size=len(old),
                                                sha256=hashlib.sha256(old).hexdigest()))
            step1.append(_entry(path, new1, "step_0001"))
            blobs1[hashlib.sha256(new1).hexdigest()] = new1
            step2.append(_entry(path, new2, "step_0002"))
            blobs2[hashlib.sha256(new2).hexdigest()] = new2
        snapshots.write_base(folder, entries=base_entries, blobs={}, **common)
        snapshots.write_step(folder, step_index=1, workdir="/testbed", entries=step1, blobs=blobs1, **common)
        snapshots.write_step(folder, step_index=2, workdir="/testbed", entries=step2, blobs=blobs2, **common)
        one, two = folder / "step_0001", folder / "step_0002"

        def listing():
            diff = fsdiff.diff_snapshots(snapshots.open_step(one), snapshots.open_step(two))
            assert len(diff.changes) == files

        def bare():
            for step in (one, two):
                json.loads((step / snapshots.MANIFEST_NAME).read_bytes())

        def listing_and_tree():  # what the Files page does before showing anything: the list, then its tree
            diff = fsdiff.diff_snapshots(snapshots.open_step(one), snapshots.open_step(two))
            nodes = diff.tree()
            fsdiff.visible_nodes(nodes, fsdiff.initial_collapsed(nodes, 80))

        ours, base, tree = _best(3, listing), _best(3, bare), _best(3, listing_and_tree)
        print(f"list changes, {files} changed files: {ours:.3f} s (target < 1 s); "
              f"bare json.loads of both manifests {base:.3f} s; RATIO {ours / base:.1f}x")
        print(f"list changes and build the Files page's folder tree: {tree:.3f} s (target < 1 s); "
              f"RATIO {tree / base:.1f}x the bare json.loads")


def _boundary_snapshots(files: int) -> None:
    """Listing the changes between two episode-boundary folder copies, cold and indexed."""
    with tempfile.TemporaryDirectory() as tmp:
        # Episode-boundary snapshots: two whole-filesystem folder copies, every file rewritten in between with the
        # same size (so sizes cannot tell, and the new modification times force a content comparison).
        old_files = {f"/testbed/pkg{i % 50}/mod{i}.py": f"v1 {i:06d}\n".encode() for i in range(files)}
        new_files = {path: data.replace(b"v1", b"v2") for path, data in old_files.items()}
        messages = [{"role": "user", "content": "task"}]
        one = synthetic.write_boundary_snapshot(tmp, messages, old_files, snapshot_id="s1", mtime=1_763_800_000)
        two = synthetic.write_boundary_snapshot(tmp, messages, new_files, snapshot_id="s2", mtime=1_763_800_100)

        def boundary_cold():
            episode_boundary._OPEN_CACHE.clear()
            listing = fsdiff.diff_snapshots(episode_boundary.open_boundary(one), episode_boundary.open_boundary(two))
            assert len(listing.changes) == files

        def boundary_warm():  # the folders are indexed already (the app keeps a few open)
            listing = fsdiff.diff_snapshots(episode_boundary.open_boundary(one), episode_boundary.open_boundary(two))
            assert len(listing.changes) == files

        cold, warm = _best(3, boundary_cold), _best(3, boundary_warm)
        print(f"list changes between two boundary folder copies, {files} rewritten files of equal size: "
              f"{cold:.3f} s cold (walk + hash both sides), {warm:.3f} s indexed (target < 1 s)")


def _text_diff(count: int) -> None:
    """A unified diff of two ``count``-line files with 40 scattered edits, against SequenceMatcher.ratio."""
    rng = random.Random(0)
    lines = [f"    value_{i} = compute({i}, flag={i % 7 == 0})  # line {i}\n" for i in range(count)]
    edited = list(lines)
    for i in rng.sample(range(count), 40):
        edited[i] = edited[i].replace("compute", "compute_fast")
    old_text, new_text = "".join(lines), "".join(edited)
    ours = _best(3, lambda: textdiff.unified(old_text, new_text, limit=10**9))
    base = _best(3, lambda: difflib.SequenceMatcher(None, lines, edited).ratio())
    print(f"unified diff of two {count}-line files, 40 scattered edits: {ours:.3f} s (target < 0.5 s); "
          f"bare SequenceMatcher.ratio {base:.3f} s; RATIO {ours / base:.2f}x")


if __name__ == "__main__":
    main()
