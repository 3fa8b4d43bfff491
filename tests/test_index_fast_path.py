"""The index's fast path for ARES files: context lists compared as bytes must give the same rows as decoding them."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

import ares_viewer
from ares_viewer import formats
from ares_viewer.formats.adapters import ares
from testdata import synthetic

SAMPLE_RUN = pathlib.Path(__file__).resolve().parents[1] / "sample_runs" / "demo-run"


def _rows(path: str, data: bytes):
    fast = formats.summarize_file(path, data)
    ordinary = formats.read_file(path, data)
    return fast, ordinary


def _same_as_parsed(row: dict, episode: ares_viewer.Episode) -> None:
    expected = episode.summary()
    for key, value in expected.items():
        if isinstance(value, float) and value != value:
            assert row[key] != row[key], key
        else:
            assert row[key] == value, key


@pytest.mark.parametrize("kwargs", [
    {"actions": 12},
    {"actions": 7, "ending": "truncated"},
    {"actions": 5, "ending": "errored"},
    {"actions": 9, "drop_context_at": 4},
    {"actions": 3, "output_chars": 30_000},
])
def test_writer_layout_takes_the_fast_path_and_agrees_with_the_parsed_episode(kwargs):
    doc = synthetic.episode_dict(seed=5, **kwargs)
    data = json.dumps(doc, indent=2).encode()
    split = ares.split_contexts(data)
    assert split is not None, "the writer's own layout must take the fast path"
    skeleton, contexts = split
    assert len(skeleton) < len(data) / 2  # the contexts are most of a file (more, the longer it is): never decoded
    assert len(contexts) == sum(1 for step in doc["steps"] if (step.get("observation") or {}).get("messages"))
    fast, ordinary = _rows("e.json", data)
    assert not fast.errors and len(fast.rows) == 1
    _same_as_parsed(fast.rows[0], ordinary.episodes[0])


def test_bundled_sample_episodes_agree_on_both_paths():
    files = sorted(SAMPLE_RUN.glob("*.json"))
    if not files:
        pytest.skip("the bundled sample run is not there")
    for path in files:
        data = path.read_bytes()
        assert ares.split_contexts(data) is not None, path.name
        fast, ordinary = _rows(str(path), data)
        _same_as_parsed(fast.rows[0], ordinary.episodes[0])


def test_a_message_changed_in_the_middle_of_the_context_is_a_rewrite():
    doc = synthetic.episode_dict(actions=6, seed=2)
    # The agent rewrites its second message at step 4 but keeps the rest (last message included).
    messages = doc["steps"][4]["observation"]["messages"]
    messages[1] = dict(messages[1], content="(summarised)")
    fast, ordinary = _rows("e.json", json.dumps(doc, indent=2).encode())
    assert ordinary.episodes[0].summary()["context_rewrites"] == 2  # at step 4, and back at step 5
    _same_as_parsed(fast.rows[0], ordinary.episodes[0])


def _preamble_first(doc: dict) -> bytes:
    """The writer's layout with 100 KB of metadata before the steps: its first context opens too far in."""
    return json.dumps({"metadata": {"notes": ["x" * 1000] * 100}, **doc}, indent=2).encode()


@pytest.mark.parametrize("layout", ["compact", "indent4", "ascii_off", "preamble"])
def test_other_layouts_read_the_ordinary_way_with_the_same_row(layout):
    doc = synthetic.episode_dict(actions=5, seed=3)
    doc["steps"][2]["observation"]["messages"][0]["content"] += " – ünïcode ]\n        ] text"
    data = {"compact": lambda d: json.dumps(d).encode(),
            "indent4": lambda d: json.dumps(d, indent=4).encode(),
            "ascii_off": lambda d: json.dumps(d, indent=2, ensure_ascii=False).encode(),
            "preamble": _preamble_first}[layout](doc)
    assert (ares.split_contexts(data) is None) == (layout != "ascii_off")
    fast, ordinary = _rows("e.json", data)
    _same_as_parsed(fast.rows[0], ordinary.episodes[0])


def test_unexpected_context_contents_fall_back_to_the_ordinary_path():
    doc = synthetic.episode_dict(actions=4, seed=6)
    odd = copy.deepcopy(doc)
    odd["steps"][3]["observation"]["messages"].append("a bare string, not a message")
    data = json.dumps(odd, indent=2).encode()
    assert ares.split_contexts(data) is not None
    fast, ordinary = _rows("e.json", data)
    _same_as_parsed(fast.rows[0], ordinary.episodes[0])


def test_errors_and_repairs_are_the_ordinary_paths():
    doc = synthetic.episode_dict(actions=4, seed=7)
    data = json.dumps(doc, indent=2).encode()
    cut = data[: len(data) // 2]
    assert formats.summarize_file("e.json", cut).errors == formats.read_file("e.json", cut).errors != ()
    doc["steps"][-1]["reward"] = float("nan")
    nan = json.dumps(doc, indent=2).encode()
    assert b"NaN" in nan
    fast, ordinary = _rows("e.json", nan)
    assert fast.rows[0]["warnings"] == list(ordinary.episodes[0].warnings)
