"""Every ARES_VIEWER_* variable is declared once, read when needed, reported by `ares-viewer settings`, and a bad
value is an error naming the variable and the value."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

from ares_viewer import cli, container
from ares_viewer.base import settings
from ares_viewer.runs import index_cache, sources

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _rows(capsys) -> dict[str, dict]:
    return {row["name"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}


def test_settings_reports_a_variable_set_in_the_environment_with_its_source(monkeypatch, capsys):
    monkeypatch.setenv("ARES_VIEWER_PIDS_LIMIT", "64")
    monkeypatch.delenv("ARES_VIEWER_WALK_MAX_DEPTH", raising=False)
    assert cli.main(["settings", "--json"]) == 0
    rows = _rows(capsys)
    assert set(rows) == set(settings.SETTINGS)
    assert (rows["ARES_VIEWER_PIDS_LIMIT"]["value"], rows["ARES_VIEWER_PIDS_LIMIT"]["source"]) == (64, "environment")
    assert (rows["ARES_VIEWER_WALK_MAX_DEPTH"]["value"], rows["ARES_VIEWER_WALK_MAX_DEPTH"]["source"]) == (
        12,
        "default",
    )
    assert cli.main(["settings"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("ARES_VIEWER_PIDS_LIMIT "))
    assert line.split() == ["ARES_VIEWER_PIDS_LIMIT", "64", "environment"]


def test_settings_never_shows_the_password_of_a_url(monkeypatch, capsys):
    monkeypatch.setenv("ARES_VIEWER_MODEL_URL", "http://alice:s3cret@127.0.0.1:8000/v1")
    assert cli.main(["settings", "--json"]) == 0
    row = _rows(capsys)["ARES_VIEWER_MODEL_URL"]
    assert row["value"] == "http://alice:***@127.0.0.1:8000/v1" and row["source"] == "environment"


def test_a_bad_value_is_an_error_naming_the_variable_and_the_value(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "ARES_VIEWER_WALK_MAX_DEPTH": "deep"}
    done = subprocess.run(
        [sys.executable, "-m", "ares_viewer.cli", "settings"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "ARES_VIEWER_WALK_MAX_DEPTH='deep' is not a whole number above zero" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_walk_limit_is_refused_not_silently_replaced(monkeypatch, tmp_path):
    monkeypatch.setenv("ARES_VIEWER_WALK_MAX_ENTRIES", "-3")
    with pytest.raises(settings.SettingError, match=r"ARES_VIEWER_WALK_MAX_ENTRIES='-3'"):
        sources.Limits.from_env()


def test_settings_are_read_when_asked_for_not_at_import(monkeypatch, tmp_path):
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ARES_VIEWER_MAX_FILE_MB", "2")
    monkeypatch.setenv("ARES_VIEWER_MEM_LIMIT", "512m")
    assert index_cache.cache_dir() == tmp_path / "cache"
    assert sources.Limits.from_env().max_file_bytes == 2 * 1024 * 1024
    assert container.ResourceLimits().mem_limit == "512m"
    monkeypatch.setenv("ARES_VIEWER_PIDS_LIMIT", "many")
    with pytest.raises(ValueError, match=r"ARES_VIEWER_PIDS_LIMIT='many' is not a number"):
        container.ResourceLimits()


def test_the_settings_page_lists_every_setting_with_its_default():
    doc = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(ARES_VIEWER_\w+)` \| ([^|]+) \|", doc, re.M)}
    assert set(rows) == set(settings.SETTINGS)
    for name, setting in settings.SETTINGS.items():
        assert rows[name].strip() == ("unset" if setting.default is None else f"`{setting.default}`"), name


def test_no_module_names_a_variable_the_settings_do_not_declare():
    named = set()
    for path in [
        *ROOT.joinpath("ares_viewer").rglob("*.py"),
        *ROOT.joinpath("ares_viewer_app").rglob("*.py"),
        ROOT / "README.md",
        *ROOT.joinpath("docs").glob("*.md"),
    ]:
        named |= set(re.findall(r"ARES_VIEWER_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
    assert named <= set(settings.SETTINGS), named - set(settings.SETTINGS)
