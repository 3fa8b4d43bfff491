"""The Files page in AppTest: filesystem diffs between two steps, read from snapshots without Docker.

Real data first: the bundled sample run records a snapshot per step (pager-solved fixes ``pager/paging.py`` at
action 2; pager-explorer-partial-fix deletes, links and adds a binary file). Synthetic runs cover what the sample
run lacks: non-UTF-8 text, huge files, a corrupt snapshot, episode-boundary snapshots and no snapshots at all.
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import page_text
import pytest

from ares_viewer import review, snapshots
from testdata import synthetic

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_runs"
PAGER_SOLVED = "7c5d6d73-83f0-4d4c-a772-785a9f5c3580"  # fixes both off-by-one errors in pager/paging.py at action 2
EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # deletes a file (6), adds a binary (8) and a symlink (9)
PAGING = "/testbed/pager/paging.py"


@pytest.fixture
def samples(monkeypatch):
    if not (SAMPLES / "demo-run" / f"{PAGER_SOLVED}.json").is_file():
        pytest.skip("the bundled sample run is not there")
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(SAMPLES))


def files_page(app, **params):
    return app("files", run=params.pop("run", "demo-run"), **params)


def test_deep_link_shows_the_edit_the_agent_made(samples, app):
    at = files_page(app, episode=PAGER_SOLVED, step="2")
    assert not at.exception
    shown = page_text.of(at)
    # Default sides: the step before and the step itself; the one changed file is selected.
    assert "**step 1 → step 2**: 1 changed path(s), 1 file(s)" in shown and ":orange-badge[1 modified]" in shown
    assert at.query_params["file"] == PAGING and at.query_params["old"] == "1"
    diff = next(c.value for c in at.code if c.language == "diff")
    assert "-    return n_items // per_page" in diff and "+    return -(-n_items // per_page)" in diff
    assert "+    start = (page - 1) * per_page" in diff


def test_old_side_can_be_the_base_image_and_the_url_follows(samples, app):
    at = files_page(app, episode=PAGER_SOLVED, step="2")
    at.selectbox(key="files.old").set_value("base").run()
    assert at.query_params["old"] == "base"
    shown = page_text.of(at)
    assert "**base image → step 2**" in shown and ":green-badge[" in shown  # the project was copied in: added
    at.selectbox(key="files.new").set_value(4).run()
    assert at.query_params["step"] == "4"


def test_side_by_side_content_download_and_history(samples, app):
    at = files_page(app, episode=PAGER_SOLVED, step="2", file=PAGING)
    at.radio(key="files.view").set_value("Side by side").run()
    table = next(h.proto.body for h in at.get("html") if "<table" in h.proto.body)
    assert "step 1" in table and "step 2" in table and "-(-n_items // per_page)" in table
    at.radio(key="files.view").set_value("Old side").run()
    assert any("return n_items // per_page" in c.value and c.language == "python" for c in at.code)
    assert "Download paging.py at step 1" in [page_text.shown(b.label) for b in at.get("download_button")]
    at.radio(key="files.view").set_value("New side").run()
    assert "Download paging.py at step 2" in [page_text.shown(b.label) for b in at.get("download_button")]
    at.radio(key="files.view").set_value("History").run()
    shown = page_text.of(at)
    assert "Changed at 2 step(s)" in shown and "step 1 → step 2" in shown
    # Beside each change, the command that made it.
    assert any(c.language == "bash" and c.value.startswith("sed -i 's/    start = page") for c in at.code)
    assert "the task's setup, before the agent's first action" in shown
    at.button(key="files.history.0").click().run()  # open the step that first brought the file in
    assert at.query_params["step"] == "0" and at.query_params["old"] == "base"


def test_a_note_added_on_the_files_page_is_about_that_file_and_step(samples, app, tmp_path, monkeypatch):
    monkeypatch.setenv(review.DB_ENV, str(tmp_path / "review.sqlite"))
    at = files_page(app, episode=PAGER_SOLVED, step="2", file=PAGING)
    assert "Review notes on this file at step 2" in [e.proto.label for e in at.get("expander")]
    at.text_input(key="review.author").input("Ada").run()
    at.text_input(key="review.file_add_label").input("fixes the bug")
    at.text_area(key="review.file_add_text").input("both off-by-one errors at once")
    next(b for b in at.button if b.label == "Add to this file").click().run()
    assert not at.exception
    assert any(f"Added to `{PAGING}` at step 2" in s.value for s in at.success)
    (note,) = review.open_store().find(str(SAMPLES / "demo-run"))
    assert (note.episode_id, note.step, note.path, note.label) == (PAGER_SOLVED, 2, PAGING, "fixes the bug")
    assert "Review notes on this file at step 2 (1)" in [e.proto.label for e in at.get("expander")]
    assert ":orange-badge[fixes the bug] both off-by-one errors at once" in page_text.of(at)

    # At another step the panel points back to the step with the note; the Review page lists it with its file.
    later = files_page(app, episode=PAGER_SOLVED, step="4", file=PAGING)
    later.button(key="review.file.goto.2").click().run()
    assert later.query_params["step"] == "2" and later.query_params["file"] == PAGING
    listed = app("review", run="demo-run")
    assert listed.dataframe[0].value[["step", "path", "label"]].values.tolist() == [[2, PAGING, "fixes the bug"]]


def test_reloading_the_link_restores_the_same_file(samples, app):
    at = files_page(app, episode=EXPLORER, step="10", old="5", file="/testbed/pager/legacy.py")
    assert at.selectbox(key="files.file").value == "/testbed/pager/legacy.py"
    again = files_page(app, **{k: at.query_params[k] for k in ("episode", "step", "old", "file")})
    assert again.selectbox(key="files.file").value == "/testbed/pager/legacy.py"
    assert "#### `/testbed/pager/legacy.py` :red-badge[deleted]" in page_text.of(again)


def test_binary_symlink_and_deleted_files(samples, app):
    at = files_page(app, episode=EXPLORER, step="8")
    assert at.query_params["file"] == "/testbed/data/items.csv.gz"
    assert "binary content: 0 bytes -> 4,491 bytes" in page_text.of(at)
    at.radio(key="files.view").set_value("New side").run()
    assert "Binary file: 4,491 bytes, sha256 `5bc4140dfcce" in page_text.of(at)
    assert not [c for c in at.code if "\x1f\x8b" in c.value]  # the bytes themselves are not sent as text
    at = files_page(app, episode=EXPLORER, step="9")
    assert "→ ../data" in page_text.of(at) or "-> ../data" in page_text.of(at)
    at.radio(key="files.view").set_value("New side").run()
    assert "it is a symlink to `../data`" in page_text.of(at)
    at = files_page(app, episode=EXPLORER, step="6", file="/testbed/pager/legacy.py")
    at.radio(key="files.view").set_value("New side").run()
    assert "No content at step 6: it does not exist there." in page_text.of(at)


# ----- synthetic runs: what the sample run does not show ----------------------------------------------------------

LATIN = "naïve café\n".encode("latin-1")
HUGE = "".join(f"row {i}: {'x' * 40}\n" for i in range(8_000)).encode()  # about 400 KB of text


def _file(path, data, stored_in, change="added"):
    return snapshots.Entry(path=path, type=snapshots.FILE, mode=0o644, size=len(data),
                           sha256=hashlib.sha256(data).hexdigest(), change=change, stored_in=stored_in)


@pytest.fixture
def snap_run(runs) -> dict[str, str]:
    """run-a's solved episode gets per-step snapshots: notes (Latin-1) at 1, a huge log at 2, corrupt step 3."""
    root = pathlib.Path(runs["root"]["path"]) / "run-a"
    episode_id = runs["run-a"]["solved"]
    folder = snapshots.episode_snapshots_dir(root, episode_id)
    common = {"episode_id": episode_id, "base_image": "calc-base:1", "image_id": None}
    snapshots.write_base(folder, entries=[snapshots.Entry(path="/testbed/notes.txt", type=snapshots.ABSENT),
                                          snapshots.Entry(path="/testbed/run.log", type=snapshots.ABSENT)],
                         blobs={}, **common)
    notes = _file("/testbed/notes.txt", LATIN, "step_0001")
    log = _file("/testbed/run.log", HUGE, "step_0002")
    blobs = {e.sha256: d for e, d in ((notes, LATIN), (log, HUGE))}
    for k in range(6):
        entries = [e for e, since in ((notes, 1), (log, 2)) if k >= since]
        mine = {e.sha256: blobs[e.sha256] for e in entries if e.stored_in == snapshots.step_dirname(k)}
        snapshots.write_step(folder, step_index=k, workdir="/testbed", entries=entries, blobs=mine, **common)
    (folder / "step_0003" / snapshots.MANIFEST_NAME).write_text("{ half written")
    return {"episode": episode_id, "folder": str(folder)}


