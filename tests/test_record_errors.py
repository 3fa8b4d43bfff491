"""Record errors are typed: their kind and line are read as fields, and their words stay what users saw."""

from __future__ import annotations

from ares_viewer.formats import decoding, errors


def test_a_line_cut_short_says_so_by_its_kind_and_keeps_its_words():
    _, problems = decoding.decode("run.jsonl", b'{"step": 1}\n{"step": 2}\n{"step": 3, "obs": "unfin')
    (problem,) = problems
    assert (problem.kind, problem.line, problem.cut_short) == (errors.TRUNCATED, 3, True)
    assert str(problem).startswith("line 3: truncated JSON: the file ends before the document is complete")


def test_a_corrupt_line_is_not_mistaken_for_one_still_being_written():
    _, problems = decoding.decode("run.jsonl", b'{"step": 1}\n{"step": truncated JSON}\n{"step": 3}\n')
    (problem,) = problems
    assert (problem.kind, problem.line, problem.cut_short) == (errors.INVALID, 2, False)


def test_the_stored_form_round_trips_and_text_from_an_older_index_still_reads():
    problem = errors.RecordError(errors.CONTENT, "not a readable ares episode: no steps", 4, "item")
    assert errors.RecordError.from_json(problem.to_json()) == problem
    legacy = errors.RecordError.from_json("line 2: truncated JSON: the file ends before the document is complete")
    assert str(legacy) == "line 2: truncated JSON: the file ends before the document is complete"
    assert legacy.kind == errors.UNKNOWN
