"""Step alignment: a real global alignment with gaps, and the point where two attempts part ways."""

from __future__ import annotations

import dataclasses
import pathlib

import ares_viewer
from ares_viewer.analysis import align, ending
from ares_viewer.runs.run import load_episode
from testdata import synthetic

COMMANDS = ["ls -la", "cat src/calc/core.py", "python -m pytest -q", "sed -i 's/a - b/a + b/' src/calc/core.py",
            "python -m pytest -q", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"]


def test_identical_sequences_align_one_to_one():
    pairs = align.align(COMMANDS, COMMANDS)
    assert [(p.a, p.b) for p in pairs] == [(i, i) for i in range(len(COMMANDS))]
    assert all(p.similarity == 1.0 for p in pairs)
    assert align.divergence(pairs) is None


def test_an_inserted_step_becomes_a_gap_not_a_shift():
    longer = [*COMMANDS[:2], "grep -rn 'def add' src/", *COMMANDS[2:]]
    pairs = align.align(COMMANDS, longer)
    assert [(p.a, p.b) for p in pairs] == [(0, 0), (1, 1), (None, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    assert align.divergence(pairs) == 2


def test_each_sides_own_departure():
    """A solved attempt that explored more (extra ls, grep) must not hide where the failed one went its own way."""
    failed: list[str | None] = [COMMANDS[1], "rm tests/test_core.py", COMMANDS[5]]  # deletes the failing test
    solved = [COMMANDS[0], COMMANDS[1], "grep -rn 'def add' src/", COMMANDS[3], COMMANDS[4], COMMANDS[5]]
    pairs = align.align(failed, solved)
    assert align.divergence(pairs) == 0  # the solved attempt's ls, facing a gap
    row = align.divergence(pairs, side="a")
    assert pairs[row].a == 1  # the deleted test, not the solved attempt's extra exploration before it
    assert align.divergence(pairs, side="b") == 0
    assert align.divergence(align.align(COMMANDS, COMMANDS), side="a") is None


def test_every_item_appears_once_in_order():
    a = ["ls", "cat a.py", "pytest", "vim", "submit"]
    b = ["cat a.py", "pytest -x", "rm -rf build", "pytest", "submit", "extra"]
    pairs = align.align(a, b)
    assert [p.a for p in pairs if p.a is not None] == list(range(len(a)))
    assert [p.b for p in pairs if p.b is not None] == list(range(len(b)))


def test_similar_commands_pair_and_unrelated_ones_do_not():
    pairs = align.align(["python -m pytest -q tests/test_core.py"], ["python -m pytest -q tests/test_parse.py"])
    assert [(p.a, p.b) for p in pairs] == [(0, 0)]
    assert pairs[0].similarity > 0.8
    pairs = align.align(["ls"], ["python - <<'EOF'\nimport calc\nEOF"])
    assert all(p.is_gap for p in pairs)  # two gaps score better than pairing unrelated commands


def test_divergence_threshold():
    pairs = align.align(["git status", "cat a.py"], ["git status", "cat b.py"])
    assert align.divergence(pairs, threshold=0.99) == 1
    assert align.divergence(pairs, threshold=0.5) is None


def test_empty_sides():
    assert align.align([], []) == []
    assert [(p.a, p.b) for p in align.align(["ls"], [])] == [(0, None)]


def test_align_episodes_returns_step_indices(tmp_path):
    doc = synthetic.episode_dict(actions=6, seed=1)
    a = load_episode(synthetic.write_episode(tmp_path, doc))
    b = load_episode(synthetic.write_episode(tmp_path, dict(doc, episode_id="b")))
    pairs = align.align_episodes(a, b)
    assert [(p.a, p.b) for p in pairs] == [(k, k) for k in range(1, 7)]


def _episode(tmp_path, name, commands):
    """A synthetic episode whose actions ran ``commands``."""
    doc = synthetic.episode_dict(actions=len(commands), seed=7)
    episode = load_episode(synthetic.write_episode(tmp_path, dict(doc, episode_id=name)))
    steps = list(episode.steps)
    for k, command in enumerate(commands, start=1):
        steps[k] = dataclasses.replace(steps[k], command=command, response=command)
    return dataclasses.replace(episode, steps=tuple(steps))


SED_FIX = "sed -i 's/a - b/a + b/' src/calc/core.py"
HEREDOC = "cat <<'EOF' > src/calc/core.py\ndef add(a, b):\n    return a + b\nEOF"


def test_steps_that_changed_the_same_files_pair_up(tmp_path):
    """A sed fix and a heredoc rewrite of the same file are the same move, though their commands differ."""
    a = _episode(tmp_path, "a", ["cat src/calc/core.py", SED_FIX, "python -m pytest -q"])
    b = _episode(tmp_path, "b", ["cat src/calc/core.py", HEREDOC, "python -m pytest -q"])
    by_commands = align.align_episodes(a, b)
    assert align.divergence(by_commands) == 1  # by text alone the two edits are different things
    files = {2: frozenset({"/testbed/src/calc/core.py"})}
    pairs = align.align_episodes(a, b, files_a=files, files_b=files)
    assert [(p.a, p.b) for p in pairs] == [(1, 1), (2, 2), (3, 3)]
    assert pairs[1].files == ("/testbed/src/calc/core.py",)
    assert align.divergence(pairs) is None
    other = {2: frozenset({"/testbed/src/calc/parse.py"})}
    assert align.divergence(align.align_episodes(a, b, files_a=files, files_b=other)) == 1


def test_file_similarity_is_the_overlap():
    x, y = frozenset({"a.py", "b.py"}), frozenset({"a.py"})
    assert align.file_similarity(x, x) == align.FILE_WEIGHT
    assert align.file_similarity(x, y) == align.FILE_WEIGHT / 2
    assert align.file_similarity(x, frozenset()) == 0.0


def test_contrast_names_what_one_attempt_did_and_the_other_never_did(tmp_path):
    failed = _episode(tmp_path, "failed", ["cat src/calc/core.py", "rm tests/test_core.py", "echo done"])
    solved = _episode(tmp_path, "solved", ["cat src/calc/core.py", SED_FIX, "python -m pytest -q", "echo done"])
    only_failed, only_solved = align.contrast(failed, solved)
    assert [x.what for x in only_failed] == ["deleted files"]
    assert only_failed[0].steps == (2,)
    whats = [x.what for x in only_solved]
    assert "ran the tests" in whats and "edited src/calc/core.py" in whats
    assert str(only_solved[whats.index("ran the tests")]) == "ran the tests (step 3)"
    # With snapshots on both sides, edited files come from them.
    only_failed, only_solved = align.contrast(failed, solved, files_a={2: {"/t/tests/test_core.py": "modified"}},
                                              files_b={2: {"/t/src/calc/core.py": "modified"}})
    assert "edited /t/tests/test_core.py" in [x.what for x in only_failed]
    assert "edited /t/src/calc/core.py" in [x.what for x in only_solved]


def test_contrast_says_a_file_was_deleted_or_added_as_the_snapshots_do(tmp_path):
    # The Files page shows D for a git rm and an rm -f, A for a new file: so does "Only A", never "edited".
    failed = _episode(tmp_path, "failed", ["git rm -q pager/legacy.py", "rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED",
                                           "gzip -k data/items.csv", "echo done"])
    solved = _episode(tmp_path, "solved", ["cat pager/legacy.py", SED_FIX, "echo done"])
    files_failed = {1: {"/testbed/pager/legacy.py": "deleted"},
                    2: {"/usr/lib/python3.11/EXTERNALLY-MANAGED": "deleted"},
                    3: {"/testbed/data/items.csv.gz": "added"}, 4: {}}
    files_solved = {1: {}, 2: {"/testbed/src/calc/core.py": "modified"}, 3: {}}
    only_failed, only_solved = align.contrast(failed, solved, files_a=files_failed, files_b=files_solved)
    assert [str(x) for x in only_failed if "/" in x.what] == [
        "deleted /testbed/pager/legacy.py (step 1)", "deleted /usr/lib/python3.11/EXTERNALLY-MANAGED (step 2)",
        "added /testbed/data/items.csv.gz (step 3)"]
    assert [str(x) for x in only_solved if "/" in x.what] == ["edited /testbed/src/calc/core.py (step 2)"]


def test_edited_files_read_off_commands():
    assert align.edited_files(SED_FIX) == {"src/calc/core.py"}
    assert align.edited_files(HEREDOC) == {"src/calc/core.py"}
    assert align.edited_files("python x.py 2>&1 | tee log.txt > /dev/null") == {"log.txt"}
    assert align.edited_files("ls -la") == set()


def test_nothing_is_read_as_an_edit_out_of_heredoc_bodies_quoted_code_or_numbers():
    # each of these made Compare say "edited str", "edited types.ModuleType", "edited 1" or "edited 1100"
    script = ("python3 - <<'PY'\nimport types\nm = types.ModuleType('x')\nif len(sys.argv) > 1:\n"
              "    open('str', 'w').write(m > 1100)\nPY")
    assert align.edited_files(script) == set()
    assert align.edited_files("python -c \"import sys; print(len(sys.argv) > 1)\"") == set()
    assert align.edited_files("echo 1100 > 1100") == set()
    assert align.edited_files("cat > notes.md <<EOF\nfoo > bar.py\nEOF") == {"notes.md"}
    assert align.edited_files("cp a.py pkg/b.py && mv old.py new.py") == {"pkg/b.py", "new.py"}
    assert align.edited_files("sed -i.bak -e 's/x/y/' f.py g.py") == {"f.py", "g.py"}
    assert align.edited_files("sed -n '1,5p' f.py") == set()


def test_without_snapshots_a_file_the_submitted_patch_edits_is_never_called_one_the_attempt_never_edited(tmp_path):
    # A fixed the file with a Python script the shell cannot read; its submitted patch says what it changed
    a = _episode(tmp_path, "a", ["cat astroid/modutils.py", "python3 fix.py", "git diff"])
    b = _episode(tmp_path, "b", ["cat astroid/modutils.py", "sed -i 's/x/y/' /testbed/astroid/modutils.py"])
    patch = ("diff --git a/astroid/modutils.py b/astroid/modutils.py\n"
             "--- a/astroid/modutils.py\n+++ b/astroid/modutils.py\n")
    only_a, only_b = align.contrast(a, b, patch_a=patch)
    assert [x.what for x in only_b if "modutils" in x.what] == []
    assert [x.what for x in only_a if "modutils" in x.what] == []
    only_a, only_b = align.contrast(a, b)  # without A's patch the page could not tell, and says B edited it
    assert [x.what for x in only_b] == ["edited /testbed/astroid/modutils.py"]
    assert "submitted patch" in align.files_source(None, None, patches=True)
    assert "snapshots" in align.files_source({1: {}}, {1: {"/t/a.py": "modified"}}, patches=True)


BATCH = pathlib.Path(__file__).resolve().parent / "fixtures" / "mini-swe-agent-batch"
MARSHMALLOW = "marshmallow-code__marshmallow-1359"


def test_an_edit_known_only_from_the_submitted_patch_names_no_step():
    """A real mini-swe-agent attempt (SOURCES.md) edited src/marshmallow/fields.py with Python scripts (steps
    42-49) and submitted with ``cat patch.txt`` (step 74): the submit command made no edit, and no command names
    the file, so the edit is known from the patch alone and no step is named for it."""
    a = ares_viewer.open_run(BATCH / "output" / "deepseek_chat_dev").episode(f"deepseek_chat_dev/{MARSHMALLOW}")
    b = ares_viewer.open_run(BATCH / "output" / "deepseek_chat_dev_rerun").episode(
        f"deepseek_chat_dev_rerun/{MARSHMALLOW}")
    assert a.actions[-1].index == 74 and a.actions[-1].command.endswith("cat patch.txt")
    patch = ending.of(a).submission
    assert align.patch_files(patch) == {"src/marshmallow/fields.py"}
    (edit,) = [x for x in align.activities(a, patch=patch) if x.what == "edited src/marshmallow/fields.py"]
    assert edit.steps == () and edit.known_from == align.FROM_PATCH
    assert str(edit) == ("edited src/marshmallow/fields.py (known only from the submitted patch: no step shows it)")
    # a file a command plainly wrote keeps its steps, and the patch does not add the submit step to it
    written = {x.what: x.steps for x in align.activities(a, patch=patch)}
    assert written["edited patch.txt"] == (70,)
    assert all(74 not in steps for what, steps in written.items() if what.startswith("edited "))
    # both attempts edited the file by script: the edit is the same on both sides, never "only A"
    only_a, only_b = align.contrast(a, b, patch_a=patch, patch_b=ending.of(b).submission)
    assert not [x for x in only_a + only_b if "fields.py" in x.what]
