"""The compare page in AppTest: a failed and a solved attempt aligned; two runs side by side."""

from __future__ import annotations

import pathlib
import shutil

import page_text
import pandas as pd
import pytest

from ares_viewer import counterfactual
from ares_viewer.analysis import ending
from ares_viewer.runs.run import load_episode
from testdata import synthetic


def steps(column: pd.Series) -> list[int]:
    """The step numbers of a column of the aligned table (its gaps are blank)."""
    return [int(v) for v in column if v != ""]


def test_defaults_to_a_failed_and_a_solved_attempt_at_the_same_task(runs, app):
    at = app("compare", run="run-a")
    assert not at.exception
    a, b = at.selectbox(key="compare.a").value, at.selectbox(key="compare.b").value
    assert a == runs["run-a"]["failed"]
    assert b == runs["run-a"]["solved"]  # the shorter of the two solved attempts (5 actions, not 7)
    frame = at.dataframe(key="compare.pairs").value
    # Every action of both episodes appears once, in order (gaps where one has no counterpart).
    assert steps(frame["A step"]) == list(range(1, 7))
    assert steps(frame["B step"]) == sorted(steps(frame["B step"]))
    # A gap's step is blank, as its command is: never the grid's "None".
    gaps = frame[frame[""].str.contains("gap")]
    assert len(gaps) and not frame[["A step", "B step"]].isna().any().any()
    assert all((row["A step"] == "") != (row["B step"] == "") for _, row in gaps.iterrows())
    shown = page_text.of(at)
    assert "They diverge at row" in shown and "where A first does what B does not (A step" in shown
    # one divergence row, stated once: the sentence names no second row
    assert shown.count("first does what") == 1
    # The row shown first is where A (the failed attempt) first did something of its own.
    [marked] = [i for i, v in enumerate(frame[""]) if v.startswith("◀ diverged")]
    assert frame["A step"][marked] != ""
    # Rows are numbered from 1 in the table, and the heading and the sentence use the table's numbers.
    assert list(frame["row"]) == list(range(1, len(frame) + 1))
    assert f"Row {marked + 1}" in [h.value for h in at.subheader]
    assert f"They diverge at row {marked + 1}," in shown
    # The picked row (the divergence point) shows command and output diffs.
    assert any("Command diff" in m.value for m in at.markdown)
    assert at.get("page_link")


def test_episode_a_follows_the_episode_view(runs, app):
    at = app("compare", run="run-a", episode=runs["run-a"]["solved"], other=runs["run-a"]["solved2"])
    assert at.selectbox(key="compare.a").value == runs["run-a"]["solved"]
    assert at.selectbox(key="compare.b").value == runs["run-a"]["solved2"]
    at.selectbox(key="compare.b").select(runs["run-a"]["failed"]).run()
    assert at.query_params["other"] == runs["run-a"]["failed"]


def test_two_runs_side_by_side(runs, app):
    at = app("compare", run="run-a")
    assert not at.get("plotly_chart")  # the hidden tab is not run
    at.session_state["compare.tab"] = "Two runs"
    at.run()
    assert at.selectbox(key="compare.other_run").value == "run-b"
    keys = {c.key for c in at.get("plotly_chart")}
    assert {"compare.dist", "compare.tasks"} <= keys


def test_the_picked_row_is_in_the_url(runs, app):
    at = app("compare", run="run-a", row="2")
    assert "Row 2" in [h.value for h in at.subheader]
    frame = at.dataframe(key="compare.pairs").value
    shown = frame.set_index("row")[""][2]  # the row the table numbers 2
    assert "◀ shown" in shown or shown.startswith("◀ diverged")
    # Another pair of episodes starts again at its own divergence.
    at.selectbox(key="compare.b").select(runs["run-a"]["solved2"]).run()
    assert "row" not in at.query_params


def test_summary_and_final_submissions(runs, app):
    at = app("compare", run="run-a")
    shown = page_text.of(at)
    assert "Final submissions, side by side" in [e.label for e in at.expander]
    assert "never did" in shown or "Both attempts did the same kinds of things" in shown
    # each side says why it ended as it did, from the files (docs/endings.md)
    why = [c.value.replace("\\", "") for c in at.caption if c.value.startswith("Why: ")]
    assert len(why) == 2
    assert why[0].startswith("Why: completed, reward 0") and why[1].startswith("Why: completed, reward 1")


def test_an_unknown_episode_says_so(runs, app):
    at = app("compare", run="run-a", episode="no-such-episode")
    assert any("no episode `no-such-episode`" in w.value for w in at.warning)
    assert at.selectbox(key="compare.a").value == runs["run-a"]["failed"]
    # The link now names the episodes shown: shared, it opens this comparison.
    assert at.query_params["episode"] == runs["run-a"]["failed"]
    assert at.query_params["other"] == runs["run-a"]["solved"]


def _query(link) -> dict[str, str]:
    return dict(part.split("=", 1) for part in link.proto.query_string.split("&"))


