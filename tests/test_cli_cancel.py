"""A long command that runs branches (``ares-viewer branch``) stops as Ctrl+C stops it when the process gets SIGTERM,
what a cluster's scheduler sends before it kills a job: no new branch starts, the running ones finish and are kept,
and what was found is printed, instead of the process dying with its containers left running."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

# The command as a terminal starts it: Python turns SIGINT into KeyboardInterrupt only when SIGINT was not ignored at
# its start, and a shell starts a background job (a test run started with ``&``) with SIGINT ignored, which its
# children inherit.
SCRIPT = textwrap.dedent("""
    import signal, sys, threading, time
    from ares_viewer.cli import terminal
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def work(cancel):
        print("started", flush=True)
        cancel.wait(60)  # a search checks ``cancel`` before each branch; the one running ends first
        time.sleep(0.2)
        return "kept: 3 branches" if cancel.is_set() else "ran to the end"

    print(terminal.until_done(work, "search"), flush=True)
""")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl+C"])
def test_a_signal_cancels_the_search_and_keeps_what_it_found(how):
    process = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    time.sleep(0.2)
    process.send_signal(how)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.strip() == "kept: 3 branches"
    assert "cancelled: waiting for the running branches to finish" in err
