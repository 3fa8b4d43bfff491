"""Filesystem diffs between steps, read from recorded snapshots without Docker."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess

import pytest

import ares_viewer
from ares_viewer import fsdiff, snapshots
from testdata import synthetic

APP_V0 = "".join(f"line {i}\n" for i in range(1, 21)).encode()
APP_V1 = APP_V0.replace(b"line 5\n", b"line five, fixed\n")
PNG_V0 = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
PNG_V1 = PNG_V0 + b"\x00more"
LATIN = "café déjà vu\n".encode("latin-1")


def _file(path, data, mode=0o644, change="modified", stored_in="base"):
    return snapshots.Entry(path=path, type=snapshots.FILE, mode=mode, size=len(data),
                           sha256=hashlib.sha256(data).hexdigest(), change=change, stored_in=stored_in)


def _blobs(*datas):
    return {hashlib.sha256(d).hexdigest(): d for d in datas}


@pytest.fixture
def episode(tmp_path):
    """An episode of 3 actions with a snapshot per step: edit, add/delete/link/chmod, binary + type change."""
    doc = synthetic.episode_dict(actions=3, seed=4)
    path = synthetic.write_episode(tmp_path, doc)
    eid = doc["episode_id"]
    folder = snapshots.episode_snapshots_dir(tmp_path, eid)
    common = {"episode_id": eid, "base_image": "ares-viewer/sample-base:1", "image_id": None}
    snapshots.write_base(folder, entries=[
        dataclasses.replace(_file("/testbed/app.py", APP_V0), change=None),
        dataclasses.replace(_file("/testbed/logo.png", PNG_V0), change=None),
        dataclasses.replace(_file("/testbed/old.txt", b"old\n"), change=None),
        snapshots.Entry(path="/testbed/new.py", type=snapshots.ABSENT),
        snapshots.Entry(path="/testbed/link", type=snapshots.ABSENT),
        snapshots.Entry(path="/testbed/notes.txt", type=snapshots.ABSENT),
    ], blobs=_blobs(APP_V0, PNG_V0, b"old\n"), **common)

    def step(k, entries, blobs):
        snapshots.write_step(folder, step_index=k, workdir="/testbed", entries=entries, blobs=blobs, **common)

    step(0, [], {})
    app1 = _file("/testbed/app.py", APP_V1, stored_in="step_0001")
    step(1, [app1], _blobs(APP_V1))
    app2 = dataclasses.replace(app1, mode=0o755)
    new = _file("/testbed/new.py", b"print('hi')\n", change="added", stored_in="step_0002")
    gone = snapshots.Entry(path="/testbed/old.txt", type=snapshots.DELETED, change="deleted")
    link = snapshots.Entry(path="/testbed/link", type=snapshots.SYMLINK, mode=0o777, link_target="app.py",
                           change="added")
    step(2, [app2, new, gone, link], _blobs(b"print('hi')\n"))
    app3 = snapshots.Entry(path="/testbed/app.py", type=snapshots.SYMLINK, mode=0o777, link_target="new.py",
                           change="modified")
    logo = _file("/testbed/logo.png", PNG_V1, stored_in="step_0003")
    notes = _file("/testbed/notes.txt", LATIN, change="added", stored_in="step_0003")
    step(3, [app3, new, gone, link, logo, notes], _blobs(PNG_V1, LATIN))
    return ares_viewer.load_episode(path)


def test_edit_at_one_step_shows_a_unified_diff(episode):
    diff = fsdiff.step_changes(episode, 1)
    assert diff.paths() == ["/testbed/app.py"]
    assert diff.counts()["modified"] == 1
    file_diff = diff.file_diff("/testbed/app.py")
    assert "-line 5" in file_diff.unified and "+line five, fixed" in file_diff.unified
    assert not file_diff.binary and file_diff.note is None


def test_added_deleted_symlink_and_mode_changes(episode):
    diff = fsdiff.compare(episode, 1, 2)
    kinds = {c.path: c.kind for c in diff.changes}
    assert kinds == {"/testbed/app.py": "modified", "/testbed/new.py": "added", "/testbed/old.txt": "deleted",
                     "/testbed/link": "added"}
    assert diff.change("/testbed/app.py").mode_changed
    assert diff.change("/testbed/link").new.link_target == "app.py"
    # A link has no content to diff: the note says what it is, rather than "same content".
    link = diff.file_diff("/testbed/link")
    assert link.unified == "" and link.note == "not a regular file on either side: absent -> symlink to app.py"
    assert diff.file_diff("/testbed/new.py").new_text == "print('hi')\n"
    assert diff.file_diff("/testbed/old.txt").old_text == "old\n"


def test_against_the_base_image(episode):
    diff = fsdiff.compare(episode, None, 3)
    kinds = {c.path: c.kind for c in diff.changes}
    assert kinds["/testbed/app.py"] == "type_changed"
    assert kinds["/testbed/old.txt"] == "deleted"
    assert kinds["/testbed/notes.txt"] == "added"
    assert "base image -> step 3" in diff.summary()


def test_binary_files_are_reported_by_size_and_hash(episode):
    file_diff = fsdiff.compare(episode, 2, 3).file_diff("/testbed/logo.png")
    assert file_diff.binary and file_diff.unified == ""
    assert file_diff.old_size == len(PNG_V0) and file_diff.new_size == len(PNG_V1)
    assert hashlib.sha256(PNG_V1).hexdigest()[:12] in file_diff.note


def test_non_utf8_text_is_shown_safely(episode):
    file_diff = fsdiff.compare(episode, 2, 3).file_diff("/testbed/notes.txt")
    assert file_diff.binary is False
    assert file_diff.new_text == "caf\\xe9 d\\xe9j\\xe0 vu\n"


def test_large_files_are_capped_with_a_note(episode):
    file_diff = fsdiff.step_changes(episode, 1).file_diff("/testbed/app.py", max_bytes=50)
    assert file_diff.unified == "" and "larger than 50" in file_diff.note


def test_file_history(episode):
    history = fsdiff.file_history(episode, "/testbed/app.py")
    assert [(p.step, p.kind) for p in history] == [(1, "modified"), (2, "modified"), (3, "type_changed")]
    assert "+line five, fixed" in history[0].diff.unified
    assert fsdiff.file_history(episode, "/testbed/never-touched") == []


def test_diff_renders_in_a_notebook(episode):
    page = fsdiff.step_changes(episode, 1)._repr_html_()
    assert "/testbed/app.py" in page and "line five, fixed" in page and "<script" not in page


def test_notebook_html_shows_the_edited_lines_of_a_file(episode):
    """In Jupyter, an FsDiff and a FileDiff render the edit itself: the removed and the added line."""
    diff = fsdiff.step_changes(episode, 1)
    for page in (diff._repr_html_(), diff.file_diff("/testbed/app.py")._repr_html_()):
        assert "-line 5" in page and "+line five, fixed" in page
        assert "a/testbed/app.py" in page and "b/testbed/app.py" in page
    binary = fsdiff.compare(episode, 2, 3).file_diff("/testbed/logo.png")._repr_html_()
    assert "binary content" in binary and hashlib.sha256(PNG_V1).hexdigest()[:12] in binary


def test_missing_step_is_a_clear_error(episode):
    with pytest.raises(LookupError, match="no snapshot for step 9"):
        fsdiff.compare(episode, 1, 9)


def test_corrupt_snapshot_is_named_and_the_rest_works(episode):
    refs = {r.step_index: r for r in snapshots.find(episode)}
    (pathlib.Path(refs[2].path) / snapshots.MANIFEST_NAME).write_text("{ not json")
    with pytest.raises(snapshots.SnapshotError, match="step_0002"):
        fsdiff.compare(episode, 1, 2)
    assert fsdiff.compare(episode, 0, 1).paths() == ["/testbed/app.py"]
    assert [p.step for p in fsdiff.file_history(episode, "/testbed/app.py")] == [1, 3]


@pytest.mark.parametrize("binary", [b"\x00\x01\x02", b"\x01\x02\x03\x7f" * 10])
def test_binary_detection(binary):
    assert fsdiff.is_binary(binary)
    assert not fsdiff.is_binary("naïve text ✓\n".encode() * 3000)
    assert not fsdiff.is_binary(LATIN)


def _change(path, kind=fsdiff.MODIFIED):
    return fsdiff.FileChange(path=path, kind=kind, old=None, new=None)


def test_change_tree_nests_folders_with_counts_and_merges_single_folder_chains():
    changes = [_change("/repo/src/pkg/a.py"), _change("/repo/src/pkg/b.py", fsdiff.ADDED),
               _change("/repo/README.md", fsdiff.DELETED), _change("/repo/deep/er/x.txt", fsdiff.ADDED)]
    rows = [(n.depth, n.name, n.children, n.counts) for n in fsdiff.change_tree(changes)]
    assert rows == [
        (0, "/repo", 3, {fsdiff.MODIFIED: 1, fsdiff.ADDED: 2, fsdiff.DELETED: 1}),
        (1, "deep/er", 1, {fsdiff.ADDED: 1}),  # "deep" holds nothing but "er": one row
        (2, "x.txt", 0, {fsdiff.ADDED: 1}),
        (1, "src/pkg", 2, {fsdiff.MODIFIED: 1, fsdiff.ADDED: 1}),
        (2, "a.py", 0, {fsdiff.MODIFIED: 1}),
        (2, "b.py", 0, {fsdiff.ADDED: 1}),
        (1, "README.md", 0, {fsdiff.DELETED: 1}),  # folders first, then files
    ]
    merged = next(n for n in fsdiff.change_tree(changes) if n.name == "src/pkg")
    assert merged.path == "/repo/src/pkg" and merged.folder and merged.change is None


def test_a_changed_folder_with_changes_below_is_both_a_change_and_a_folder():
    changes = [_change("/w/new", fsdiff.ADDED), _change("/w/new/f.txt", fsdiff.ADDED)]
    node = next(n for n in fsdiff.change_tree(changes) if n.path == "/w/new")
    assert node.folder and node.change is changes[0] and node.counts == {fsdiff.ADDED: 2}


def test_closed_folders_hide_their_rows_and_big_trees_start_within_the_limit():
    changes = [_change(f"/r/d{i}/f{j}.py") for i in range(30) for j in range(20)] + [_change("/r/.git/index")]
    nodes = fsdiff.change_tree(changes)
    closed = fsdiff.initial_collapsed(nodes, 80)
    shown = fsdiff.visible_nodes(nodes, closed)
    # /r opens (its 31 folders fit in 80 rows), then its first folders while 20 more rows fit: d0 and d1.
    assert [n.name for n in shown][:3] == ["/r", ".git", "d0"] and len(shown) == 1 + 31 + 2 * 20
    assert "/r" not in closed and "/r/d0" not in closed and "/r/d1" not in closed
    assert "/r/d2" in closed and "/r/d29" in closed and "/r/.git" in closed  # .git starts closed, though it fits
    # Looking at one file opens the way to it; opening everything shows every row.
    open_to = fsdiff.initial_collapsed(nodes, 80, keep_open="/r/d7/f3.py")
    assert "/r/d7/f3.py" in [n.path for n in fsdiff.visible_nodes(nodes, open_to)]
    assert len(fsdiff.visible_nodes(nodes, set())) == len(nodes) == 1 + 31 + 601
    assert [n.name for n in fsdiff.visible_nodes(nodes, {"/r"})] == ["/r"]


def test_small_trees_start_fully_open(episode):
    diff = fsdiff.compare(episode, 1, 3)
    nodes = diff.tree()
    assert fsdiff.visible_nodes(nodes, fsdiff.initial_collapsed(nodes, 80)) == nodes
    assert {n.path for n in nodes if not n.folder} == set(diff.paths())


def test_a_run_read_through_fsspec_has_its_snapshots_mirrored_into_the_cache(episode, monkeypatch):
    import os
    import pathlib

    import fsspec

    from ares_viewer.snapshots import per_step as snapshots_module

    local_run = pathlib.Path(episode.path).parent
    fs = fsspec.filesystem("memory")
    for file in local_run.rglob("*"):
        if file.is_file():
            fs.pipe("/mirror-run/" + file.relative_to(local_run).as_posix(), file.read_bytes())
    fetched: list[str] = []
    real_cat = type(fs).cat_file
    monkeypatch.setattr(type(fs), "cat_file", lambda self, path, *a, **k: fetched.append(path) or real_cat(
        self, path, *a, **k))
    try:
        remote = ares_viewer.open_run("memory://mirror-run").episode(episode.episode_id)
        assert remote.path.startswith("memory://")
        refs = snapshots.find(remote)
        assert [r.step_index for r in refs] == [r.step_index for r in snapshots.find(episode)] == [0, 1, 2, 3]
        cache = pathlib.Path(os.environ["ARES_VIEWER_CACHE"])
        assert all(pathlib.Path(r.path).is_relative_to(cache) for r in refs)  # in the cache, not in the run
        ours, theirs = fsdiff.compare(remote, 1, 3), fsdiff.compare(episode, 1, 3)
        assert ours.paths() == theirs.paths()
        assert ours.file_diff("/testbed/new.py").unified == theirs.file_diff("/testbed/new.py").unified
        copied = len(fetched)
        assert copied == sum(1 for _ in (local_run / "snapshots").rglob("*") if _.is_file())

        # Asked again (a later page view, after the listing's time to live): nothing is fetched again ...
        snapshots_module._REMOTE_SEEN.clear()
        assert [r.step_index for r in snapshots.find(remote)] == [0, 1, 2, 3] and len(fetched) == copied
        # ... until the remote snapshots change.
        fs.rm(f"/mirror-run/snapshots/{episode.episode_id}/step_0003", recursive=True)
        snapshots_module._REMOTE_SEEN.clear()
        assert [r.step_index for r in snapshots.find(remote)] == [0, 1, 2]
    finally:
        fs.rm("/mirror-run", recursive=True)
        snapshots_module._REMOTE_SEEN.clear()


SAMPLES = pathlib.Path(__file__).resolve().parents[1] / "sample_runs" / "demo-run"
SHORT_SOLVED = "7c5d6d73-83f0-4d4c-a772-785a9f5c3580"  # pager: cat, sed fix, pytest, submit


@pytest.fixture
def sample():
    if not SAMPLES.is_dir():
        pytest.skip("the bundled sample runs are not there")
    return ares_viewer.open_run(SAMPLES).episode(SHORT_SOLVED)


def test_main_file_is_the_edited_source_not_a_dotfile(sample):
    # The task's setup copies the project in at step 0: everything is added, the biggest code file comes first.
    setup = fsdiff.compare(sample, None, 0)
    assert fsdiff.main_file(setup).path.endswith(".py")
    assert not fsdiff.main_file(setup).path.rsplit("/", 1)[-1].startswith(".")
    whole = fsdiff.episode_patch(sample)
    assert (whole.old_step, whole.new_step) == (0, 4)
    assert fsdiff.main_file(whole).path == "/testbed/pager/paging.py"  # not .git/index, which changed too


def test_the_episode_pages_link_opens_the_file_the_files_page_shows_first(sample):
    """One ranking: the Episode page's "files changed" link and the Files page both open ``main_file``."""
    assert not hasattr(fsdiff.FsDiff, "first_file")  # the second ranking is gone
    assert fsdiff.main_file(fsdiff.compare(sample, None, 0)).path == "/testbed/pager/paging.py"  # not .gitignore