def test_open_step_links_name_the_other_episode_of_the_pair(runs, app):
    a, b = runs["run-a"]["failed"], runs["run-a"]["solved"]
    frame = app("compare", run="run-a", episode=a, other=b).dataframe(key="compare.pairs").value
    [paired, *_] = [row for _, row in frame.iterrows() if row["A step"] != "" and row["B step"] != ""]
    at = app("compare", run="run-a", episode=a, other=b, row=str(paired["row"]))
    links = {link.proto.label.split(" step ")[0]: _query(link) for link in at.get("page_link")
             if link.proto.label.startswith("Open ")}
    assert (links["Open A"]["episode"], links["Open A"]["other"]) == (a, b)
    assert (links["Open B"]["episode"], links["Open B"]["other"]) == (b, a)  # never episode=B&other=B


def test_a_substituted_episode_b_is_written_back_to_the_link(runs, app):
    a = runs["run-a"]["failed"]
    # No B named: the page picks one, and the link says which.
    at = app("compare", run="run-a", episode=a)
    assert at.query_params["other"] == at.selectbox(key="compare.b").value == runs["run-a"]["solved"]
    # B named as A itself: said, replaced, and the link follows.
    at = app("compare", run="run-a", episode=a, other=a)
    assert any("Episode B (`other` in the link) is episode A" in w.value for w in at.warning)
    assert at.query_params["other"] == at.selectbox(key="compare.b").value == runs["run-a"]["solved"]
    # B not in the run: said, replaced, and the link follows.
    at = app("compare", run="run-a", episode=a, other="no-such-episode")
    assert any("no episode `no-such-episode` (`other` in the link)" in w.value for w in at.warning)
    assert at.query_params["other"] == runs["run-a"]["solved"]
    # Another A starts again with the best partner of its own.
    at.selectbox(key="compare.a").select(runs["run-a"]["solved2"]).run()
    assert at.query_params["other"] == at.selectbox(key="compare.b").value != runs["run-a"]["solved2"]


@pytest.mark.parametrize("row", ["99", "abc", "0"])
def test_a_row_the_alignment_lacks_is_a_warning_naming_the_row_shown(runs, app, row):
    at = app("compare", run="run-a", row=row)
    assert not at.exception
    rows = len(at.dataframe(key="compare.pairs").value)
    [shown] = [h.value for h in at.subheader if h.value.startswith("Row ")]
    [warning] = [w.value for w in at.warning if "(`row` in the link)" in w.value]
    said = (f"“{row}” is not a row number; the alignment has rows 1 to {rows}." if row == "abc"
            else f"The alignment has no row {row}: its rows are 1 to {rows}.")
    assert warning == f"{said} Showing {shown.lower()} instead (`row` in the link)."
    assert "row" not in at.query_params




def _counterfactual_folder(runs, episode_id: str) -> pathlib.Path:
    """An episode copied to a folder of its own under the cache folder's counterfactuals, as the Sandbox page
    writes them."""
    folder = counterfactual.new_out_dir()
    folder.mkdir(parents=True)
    [source] = [p for p in pathlib.Path(runs["root"]["path"], "run-b").glob("*.json") if episode_id in p.read_text()]
    shutil.copy(source, folder / source.name)
    return folder


def test_episode_b_comes_from_a_counterfactual_folder_even_on_an_exposed_server(runs, app, exposed):
    b = runs["run-b"]["solved"]
    folder = _counterfactual_folder(runs, b)
    at = app("compare", run="run-a", episode=runs["run-a"]["failed"], other=b, other_in=str(folder))
    assert not at.exception and not at.warning
    picker = at.selectbox(key="compare.b")
    assert picker.label == "Episode B (another run)" and picker.value == b and len(picker.options) == 1
    assert at.selectbox(key="compare.a").value == runs["run-a"]["failed"]
    assert steps(at.dataframe(key="compare.pairs").value["B step"]) == [1, 2, 3, 4]
    assert at.query_params["other_in"] == str(folder)
    at.button(key="compare.same_run").click().run()
    assert "other_in" not in at.query_params and at.selectbox(key="compare.b").label == "Episode B"


def test_episode_b_elsewhere_is_refused_on_an_exposed_server_and_a_folder_without_it_is_dropped(runs, app, exposed,
                                                                                                 tmp_path):
    b = runs["run-b"]["solved"]
    outside = tmp_path / "elsewhere"
    shutil.copytree(pathlib.Path(runs["root"]["path"], "run-b"), outside)
    at = app("compare", run="run-a", other=b, other_in=str(outside))
    assert "reachable from other machines" in page_text.of(at) and "other_in" not in at.query_params
    assert at.selectbox(key="compare.b").label == "Episode B"
    at = app("compare", run="run-a", other=runs["run-a"]["solved"], other_in=str(_counterfactual_folder(runs, b)))
    assert "other_in" not in at.query_params and at.selectbox(key="compare.b").value == runs["run-a"]["solved"]


