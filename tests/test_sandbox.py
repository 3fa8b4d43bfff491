"""Live sandboxes against the real Docker engine: restore, run, replay, fork, lifecycle, and failure handling.

Every container a test makes carries this module's session label and is removed by a finalizer, whatever
happens. Containers are reused where a test only reads them.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
import uuid

import pytest

from ares_viewer import container as containers
from ares_viewer import fsdiff, model, sandbox, snapshots
from ares_viewer.runs import run
from ares_viewer.sandbox import registry
from ares_viewer.sandbox import replays as sandbox_replay

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"  # slugify-solved: 7 actions, reward 1.0
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"  # slugify-wrong-fix: strips accents at step 2, reward 0.0
EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # pager-explorer: deletions, binary, symlink, elided output
SESSION = f"pytest-{uuid.uuid4().hex[:10]}"


def _episode(episode_id: str) -> model.Episode:
    return run.load_episode(DEMO / f"{episode_id}.json")


@pytest.fixture(scope="module")
def explorer_box(engine):
    """One sandbox of the explorer episode's last step, shared by the tests that only read it."""
    box = sandbox.restore(_episode(EXPLORER), 12, client=engine, session=SESSION)
    yield box
    box.remove()


def _tree_hash(root: pathlib.Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
        digest.update(str(path.stat().st_mode).encode())
    return digest.hexdigest()


def _stat(client, container_id: str, path: str) -> dict | None:
    api = client.api
    answer = api.head(api._url("/containers/{0}/archive", container_id), params={"path": path})
    if answer.status_code == 404:
        return None
    return json.loads(base64.b64decode(answer.headers["X-Docker-Container-Path-Stat"]))


def _read_tree(client, container_id: str, path: str) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
    """Every member of the engine's archive of ``path``, by absolute path (one request for a whole folder)."""
    chunks, _ = client.api.get_archive(container_id, path)
    parent = os.path.dirname(path)
    found = {}
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isreg() else None
            found[os.path.join(parent, member.name.rstrip("/"))] = (member, handle.read() if handle else b"")
    return found


# ----- restore ----------------------------------------------------------------------------------------------------


def test_restored_files_match_the_snapshot_byte_for_byte(engine, explorer_box):
    snap = snapshots.for_step(_episode(EXPLORER), 12)
    kinds = {entry.type for entry in snap.entries.values()}
    assert {snapshots.FILE, snapshots.DIR, snapshots.SYMLINK, snapshots.DELETED} <= kinds
    checked = 0
    testbed = _read_tree(engine, explorer_box.container_id, "/testbed")
    for path, entry in sorted(snap.entries.items()):
        if entry.type == snapshots.DELETED:
            assert _stat(engine, explorer_box.container_id, path) is None, f"{path} should be deleted"
            continue
        if path in testbed:
            member, data = testbed[path]
        else:
            member, data = _read_tree(engine, explorer_box.container_id, path)[path]
        assert member.mode & 0o7777 == entry.mode, path
        if entry.type == snapshots.FILE:
            assert member.isreg(), path
            assert data == snap.read(path), f"{path} differs from the snapshot"
            checked += 1
        elif entry.type == snapshots.SYMLINK:
            assert member.issym() and member.linkname == entry.link_target, path
        elif entry.type == snapshots.DIR:
            assert member.isdir(), path
    assert checked >= 10
    assert snap.read("/testbed/data/items.csv.gz")[:2] == b"\x1f\x8b"  # the binary file came through intact


def test_restored_container_is_locked_down_and_labelled(engine, explorer_box):
    attrs = engine.api.inspect_container(explorer_box.container_id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["Privileged"] is False
    assert host["Memory"] > 0 and host["NanoCpus"] > 0 and host["PidsLimit"] > 0
    assert not host.get("Binds") and not attrs["Mounts"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert attrs["Config"]["WorkingDir"] == "/testbed"
    labels = attrs["Config"]["Labels"]
    assert labels[sandbox.LABEL_PROJECT] == "1"
    assert labels[sandbox.LABEL_EPISODE] == EXPLORER
    assert labels[sandbox.LABEL_STEP] == "12"
    assert labels[sandbox.LABEL_SESSION] == SESSION
    assert abs(float(labels[sandbox.LABEL_CREATED]) - explorer_box.created_at) < 1
    # No network: nothing but loopback.
    result = explorer_box.run("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
    assert result.output.split() == ["lo"]


def test_network_is_an_explicit_option(restore, engine):
    box = restore(WRONG_FIX, 0, network=True)
    assert engine.api.inspect_container(box.container_id)["HostConfig"]["NetworkMode"] == "bridge"


# ----- running commands -------------------------------------------------------------------------------------------


def test_commands_run_like_ares(explorer_box):
    result = explorer_box.run("pwd && echo $PAGER && echo oops >&2 && exit 3")
    assert result.returncode == 3
    assert result.output == "/testbed\ncat\noops\n"  # one stream, in the order it was written
    assert result.ok and not result.timed_out and result.duration_s > 0
    assert explorer_box.run("printf 'Crème brûlée\\n'").output == "Crème brûlée\n"


def test_timeout_kills_the_command_and_its_children(explorer_box):
    started = time.monotonic()
    result = explorer_box.run("sleep 300 & sleep 300; echo never", timeout_s=1)
    assert time.monotonic() - started < 15
    assert result.timed_out and "timed out after 1 s" in result.error
    assert "never" not in result.output
    survivors = explorer_box.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c '[s]leep 300' || true")
    assert survivors.output.strip() == "0"
    assert explorer_box.run("echo still here").output == "still here\n"  # the caller keeps working


def test_a_command_may_outlast_the_clients_own_timeout(explorer_box):
    import docker

    impatient = docker.from_env(timeout=1)
    result = dataclasses.replace(explorer_box, client=impatient).run("sleep 3; echo done", timeout_s=10)
    assert result.error is None and result.output == "done\n" and result.duration_s >= 3


# ----- replay -----------------------------------------------------------------------------------------------------


def test_replaying_the_solved_episode_reproduces_every_step(restore):
    episode = _episode(SOLVED)
    folder = snapshots.episode_snapshots_dir(DEMO, SOLVED)
    before = _tree_hash(folder)
    box = restore(SOLVED, 0)
    results = sandbox.replay(box, episode, normalize=True)
    assert iter(results) is results  # a generator: the app fills its table as steps finish
    results = list(results)
    assert [r.step for r in results] == list(range(1, 8))
    assert [str(r.status) for r in results] == ["reproduced"] * 7, [(r.step, r.note, r.output_diff) for r in results]
    assert all(r.output_matches for r in results[:-1])  # the submitting LAST step has no recorded output
    assert results[2].result.returncode == 1 == results[2].recorded_returncode  # the failing test run, again
    assert _tree_hash(folder) == before, "replay must never modify snapshot files"
    assert not list(folder.parent.parent.glob("**/*.tmp-*"))


def test_following_changes_sees_what_the_engines_change_list_sees(restore):
    """After each command, the tracker's capture and a full capture from ``container.diff()`` agree on every path."""
    episode = _episode(EXPLORER)
    box = restore(EXPLORER, 12)  # deletions, a binary file, a symlink, base-image files touched
    recorded = snapshots.for_step(episode, 12)
    assert box.container_id in registry._TRACKERS  # the restore started following it: the fast path is tested
    commands = [
        "printf 'new\\n' > notes.txt && mkdir -p deep/er && echo x > deep/er/f && chmod 700 deep",
        "mv notes.txt renamed.txt && ln -sf renamed.txt link && rm -rf deep",
        "rm -f tests/data && mkdir tests/data && echo csv > tests/data/a.csv && chmod 4755 README.md",
        "git add -A && git -c user.email=a@b -c user.name=n commit -qm wip && rm /etc/debian_version",
        "printf 'caf\\xc3\\xa9 \\x00\\x01' > bin.dat && touch -d 2001-01-01 bin.dat && echo 2 >> renamed.txt",
    ]
    for command in commands:
        assert box.run(command).returncode == 0, command
        followed = box.capture(recorded)
        full = containers.capture_live(box.container(), recorded)
        differ = fsdiff.diff_snapshots(full, followed)
        assert not differ.changes, (command, [c.describe() for c in differ.changes])
    assert followed.read("/testbed/renamed.txt") == b"new\n2\n"
    assert followed.stat("/testbed/link").link_target == "renamed.txt"
    assert followed.stat("/testbed/deep") is None  # added, then removed: no trace, as in the engine's list
    assert followed.stat("/etc/debian_version").type == snapshots.DELETED


def test_a_sandbox_this_process_did_not_restore_is_followed_after_one_full_capture(restore):
    episode = _episode(SOLVED)
    box = restore(SOLVED, 2)
    box.run("echo before > before.txt")
    registry.forget_container(box.container_id)  # as after an app restart: the state is not known here
    recorded = snapshots.for_step(episode, 2)
    first = box.capture(recorded)  # the engine's change list, then following from that state
    assert first.read("/testbed/before.txt") == b"before\n"
    assert box.container_id in registry._TRACKERS
    box.run("echo after > after.txt")
    second = box.capture(recorded)
    assert second.read("/testbed/before.txt") == b"before\n"  # content read before the tracker started
    assert second.read("/testbed/after.txt") == b"after\n"
    assert not fsdiff.diff_snapshots(containers.capture_live(box.container(), recorded), second).changes


def test_divergence_is_reported_with_diffs_and_can_stop_the_replay(restore):
    episode = _episode(SOLVED)
    box = restore(SOLVED, 5)  # the fix is in place; break it before the tests run again
    assert box.run("echo 'raise RuntimeError(\"broken\")' >> textkit/__init__.py").returncode == 0
    results = list(sandbox.replay(box, episode, normalize=True, stop_at_divergence=True))
    assert len(results) == 1
    first = results[0]
    assert first.status == sandbox.Status.OUTPUT_DIVERGED
    assert first.result.returncode != 0 and first.recorded_returncode == 0
    assert "RuntimeError" in first.output_diff and first.output_diff.startswith("--- recorded")
    assert [c.path for c in first.fs_changes] == ["/testbed/textkit/__init__.py"]
    assert "+raise RuntimeError" in first.file_diffs[0].unified


def test_filesystem_divergence_alone(restore):
    episode = _episode(SOLVED)
    box = restore(SOLVED, 1)
    box.run("echo scratch > /testbed/notes.txt")
    result = next(sandbox.replay(box, episode, normalize=True))
    assert result.status == sandbox.Status.FILESYSTEM_DIVERGED and result.output_matches
    assert [(c.path, c.kind) for c in result.fs_changes] == [("/testbed/notes.txt", "added")]


def test_a_killed_container_gives_per_step_errors(restore, engine):
    episode = _episode(SOLVED)
    box = restore(SOLVED, 0)
    steps = sandbox.replay(box, episode, normalize=True)
    assert next(steps).status == sandbox.Status.REPRODUCED
    engine.api.kill(box.container_id)
    rest = list(steps)  # never raises
    assert [r.step for r in rest] == list(range(2, 8))
    assert all(r.status == sandbox.Status.ERROR for r in rest)
    assert "not running" in rest[0].note and "restore the step again" in rest[0].note
    assert box.state() == "exited"


def test_running_out_of_memory_mid_replay(restore):
    episode = _episode(SOLVED)
    hog = "python3 -c 'x = bytearray(400 * 1024 * 1024)'"
    steps = list(episode.steps)
    steps[2] = dataclasses.replace(steps[2], command=hog)
    hungry = dataclasses.replace(episode, steps=tuple(steps))
    box = restore(SOLVED, 0, mem_limit="96m")
    results = list(sandbox.replay(box, hungry, until=4, normalize=True))
    assert [str(r.status) for r in results] == ["reproduced", "error", "reproduced", "reproduced"]
    assert "ran out of memory" in results[1].note
    assert box.state() == "running"


class _SilentEngine:
    """A socket that accepts connections and never answers: an engine that stopped responding."""

    def __init__(self, path: pathlib.Path) -> None:
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen(16)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.server.accept()[0])

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.server.close()


def test_an_engine_that_stops_answering(restore, tmp_path):
    import docker

    episode = _episode(SOLVED)
    box = restore(SOLVED, 0)
    # Refused: nothing listens on the socket any more.
    dead = docker.DockerClient(base_url=f"unix://{tmp_path / 'gone.sock'}", version="1.41", timeout=3)
    cut_off = dataclasses.replace(box, client=dead)
    result = cut_off.run("echo hi")
    assert result.returncode is None and "unreachable" in result.error and "dockerd" in result.error
    assert cut_off.state() == "unreachable"
    # Hung: the engine accepts the connection and never answers.
    silent = _SilentEngine(tmp_path / "silent.sock")
    try:
        hung = docker.DockerClient(base_url=f"unix://{tmp_path / 'silent.sock'}", version="1.41", timeout=2)
        started = time.monotonic()
        results = list(sandbox.replay(dataclasses.replace(box, client=hung), episode, until=2))
        assert time.monotonic() - started < 20
        assert [str(r.status) for r in results] == ["error", "error"]
        assert "did not answer" in results[0].note
    finally:
        silent.close()
    # The caller keeps working: the real engine still serves the same sandbox.
    assert box.run("echo back").output == "back\n"
    assert next(sandbox.replay(box, episode, normalize=True)).status == sandbox.Status.REPRODUCED


def test_restore_with_an_unreachable_engine_says_how_to_start_one(tmp_path):
    import docker

    dead = docker.DockerClient(base_url=f"unix://{tmp_path / 'gone.sock'}", version="1.41", timeout=3)
    with pytest.raises(sandbox.SandboxError, match="dockerd") as caught:
        sandbox.restore(_episode(WRONG_FIX), 0, client=dead)
    assert "systemctl start docker" in str(caught.value)


# ----- unsafe or unusable snapshots ---------------------------------------------------------------------------------


class _NoEngine:
    """A client that fails the test if anything at all is asked of it."""

    def __getattr__(self, name):
        raise AssertionError(f"the engine was contacted ({name}) for an unsafe snapshot")


def _copy_episode(tmp_path: pathlib.Path, episode_id: str) -> pathlib.Path:
    run_dir = tmp_path / "run"
    (run_dir / "snapshots").mkdir(parents=True)
    shutil.copy(DEMO / f"{episode_id}.json", run_dir)
    shutil.copytree(DEMO / "snapshots" / episode_id, run_dir / "snapshots" / episode_id)
    shutil.copytree(DEMO / "tasks", run_dir / "tasks")
    return run_dir


def _edit_manifests(folder: pathlib.Path, edit) -> None:
    for path in folder.glob("*/manifest.json"):
        manifest = json.loads(path.read_text())
        edit(manifest)
        path.write_text(json.dumps(manifest))


def test_traversal_paths_are_refused_before_the_engine(tmp_path):
    run_dir = _copy_episode(tmp_path, WRONG_FIX)
    step = run_dir / "snapshots" / WRONG_FIX / "step_0002" / "manifest.json"
    manifest = json.loads(step.read_text())
    manifest["entries"]["/testbed/../etc/cron.d/evil"] = {"type": "file", "mode": 420}
    step.write_text(json.dumps(manifest))
    episode = run.load_episode(run_dir / f"{WRONG_FIX}.json")
    with pytest.raises(snapshots.SnapshotError, match="not an absolute normalized path"):
        sandbox.restore(episode, 2, client=_NoEngine())


def test_device_files_are_refused_before_the_engine(tmp_path):
    run_dir = _copy_episode(tmp_path, WRONG_FIX)
    archive = run_dir / "snapshots" / WRONG_FIX / "step_0002" / snapshots.BLOBS_NAME
    raw = io.BytesIO()
    with tarfile.open(archive) as old, tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as new:
        for member in old:
            new.addfile(member, old.extractfile(member))
        device = tarfile.TarInfo("0" * 64)
        device.type, device.devmajor, device.devminor = tarfile.CHRTYPE, 1, 3
        new.addfile(device)
    archive.write_bytes(gzip.compress(raw.getvalue()))
    episode = run.load_episode(run_dir / f"{WRONG_FIX}.json")
    with pytest.raises(snapshots.SnapshotError, match="character device"):
        sandbox.restore(episode, 2, client=_NoEngine())


def test_a_missing_base_image_says_how_to_build_it(tmp_path, engine):
    run_dir = _copy_episode(tmp_path, WRONG_FIX)
    _edit_manifests(run_dir / "snapshots" / WRONG_FIX, lambda m: m.update(base_image="ares-viewer/absent:0"))
    episode = run.load_episode(run_dir / f"{WRONG_FIX}.json")
    session = f"{SESSION}-noimage"
    with pytest.raises(sandbox.SandboxError, match=r"bash images/build-base.sh --offline"):
        sandbox.restore(episode, 1, client=engine, session=session)
    assert sandbox.list_sandboxes(engine, session=session) == []


def test_a_step_without_snapshot(engine):
    with pytest.raises(LookupError, match="no snapshot for step 99"):
        sandbox.restore(_episode(WRONG_FIX), 99, client=engine)


# ----- fork and verifier --------------------------------------------------------------------------------------------


def test_forking_the_wrong_fix_with_the_right_one_earns_the_reward(restore):
    wrong, solved = _episode(WRONG_FIX), _episode(SOLVED)
    assert wrong.total_reward == 0.0
    # The recorded path, verified again in a live container: the wrong fix earns nothing.
    recorded_end = restore(WRONG_FIX, 4)
    assert sandbox.verify(recorded_end, sandbox.task_recipe(wrong)).reward == 0.0
    # Step 2 is where it went wrong (bytes dropped instead of transliterated): run the solved fix instead.
    box = restore(WRONG_FIX, 1)
    fix = solved.step(5).command
    forked = sandbox.fork(box, wrong, [fix, "python3 -m pytest -q"])
    assert [r.returncode for r in forked.results] == [0, 0]
    assert forked.compared_with == 2
    assert [c.path for c in forked.fs.changes if not c.path.startswith("/testbed/.git")] == ["/testbed/textkit/slug.py"]
    slug_diff = next(d for d in forked.file_diffs if d.path == "/testbed/textkit/slug.py")
    assert "+import unicodedata" in slug_diff.unified and '-    text = text.encode("ascii"' in slug_diff.unified
    assert forked.verifier.error is None
    assert forked.reward == 1.0 and forked.recorded_reward == 0.0


def test_task_recipe_refuses_unsafe_names(tmp_path):
    episode = dataclasses.replace(_episode(WRONG_FIX), task_name="../../etc")
    with pytest.raises(LookupError, match="cannot name a task folder"):
        sandbox.task_recipe(episode)


# ----- lifecycle ----------------------------------------------------------------------------------------------------


def test_list_cleanup_and_reap_find_everything_by_label(engine):
    session = f"{SESSION}-life"
    episode = _episode(WRONG_FIX)
    try:
        first = sandbox.restore(episode, 0, client=engine, session=session)
        second = sandbox.restore(episode, 1, client=engine, session=session)
        found = {info.container_id: info for info in sandbox.list_sandboxes(engine, session=session)}
        assert set(found) == {first.container_id, second.container_id}
        assert found[second.container_id].step == 1 and found[second.container_id].role == "sandbox"
        # Young containers survive an age filter; an idle one is reaped, a busy one is not.
        assert sandbox.cleanup(engine, session=session, older_than_s=3600) == []
        sandbox.touch(first.container_id, time.time() - 7200)
        second.run("true")
        reaped = sandbox.reap_idle(3600, engine, sessions={session})
        assert first.container_id in reaped and second.container_id not in reaped
        # A crashed app's container (never touched by this process) is found by its labels alone.
        registry._REGISTRY.pop(second.container_id, None)
        cli = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "sandbox", "list", "--json",
                              "--session", session], capture_output=True, text=True, check=True)
        assert [json.loads(line)["id"] for line in cli.stdout.splitlines()] == [second.container_id]
        cli = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "sandbox", "cleanup", "--session", session],
                             capture_output=True, text=True, check=True)
        assert cli.stdout.split() == [second.short_id]
        assert sandbox.list_sandboxes(engine, session=session) == []
        assert second.state() == "removed"
        second.remove()  # removing twice is harmless
    finally:
        sandbox.cleanup(engine, session=session)


