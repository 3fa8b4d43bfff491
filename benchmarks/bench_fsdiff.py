"""Speed of filesystem diffs, printed against baselines measured in the same run.

    python benchmarks/bench_fsdiff.py

- listing the changes between two snapshots with 10,000 changed files (target < 1 s), vs a bare
  ``json.loads`` of the two manifests;
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
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "snapshots" / "e1"
        common = {"episode_id": "e1", "base_image": "img", "image_id": None}
        base_entries, step1, step2, blobs1, blobs2 = [], [], [], {}, {}
        for i in range(args.files):
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
            diff = fsdiff.diff_snapshots(snapshots.open_snapshot(one), snapshots.open_snapshot(two))
            assert len(diff.changes) == args.files

        def bare():
            for step in (one, two):
                json.loads((step / snapshots.MANIFEST_NAME).read_bytes())

        ours, base = _best(3, listing), _best(3, bare)
        print(f"list changes, {args.files} changed files: {ours:.3f} s (target < 1 s); "
              f"bare json.loads of both manifests {base:.3f} s; RATIO {ours / base:.1f}x")

    lines = [f"    value_{i} = compute({i}, flag={i % 7 == 0})  # line {i}\n" for i in range(args.lines)]
    edited = list(lines)
    for i in rng.sample(range(args.lines), 40):
        edited[i] = edited[i].replace("compute", "compute_fast")
    old_text, new_text = "".join(lines), "".join(edited)
    ours = _best(3, lambda: fsdiff.textdiff.unified(old_text, new_text, limit=10**9))
    base = _best(3, lambda: difflib.SequenceMatcher(None, lines, edited).ratio())
    print(f"unified diff of two {args.lines}-line files, 40 scattered edits: {ours:.3f} s (target < 0.5 s); "
          f"bare SequenceMatcher.ratio {base:.3f} s; RATIO {ours / base:.2f}x")


if __name__ == "__main__":
    main()