def test_an_episode_with_no_other_attempt_at_its_task_is_never_paired_with_another_task(runs, app):
    # run-a's truncated attempt is the only attempt at calc__calc-2: before, B silently became an attempt at
    # calc__calc-1 and 12 rows of unrelated work were aligned
    at = app("compare", run="run-a", episode=runs["run-a"]["truncated"])
    assert not at.exception
    assert at.selectbox(key="compare.b").value is None
    shown = page_text.of(at)
    assert "Episode A is the only attempt at task" in shown and "calc__calc-2" in shown
    assert "They diverge" not in shown
    with pytest.raises(KeyError):  # no alignment of unrelated work
        at.dataframe(key="compare.pairs")


def test_a_submission_the_files_do_not_hold_is_not_called_nothing_submitted(runs, app):
    # the solved attempt got reward 1: it submitted something, though neither its output nor a snapshot holds it
    at = app("compare", run="run-a")
    shown = page_text.of(at)
    assert "(nothing submitted)" not in shown
    assert "(no diff found there)" in shown and "From no output and no snapshots recorded." in shown


def test_compare_shows_what_the_episode_page_says_was_submitted(tmp_path, monkeypatch, app):
    """One answer to "what was submitted" (``ending.of``): the diff after the submit marker, not the marker line,
    with the same source the Episode page names."""
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    diff = "diff --git a/src/calc/core.py b/src/calc/core.py\n--- a/src/calc/core.py\n+++ b/src/calc/core.py\n"
    folder = tmp_path / "runs" / "run-s"
    folder.mkdir(parents=True)
    paths = {}
    for label, reward, seed in (("failed", 0.0, 1), ("solved", 1.0, 2)):
        doc = synthetic.episode_dict(actions=4, reward=reward, seed=seed)
        doc["final_command"] = {"step_index": 4, "returncode": 0, "command": submit,
                                "output": f"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n{diff}{label}\n"}
        paths[label] = synthetic.write_episode(folder, doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    at = app("compare", run="run-s")
    assert not at.exception
    shown = [b.value for b in page_text.blocks(at) if b.language == "diff" and b.value.startswith("diff --git")]
    episode_page = [ending.of(load_episode(paths[label])) for label in ("failed", "solved")]
    assert shown == [end.submission for end in episode_page]
    assert [text.removesuffix("\n") for text in shown] == [f"{diff}failed", f"{diff}solved"]
    captions = page_text.of(at)
    assert "From the output of the submit command (step 4)." in captions


def test_what_each_attempt_alone_did_is_worked_out_once_per_pair_not_on_every_rerun(runs, app, monkeypatch):
    from ares_viewer.analysis import align

    calls = []
    contrast = align.contrast
    monkeypatch.setattr(align, "contrast", lambda *args, **kwargs: calls.append(1) or contrast(*args, **kwargs))
    at = app("compare", run="run-a", row="2")
    summary = page_text.of(at)
    assert "never did" in summary or "Both attempts did the same kinds of things" in summary
    at.run()  # a rerun of the same pair, as picking a row of the table makes
    assert len(calls) <= 1  # none when an earlier test of the same pair filled the cache
    assert page_text.of(at) == summary



def test_a_long_list_of_what_one_attempt_alone_did_names_six_above_the_table_and_all_below(runs, app, monkeypatch):
    """Real attempts of 180 steps edit dozens of files the other never touched: the first few are named above the
    aligned table, with how many more, and an expander holds every one of them."""
    from ares_viewer.analysis import align

    only_a = [align.Activity(f"edited reproduce_{k}.py", (k,)) for k in range(1, 10)]
    only_b = [align.Activity("ran the tests", (3, 4))]
    monkeypatch.setattr(align, "contrast", lambda *args, **kwargs: (only_a, only_b))
    at = app("compare", run="run-a")
    summary = page_text.shown(next(m.value for m in at.markdown if m.value.startswith("- **Only A:**")))
    assert "edited reproduce_6.py (step 6); and 3 more — B never did." in summary
    assert "reproduce_7.py" not in summary
    assert "- **Only B:** ran the tests (steps 3, 4) — A never did." in summary
    [everything] = [e for e in at.expander if e.label.startswith("All that only one attempt did")]
    assert everything.label == "All that only one attempt did (9 of A and 1 of B)"
    listed = page_text.shown(everything.markdown[0].value)
    assert all(f"edited reproduce_{k}.py (step {k})" in listed for k in range(1, 10))

BATCH = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "mini-swe-agent-batch"


def test_an_edit_known_only_from_the_submitted_patch_is_said_so_and_names_no_step(app, monkeypatch):
    """A real mini-swe-agent attempt edited fields.py by Python scripts and submitted with ``cat patch.txt`` at step
    74: Compare names the edit from the patch and no step, never "edited ... (step 74)"."""
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(BATCH / "output"))
    at = app("compare", run="deepseek_chat_dev", episode="deepseek_chat_dev/marshmallow-code__marshmallow-1359",
             other="deepseek_chat_dev/sqlfluff__sqlfluff-1733")
    assert not at.exception
    shown = page_text.of(at)
    assert ("edited src/marshmallow/fields.py (known only from the submitted patch: no step shows it)" in shown), shown
    assert "fields.py (step 74)" not in shown
