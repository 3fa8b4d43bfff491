"""Live sandboxes under hostile or heavy use, against the real Docker engine: time linear in bytes, bounded memory,
no process outliving its command, a verifier the agent cannot prepare, and clear errors at every limit.

Memory is measured in a child process (its peak resident set, from ``getrusage``), against a baseline taken in
the same child before the work, so the figures hold on a loaded machine. Times are compared with a baseline
read of the same bytes measured in the same test. Every container carries this module's session label and is
removed at the end, whatever happens.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
import uuid

import pytest

from ares_viewer import container as containers
from ares_viewer import sandbox, snapshots
from ares_viewer.runs import run

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"  # slugify-solved: 7 actions, reward 1.0
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"  # slugify-wrong-fix: reward 0.0
SESSION = f"pytest-hard-{uuid.uuid4().hex[:10]}"
MIB = 1024 * 1024


def _episode(episode_id: str, folder: pathlib.Path = DEMO):
    return run.load_episode(folder / f"{episode_id}.json")


def _child(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter (this worktree's code); it prints one JSON line last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_RSS = """
import json, resource
def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""


# ----- case 1: captures stream, in time linear in bytes ------------------------------------------------------------


def _drain_archive(engine, container_id: str, path: str) -> tuple[float, int]:
    began = time.perf_counter()
    chunks, _ = engine.api.get_archive(container_id, path, chunk_size=1 << 20)
    size = sum(len(chunk) for chunk in chunks)
    return time.perf_counter() - began, size


def test_capturing_100_mb_takes_time_linear_in_bytes(engine, restore):
    box = restore(SOLVED, 0)
    recorded = snapshots.for_step(_episode(SOLVED), 0)
    wrote = box.run("mkdir big && for i in $(seq 100); do head -c 1048576 /dev/urandom > big/f$i; done; du -sm big",
                    timeout_s=120)
    assert wrote.returncode == 0, wrote.output
    # Baseline: the same bytes read raw through the engine's archive API, measured now on this machine.
    baseline, size = _drain_archive(engine, box.container_id, "/testbed/big")
    assert size >= 100 * MIB
    began = time.perf_counter()
    live = box.capture(recorded)  # the change tracker the restore started: one exec, streamed
    tracked = time.perf_counter() - began
    began = time.perf_counter()
    fresh = containers.capture_live(box.container(), recorded)  # the engine's change list + archives
    listed = time.perf_counter() - began
    for state in (live, fresh):
        assert state.read("/testbed/big/f7") is not None and len(state.read("/testbed/big/f100")) == MIB
    # Quadratic joining took 88 s for 90 MB; a stream costs a small multiple of reading the bytes at all.
    allowed = 15 * baseline + 10
    assert tracked < allowed, f"tracked capture {tracked:.1f} s vs raw read {baseline:.2f} s"
    assert listed < allowed, f"capture_live {listed:.1f} s vs raw read {baseline:.2f} s"


_CAPTURE_IN_CHILD = """
import hashlib, json, os
import docker
from ares_viewer import container as containers, snapshots
from ares_viewer.runs import run

def peak_mib():  # the peak resident set so far (VmHWM), in MiB
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024

client = docker.from_env(timeout=120)
live = client.containers.get(os.environ["CONTAINER"])
episode = run.load_episode(os.environ["EPISODE"])
recorded = snapshots.for_step(episode, 0)
tracker = containers.ChangeTracker.start(live, containers.capture_live(live, recorded))
wrote = live.exec_run(["sh", "-c", "mkdir /testbed/big && for i in $(seq 10); do "
                       "head -c 10485760 /dev/urandom > /testbed/big/f$i; done"])
assert wrote.exit_code == 0, wrote.output
out = {"before_mib": peak_mib()}
tracked = tracker.snapshot(recorded)
out["tracked_mib"] = peak_mib()
fresh = containers.capture_live(live, recorded)
out["live_mib"] = peak_mib()
step = containers.capture_snapshot(live, recorded.base_image, episode.episode_id, 1, os.environ["OUT"])
out["written_mib"] = peak_mib()
written = snapshots.open_step(step)
out["digests"] = [sorted({hashlib.sha256(state.read(f"/testbed/big/f{i}") or b"").hexdigest()
                          for state in (tracked, fresh, written)}) for i in range(1, 11)]
out["sizes"] = [written.stat(f"/testbed/big/f{i}").size for i in range(1, 11)]
print(json.dumps(out))
"""