def test_non_utf8_text_is_shown_safely(snap_run, app):
    at = app("files", run="run-a", episode=snap_run["episode"], step="1")
    at.radio(key="files.view").set_value("New side").run()
    code = next(c.value for c in at.code if "caf" in c.value)
    assert code.strip() == "na\\xefve caf\\xe9"
    assert "invalid UTF-8 bytes shown as \\xNN" in page_text.of(at)


def test_huge_file_is_capped_with_a_note(snap_run, app):
    at = app("files", run="run-a", episode=snap_run["episode"], step="2", file="/testbed/run.log")
    at.radio(key="files.view").set_value("New side").run()
    assert "Showing the first 200,000 of" in page_text.of(at)
    assert max(len(c.value) for c in at.code) <= 200_000


def test_corrupt_snapshot_is_an_error_for_that_step_only(snap_run, app):
    at = app("files", run="run-a", episode=snap_run["episode"], step="3")
    assert not at.exception
    error = next(page_text.shown(e.value) for e in at.error)
    assert "step_0003" in error and "not valid JSON" in error
    at.selectbox(key="files.new").set_value(2).run()  # the other steps still compare
    assert not at.error and "**step 1 → step 2**" in page_text.of(at)
    # The episode view says so in a caption, and its step still renders.
    at = app("episode", run="run-a", episode=snap_run["episode"], step="3")
    assert not at.exception
    assert any("Cannot tell which files changed at this step" in c and "step_0003" in c
               for c in map(page_text.shown, (c.value for c in at.caption)))
    assert any(c.value.startswith("step 3 (") for c in at.caption)


