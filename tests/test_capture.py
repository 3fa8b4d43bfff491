"""Capturing snapshots from a real Docker container, and reading them back without the daemon."""

from __future__ import annotations

import base64
import json
import os
import uuid

import pytest

from ares_viewer import container as containers
from ares_viewer import snapshots
from ares_viewer.snapshots import per_step

IMAGE = "ares-viewer/sample-base:1"

pytestmark = pytest.mark.docker

# Prints, for each path, what the container itself says about it: type, permission bits, link target and
# content (base64). This is the ground truth the snapshot must reproduce.
_PROBE = r"""
import base64, json, os, stat, sys
out = {}
for path in sys.argv[1:]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        out[path] = None
        continue
    if stat.S_ISLNK(st.st_mode):
        out[path] = ["symlink", stat.S_IMODE(st.st_mode), os.readlink(path), None]
    elif stat.S_ISDIR(st.st_mode):
        out[path] = ["dir", stat.S_IMODE(st.st_mode), None, None]
    else:
        with open(path, "rb") as handle:
            out[path] = ["file", stat.S_IMODE(st.st_mode), None, base64.b64encode(handle.read()).decode()]
print(json.dumps(out))
"""

_SETUP = r"""
set -e
mkdir -p /testbed/pkg/sub /testbed/empty
printf 'def answer():\n    return 42\n' > /testbed/pkg/mod.py
printf 'Crème brûlée — 日本語\n' > /testbed/pkg/notes.txt
head -c 3000 /dev/urandom > /testbed/pkg/sub/blob.bin
printf '#!/bin/sh\necho hi\n' > /testbed/pkg/run.sh && chmod 4750 /testbed/pkg/run.sh
: > /testbed/pkg/empty.txt
chmod 700 /testbed/pkg/sub
ln -s mod.py /testbed/pkg/link_rel
ln -s /etc/os-release /testbed/pkg/link_abs
ln -s ../../../../nowhere /testbed/pkg/link_dangling
printf 'überall\n' > '/testbed/pkg/ünïcode name.txt'
echo 'appended by the agent' >> /etc/issue
rm /etc/debian_version
rm -r /usr/share/keyrings
mkdir -p /testbed/pkg/__pycache__ && echo x > /testbed/pkg/__pycache__/mod.cpython-311.pyc
echo scratch > /tmp/scratch.txt
"""

TOUCHED = [
    "/testbed/pkg",
    "/testbed/pkg/sub",
    "/testbed/empty",
    "/testbed/pkg/mod.py",
    "/testbed/pkg/notes.txt",
    "/testbed/pkg/sub/blob.bin",
    "/testbed/pkg/run.sh",
    "/testbed/pkg/empty.txt",
    "/testbed/pkg/link_rel",
    "/testbed/pkg/link_abs",
    "/testbed/pkg/link_dangling",
    "/testbed/pkg/ünïcode name.txt",
    "/etc/issue",
]


@pytest.fixture(scope="module")
def base_image(docker_client):
    import docker.errors

    try:
        docker_client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        message = f"{IMAGE} missing: run `bash images/build-base.sh --offline`"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return IMAGE


@pytest.fixture
def container(docker_client, base_image):
    started = docker_client.containers.run(
        base_image,
        ["sleep", "infinity"],
        detach=True,
        network_mode="none",
        mem_limit="256m",
        nano_cpus=1_000_000_000,
        pids_limit=128,
        labels={containers.LABEL_PROJECT: "1", containers.LABEL_ROLE: "test"},
    )
    yield started
    started.remove(force=True)


def _probe(container, paths) -> dict:
    result = container.exec_run(["python3", "-c", _PROBE, *paths])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _sh(container, script: str) -> None:
    result = container.exec_run(["bash", "-c", script])
    assert result.exit_code == 0, result.output.decode(errors="replace")


def _as_probe(snap: snapshots.Snapshot, path: str):
    entry = snap.stat(path)
    if entry is None or entry.type in {snapshots.DELETED, snapshots.ABSENT}:
        return None
    data = snap.read(path)
    content = base64.b64encode(data).decode() if data is not None else None
    return [entry.type, entry.mode, entry.link_target, content]