# ----- pure helpers (no engine) -------------------------------------------------------------------------------------


def test_normalize_text_hides_volatile_parts():
    a = ("1 failed, 1 passed in 0.04s\n<object at 0x7f3a2b1c9d80>\n2026-11-20T14:00:03.123Z\n"
         "-rw-r--r-- 1 root root 34 Nov 20 14:00 .gitignore\n/tmp/tmpa1b2c3d4/x\ncontainer 3f2a9c0d1e2b\n")
    b = ("1 failed, 1 passed in 1.27s\n<object at 0x55d0e1f2a3b4>\n2026-11-22T09:41:59.999Z\n"
         "-rw-r--r-- 1 root root 34 Jan  1  1970 .gitignore\n/tmp/tmpzz99yy88/x\ncontainer 9e8d7c6b5a41\n")
    assert a != b and sandbox.normalize_text(a) == sandbox.normalize_text(b)
    assert sandbox.normalize_text("exit 1, 3 files") == "exit 1, 3 files"


def test_elided_outputs_compare_head_and_tail():
    long = "".join(f"line {i}\n" for i in range(3000))
    recorded = sandbox.as_agent_saw(long)
    step = model.Step(index=3, kind=model.StepKind.MID, command="seq", returncode=0, output=recorded,
                      output_elided=len(long) - sandbox.ELIDE_AT)
    same = sandbox.CommandResult(0, long, 0.1)
    assert sandbox.compare_output(step, same)[0] is True
    middle_changed = sandbox.CommandResult(0, long[:8000] + "X" + long[8001:], 0.1)
    assert sandbox.compare_output(step, middle_changed)[0] is True  # the agent never saw the middle
    tail_changed = sandbox.CommandResult(0, long[:-3] + "!!\n", 0.1)
    matches, diff, note = sandbox.compare_output(step, tail_changed)
    assert matches is False and "!!" in diff and note == "output differs"