def test_capturing_100_mb_of_changes_keeps_memory_bounded(engine, restore, tmp_path):
    box = restore(SOLVED, 0)
    out = _child(_CAPTURE_IN_CHILD, CONTAINER=box.container_id, EPISODE=str(DEMO / f"{SOLVED}.json"),
                 OUT=str(tmp_path))
    # Every capture holds all ten files, the same bytes.
    assert out["sizes"] == [10 * MIB] * 10
    assert all(len(found) == 1 and found[0] != hashlib.sha256(b"").hexdigest() for found in out["digests"]), out
    # 100 MiB changed; each capture's content went to a temporary file, so the process grew by far less.
    for stage in ("tracked_mib", "live_mib", "written_mib"):
        assert out[stage] - out["before_mib"] < 40, (stage, out)


def test_a_capture_past_its_time_limit_fails_clearly(engine, restore, monkeypatch):
    box = restore(SOLVED, 0)
    recorded = snapshots.for_step(_episode(SOLVED), 0)
    box.run("mkdir big && for i in $(seq 40); do head -c 1048576 /dev/urandom > big/f$i; done", timeout_s=120)
    monkeypatch.setenv("ARES_VIEWER_CAPTURE_TIMEOUT_S", "0.001")
    with pytest.raises(containers.ContainerFilesError, match=r"did not finish within|took over"):
        containers.capture_live(box.container(), recorded)
    with pytest.raises(containers.ContainerFilesError, match=r"did not finish within|took over"):
        box.capture(recorded)


def test_a_restore_past_its_time_limit_leaves_no_container(engine, monkeypatch):
    session = f"{SESSION}-slow"
    monkeypatch.setenv("ARES_VIEWER_RESTORE_TIMEOUT_S", "0.001")
    with pytest.raises(containers.ContainerFilesError, match=r"took over .* the container was removed"):
        sandbox.restore(_episode(SOLVED), 5, client=engine, session=session)
    assert sandbox.list_sandboxes(engine, session=session) == []


# ----- case 2: restores are budgeted and streamed -----------------------------------------------------------------


def _big_blob_run(tmp_path: pathlib.Path, refs: int, blob_mib: int = 256) -> pathlib.Path:
    """A copy of the wrong-fix episode whose step 4 references one ``blob_mib`` MiB blob from ``refs`` paths."""
    run_dir = tmp_path / "run"
    (run_dir / "snapshots").mkdir(parents=True)
    shutil.copy(DEMO / f"{WRONG_FIX}.json", run_dir)
    shutil.copytree(DEMO / "snapshots" / WRONG_FIX, run_dir / "snapshots" / WRONG_FIX)
    step = run_dir / "snapshots" / WRONG_FIX / "step_0004"
    size = blob_mib * MIB
    zeros = bytes(MIB)
    digest = hashlib.sha256()
    for _ in range(blob_mib):
        digest.update(zeros)
    sha = digest.hexdigest()
    archive = step / snapshots.BLOBS_NAME
    old_archive = io.BytesIO(archive.read_bytes())
    # The archive rewritten with the blob appended (streamed: the blob is never in memory whole).
    with tarfile.open(fileobj=old_archive) as old, gzip.open(archive, "wb", compresslevel=1) as gz, \
            tarfile.open(fileobj=gz, mode="w|") as new:
        for member in old:
            new.addfile(member, old.extractfile(member))
        info = tarfile.TarInfo(sha)
        info.size, info.mode = size, 0o644

        class _Zeros(io.RawIOBase):
            left = size

            def readable(self):
                return True

            def readinto(self, buffer):
                n = min(len(buffer), self.left)
                buffer[:n] = bytes(n)
                self.left -= n
                return n

        new.addfile(info, io.BufferedReader(_Zeros(), MIB))
    manifest_path = step / snapshots.MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest["entries"]["/testbed/big"] = {"type": "dir", "mode": 0o755, "change": "added"}
    for k in range(refs):
        manifest["entries"][f"/testbed/big/copy{k:02d}.bin"] = {
            "type": "file", "mode": 0o644, "size": size, "sha256": sha, "change": "added", "stored_in": "step_0004"}
    manifest_path.write_text(json.dumps(manifest))
    return run_dir


