"""Agreement figures against the published worked examples, and the label schema's checks."""

from __future__ import annotations

import math

import pytest

from ares_viewer.review import agreement, labelschema


def test_cohen_kappa_matches_the_textbook_example():
    # Wikipedia "Cohen's kappa": 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no gives kappa 0.4.
    first = ["yes"] * 25 + ["no"] * 25
    second = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert agreement.cohen_kappa(first, second) == pytest.approx(0.4)


def test_fleiss_kappa_matches_fleiss_worked_example():
    # Wikipedia "Fleiss' kappa": 10 subjects, 14 raters, 5 categories; kappa 0.210.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    items = [[category for category, n in enumerate(row) for _ in range(n)] for row in table]
    assert agreement.fleiss_kappa(items) == pytest.approx(0.210, abs=5e-4)


def test_krippendorff_alpha_matches_krippendorffs_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 3 coders, 15 units with gaps:
    # interval alpha 0.811, nominal 0.691.
    nan = math.nan
    data = {
        "A": [nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
        "B": [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
        "C": [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4],
    }
    units = [{r: v[i] for r, v in data.items() if not math.isnan(v[i])} for i in range(15)]
    assert agreement.krippendorff_alpha(units) == pytest.approx(0.811, abs=5e-4)
    assert agreement.krippendorff_alpha(units, "nominal") == pytest.approx(0.691, abs=5e-4)


def test_nominal_picks_the_figure_that_fits_the_raters():
    two = [{"ada": "hack", "bo": "hack"}, {"ada": "fine", "bo": "hack"}, {"ada": "fine", "bo": "fine"}]
    assert agreement.nominal(two)[0] == "cohen_kappa"
    three = [{"a": 1, "b": 1, "c": 2}, {"a": 2, "b": 2, "c": 2}]
    assert agreement.nominal(three)[0] == "fleiss_kappa"
    assert agreement.nominal([{"a": 1}])[0] == "none"


SCHEMA = {
    "fields": [
        {"name": "verdict", "kind": "single", "options": ["hack", "fine"]},
        {"name": "tags", "kind": "multiple", "options": ["edits tests", "skips tests"]},
        {"name": "severity", "kind": "score", "min": 0, "max": 5},
        {"name": "note", "kind": "note"},
    ]
}


def test_a_label_is_checked_against_the_schema_with_the_field_named():
    schema = labelschema.LabelSchema.parse(SCHEMA)
    assert schema.clean({"verdict": "hack", "severity": 3, "tags": ["skips tests", "edits tests"]}) == {
        "verdict": "hack",
        "tags": ["edits tests", "skips tests"],
        "severity": 3.0,
        "note": None,
    }
    with pytest.raises(labelschema.SchemaError, match="'severity' is between 0 and 5"):
        schema.clean({"verdict": "hack", "severity": 9})
    with pytest.raises(labelschema.SchemaError, match="'verdict' is one of"):
        schema.clean({"verdict": "maybe", "severity": 1})
    with pytest.raises(labelschema.SchemaError, match="'verdict' needs a value"):
        schema.clean({"severity": 1})
    with pytest.raises(labelschema.SchemaError, match="no field"):
        schema.clean({"verdict": "hack", "severity": 1, "colour": "red"})


@pytest.mark.parametrize(
    "bad, reason",
    [
        ({"fields": []}, "at least one field"),
        ({"fields": [{"name": "x", "kind": "colour"}]}, "kind is one of"),
        ({"fields": [{"name": "x", "kind": "single"}]}, "needs a list of options"),
        ({"fields": [{"name": "x", "kind": "score", "min": 5, "max": 1}]}, "min < max"),
        ("{not json", "is JSON"),
    ],
)
def test_a_bad_schema_says_why(bad, reason):
    with pytest.raises(labelschema.SchemaError, match=reason):
        labelschema.LabelSchema.parse(bad)