def test_episode_view_links_to_the_files_of_that_step(snap_run, app):
    at = app("episode", run="run-a", episode=snap_run["episode"], step="2")
    links = [link for link in at.get("page_link") if link.proto.page == "files"]
    assert [link.proto.label for link in links] == ["1 file changed at this step"]
    query = dict(part.split("=", 1) for part in links[0].proto.query_string.split("&"))
    assert query["episode"] == snap_run["episode"] and query["step"] == "2" and query["old"] == "1"
    assert query["file"] == "%2Ftestbed%2Frun.log"
    at = app("episode", run="run-a", episode=snap_run["episode"], step="5")
    assert any(c.value == "No files changed at this step (compared with step 4)." for c in at.caption)


def test_episode_without_snapshots(runs, app):
    at = app("files", run="run-a", episode=runs["run-a"]["failed"])
    assert not at.exception
    assert any("has no recorded snapshots" in i.value for i in at.info)
    at = app("episode", run="run-a", episode=runs["run-a"]["failed"], step="2")
    assert any(c.value == "No filesystem snapshots were recorded for this episode." for c in at.caption)


def test_episode_boundary_snapshots(runs, app):
    """Upstream snapshots (whole filesystem copies linked by conversation): no base image side, diffs work."""
    root = pathlib.Path(runs["root"]["path"]) / "run-b"
    episode_id = runs["run-b"]["solved"]
    doc = json.loads((root / f"{episode_id}.json").read_text())
    before = {"/testbed/src/calc/core.py": b"def add(a, b):\n    return a - b\n"}
    after = {"/testbed/src/calc/core.py": b"def add(a, b):\n    return a + b\n"}
    synthetic.write_boundary_snapshot(root, synthetic.boundary_messages(doc, 1), before, snapshot_id="s1")
    synthetic.write_boundary_snapshot(root, synthetic.boundary_messages(doc, 3), after, snapshot_id="s3",
                                      mtime=1_763_900_000)
    at = app("files", run="run-b", episode=episode_id, step="3")
    assert not at.exception
    assert at.selectbox(key="files.old").options == ["step 1", "step 3"]
    diff = next(c.value for c in at.code if c.language == "diff")
    assert "-    return a - b" in diff and "+    return a + b" in diff
    at = app("episode", run="run-b", episode=episode_id, step="3")
    assert [link.proto.label for link in at.get("page_link") if link.proto.page == "files"] == [
        "1 file changed at this step"]
    # A boundary snapshot is restored like a per-step one (compared with its image first): the step links there.
    assert [link.proto.label for link in at.get("page_link") if link.proto.page == "sandbox"] == [
        "Restore step 3 into a live container"]
    # The first snapshot has nothing before it: the episode view says so instead of linking.
    at = app("episode", run="run-b", episode=episode_id, step="1")
    assert any("records no base image" in c.value for c in at.caption)


