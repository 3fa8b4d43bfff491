"""Serve the app: ``ares-viewer app`` starts Streamlit on the packaged entry file and stops it on a signal.

The app's Streamlit settings live in ``streamlit.toml`` beside this module (shipped in the wheel) and are
passed as command-line flags, so they hold from any working directory; a checkout's ``.streamlit/config.toml``
(read by a plain ``streamlit run app/main.py`` started at the checkout's root) is the same file, and a test
keeps the two equal. Streamlit runs in its own process group: SIGTERM or SIGINT to ``ares-viewer app`` stops
that whole group, then the command exits.

Importing this module does not import Streamlit.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import tomllib

from ares_viewer.base import settings as viewer_settings

HERE = pathlib.Path(__file__).resolve().parent.parent  # the package: its entry file and settings
ENTRY = HERE / "main.py"
SETTINGS = HERE / "streamlit.toml"
# Seconds Streamlit gets to shut down after SIGTERM before its process group is killed.
STOP_GRACE_S = 10.0


def settings() -> dict[str, dict[str, object]]:
    """The app's Streamlit settings by section (``server``, ``browser``, ``client``, ``runner``, ``theme``)."""
    with open(SETTINGS, "rb") as handle:
        return tomllib.load(handle)


def _flag_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def flags(*, address: str | None = None, port: int | None = None) -> list[str]:
    """``streamlit run`` flags for the app's settings, with the address and port given (when given)."""
    values = {f"{section}.{key}": value for section, table in settings().items() for key, value in table.items()}
    if address:
        values["server.address"] = address
    if port:
        values["server.port"] = port
    return [part for name, value in values.items() for part in (f"--{name}", _flag_value(value))]


def command(*, address: str | None = None, port: int | None = None) -> list[str]:
    """The command that serves the app with this interpreter's Streamlit."""
    return [sys.executable, "-m", "streamlit", "run", str(ENTRY), *flags(address=address, port=port)]


class _StopRequestedError(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _StopRequestedError(signum)


def stop(child: subprocess.Popen) -> None:
    """Stop a server started by ``serve`` and everything in its process group: SIGTERM, then SIGKILL."""
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=STOP_GRACE_S)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def serve(location: str | None = None, *, address: str | None = None, port: int | None = None) -> int:
    """Serve the app until Streamlit exits or a SIGTERM/SIGINT arrives; returns the exit code.

    ``location`` is the run the app opens first (else the first run the run picker lists). A signal stops
    Streamlit's whole process group and gives 128 + the signal's number.
    """
    env = dict(os.environ)
    if location:
        env[viewer_settings.RUN.name] = location
    handled = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, _raise_stopped) for signum in handled}
    child = None
    try:
        child = subprocess.Popen(command(address=address, port=port), env=env, start_new_session=True)
        return child.wait()
    except _StopRequestedError as stopped:
        return 128 + stopped.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child is not None:
            stop(child)
