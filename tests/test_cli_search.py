"""``ares-viewer search``: hits of real queries on the bundled sample run, printed as found, with how much was
searched; a bad regular expression is refused with exit code 2."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

import ares_viewer
from ares_viewer import cli
from ares_viewer.analysis import search
from testdata import synthetic

REPO = pathlib.Path(__file__).resolve().parent.parent
DEMO_RUN = REPO / "sample_runs" / "demo-run"


def test_plain_query_prints_hits_up_to_the_limit_and_how_far_it_got(capsys):
    assert cli.main(["search", str(DEMO_RUN), "slugify", "--limit", "5"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 5
    assert all(re.match(r"^[0-9a-f-]{36}  step \d+  (reasoning|thought|command|output|task|system): ", line)
               for line in lines)
    assert all("slugify" in line.lower() for line in lines)
    last = captured.err.splitlines()[-1]
    assert last.startswith("5 hit(s) in 1 episode(s) (the limit: there may be more) · searched ")
    assert "of 10 episodes" in last


def test_regex_in_one_field_as_json(capsys):
    assert cli.main(["search", str(DEMO_RUN), r"def \w+\(", "--regex", "--field", "command", "--json",
                     "--limit", "0"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits and {h["field"] for h in hits} == {"command"}
    for hit in hits:
        assert re.fullmatch(r"def \w+\(", hit["match"], re.IGNORECASE)
        assert hit["match"] in hit["snippet"] and hit["end"] - hit["start"] == len(hit["match"])
        assert set(hit) >= {"episode_id", "task_name", "step", "field", "snippet", "match"}


def test_case_and_no_hits(capsys):
    assert cli.main(["search", str(DEMO_RUN), "Slugify"]) == 0
    capsys.readouterr()
    assert cli.main(["search", str(DEMO_RUN), "SLUGIFY", "--case"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1].startswith("0 hit(s) in 0 episode(s) · searched all 10 file(s)")


def test_a_bad_regular_expression_is_refused(capsys):
    assert cli.main(["search", str(DEMO_RUN), "foo(", "--regex"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "invalid regular expression 'foo('" in captured.err and "missing )" in captured.err


def test_files_that_cannot_be_read_go_to_stderr(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    shutil.copytree(DEMO_RUN, run)
    (run / "broken.json").write_text('{"episode_id": "x", "steps": [')
    doc = synthetic.episode_dict(actions=3, seed=3)
    big = synthetic.write_episode(run, {**doc, "padding": "x" * 1_200_000})  # a field no reader looks at
    assert cli.main(["episodes", str(run)]) == 0  # indexed while the big file may be read
    capsys.readouterr()
    monkeypatch.setenv("ARES_VIEWER_MAX_FILE_MB", "1")  # now it is too large to read: the search says so
    assert cli.main(["search", str(run), "slugify", "--limit", "2"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert "broken.json" in captured.err
    assert cli.main(["search", str(run), "calc", "--limit", "0"]) in (0, 1)
    err = capsys.readouterr().err
    assert f"error: {big}" in err and "could not be read" in err.splitlines()[-1]


def test_at_the_limit_the_file_being_read_is_partly_searched_and_the_rest_not_yet(capsys):
    """Every file of the sample run holds "(": the limit is reached inside the first file, so the line says that
    file is partly searched and the other nine are not searched yet, never that their text cannot hold "(";
    the CLI prints the same line."""
    found = search.Search(ares_viewer.open_run(DEMO_RUN, use_cache=False), "(")
    hits = list(found.hits(limit=100))
    line = found.progress.describe(len(hits), len({h.episode_id for h in hits}))
    assert line == ("100 hit(s) in 1 episode(s) (the limit: there may be more) · searched 0 of 10 file(s) and part "
                    "of the next (0 of 10 episodes; 1 parsed) · 9 file(s) not searched yet")
    assert cli.main(["search", str(DEMO_RUN), "("]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == line  # the CLI's limit is 100 too


def test_a_whole_search_names_the_episodes_it_did_not_parse(capsys):
    assert cli.main(["search", str(DEMO_RUN), "slugify"]) == 0
    last = capsys.readouterr().err.splitlines()[-1]
    assert re.search(r"searched all 10 file\(s\) \(10 of 10 episodes; (\d) parsed, (\d) not: their text cannot "
                     r"hold the query\)$", last)
    assert "not searched yet" not in last


# An expression a backtracking engine takes 2**n steps for on n letters a that do not end the text: 30 of them took
# minutes (the search's time budget is looked at between episodes, never inside one match).
BACKTRACKING = "(a+)+$"


def test_an_expression_that_backtracks_returns_at_once_from_the_real_command(tmp_path):
    synthetic.write_output_run(tmp_path / "run", "a" * 30 + "!")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ARES_VIEWER_CACHE": str(tmp_path / "cache"),
           "ARES_VIEWER_SEARCH_SECONDS": "5"}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "search", str(tmp_path / "run"), BACKTRACKING,
                               "--regex"], env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the search of (a+)+$ held the command for 30 s")
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stderr  # no hit: the a's are followed by "!"
    assert done.stderr.splitlines()[-1].startswith("0 hit(s) in 0 episode(s) · searched all 1 file(s)")
    # The same letters at the end of a text do match.
    synthetic.write_output_run(tmp_path / "ends", "a" * 30)
    done = subprocess.run([sys.executable, "-m", "ares_viewer.cli", "search", str(tmp_path / "ends"), r"(a+)+\s*$",
                           "--regex", "--field", "output"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "a" * 30 in done.stdout


@pytest.mark.parametrize("expression, shown", [("(?<=def )parse", "(?<="), (r"(\w)\1", r"\1"), ("a++", "++")])
def test_lookarounds_and_backreferences_are_refused_with_the_reason(capsys, expression, shown):
    assert cli.main(["search", str(DEMO_RUN), expression, "--regex"]) == 2
    err = capsys.readouterr().err
    assert f"invalid regular expression {expression!r}" in err
    assert "no lookarounds" in err and "no backreferences" in err and shown in err