_RESTORE_IN_CHILD = _RSS + """
import os, sys
from ares_viewer import sandbox, snapshots
from ares_viewer.runs import run
episode = run.load_episode(os.environ["EPISODE"])
before = peak_mib()
out = {"before_mib": before}
try:
    box = sandbox.restore(episode, 4, session=os.environ["SESSION"])
except snapshots.SnapshotError as exc:
    out["error"] = str(exc)
else:
    check = box.run("cat big/*.bin | wc -c")
    out["bytes"] = check.output.strip()
    box.remove()
out["peak_mib"] = peak_mib()
print(json.dumps(out))
"""


def test_a_blob_referenced_20_times_is_refused_before_it_is_read(engine, tmp_path):
    run_dir = _big_blob_run(tmp_path, refs=20)
    out = _child(_RESTORE_IN_CHILD, EPISODE=str(run_dir / f"{WRONG_FIX}.json"), SESSION=f"{SESSION}-blob")
    written = re.search(r"restoring it writes (\d+) bytes of file content, over the budget of 2147483648 bytes",
                        out["error"])
    assert written and int(written.group(1)) >= 20 * 256 * MIB, out["error"]
    assert "ARES_VIEWER_RESTORE_MAX_BYTES" in out["error"]
    assert out["peak_mib"] - out["before_mib"] < 64, out  # refused before anything was materialized
    assert sandbox.list_sandboxes(engine, session=f"{SESSION}-blob") == []


def test_a_blob_referenced_twice_is_restored_with_bounded_memory(engine, tmp_path):
    run_dir = _big_blob_run(tmp_path, refs=2)
    out = _child(_RESTORE_IN_CHILD, EPISODE=str(run_dir / f"{WRONG_FIX}.json"), SESSION=f"{SESSION}-blob2")
    assert "error" not in out, out
    assert out["bytes"] == str(2 * 256 * MIB)
    # 512 MiB restored; one copy of the blob in memory alone would be 256 MiB.
    assert out["peak_mib"] - out["before_mib"] < 128, out
    assert sandbox.list_sandboxes(engine, session=f"{SESSION}-blob2") == []


def test_the_restore_budget_is_a_resource_limit(engine, tmp_path):
    run_dir = _big_blob_run(tmp_path, refs=1, blob_mib=8)
    limits = containers.ResourceLimits(restore_max_bytes=4 * MIB)
    with pytest.raises(snapshots.SnapshotError, match="over the budget of 4194304 bytes"):
        sandbox.restore(_episode(WRONG_FIX, run_dir), 4, client=engine, session=SESSION, limits=limits)


# ----- case 3: command output is kept as head and tail while it streams ----------------------------------------


_COMMAND_IN_CHILD = _RSS + """
import os
import docker
from ares_viewer.sandbox import run_command
client = docker.from_env(timeout=30)
before = peak_mib()
result = run_command(client, os.environ["CONTAINER"], os.environ["COMMAND"], workdir="/",
                     timeout_s=float(os.environ["TIMEOUT"]))
print(json.dumps({"before_mib": before, "peak_mib": peak_mib(), "returncode": result.returncode,
                  "timed_out": result.timed_out, "error": result.error, "length": len(result.output),
                  "head": result.output[:20], "tail": result.output[-20:],
                  "middle": result.output[3_999_990:4_000_200]}))
"""


def test_a_gigabyte_of_output_costs_bounded_memory(engine, restore):
    box = restore(SOLVED, 0)
    out = _child(_COMMAND_IN_CHILD, CONTAINER=box.container_id, TIMEOUT="300",
                 COMMAND="echo start; head -c 1073741824 /dev/zero | tr '\\0' x; echo; echo end")
    assert out["returncode"] == 0 and out["error"] is None and not out["timed_out"]
    assert out["head"].startswith("start\nxxx") and out["tail"].endswith("xxx\nend\n")
    assert "more bytes not kept" in out["middle"]
    assert out["length"] < 8_100_000
    # The whole stream was 1 GiB; what was held is the 8 MB kept, decoded once.
    assert out["peak_mib"] - out["before_mib"] < 100, out


