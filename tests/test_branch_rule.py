"""Stored branches are judged by the rule of the search that wrote them (``parent.json``), so the command that ran
the search, the Episode page, ``branch --report`` and the Lost tasks page name the same decisive step, or none."""

from __future__ import annotations

import json
import shutil

import pytest
from test_counterfactual import DEMO, WRONG_FIX

from ares_viewer.counterfactual import branching, strategies
from ares_viewer.runs.run import load_episode


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """The bundled wrong-fix episode's branches, as a search would have stored them in the cache folder."""
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(DEMO / f"{WRONG_FIX}.json", run)
    episode = load_episode(run / f"{WRONG_FIX}.json")
    folder = branching.store_dir(episode)
    shutil.copytree(DEMO / ".branches" / WRONG_FIX, folder)  # its paths are relative to the folder, as a store's
    return episode, folder


def _verdict(found: branching.Search):
    d = found.decisive
    return None if d is None else (d.step, d.change, d.sure)


@pytest.mark.parametrize("strategy", [strategies.SPECTRUM, strategies.BISECT, strategies.EXHAUSTIVE])
def test_the_stored_rule_gives_the_verdict_its_search_gave(stored, strategy):
    episode, folder = stored
    (folder / "parent.json").write_text(json.dumps({"episode_id": WRONG_FIX, **branching.rule(strategy, 6, 3)}))
    explicit = branching.load(episode, strategy=strategy, samples=6, batch=3)
    found = branching.load(episode)
    assert found.branches and _verdict(found) == _verdict(explicit)
    assert found.describe() == explicit.describe()


@pytest.mark.parametrize("parent", ['{"strategy": "oracle"}', '{"strategy": 7}', "not json", '["spectrum"]',
                                    '{"strategy": "spectrum", "samples": true, "batch": -1}'])
def test_an_unusable_rule_falls_back_to_exhaustives_or_keeps_the_default_counts(stored, parent):
    episode, folder = stored
    (folder / "parent.json").write_text(parent)
    found = branching.load(episode)
    rule = json.loads(parent) if parent.startswith("{") else {}
    expected = branching.load(episode, strategy=strategies.SPECTRUM if rule.get("strategy") == "spectrum" else None)
    assert _verdict(found) == _verdict(expected) and found.describe() == expected.describe()
