"""Speed of live sandboxes against the real Docker engine, printed with baselines measured in the same run.

    python3 -m benchmarks.bench_sandbox [--repeat 3]

- restoring a sample step into a container (target < 3 s), vs ``docker run`` of the bare base image with the
  same limits (the SDK's ``containers.run`` + nothing applied);
- the per-step overhead of a replay beyond the command's own run time (target < 0.3 s): each replayed step
  (run + output comparison, and with the filesystem check: in-memory capture + fsdiff) vs the same command
  run bare with ``exec_run(["bash", "-lc", ...])`` in an identical container; printed with the engine's own
  change listing (``container.diff()`` of an unchanged container): what one check would cost if it asked the
  engine, which a replay after a restore does not (``container.ChangeTracker`` reads only what each step changed);
- restoring the same step from an episode-boundary snapshot whose ``container_fs.tar.gz`` is the container's
  whole filesystem (its ``docker export``): the first time (every file hashed, the image listed) and again;
- capturing a container after a step that wrote 100 MB (100 files of 1 MiB), per 100 MB and with the peak
  resident memory of the process doing it, vs reading the same bytes raw through the engine's archive API
  (what ``docker cp`` does), each in a fresh child process; the change tracker (what a replay uses) and the
  engine's change list (``container.capture_live``) both.

Every container made here is labelled with a benchmark session and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import docker

from ares_viewer import sandbox, snapshots
from ares_viewer.container import image as container_image
from ares_viewer.container import limits
from ares_viewer.runs import run
from ares_viewer.snapshots import episode_boundary
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parent.parent
EPISODE = REPO / "sample_runs" / "demo-run" / "48d3a704-23f6-46b7-aed6-fa19b678c0a6.json"  # slugify-solved


def _replay_overheads(client, episode, session: str, repeat: int, check: bool) -> tuple[list[float], set[str]]:
    overheads, statuses = [], set()
    for _ in range(repeat):
        box = sandbox.restore(episode, 0, client=client, session=session)
        twin = sandbox.restore(episode, 0, client=client, session=session)
        try:
            replayed = []
            began = time.perf_counter()
            for result in sandbox.replay(box, episode, normalize=True, compare_filesystem=check):
                now = time.perf_counter()
                replayed.append((result, now - began))
                began = now
            container = twin.container()
            for result, seconds in replayed:
                start = time.perf_counter()
                container.exec_run(["bash", "-lc", result.command], workdir=twin.workdir)
                overheads.append(seconds - (time.perf_counter() - start))
            statuses |= {str(result.status) for result, _ in replayed}
        finally:
            box.remove()
            twin.remove()
    return overheads, statuses


def _boundary_restores(client, episode, session: str, repeat: int) -> tuple[float, float, int, int]:
    """Restore step 0 from a whole-filesystem boundary copy: (first time, best later time, copy bytes, paths)."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="bench-boundary-"))
    try:
        run_dir = folder / "run"
        run_dir.mkdir()
        shutil.copy(EPISODE, run_dir)
        doc = json.loads(EPISODE.read_text())
        with sandbox.restore(episode, 0, client=client, session=session) as source:
            snapshot = pathlib.Path(synthetic.write_boundary_snapshot(
                run_dir, synthetic.boundary_messages(doc, 0), {}, container_image=source.image, tarball=True))
            with open(snapshot / episode_boundary.CONTAINER_FS, "wb") as out:
                for chunk in source.container().export():
                    out.write(chunk)
        copy = run.load_episode(run_dir / EPISODE.name)
        container_image._IMAGE_LISTINGS.clear()
        times = []
        for _ in range(repeat + 1):
            began = time.perf_counter()
            box = sandbox.restore(copy, 0, client=client, session=session)
            times.append(time.perf_counter() - began)
            box.remove()
        paths = len(snapshots.for_step(copy, 0).entries)
        return times[0], min(times[1:]), (snapshot / episode_boundary.CONTAINER_FS).stat().st_size, paths
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_CHILD = """
import json, os, resource, sys, time
import docker
from ares_viewer import container, snapshots
from ares_viewer.runs import run
from ares_viewer.sandbox import registry
client = docker.from_env(timeout=60)
box = client.containers.get(os.environ["CONTAINER"])
recorded = snapshots.for_step(run.load_episode(os.environ["EPISODE"]), 0)
what = os.environ["WHAT"]
if what == "tracked":
    # A tracker started before the write, as a restore starts one: its next look reads what the step changed.
    tracker = container.ChangeTracker.start(box, recorded)
    box.exec_run(["sh", "-c", os.environ["WRITE"]], workdir="/testbed")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
began = time.perf_counter()
if what == "raw":
    chunks, _ = client.api.get_archive(box.id, "/testbed/big", chunk_size=1 << 20)
    size = sum(len(chunk) for chunk in chunks)
elif what == "tracked":
    state = tracker.snapshot(recorded)
    size = sum(len(state.read(p) or b"") for p in state.changed_paths() if p.startswith("/testbed/big/"))
else:
    state = container.capture_live(box, recorded)
    size = sum(len(state.read(p) or b"") for p in state.changed_paths() if p.startswith("/testbed/big/"))
seconds = time.perf_counter() - began
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "bytes": size, "peak_mib": peak, "grew_mib": peak - before}))
"""
_WRITE = "rm -rf big && mkdir big && for i in $(seq 100); do head -c 1048576 /dev/urandom > big/f$i; done"