def test_yes_past_the_timeout_is_a_clear_timed_out_result(engine, restore):
    box = restore(SOLVED, 0)
    out = _child(_COMMAND_IN_CHILD, CONTAINER=box.container_id, TIMEOUT="5", COMMAND="yes")
    assert out["timed_out"] and out["returncode"] in (124, 137)
    assert "timed out after 5 s" in out["error"]
    assert out["head"].startswith("y\ny\n") and "more bytes not kept" in out["middle"]
    assert out["peak_mib"] - out["before_mib"] < 100, out


# ----- case 8: no process outlives its command; a container that cannot run commands says why ----------------


def _processes(box) -> str:
    listing = box.run("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done")
    assert listing.returncode == 0, listing.output
    return listing.output


def test_background_and_new_session_processes_die_with_their_command(restore):
    box = restore(SOLVED, 0)
    started = box.run("setsid sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 & (sleep 1002 &) ; echo started")
    assert started.returncode == 0 and started.output.strip() == "started"
    assert started.killed_leftovers >= 3
    left = _processes(box)
    assert "sleep 1000" not in left and "sleep 1001" not in left and "sleep 1002" not in left
    assert "sleep infinity" in left  # the container's own process is not a command's


def _outside_any_command(box, script: str) -> None:
    """Start ``script`` in the container the way the container's own services start: its own exec, not a
    sandbox command (so no command's clean-up is about it)."""
    box.container().exec_run(["sh", "-c", script], detach=True)


def test_processes_that_clear_their_environment_die_with_their_command(restore):
    box = restore(SOLVED, 0)
    _outside_any_command(box, "exec sleep 3000")  # a long-lived process the container ran before the command
    time.sleep(0.5)
    started = box.run("env -i setsid sleep 1003 & env -u ARES_VIEWER_COMMAND nohup sleep 1004 >/dev/null 2>&1 & "
                      "(exec env -i sh -c 'sleep 1005 & sleep 1006 &') ; (exec -c sleep 1007) & echo started")
    assert started.returncode == 0 and started.output.strip() == "started", started
    assert started.killed_leftovers >= 5, started
    left = _processes(box)
    assert not any(f"sleep {n}" in left for n in range(1003, 1008)), left
    # What was running before the command is not the command's: it is left alone.
    assert "sleep 3000" in left and "sleep infinity" in left


# The command's parent is ``timeout``; its parent is the wrapper that runs the command and cleans up after it.
_WRAPPER_PID = "$(cut -d' ' -f4 /proc/$PPID/stat)"


def test_a_command_that_kills_its_wrapper_leaves_nothing_and_says_so(restore):
    box = restore(SOLVED, 0)
    began = time.monotonic()
    # One leftover keeps the command's output open, one does not; then the wrapper is killed outright.
    killed = box.run(f"setsid -f sleep 1010; setsid -f sleep 1011 >/dev/null 2>&1; kill -9 {_WRAPPER_PID}; sleep 1",
                     timeout_s=20)
    assert time.monotonic() - began < 15, killed  # seen when the wrapper went, not at the timeout
    assert killed.error is not None and "killed its wrapper" in killed.error, killed
    assert "did not answer" not in killed.error and not killed.timed_out
    assert killed.killed_leftovers >= 2, killed
    left = _processes(box)
    assert "sleep 1010" not in left and "sleep 1011" not in left, left
    assert box.run("echo next").output == "next\n"


def test_a_command_that_stops_its_wrapper_leaves_nothing_and_says_so(restore):
    box = restore(SOLVED, 0)
    began = time.monotonic()
    stopped = box.run(f"setsid -f sleep 1012 >/dev/null 2>&1; kill -STOP {_WRAPPER_PID}; echo stopped", timeout_s=3)
    assert time.monotonic() - began < 25, stopped
    assert stopped.error is not None and "stopped its wrapper" in stopped.error, stopped
    assert "did not answer" not in stopped.error
    assert stopped.output == "stopped\n" and stopped.killed_leftovers >= 1, stopped
    left = _processes(box)
    assert "sleep 1012" not in left, left
    assert box.run("grep -l '^State:.*stopped' /proc/[0-9]*/status || true").output == ""  # the wrapper is gone
    assert box.run("echo next").output == "next\n"


