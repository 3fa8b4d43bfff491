"""Review notes under load: busy writers in other processes refuse no note added in the app, and a step with
thousands of notes shows one page of them."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import time

import page_text
import pytest
from test_page_review import add, db, open_step, run_location  # noqa: F401  (db: a fixture)

from ares_viewer import review
from ares_viewer_app.panels import review_panel

REPO = pathlib.Path(__file__).resolve().parents[2]
WRITERS = 4
# Notes the reviewer adds in the app while the writers run (each a script run that waits for its share of the cores).
ADDED = 6

# A reviewer's script adding notes back to back until the stop file appears; prints how many it added and how many
# were refused.
WRITER = textwrap.dedent("""
    import os, sys
    from ares_viewer import review
    db, run, episode, stop = sys.argv[1:5]
    store = review.open_store(db)
    added = refused = 0
    while not os.path.exists(stop):
        try:
            store.add(run, episode, 1, author=f"bot-{os.getpid()}", text=f"note {added}")
            added += 1
        except review.ReviewError:
            refused += 1
    print(added, refused, flush=True)
    """)


def test_busy_writers_in_other_processes_refuse_no_note_added_in_the_app(runs, app, db, tmp_path):  # noqa: F811
    episode = runs["run-a"]["failed"]
    review.open_store(db).close()  # the schema exists before the writers race for it
    stop = tmp_path / "stop"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), run_location(runs), episode, str(stop)],
                                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
               for _ in range(WRITERS)]
    try:
        deadline = time.monotonic() + 60
        while review.open_store(db, read_only=True).find(run_location(runs)).__len__() < 50 * WRITERS:
            assert time.monotonic() < deadline, "the writers did not start"
            time.sleep(0.2)
        at = open_step(app, runs)
        # Four writers adding back to back take the cores too: a script run waits for its share of them, which on
        # a loaded 2-core machine took longer than AppTest's usual minute (what is tested is that no note is lost)
        at.default_timeout = 240
        refused = []
        for n in range(ADDED):
            add(at, text=f"added under load {n}")
            refused += [e.value for e in at.error]
    finally:
        stop.touch()
        counts = [w.communicate(timeout=60)[0].split() for w in writers]
    assert not at.exception
    assert refused == []
    mine = [n for n in review.open_store(db).find(run_location(runs), episode_id=episode, step=3)
            if n.text.startswith("added under load")]
    assert len(mine) == ADDED
    assert all(int(added) > 0 and int(failed) == 0 for added, failed in counts), counts


def test_a_step_with_thousands_of_notes_shows_one_page_of_them(runs, app, db):  # noqa: F811
    store = review.open_store(db)
    episode = runs["run-a"]["failed"]
    for n in range(1000):
        store.add(run_location(runs), episode, 3, author="bot", text=f"bulk note {n:04d}")
    at = open_step(app, runs)
    assert not at.exception
    shown = [m.value for m in at.markdown if "bulk note" in m.value]
    assert len(shown) == 20  # one page (review_panel.NOTES_PAGE), not a thousand notes with a form each
    assert "bulk note 0000" in shown[0]  # oldest first
    assert "Notes 1 to 20 of 1,000" in page_text.of(at)
    at.selectbox(key="review.notes_page.3").set_value(49).run()  # the last page
    shown = [m.value for m in at.markdown if "bulk note" in m.value]
    assert len(shown) == 20 and "bulk note 0999" in shown[-1]


@pytest.fixture(autouse=True)
def _fresh_store():
    """Each test opens its own database (the app keeps its stores open across runs of a script)."""
    review_panel._open.clear()
    yield
    review_panel._open.clear()
