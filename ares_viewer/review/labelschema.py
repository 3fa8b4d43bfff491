"""A queue's label schema: what a reviewer fills in for each item, and the check of what they filled in.

A schema is a list of fields, each one of:

- ``single``: one choice among ``options`` (``verdict: hack | fine``);
- ``multiple``: any number of ``options`` (``tags: [edits tests, skips tests]``);
- ``score``: a number between ``min`` and ``max`` inclusive (``severity: 0..5``);
- ``note``: free text.

As data (JSON, or a dict in a notebook)::

    {"fields": [{"name": "verdict", "kind": "single", "options": ["hack", "fine"]},
                {"name": "severity", "kind": "score", "min": 0, "max": 5},
                {"name": "note", "kind": "note"}]}

A queue keeps every version of its schema; each label records the version it was written under, so changing
the schema never rewrites a past label.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, TypeGuard

KINDS = ("single", "multiple", "score", "note")
MAX_NOTE = 20_000


class SchemaError(ValueError):
    """A schema, or values given for it, that cannot be used; the message says which field and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """One thing a reviewer fills in.

    Attributes:
        name: what it is called (unique in its schema).
        kind: ``single``, ``multiple``, ``score`` or ``note``.
        options: the choices of a ``single`` or ``multiple`` field.
        low, high: the inclusive range of a ``score``.
        required: True when a label must give it (notes and multiple choices default to optional).
    """

    name: str
    kind: str
    options: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    required: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "required": self.required}
        if self.options:
            out["options"] = list(self.options)
        if self.kind == "score":
            out.update(min=self.low, max=self.high)
        return out

    def clean(self, value: Any) -> Any:
        """``value`` checked against this field (None when absent and optional).

        Raises:
            SchemaError: naming the field and what is wrong.
        """
        if value is None or value == "" or value == []:
            if self.required:
                raise SchemaError(f"{self.name!r} needs a value")
            return None
        if self.kind == "single":
            if value not in self.options:
                raise SchemaError(f"{self.name!r} is one of {list(self.options)}, not {value!r}")
            return value
        if self.kind == "multiple":
            chosen = [value] if isinstance(value, str) else list(value)
            unknown = [v for v in chosen if v not in self.options]
            if unknown:
                raise SchemaError(f"{self.name!r} takes {list(self.options)}, not {unknown}")
            return [o for o in self.options if o in chosen]
        if self.kind == "score":
            if isinstance(value, bool):
                raise SchemaError(f"{self.name!r} is a number, not {value!r}")
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise SchemaError(f"{self.name!r} is a number, not {value!r}") from None
            low = -math.inf if self.low is None else self.low
            high = math.inf if self.high is None else self.high
            if math.isnan(number) or not low <= number <= high:
                raise SchemaError(f"{self.name!r} is between {self.low:g} and {self.high:g}, not {value!r}")
            return number
        if not isinstance(value, str):
            raise SchemaError(f"{self.name!r} is text, not {type(value).__name__}")
        if len(value) > MAX_NOTE:
            raise SchemaError(f"{self.name!r} is at most {MAX_NOTE} characters")
        return value


@dataclasses.dataclass(frozen=True, slots=True)
class LabelSchema:
    """The fields of a label, in the order a reviewer sees them."""

    fields: tuple[Field, ...]

    @classmethod
    def parse(cls, data: str | Mapping[str, Any] | LabelSchema) -> LabelSchema:
        """A schema from JSON text or its dict.

        Raises:
            SchemaError: for a field without a name, an unknown kind, a choice without options, a score without
                a finite range (NaN and infinite bounds are refused), or two fields of one name.
        """
        if isinstance(data, LabelSchema):
            return data
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise SchemaError(f"a label schema is JSON: {exc}") from exc
        if not isinstance(data, Mapping) or not isinstance(data.get("fields"), list) or not data["fields"]:
            raise SchemaError('a label schema is {"fields": [...]} with at least one field')
        fields = [_field(raw) for raw in data["fields"]]
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise SchemaError(f"two fields share a name in {names}")
        return cls(tuple(fields))

    def to_dict(self) -> dict[str, Any]:
        return {"fields": [f.to_dict() for f in self.fields]}

    def field(self, name: str) -> Field:
        for found in self.fields:
            if found.name == name:
                return found
        raise KeyError(name)

    def clean(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A label's values checked against the schema; fields left out are None.

        Raises:
            SchemaError: for a value that does not fit, a missing required one, or a field the schema lacks.
        """
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise SchemaError(f"the schema has no field {sorted(unknown)}")
        return {f.name: f.clean(values.get(f.name)) for f in self.fields}

    def clean_partial(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Only the fields given a value, each checked against its field (an adjudicator's decision): a field left
        out, None or empty text is not set; a multiple choice given ``[]`` is set to none of its options.

        Raises:
            SchemaError: for a value that does not fit, or a field the schema lacks.
        """
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise SchemaError(f"the schema has no field {sorted(unknown)}")
        out: dict[str, Any] = {}
        for f in self.fields:
            value = values.get(f.name)
            if value is None or value == "" or (value == [] and f.kind != "multiple"):
                continue
            out[f.name] = [] if value == [] else f.clean(value)
        return out


def _field(raw: Any) -> Field:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"].strip():
        raise SchemaError(f"each field has a name: {raw!r}")
    name, kind = raw["name"].strip(), raw.get("kind")
    if kind not in KINDS:
        raise SchemaError(f"field {name!r}: kind is one of {list(KINDS)}, not {kind!r}")
    required = bool(raw.get("required", kind in ("single", "score")))
    if kind in ("single", "multiple"):
        options = raw.get("options")
        if not isinstance(options, list) or not options or not all(isinstance(o, str) and o for o in options):
            raise SchemaError(f"field {name!r}: a {kind} choice needs a list of options")
        if len(set(options)) != len(options):
            raise SchemaError(f"field {name!r}: options repeat in {options}")
        return Field(name, kind, tuple(options), required=required)
    if kind == "score":
        low, high = raw.get("min"), raw.get("max")
        if not (_is_number(low) and _is_number(high)) or float(low) >= float(high):
            raise SchemaError(f"field {name!r}: a score needs finite numbers min < max, not {low!r}..{high!r}")
        return Field(name, kind, low=float(low), high=float(high), required=required)
    return Field(name, kind, required=required)


def _is_number(value: Any) -> TypeGuard[int | float]:
    """A finite JSON number (not a boolean, NaN, an infinity or an integer past a float's range), so a bound
    exports as plain JSON, never ``Infinity`` or ``NaN``."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False