def test_git_index_comparison_ignores_the_stat_cache(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "a.txt"], cwd=repo, check=True)
    first = (repo / ".git" / "index").read_bytes()
    os.utime(repo / "a.txt", (1, 1))
    subprocess.run([*git, "update-index", "--refresh"], cwd=repo, check=False, capture_output=True)
    refreshed = (repo / ".git" / "index").read_bytes()
    assert refreshed != first
    assert sandbox_replay._git_index_key(first) == sandbox_replay._git_index_key(refreshed)
    (repo / "a.txt").write_text("two\n")
    subprocess.run([*git, "add", "a.txt"], cwd=repo, check=True)
    assert sandbox_replay._git_index_key((repo / ".git" / "index").read_bytes()) != sandbox_replay._git_index_key(first)


# ----- the app page without a browser (AppTest) ---------------------------------------------------------------------

def _page(sandbox_page):
    return sandbox_page(REPO / "sample_runs", run="demo-run", episode=SOLVED, step="0")


def test_page_says_how_to_fix_a_missing_engine(tmp_path, monkeypatch, sandbox_page):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'gone.sock'}")
    at = _page(sandbox_page).run()
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "Docker is unavailable" in errors and "dockerd" in errors and "systemctl start docker" in errors


def test_page_is_off_unless_enabled_on_a_public_address(monkeypatch, sandbox_page):
    monkeypatch.setenv("ARES_VIEWER_SANDBOX", "0")
    at = _page(sandbox_page).run()
    assert not at.exception
    assert any("ARES_VIEWER_SANDBOX=1" in w.value for w in at.warning)
    assert not [b for b in at.button if b.label == "Restore"]


def test_the_idle_reaper_does_not_keep_a_page_run_alive(engine, sandbox_page):
    # The server's reaper thread runs as long as the server: it must not hold the run a Sandbox page showed (a
    # thread started from the page script would keep that script's globals, and the run in them, alive).
    import threading

    import ares_viewer

    at = _page(sandbox_page).run()
    assert not at.exception and [b for b in at.button if b.label == "Restore"]
    reapers = [t for t in threading.enumerate() if t.name == "ares-viewer-sandbox-reaper"]
    assert reapers
    for thread in reapers:
        loop = thread._target  # the function the thread runs
        held = [*loop.__globals__.values(), *(cell.cell_contents for cell in loop.__closure__ or ())]
        assert not [value for value in held if isinstance(value, ares_viewer.Run)]
        assert loop.__globals__["__name__"] == "ares_viewer_app.serving.sandbox_reaper"
