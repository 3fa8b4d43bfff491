"""The smaller hardening cases of issue #45, one test (or a few) per case, grouped by mechanism.

docs/security.md ("Smaller cases") lists each mechanism beside its test here.
"""

from __future__ import annotations

import json
import math

import pytest

from ares_viewer.review import labelschema

# --- A label schema's score bounds are finite numbers ------------------------------------------------------------


@pytest.mark.parametrize(
    "bounds",
    [
        '"min": -Infinity, "max": 5',
        '"min": 0, "max": Infinity',
        '"min": NaN, "max": 5',
        '"min": 0, "max": 1e999',
        '"min": 0, "max": ' + "9" * 400,
    ],
    ids=["-inf", "inf", "nan", "1e999", "int-past-float"],
)
def test_a_score_with_an_infinite_or_nan_bound_is_refused_at_parse(bounds):
    text = '{"fields": [{"name": "severity", "kind": "score", ' + bounds + "}]}"
    with pytest.raises(labelschema.SchemaError, match="'severity': a score needs finite numbers"):
        labelschema.LabelSchema.parse(text)
    as_dict = json.loads(text)
    with pytest.raises(labelschema.SchemaError, match="finite numbers"):
        labelschema.LabelSchema.parse(as_dict)


def test_a_finite_score_schema_exports_as_strict_json():
    parsed = labelschema.LabelSchema.parse({"fields": [{"name": "severity", "kind": "score", "min": -2.5, "max": 5}]})
    exported = json.dumps(parsed.to_dict(), allow_nan=False)
    assert "Infinity" not in exported and "NaN" not in exported
    assert parsed.field("severity").clean(5) == 5.0
    with pytest.raises(labelschema.SchemaError, match=r"between -2\.5 and 5"):
        parsed.field("severity").clean(math.inf)