def test_patch_is_the_whole_change_without_git_bookkeeping(sample):
    text = fsdiff.patch(fsdiff.episode_patch(sample))
    assert text.startswith("diff --git a/testbed/pager/paging.py b/testbed/pager/paging.py\n")
    assert "--- a/testbed/pager/paging.py\n+++ b/testbed/pager/paging.py\n" in text
    assert "+    start = (page - 1) * per_page" in text
    assert ".git/" not in text


def test_files_by_step(sample):
    assert fsdiff.files_by_step(sample) == {1: {}, 2: {"/testbed/pager/paging.py": "modified"}, 3: {}, 4: {}}


def test_files_by_step_says_how_each_file_changed():
    if not SAMPLES.is_dir():
        pytest.skip("the bundled sample runs are not there")
    files = fsdiff.files_by_step(ares_viewer.open_run(SAMPLES).episode(EDITS_AND_REMOVALS))
    assert files[6] == {"/testbed/pager/legacy.py": "deleted"}  # git rm
    assert files[7] == {"/usr/lib/python3.11/EXTERNALLY-MANAGED": "deleted"}  # rm -f
    assert files[8] == {"/testbed/data/items.csv.gz": "added"}
    assert files[10] == {"/testbed/pager/paging.py": "modified"}


# ----- patches that git apply and patch -p1 reproduce exactly ---------------------------------------------------------