def test_capture_then_read_matches_the_container(tmp_path, container, base_image, docker_client):
    episode_id = str(uuid.uuid4())
    base_truth = _probe(container, ["/etc/issue", "/etc/debian_version"])
    _sh(container, _SETUP)
    truth = _probe(container, TOUCHED)

    step_dir = containers.capture_snapshot(container, base_image, episode_id, 0, tmp_path)

    assert step_dir == tmp_path / "snapshots" / episode_id / "step_0000"
    snap = snapshots.open(per_step.find_for_episode(tmp_path / f"{episode_id}.json", episode_id)[0])
    for path in TOUCHED:
        assert _as_probe(snap, path) == truth[path], path
    assert snap.stat("/testbed/pkg/link_rel").link_target == "mod.py"
    assert snap.stat("/testbed/pkg/link_dangling").link_target == "../../../../nowhere"
    assert snap.stat("/testbed/pkg/run.sh").mode == 0o4750
    assert snap.stat("/testbed/pkg/mod.py").change == "added"
    assert snap.stat("/etc/issue").change == "modified"
    # Deletions, with the base image's own versions readable without the daemon.
    assert snap.deleted_paths() == ["/etc/debian_version", "/usr/share/keyrings"]
    assert snap.read_base("/etc/debian_version") == base64.b64decode(base_truth["/etc/debian_version"][3])
    assert snap.read_base("/etc/issue") == base64.b64decode(base_truth["/etc/issue"][3])
    assert snap.read("/etc/debian_version") is None
    assert snap.stat("/usr/share/keyrings/debian-archive-keyring.gpg").type == snapshots.DELETED
    assert snap.base_entries["/testbed/pkg/mod.py"].type == snapshots.ABSENT
    # Noise is not recorded.
    assert not [p for p in snap.entries if "__pycache__" in p or p.startswith("/tmp")]
    # No helper container is left behind (this capture's: other work may share the engine).
    helpers = docker_client.containers.list(all=True, filters={"label": [
        f"{containers.LABEL_ROLE}=base-reader", f"{containers.LABEL_EPISODE}={episode_id}"]})
    assert helpers == []


def test_later_steps_share_content_and_diff_cleanly(tmp_path, container, base_image):
    episode_id = str(uuid.uuid4())
    _sh(container, _SETUP)
    containers.capture_snapshot(container, base_image, episode_id, 0, tmp_path)
    _sh(
        container,
        "printf 'def answer():\\n    return 43\\n' > /testbed/pkg/mod.py && rm /testbed/pkg/notes.txt "
        "&& echo 'new line' >> /etc/issue.net",
    )
    containers.capture_snapshot(container, base_image, episode_id, 1, tmp_path)

    refs = per_step.find_for_episode(tmp_path / f"{episode_id}.json", episode_id)
    step0, step1 = (snapshots.open(ref) for ref in refs)
    assert step1.read("pkg/mod.py") == b"def answer():\n    return 43\n"
    assert step0.read("pkg/mod.py") == b"def answer():\n    return 42\n"
    # Unchanged content is stored once: step 1 points at step 0's archive.
    assert step1.stat("/testbed/pkg/sub/blob.bin").stored_in == "step_0000"
    assert step1.stat("/testbed/pkg/mod.py").stored_in == "step_0001"
    # notes.txt was added at step 0 and removed at step 1: absent from the base, so gone at step 1.
    assert step1.stat("/testbed/pkg/notes.txt").type == snapshots.ABSENT
    assert snapshots.changed_between(step0, step1) == [
        "/etc/issue.net",
        "/testbed/pkg/mod.py",
        "/testbed/pkg/notes.txt",
    ]
    assert step1.read_base("/etc/issue.net") is not None
    assert step1.read("/etc/issue.net").endswith(b"new line\n")


def test_restored_container_matches_the_original(tmp_path, container, base_image, docker_client):
    episode_id = str(uuid.uuid4())
    _sh(container, _SETUP)
    truth = _probe(container, [*TOUCHED, "/etc/debian_version", "/usr/share/keyrings"])
    containers.capture_snapshot(container, base_image, episode_id, 0, tmp_path)
    snap = snapshots.open(per_step.find_for_episode(tmp_path / "x.json", episode_id)[0])

    restored = containers.restore_container(docker_client, snap)
    try:
        assert _probe(restored, [*TOUCHED, "/etc/debian_version", "/usr/share/keyrings"]) == truth
        assert restored.attrs["HostConfig"]["NetworkMode"] == "none"
        assert restored.labels[containers.LABEL_EPISODE] == episode_id
    finally:
        restored.remove(force=True)


def test_capture_refuses_a_container_of_another_image(tmp_path, container, docker_client):
    other = container.commit(repository="ares-viewer/test-other", tag=uuid.uuid4().hex[:12])
    try:
        with pytest.raises(containers.ContainerFilesError, match="was not created from"):
            containers.capture_snapshot(container, other.tags[0], str(uuid.uuid4()), 0, tmp_path)
    finally:
        docker_client.images.remove(other.id, force=True)
