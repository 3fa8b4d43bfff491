"""Text diffs of responses, commands and outputs."""

from __future__ import annotations

from ares_viewer.base import textdiff

BEFORE = "THOUGHT: look at the code\n\n```bash\ncat src/calc/core.py\n```"
AFTER = "THOUGHT: fix the sign\n\n```bash\nsed -i 's/a - b/a + b/' src/calc/core.py\n```"


def test_unified_names_sides_and_marks_changed_lines():
    diff = textdiff.unified(BEFORE, AFTER, a_name="step 1", b_name="step 2")
    lines = diff.splitlines()
    assert lines[0] == "--- step 1" and lines[1] == "+++ step 2"
    assert "-cat src/calc/core.py" in lines
    assert "+sed -i 's/a - b/a + b/' src/calc/core.py" in lines
    assert " ```bash" in lines  # unchanged context


def test_equal_texts_have_no_diff():
    assert textdiff.unified(BEFORE, BEFORE) == ""
    assert "identical" in textdiff.to_html(BEFORE, BEFORE, a_name="A", b_name="B")
    assert textdiff.stats(BEFORE, BEFORE).identical


def test_stats_count_lines():
    stats = textdiff.stats("a\nb\nc", "a\nB\nc\nd")
    assert (stats.added, stats.removed) == (2, 1)
    assert 0 < stats.ratio < 1


def test_html_escapes_and_colours():
    html = textdiff.to_html("<script>alert(1)</script>", "<b>bold</b>")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "#ffebe9" in html and "#e6ffec" in html  # removed and added lines are coloured


def test_none_is_empty_and_huge_inputs_are_clipped():
    assert "+only after" in textdiff.unified(None, "only after")
    huge = "x\n" * 100_000
    diff = textdiff.unified(huge, huge + "y", limit=1_000)
    assert "more characters not compared" in diff or diff == ""
    assert len(diff) < 5_000


def test_side_by_side_shows_both_versions_with_line_numbers():
    old = "".join(f"line {i}\n" for i in range(1, 40))
    new = old.replace("line 20\n", "line twenty <b>\n")
    page = textdiff.side_by_side_html(old, new, a_name="step 1", b_name="step 2")
    assert "step 1" in page and "step 2" in page and "@@ -17,7 +17,7 @@" in page
    assert ">20</td>" in page and "line 20" in page and "line twenty &lt;b&gt;" in page
    assert "line 5" not in page  # far from the edit: not shown
    assert "<script" not in page and "<b>" not in page
    assert "identical" in textdiff.side_by_side_html(old, old)


def test_side_by_side_caps_its_rows():
    old = "".join(f"a {i}\n" for i in range(300))
    new = "".join(f"b {i}\n" for i in range(300))
    page = textdiff.side_by_side_html(old, new, max_rows=50)
    assert page.count("<tr>") <= 51 and "more row(s) not shown" in page