# Its steps: git rm (6), rm -f (7), a new .gz file (8), a symlink (9), an edit (10).
EDITS_AND_REMOVALS = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"


def _write_side(root: pathlib.Path, diff: fsdiff.FsDiff, side: str) -> None:
    """The files of one side of ``diff`` under ``root`` (the container's ``/``), as they were in the container."""
    for change in diff.changes:
        entry, kind = (change.old, change.old_type) if side == "old" else (change.new, change.new_type)
        target = root / change.path.lstrip("/")
        if kind is None:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == snapshots.DIR:
            target.mkdir(exist_ok=True)
        elif kind == snapshots.SYMLINK:
            target.symlink_to(entry.link_target)
        else:
            target.write_bytes((diff.read_old if side == "old" else diff.read_new)(change.path))
            target.chmod(entry.mode)


def _on_disk(root: pathlib.Path, diff: fsdiff.FsDiff) -> dict[str, tuple]:
    """Each changed path's state under ``root`` (``.git`` left out, as patches leave it out): a link's target, a
    file's bytes and executable bit, or absent."""
    found = {}
    for change in diff.changes:
        if fsdiff.is_noise(change.path):
            continue
        path = root / change.path.lstrip("/")
        if path.is_symlink():
            found[change.path] = ("symlink", os.readlink(path))
        elif path.is_file():
            found[change.path] = ("file", path.read_bytes(), bool(path.stat().st_mode & 0o100))
        else:
            found[change.path] = ("folder",) if path.is_dir() else ("absent",)
    return found