def test_a_fork_bomb_is_cleaned_up_and_later_commands_work(restore):
    box = restore(SOLVED, 0, pids_limit=64)
    bomb = box.run("bomb() { bomb | bomb & }; bomb; sleep 2; echo done", timeout_s=20)
    assert bomb.killed_leftovers > 10, bomb
    after = box.run("echo alive; ls /proc | grep -c '^[0-9]'")
    assert after.ok and after.returncode == 0 and after.output.startswith("alive"), after
    assert int(after.output.split()[1]) < 10, after.output  # init, sleep, and this command's own


def test_a_container_that_cannot_start_commands_says_why(restore):
    box = restore(SOLVED, 0, pids_limit=32)
    # A process that is no command's (no clean-up is about it) fills every slot.
    _outside_any_command(box, textwrap.dedent("""\
        exec python3 -c '
        import os, time
        while True:
            try:
                if os.fork() == 0:
                    time.sleep(100000)
            except OSError:
                time.sleep(0.01)
        ' >/dev/null 2>&1"""))
    time.sleep(3)
    stuck = box.run("echo hello", timeout_s=10)
    assert stuck.error is not None and stuck.returncode != 0
    assert "could not start the command" in stuck.error and "process limit (32)" in stuck.error
    assert "restore the step again" in stuck.error


# ----- case 7: the verifier runs from a fresh copy the agent could not prepare ---------------------------------


_FORCING_CONFTEST = "import os\nos._exit(0)  # every run 'passes'\n"


def test_a_planted_conftest_and_reward_do_not_fool_the_verifier(restore):
    wrong = _episode(WRONG_FIX)
    box = restore(WRONG_FIX, 4)  # the recorded wrong fix: the verifier gives 0
    recipe = sandbox.task_recipe(wrong)
    plant = (
        "mkdir -p /verifier/tests /logs/verifier"
        f" && printf %s {_shell_quote(_FORCING_CONFTEST)} > /verifier/tests/conftest.py"
        f" && cp /verifier/tests/conftest.py /verifier/conftest.py && cp /verifier/tests/conftest.py /conftest.py"
        " && printf '[pytest]\\naddopts = -p no:terminal\\n' > /pytest.ini"
        " && echo 1 > /logs/verifier/reward.txt"
        " && echo planted"
    )
    assert box.run(plant).output.strip() == "planted"
    # and a process no command's clean-up is about (as if the container ran it), re-planting both as fast as it can
    _outside_any_command(box, "while :; do mkdir -p /verifier/tests /logs/verifier;"
                              " cp /conftest.py /verifier/tests/conftest.py; echo 1 > /logs/verifier/reward.txt; done")
    time.sleep(1)
    # Without the clean-up, that conftest turns the wrong fix into a pass:
    fooled = box.run("cd /testbed && python3 -m pytest -q -p no:cacheprovider /verifier/tests; echo rc=$?")
    assert "rc=0" in fooled.output
    verdict = sandbox.verify(box, recipe)
    assert verdict.error is None, verdict
    assert verdict.reward == 0.0, verdict.result.output[-2000:]
    assert "failed" in box.run("cat /logs/verifier/pytest.log").output


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# ----- a bad image reference -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reference", ["", "Not A/Valid:Ref", "ares-viewer/sample-base:1@sha256:abc"])
def test_a_bad_image_reference_is_reported_as_such(engine, reference):
    with pytest.raises(containers.ImageUnavailableError) as raised:
        containers.require_image(engine, reference)
    message = str(raised.value)
    assert "image reference" in message and "dockerd" not in message


def test_head_and_tail_are_kept_whatever_the_chunking():
    from ares_viewer.container.streams import HeadTail

    data = bytes(range(256)) * 40
    for chunk in (1, 7, 100, 5000, len(data)):
        kept = HeadTail(1000)
        for start in range(0, len(data), chunk):
            kept.write(data[start : start + chunk])
        head, tail = kept.parts()
        assert head == data[:500] and tail == data[-500:], chunk
        assert kept.total == len(data) and kept.dropped == len(data) - 1000
    small = HeadTail(1000)
    small.write(b"abc")
    small.write(b"def")
    assert small.parts() == (b"abcdef", b"") and small.dropped == 0
