"""Any valid JSON a producer might write, in any place of a line: the fast paths (DuckDB's for Tinker and Ray runner,
mini-swe-agent's msgspec ``summarize_bytes``) either give the ordinary path's rows for the file or leave the file to
it, and neither way of reading stops on it.

Each example changes one to three places of a real-shaped line (a value replaced by another JSON value of any type,
a key dropped, a list emptied), between two unchanged lines. The examples are drawn deterministically, so a failure
in CI is the same failure locally; ``ARES_VIEWER_HOSTILE_EXAMPLES=500`` draws that many new ones per format instead.
"""

from __future__ import annotations

import json
import os
import random

import fast_paths
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ares_viewer.formats import _reading, decoding
from ares_viewer.formats.adapters import mini_swe_agent
from ares_viewer.runs import sources
from ares_viewer.runs.index import _fast_ray as fast_ray
from ares_viewer.runs.index import _fast_tinker as fast_tinker
from benchmarks import bench_scale

_FORMATS = {
    "tinker": (fast_tinker.SPEC, "iteration_000003/train_rollout_summaries.jsonl",
               lambda n: bench_scale._rollout(3, n // 3 * 10, n % 3, random.Random(n))),  # group 0: three turns
    "ray": (fast_ray.SPEC, "rollouts-epoch000002.jsonl", lambda n: bench_scale._ray_trajectory(2, n, random.Random(n))),
}


def _mini(n: int) -> dict:
    return bench_scale._mini_trajectory(n, random.Random(n))

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
    | st.sampled_from(["user", "assistant", "tool", "system", "<returncode>1</returncode>", "length", "true", "1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _places(doc, path=()) -> list[tuple]:
    """Every place in a document: the path of keys and indexes leading to it."""
    found = [path]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _places(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += _places(value, (*path, index))
    return found


@st.composite
def _changed(draw, make):
    doc = make(1)
    for _ in range(draw(st.integers(1, 3))):
        places = [p for p in _places(doc) if p]
        place = draw(st.sampled_from(places))
        parent = doc
        for step in place[:-1]:
            parent = parent[step]
        how = draw(st.sampled_from(["replace", "replace", "drop", "empty"]))
        if how == "drop" and isinstance(parent, dict):
            parent.pop(place[-1])
        elif how == "empty" and isinstance(parent[place[-1]], (list, dict)):
            parent[place[-1]] = type(parent[place[-1]])()
        else:
            parent[place[-1]] = draw(_JSON)
    return doc


@pytest.mark.parametrize("name", list(_FORMATS))
def test_any_value_anywhere_gives_the_ordinary_rows_or_the_ordinary_path(tmp_path_factory, name):
    spec, relative, make = _FORMATS[name]

    drawn = os.environ.get("ARES_VIEWER_HOSTILE_EXAMPLES")

    @settings(max_examples=int(drawn or 40), derandomize=drawn is None, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(_changed(make))
    def check(doc):
        folder = tmp_path_factory.mktemp(name)
        path = folder / "run" / relative
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(d) + "\n" for d in (make(0), doc, make(2))))
        files = sources.list_files(folder / "run")
        # The rows the fast path takes equal the ordinary path's; neither raises.
        taken, left, entries = fast_paths.same_rows(folder, spec, files)
        assert len(taken) + len(left) == 1
        assert sum(e.rows for e in entries) + sum(len(e.errors) for e in entries) >= 1

    check()


def test_any_value_anywhere_gives_the_ordinary_rows_or_the_ordinary_path_in_msgspec(tmp_path_factory):
    drawn = os.environ.get("ARES_VIEWER_HOSTILE_EXAMPLES")

    @settings(max_examples=int(drawn or 60), derandomize=drawn is None, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(_changed(_mini))
    def check(doc):
        folder = tmp_path_factory.mktemp("mini")
        path = folder / "run" / "batch_000000" / "trajectories.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(d) + "\n" for d in (_mini(0), doc, _mini(2))))
        data = path.read_bytes()
        try:
            fast = mini_swe_agent.summarize_bytes(str(path), data)
        except _reading._CONTENT_ERRORS:
            fast = None  # ``summarize_file`` reads the file the ordinary way
        ordinary = _reading._line_rows(str(path), data) if decoding.is_json_lines(data) else None
        if ordinary is None:
            ordinary = list(_reading._read(str(path), data, summaries=True).rows)
        assert fast is None or repr([sorted(r.items()) for r in fast]) == repr([sorted(r.items()) for r in ordinary])

    check()
