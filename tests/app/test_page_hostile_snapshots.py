"""The Episode and Files pages beside a boundary snapshot whose ``snapshot.json`` is nested far too deeply: the
pages work, and say which snapshot does not read and why."""

from __future__ import annotations

import json
import pathlib

import pytest

from ares_viewer.snapshots import episode_boundary
from testdata import synthetic

DEPTH = 200_000


@pytest.fixture
def deep_run(runs) -> str:
    root = pathlib.Path(runs["root"]["path"]) / "run-b"
    episode_id = runs["run-b"]["solved"]
    doc = json.loads((root / f"{episode_id}.json").read_text())
    synthetic.write_boundary_snapshot(root, synthetic.boundary_messages(doc, 1), {"/testbed/a.py": b"x = 1\n"},
                                      snapshot_id="s1")
    synthetic.write_boundary_snapshot(root, synthetic.boundary_messages(doc, 3), {"/testbed/a.py": b"x = 2\n"},
                                      snapshot_id="s3", mtime=1_763_900_000)
    deep = root / "deep"
    (deep / episode_boundary.CONTAINER_FS).mkdir(parents=True)
    (deep / episode_boundary.SNAPSHOT_JSON).write_text(
        '{"agent_messages": [{"role": "user", "content": ' + "[" * DEPTH + "]" * DEPTH + "}]}")
    return episode_id


def _says_deep_is_unreadable(at) -> None:
    errors = [e.value for e in at.error if "Cannot read the snapshot" in e.value]
    assert len(errors) == 1, [e.value for e in at.error]
    assert "deep" in errors[0] and "snapshot.json is nested too deeply to read" in errors[0].replace("\\", "")


def test_the_files_page_survives_a_deeply_nested_snapshot_json(deep_run, app):
    at = app("files", run="run-b", episode=deep_run, step="3")
    assert not at.exception
    assert at.selectbox(key="files.old").options == ["step 1", "step 3"]
    diff = next(c.value for c in at.code if c.language == "diff")
    assert "-x = 1" in diff and "+x = 2" in diff
    _says_deep_is_unreadable(at)


def test_the_episode_page_survives_a_deeply_nested_snapshot_json(deep_run, app):
    at = app("episode", run="run-b", episode=deep_run, step="3")
    assert not at.exception
    assert [link.proto.label for link in at.get("page_link") if link.proto.page == "files"] == [
        "1 file changed at this step"]
    _says_deep_is_unreadable(at)