def test_a_single_boundary_snapshot_has_nothing_to_compare(runs, app):
    root = pathlib.Path(runs["root"]["path"]) / "run-b"
    episode_id = runs["run-b"]["failed"]
    doc = json.loads((root / f"{episode_id}.json").read_text())
    synthetic.write_boundary_snapshot(root, synthetic.boundary_messages(doc, 2), {"/testbed/a.py": b"x = 1\n"})
    at = app("files", run="run-b", episode=episode_id)
    assert not at.exception
    assert any("one snapshot (step 2" in i.value and "nothing to compare" in i.value for i in at.info)


def test_default_file_is_the_changed_source_and_the_setup_is_named(samples, app):
    at = files_page(app, episode=PAGER_SOLVED, step="0", old="base")
    # Everything is added at step 0 (the setup copies the project in): the code comes first, not .gitignore.
    assert at.query_params["file"].endswith(".py")
    at = files_page(app, episode=PAGER_SOLVED, step="4", old="base")
    assert at.query_params["file"] == PAGING
    shown = page_text.of(at)
    assert "were already there at step 0" in shown
    at.button(key="files.from_start").click().run()
    assert at.query_params["old"] == "0"
    assert "**step 0 → step 4**" in page_text.of(at)


def test_patch_downloads(samples, app):
    at = files_page(app, episode=PAGER_SOLVED, step="2")
    labels = [b.label for b in at.get("download_button")]
    assert "Download the patch (step 1 → step 2)" in labels
    assert "Download the whole episode's patch (step 0 → step 4)" in labels


def test_view_mode_round_trips_through_the_url(samples, app):
    at = files_page(app, episode=PAGER_SOLVED, step="2", file=PAGING, view="history")
    assert at.radio(key="files.view").value == "History"
    assert "Changed at 2 step(s)" in page_text.of(at)
    at.radio(key="files.view").set_value("Side by side").run()
    assert at.query_params["view"] == "side"


def test_two_sides_without_changes_say_so_once_without_an_empty_tree(samples, app):
    at = files_page(app, episode=EXPLORER, step="3")  # action 3 only reads files
    assert not at.exception
    assert [s.value for s in at.success] == ["No files differ between step 2 and step 3."]
    assert "Nothing differs between these two sides." not in page_text.of(at)
    assert not [t for t in at.text_input if t.key == "files.filter"]  # no filter over an empty tree


