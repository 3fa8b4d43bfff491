"""The app ships in the wheel: installed into a fresh venv, ``ares-viewer app`` serves from any folder with the
project's Streamlit settings, and SIGTERM (or SIGINT) leaves no process behind."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request

import pytest

from ares_viewer_app.serving import server
from testdata import app_server

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO = REPO / "sample_runs" / "demo-run"
# What the wheel is built from (copied, so the build writes nothing into the checkout).
SOURCES = ["pyproject.toml", "README.md", "ares_viewer", "ares_viewer_app"]


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every live process (zombies included)."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) ": state ppid pgrp ...
        found[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> pathlib.Path:
    """A fresh venv (on this interpreter's packages, so nothing is downloaded) with the built wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(source)])
    (wheel,) = (work / "dist").glob("ares_viewer-*.whl")
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)])
    where = _run([str(python), "-c", "import ares_viewer, ares_viewer_app; print(ares_viewer.__file__); "
                  "print(ares_viewer_app.__file__)"], cwd=work).stdout.split()
    assert all(pathlib.Path(path).is_relative_to(venv) for path in where), f"not the installed wheel: {where}"
    return venv


def test_the_checkouts_streamlit_settings_are_the_packaged_ones():
    # `streamlit run app/main.py` at the checkout's root reads .streamlit/config.toml; `ares-viewer app` passes
    # the packaged file's settings as flags: both must say the same.
    assert (REPO / ".streamlit" / "config.toml").read_bytes() == server.SETTINGS.read_bytes()
    settings = server.settings()
    assert settings["server"]["address"] == "127.0.0.1"
    assert settings["browser"]["gatherUsageStats"] is False
    assert settings["server"]["maxMessageSize"] == 200
    assert tomllib.loads(server.SETTINGS.read_text()) == settings


def test_flags_carry_every_setting_and_the_given_address_and_port():
    flags = server.flags(address="0.0.0.0", port=8600)
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert pairs["--browser.gatherUsageStats"] == "false"
    assert pairs["--server.headless"] == "true"
    assert pairs["--server.maxMessageSize"] == "200"
    assert pairs["--theme.base"] == "light"
    assert pairs["--runner.postScriptGC"] == "false"  # a collection after every run took 0.1 s of every step
    assert pairs["--server.address"] == "0.0.0.0"
    assert pairs["--server.port"] == "8600"
    assert server.flags()[server.flags().index("--server.address") + 1] == "127.0.0.1"


@pytest.mark.wheel
def test_the_installed_app_carries_its_data_files(installed, tmp_path):
    # The Streamlit settings and the step list's key script are package data, not modules: a wheel built
    # without them installs and imports, and only fails when a page asks for them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("from ares_viewer_app.serving import server; from ares_viewer_app.views.episode import step_list; "
            "print(server.SETTINGS.is_file()); "
            "print('addEventListener(\"keydown\"' in step_list.keys_html())")
    done = _run([str(installed / "bin" / "python"), "-c", code], cwd=tmp_path, env=env)
    assert done.stdout.split()[-2:] == ["True", "True"], done.stdout


@pytest.mark.wheel
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_installed_app_serves_from_another_folder_and_stops_on_a_signal(installed, tmp_path, stop_signal):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "home").mkdir(parents=True)
    port = app_server.free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "ARES_VIEWER_RUNS", "ARES_VIEWER_RUN"}}
    env["HOME"] = str(elsewhere / "home")  # no user-level Streamlit settings either: the package's must apply
    log_path = tmp_path / "app.log"
    with open(log_path, "w+b") as log:
        cli = subprocess.Popen([str(installed / "bin" / "ares-viewer"), "app", str(DEMO), "--port", str(port)],
                               cwd=elsewhere, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as answer:
                        status, body = answer.status, answer.read()
                    break
                except OSError:
                    pass
                if cli.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"the app did not answer:\n{log.read().decode(errors='replace')[-3000:]}")
                time.sleep(0.3)
            assert (status, body) == (200, b"ok")
            children = [pid for pid, (parent, _) in _processes().items() if parent == cli.pid]
            assert len(children) == 1, f"expected one Streamlit child, found {children}"
            (streamlit_pid,) = children

            cli.send_signal(stop_signal)
            assert cli.wait(timeout=60) == 128 + stop_signal
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
    output = log_path.read_text(errors="replace")
    assert "usage statistics" not in output.lower(), output
    assert f"127.0.0.1:{port}" in output, output  # it says where it listens: the loopback address only
    left = [pid for pid, (_, group) in _processes().items() if pid == streamlit_pid or group == streamlit_pid]
    assert not left, f"processes left after {stop_signal.name}: {left}"
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
