"""A capture whose agent touched a large file of the image: memory stays bounded, the base content comes back whole.

The image is the sample base plus a 64 MB file of random bytes in its own layer (built here, labelled, removed at
the end). The capture runs in a separate process so its peak memory (Python allocations and the process's peak
resident size) is its own.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys
import uuid

import pytest

from ares_viewer import container as containers
from ares_viewer import snapshots
from ares_viewer.snapshots import per_step

pytestmark = pytest.mark.docker

REPO = pathlib.Path(__file__).resolve().parents[1]
BASE = "ares-viewer/sample-base:1"
BIG = "/opt/big.bin"
BIG_MB = 64
MB = 1024 * 1024

# Runs one capture in a fresh process and prints its peak memory: Python's allocations (tracemalloc) and how far
# the process's peak resident size grew past what it was before the capture.
_MEASURE = r"""
import json, resource, sys, tracemalloc
import docker
from ares_viewer import container as containers

container_id, image, episode_id, step, out, max_bytes = sys.argv[1:]
box = docker.from_env(timeout=120).containers.get(container_id)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
containers.capture_snapshot(box, image, episode_id, int(step), out, max_file_bytes=int(max_bytes))
peak = tracemalloc.get_traced_memory()[1]
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"python_peak": peak, "rss_growth": grown * 1024}))
"""


@pytest.fixture(scope="module")
def big_image(docker_client, missing):
    """The sample base with a 64 MB random file in a layer of its own; its tag and the file's sha256."""
    import docker.errors

    try:
        docker_client.images.get(BASE)
    except docker.errors.ImageNotFound:
        missing(f"{BASE} missing: run `bash images/build-base.sh --offline`")
    tag = f"ares-viewer/test-large-base:{uuid.uuid4().hex[:12]}"
    dockerfile = (f"FROM {BASE}\nRUN head -c {BIG_MB * MB} /dev/urandom > {BIG} && "
                  f"sha256sum {BIG} | cut -c1-64 > /opt/big.sha256\n")
    image, _ = docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True, network_mode="none",
        labels={containers.LABEL_PROJECT: "1", containers.LABEL_ROLE: "test"})
    try:
        digest = docker_client.containers.run(image.id, ["cat", "/opt/big.sha256"], remove=True,
                                              network_mode="none").decode().strip()
        yield tag, digest
    finally:
        docker_client.images.remove(image.id, force=True, noprune=False)


def _sh(box, script: str) -> str:
    result = box.exec_run(["bash", "-c", script])
    assert result.exit_code == 0, result.output.decode(errors="replace")
    return result.output.decode()


def _capture(box, image: str, episode_id: str, step: int, out: pathlib.Path) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, box.id, image, episode_id, str(step), str(out), str(2 * BIG_MB * MB)],
        capture_output=True, text=True, timeout=600, check=False, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_large_base_file_is_captured_in_bounded_memory_and_restored_exactly(big_image, docker_client, tmp_path):
    image, base_digest = big_image
    box = docker_client.containers.run(
        image, ["sleep", "infinity"], detach=True, network_mode="none", mem_limit="512m",
        labels={containers.LABEL_PROJECT: "1", containers.LABEL_ROLE: "test"})
    episode_id = str(uuid.uuid4())
    try:
        # Step 0: the agent keeps a copy of the big file and appends to it. Step 1: it puts the copy back (the
        # base content again) and writes a new file, so the base archive is rewritten with one more path.
        _sh(box, f"cp {BIG} /opt/big.orig && echo appended >> {BIG}")
        measured = [_capture(box, image, episode_id, 0, tmp_path)]
        _sh(box, f"mv /opt/big.orig {BIG} && echo new > /opt/new.txt")
        measured.append(_capture(box, image, episode_id, 1, tmp_path))
    finally:
        box.remove(force=True)

    # Each capture read 64 MB of base content (and 64 MB of changed content at step 0) without holding it.
    for m in measured:
        assert m["python_peak"] < BIG_MB * MB / 4, measured
        assert m["rss_growth"] < BIG_MB * MB / 2, measured

    step0, step1 = (snapshots.open(ref) for ref in per_step.find_for_episode(tmp_path / "x.json", episode_id))
    # The format is unchanged: the base content is in the base archive, named by its sha256.
    assert step0.base_entries[BIG].stored_in == snapshots.BASE_DIRNAME
    assert step0.base_entries[BIG].sha256 == base_digest and step0.base_entries[BIG].size == BIG_MB * MB
    assert step0.stat(BIG).size == BIG_MB * MB + len(b"appended\n")
    assert step1.stat(BIG).sha256 == base_digest and step1.stat(BIG).stored_in == snapshots.BASE_DIRNAME
    assert step1.base_entries["/opt/new.txt"].type == snapshots.ABSENT
    assert step1.read("/opt/new.txt") == b"new\n"

    restored = containers.restore_container(docker_client, step1)
    try:
        assert _sh(restored, f"sha256sum {BIG} | cut -c1-64").strip() == base_digest
        assert _sh(restored, "cat /opt/new.txt") == "new\n"
    finally:
        restored.remove(force=True)