def test_file_sizes_are_written_one_way_in_the_tree_captions_and_content(samples, app):
    import re

    at = files_page(app, episode=PAGER_SOLVED, step="2")
    tree = next(d for d in at.dataframe if d.key.startswith("files.tree.")).value
    row = tree[tree["path"].str.endswith("paging.py")].iloc[0]
    assert (row["old"], row["new"]) == ("369 bytes", "379 bytes")
    assert "old: 369 bytes, mode 644 · new: 379 bytes, mode 644" in page_text.of(at)
    at.radio(key="files.view").set_value("New side").run()
    assert any(c.value.startswith("379 bytes") for c in at.caption)
    assert not re.search(r"\d B\b", page_text.of(at))  # never "379 B" beside "379 bytes"


@pytest.mark.parametrize(("step", "said"), [
    ("abc", "“abc” is not a step number; this episode has steps 0 to 12."),
    ("99", "This episode has no step 99: its steps are 0 to 12."),
])
def test_a_step_the_episode_lacks_is_a_warning_naming_the_step_shown(samples, app, step, said):
    at = files_page(app, episode=EXPLORER, step=step)
    assert not at.exception
    assert [w.value for w in at.warning] == [f"{said} Showing step 12 instead (`step` in the link)."]
    assert "**step 11 → step 12**" in page_text.of(at) and at.query_params["step"] == "12"


def test_an_old_side_file_or_view_the_page_cannot_show_is_a_warning(samples, app):
    at = files_page(app, episode=EXPLORER, step="6", old="xyz", file="/nonexistent", view="bogus")
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert ("The old side cannot be `xyz`: “xyz” is neither a recorded step nor “base”; the recorded steps are 0 to "
            "12. Showing step 5 instead (`old` in the link).") in warnings
    assert ("`/nonexistent` is not a file at step 5 or at step 6 in the recorded snapshots. Showing "
            "`/testbed/pager/legacy.py` instead (`file` in the link).") in warnings
    assert "“bogus” is not a way to show a file" in warnings and "Showing the unified diff instead (`view`" in warnings
    # The link now names what is shown.
    assert (at.query_params["old"], at.query_params["file"]) == ("5", "/testbed/pager/legacy.py")
    assert "view" not in at.query_params


def test_a_file_of_another_episode_is_not_carried_into_the_next_one(samples, app):
    # Picking another episode elsewhere (here: the Episode page) drops the Files page's file and old side.
    at = files_page(app, episode=PAGER_SOLVED, step="2", file=PAGING)
    at.switch_page("views/episode/episode.py").run()
    at.selectbox(key="episode.pick").select(EXPLORER).run()
    at.switch_page("views/files/files.py").run()
    assert not at.exception and not at.warning
    assert at.query_params["episode"] == EXPLORER and at.query_params.get("file") != PAGING


SUBMITTED = "e53da836-e11a-422f-ae90-9e861f7e5d0b"  # its last action, 4, submits: ``git add -A`` writes .git only


def test_a_step_that_changed_only_version_control_internals_says_so_and_opens_no_git_file(samples, app):
    at = files_page(app, episode=SUBMITTED, step="4")
    assert not at.exception
    shown = page_text.of(at)
    assert "Between step 3 and step 4 only version control's own files changed (/testbed/.git/index" in shown
    assert "no file of the work tree" in shown
    assert at.query_params.get("file") is None  # .git/index is not opened as if the agent had edited it
    assert not [c for c in at.code if c.language == "diff"]
    # named by the URL, it still opens
    named = files_page(app, episode=SUBMITTED, step="4", file="/testbed/.git/index")
    assert named.query_params["file"] == "/testbed/.git/index"
    # the Episode page's step says the same and links to the Files page without a file
    episode = app("episode", run="demo-run", episode=SUBMITTED, step="4")
    (link,) = [x for x in episode.get("page_link") if x.proto.page == "files"]
    assert link.proto.label.startswith("This step changed version-control internals only (/testbed/.git/index")
    assert "file=" not in link.proto.query_string