def _child(what: str, container_id: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD)], capture_output=True, text=True, check=True,
                          env={**os.environ, "CONTAINER": container_id, "EPISODE": str(EPISODE), "WHAT": what,
                               "WRITE": _WRITE, "PYTHONPATH": str(REPO)})
    return json.loads(done.stdout.strip().splitlines()[-1])


def _capture_figures(client, episode, session: str, repeat: int) -> dict[str, list[dict]]:
    """Per way of reading (raw archive, tracked capture, capture_live): one figure set per repeat."""
    figures: dict[str, list[dict]] = {"raw": [], "tracked": [], "listed": []}
    for _ in range(repeat):
        with sandbox.restore(episode, 0, client=client, session=session) as box:
            figures["tracked"].append(_child("tracked", box.container_id))  # writes the 100 MB first
            figures["raw"].append(_child("raw", box.container_id))
            figures["listed"].append(_child("listed", box.container_id))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    client = sandbox.connect()
    episode = run.load_episode(EPISODE)
    session = f"bench-{sandbox.new_session()}"
    labels = {sandbox.LABEL_PROJECT: "1", sandbox.LABEL_ROLE: "benchmark", sandbox.LABEL_SESSION: session}
    try:
        restore_times, bare_times = [], []
        for _ in range(args.repeat):
            began = time.perf_counter()
            box = sandbox.restore(episode, 0, client=client, session=session)
            restore_times.append(time.perf_counter() - began)
            box.remove()
            began = time.perf_counter()
            bare = client.containers.run(
                snapshots.for_step(episode, 0).base_image, ["sleep", "infinity"], detach=True, network_mode="none",
                mem_limit=limits.ResourceLimits().mem_limit, nano_cpus=limits.ResourceLimits().nano_cpus,
                pids_limit=limits.ResourceLimits().pids_limit, labels=labels,
            )
            bare_times.append(time.perf_counter() - began)
            bare.remove(force=True)
        ours, base = min(restore_times), min(bare_times)
        print(f"restore step 0 of slugify-solved: {ours:.3f} s (target < 3 s); bare docker run of the base image "
              f"{base:.3f} s; RATIO {ours / base:.2f}x")

        for check in (False, True):
            overheads, statuses = _replay_overheads(client, episode, session, args.repeat, check)
            what = "with the filesystem check" if check else "outputs only"
            print(f"replay overhead per step, {what} ({', '.join(sorted(statuses))}): median "
                  f"{statistics.median(overheads):.3f} s, max {max(overheads):.3f} s (target < 0.3 s); baseline: "
                  f"the same commands through bare exec_run")
        box = sandbox.restore(episode, 0, client=client, session=session)
        try:
            container = box.container()
            diffs = []
            for _ in range(args.repeat):
                began = time.perf_counter()
                container.diff()
                diffs.append(time.perf_counter() - began)
        finally:
            box.remove()
        print(f"for reference, the engine's change list: container.diff() of a restored container {min(diffs):.3f} s")

        figures = _capture_figures(client, episode, session, args.repeat)
        raw = min(figures["raw"], key=lambda f: f["seconds"])
        per_100 = {name: min(f["seconds"] / f["bytes"] * 100e6 for f in found) for name, found in figures.items()}
        peaks = {name: max(f["grew_mib"] for f in found) for name, found in figures.items()}
        print(f"capture after a step that wrote {raw['bytes'] / 1e6:.0f} MB (100 files of 1 MiB), per 100 MB: "
              f"raw archive read (docker cp) {per_100['raw']:.2f} s, peak RSS +{peaks['raw']:.0f} MiB; "
              f"change tracker {per_100['tracked']:.2f} s, peak RSS +{peaks['tracked']:.0f} MiB; "
              f"engine change list (capture_live) {per_100['listed']:.2f} s, peak RSS +{peaks['listed']:.0f} MiB; "
              f"RATIO {per_100['tracked'] / per_100['raw']:.1f}x / {per_100['listed'] / per_100['raw']:.1f}x the "
              f"raw read in time")

        first, again, size, paths = _boundary_restores(client, episode, session, args.repeat)
        print(f"restore step 0 from an episode-boundary copy of the whole filesystem ({size / 1e6:.0f} MB tar, "
              f"{paths} paths): first {first:.3f} s (hashes the copy, lists the image), again {again:.3f} s; "
              f"RATIO {first / ours:.1f}x / {again / ours:.1f}x the per-step restore")
    finally:
        sandbox.cleanup(client, session=session)
        for container in client.containers.list(all=True, filters={"label": f"{sandbox.LABEL_SESSION}={session}"}):
            container.remove(force=True)


if __name__ == "__main__":
    try:
        main()
    except (sandbox.SandboxError, docker.errors.DockerException) as exc:
        raise SystemExit(f"bench_sandbox: {exc}") from exc