def _applied(tmp_path: pathlib.Path, diff: fsdiff.FsDiff, command: list[str]) -> tuple[dict, dict]:
    """The old side with the patch applied by ``command``, and the new side, each as ``_on_disk`` sees it."""
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.rmtree(before, ignore_errors=True)
    shutil.rmtree(after, ignore_errors=True)
    before.mkdir()
    _write_side(before, diff, "old")
    _write_side(after, diff, "new")
    patch_file = tmp_path / "changes.patch"
    patch_file.write_bytes(fsdiff.patch(diff).encode())  # what the Files page's download button serves
    done = subprocess.run([*command, str(patch_file)], cwd=before, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    return _on_disk(before, diff), _on_disk(after, diff)


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@needs_git
@pytest.mark.parametrize(("old", "new"), [(0, 1), (1, 2), (2, 3), (None, 3), (0, 3)])
def test_git_apply_turns_the_old_files_into_the_new_ones(episode, tmp_path, old, new):
    # 1 -> 2: a mode change (644 -> 755), an added file, a deleted file, an added symlink; 2 -> 3: a file turned
    # into a symlink, a binary file edited, a Latin-1 text added.
    diff = fsdiff.compare(episode, old, new)
    patched, wanted = _applied(tmp_path, diff, ["git", "apply"])
    assert patched == wanted


@needs_git
@pytest.mark.parametrize(("old", "new"), [(5, 6), (6, 7), (7, 8), (8, 9), (9, 10), (0, 12)])
def test_git_apply_reproduces_the_sample_steps_and_the_whole_episode(tmp_path, old, new):
    if not SAMPLES.is_dir():
        pytest.skip("the bundled sample runs are not there")
    diff = fsdiff.compare(ares_viewer.open_run(SAMPLES).episode(EDITS_AND_REMOVALS), old, new)
    patched, wanted = _applied(tmp_path, diff, ["git", "apply"])
    assert patched == wanted


def test_a_deleted_file_goes_to_dev_null_and_an_added_one_comes_from_it(episode):
    text = fsdiff.patch(fsdiff.compare(episode, 1, 2))
    old_id = hashlib.sha1(b"blob 4\x00old\n").hexdigest()  # what git hash-object says of "old\n"
    assert ("diff --git a/testbed/old.txt b/testbed/old.txt\ndeleted file mode 100644\n"
            f"index {old_id}..{'0' * 40}\n"
            "--- a/testbed/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n") in text
    assert "new file mode 100644\n" in text and "--- /dev/null\n+++ b/testbed/new.py\n" in text
    assert "diff --git a/testbed/app.py b/testbed/app.py\nold mode 100644\nnew mode 100755\n" in text
    assert "new file mode 120000\n" in text and "+app.py\n\\ No newline at end of file\n" in text


def test_binary_and_non_utf8_files_are_git_binary_patches(episode):
    text = fsdiff.patch(fsdiff.compare(episode, 2, 3))
    for path in ("testbed/logo.png", "testbed/notes.txt"):
        block = text.split(f"diff --git a/{path} b/{path}\n", 1)[1].split("diff --git", 1)[0]
        assert "GIT binary patch\nliteral " in block and "\n--- " not in block
    # A file that became a symlink is a deletion, then an addition, as git writes it.
    app = "diff --git a/testbed/app.py b/testbed/app.py\n"
    assert text.count(app) == 2
    assert "deleted file mode 100755" in text and "new file mode 120000" in text


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
@pytest.mark.parametrize(("old", "new"), [(5, 6), (6, 7), (8, 9), (9, 10)])
def test_patch_p1_applies_text_changes_too(tmp_path, old, new):
    if not SAMPLES.is_dir():
        pytest.skip("the bundled sample runs are not there")
    diff = fsdiff.compare(ares_viewer.open_run(SAMPLES).episode(EDITS_AND_REMOVALS), old, new)
    patched, wanted = _applied(tmp_path, diff, ["patch", "-p1", "--quiet", "-i"])
    assert patched == wanted


def test_what_a_patch_cannot_carry_is_named(episode):
    diff = fsdiff.compare(episode, 0, 1)
    text = fsdiff.patch(dataclasses.replace(diff, _new=_Unreadable(diff._new)))
    assert text == "# /testbed/app.py: modified, not in this patch (content not recorded in the snapshot)\n"


class _Unreadable:
    """A snapshot whose file contents are not recorded (as a file over the capture size limit)."""

    def __init__(self, snapshot):
        self._snapshot = snapshot

    def __getattr__(self, name):
        return getattr(self._snapshot, name)

    def read(self, path):
        return None
