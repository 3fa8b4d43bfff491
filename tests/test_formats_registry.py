"""The formats a run is read in: one literal table of the built-in adapters, a base class whose defaults spare an
adapter the parts it lacks, an entry-point group through which a package outside this repository adds a format,
and the index's fast paths keyed by adapter."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from ares_viewer import formats
from ares_viewer.formats import base, registry
from ares_viewer.formats.adapters import ares, atif, inspect_ai, mini_swe_agent, ray_runner, tinker
from ares_viewer.runs.index import builder

REPO = pathlib.Path(__file__).resolve().parent.parent

# A format of another package: one JSON document {"toy_episode": id, "reward": r}, read as an episode of no steps.
_TOY = '''
from ares_viewer import model
from ares_viewer.formats import base

NAME = "toy"


def sniff(doc):
    return isinstance(doc, dict) and "toy_episode" in doc


def parse(doc, path, record=None):
    return [base.episode(NAME, path, episode_id=str(doc["toy_episode"]), task_name="toy-task",
                         outcome=model.Outcome.COMPLETED, steps=(), messages=(), links=(), metadata={}, warnings=(),
                         total_reward=float(doc["reward"]))]


def summarize(doc, path, record=None):
    return [{**episode.summary(), "warnings": []} for episode in parse(doc, path, record)]


ADAPTER = base.Adapter(NAME, sniff=sniff, summarize=summarize, parse=parse)
NOT_AN_ADAPTER = "a string"
'''


def _install_toy(folder: pathlib.Path, entry_points: str) -> None:
    """A package ``toy_format`` installed into ``folder`` as pip leaves it: the module and its dist-info."""
    (folder / "toy_format.py").write_text(_TOY)
    dist = folder / "toy_format-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-format\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[ares_viewer.formats]\n{entry_points}")


def test_the_built_in_adapters_are_one_literal_tuple_in_sniffing_order():
    tree = ast.parse((REPO / "ares_viewer" / "formats" / "registry.py").read_text())
    table = next(node.value for node in tree.body
                 if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "ADAPTERS")
    assert isinstance(table, ast.Tuple)
    order = ["ares", "mini_swe_agent", "ray_runner", "tinker", "atif", "inspect_ai"]
    assert [ast.unparse(item) for item in table.elts] == [f"{module}.ADAPTER" for module in order]
    assert registry.ADAPTERS == (ares.ADAPTER, mini_swe_agent.ADAPTER, ray_runner.ADAPTER, tinker.ADAPTER,
                                 atif.ADAPTER, inspect_ai.ADAPTER)
    assert not hasattr(registry, "register")  # nothing registers by a call at import


def test_an_adapter_without_a_fast_path_or_file_name_of_its_own_takes_the_defaults():
    for module in (atif, inspect_ai, ray_runner, tinker):
        assert not hasattr(module, "summarize_bytes"), module.__name__  # no stub left
        assert module.ADAPTER.summarize_bytes("x.jsonl", b"{}\n") is None
    assert mini_swe_agent.ADAPTER.summarize_bytes("x.jsonl", b"{}\n") is None  # not a trajectory: the ordinary path
    assert not hasattr(atif, "misnamed") and atif.ADAPTER.misnamed("trajectory.json") is None
    assert not hasattr(ray_runner, "misnamed") and ray_runner.ADAPTER.misnamed("dump.jsonl") is None


def test_a_package_outside_the_repository_adds_a_format_through_its_entry_point(tmp_path):
    """In a fresh process, as a user with the package installed runs it: the run's table and the episode page
    read the toy files; a broken entry point beside it is left out with a warning naming it."""
    site = tmp_path / "site"
    site.mkdir()
    _install_toy(site, "toy = toy_format:ADAPTER\nbroken = toy_format:NOT_AN_ADAPTER\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.json").write_text(json.dumps({"toy_episode": "t1", "reward": 1.0}))
    (run / "b.json").write_text(json.dumps({"toy_episode": "t2", "reward": 0.0}))
    script = textwrap.dedent(
        f"""
        import json, warnings
        import ares_viewer
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = ares_viewer.open_run({str(run)!r})
            table = run.episodes.sort_values("episode_id")
            episode = run.episode("t1")
        print(json.dumps({{"errors": [str(e) for e in run.errors], "ids": list(table.episode_id),
                          "formats": sorted(set(table.format)),
                          "rewards": list(table.total_reward), "episode": [episode.format, episode.total_reward],
                          "warnings": [str(w.message) for w in caught]}}))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)]),
           "ARES_VIEWER_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["errors"] == []
    assert found["ids"] == ["t1", "t2"] and found["formats"] == ["toy"] and found["rewards"] == [1.0, 0.0]
    assert found["episode"] == ["toy", 1.0]
    assert any("'broken'" in w and "not an ares_viewer.formats.base.Adapter" in w for w in found["warnings"])


def test_without_the_package_the_same_file_is_something_else():
    data = json.dumps({"toy_episode": "t1", "reward": 1.0}).encode()
    registry._PLUGINS.clear()
    try:
        assert formats.read_file("a.json", data).skipped
    finally:
        registry._PLUGINS.clear()


def test_an_added_format_cannot_take_a_built_in_name(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    _install_toy(site, "ares = toy_format:ADAPTER\n")
    (site / "toy_format.py").write_text(_TOY.replace('NAME = "toy"', 'NAME = "ares"'))
    monkeypatch.syspath_prepend(str(site))
    registry._PLUGINS.clear()
    try:
        with pytest.warns(UserWarning, match="the format 'ares' is read already"):
            assert registry.plugins() == ()
    finally:
        registry._PLUGINS.clear()


def test_every_adapter_has_an_index_fast_path_or_says_why_not():
    names = [adapter.NAME for adapter in registry.adapters()]
    assert set(builder.FAST_PATHS) | set(builder.NO_FAST_PATH) == set(names)
    assert not set(builder.FAST_PATHS) & set(builder.NO_FAST_PATH)
    assert all(name == spec.adapter.NAME for name, spec in builder.FAST_PATHS.items())
    assert all(reason.strip() for reason in builder.NO_FAST_PATH.values())
    assert isinstance(registry.ADAPTERS[0], base.Adapter)
