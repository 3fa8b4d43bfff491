"""The app served by a real ``streamlit run app/main.py`` on a free localhost port, for the browser tests and the
benchmarks that time pages in Chromium."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from typing import BinaryIO

REPO = pathlib.Path(__file__).resolve().parent.parent

# A page whose Streamlit script has finished running, as a JavaScript expression: the app root's own state of the
# script (``initial`` before the first run, then ``running``, ``rerunRequested``, ``notRunning``) and connection,
# and no status widget. The status widget alone says nothing for a run's first half second: Streamlit shows it only
# once a run has taken 500 ms, so a check of it alone passed in the middle of a run, and a test then acted on a
# page about to be redrawn (a click or a key lost, a grid counted before the last one was drawn).
IDLE_EXPRESSION = """(() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return app !== null && app.dataset.testScriptState === 'notRunning'
    && app.dataset.testConnectionState === 'CONNECTED'
    && !document.querySelector('[data-testid="stStatusWidget"]');
})()"""
IDLE = f"() => {IDLE_EXPRESSION}"


class AppStartError(RuntimeError):
    """The server exited or did not answer its health check in time (the message ends with its log)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def served(env: Mapping[str, str], log: BinaryIO, *, start_s: float = 60, script: str = "app/main.py",
           base_path: str = "", repo: pathlib.Path = REPO) -> Iterator[tuple[str, subprocess.Popen]]:
    """``streamlit run app/main.py`` (or ``script``) on 127.0.0.1 with ``env`` added to this process's environment,
    writing to ``log``; yields its URL and process once ``/_stcore/health`` answers, and stops it on exit.
    ``base_path``: served under that path (Streamlit's ``server.baseUrlPath``, as behind a proxy); the URL ends
    with it. ``repo``: the checkout served (its folder is the server's working directory, which ``python -m``
    puts first on the import path: a checkout named only on ``PYTHONPATH`` would import this one's packages).

    Raises:
        AppStartError: when the server exits or stays silent for ``start_s`` seconds.
    """
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         *(["--server.baseUrlPath", base_path] if base_path else [])],
        cwd=repo, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}" + (f"/{base_path}" if base_path else "")
    try:
        deadline = time.monotonic() + start_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise AppStartError(f"streamlit did not start:\n{log.read().decode(errors='replace')[-3000:]}")
            time.sleep(0.3)
        yield url, server
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
