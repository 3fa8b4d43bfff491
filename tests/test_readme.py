"""The README's notebook example runs as written on the bundled sample run."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _notebook_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## In a notebook or a script"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_notebook_example_runs_on_the_sample_run(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    names: dict = {}
    exec(compile(_notebook_block(), "README.md", "exec"), names)  # the README's own example
    episode = names["episode"]
    assert len(names["failed"]) > 0
    assert names["run"].query("SELECT count(*) FROM episodes").fetchall()[0][0] == len(names["run"])
    assert episode.new_messages(3) == list(episode.context_change(3).new)


def test_the_readme_flag_example_finds_what_it_says(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## What the agents did: behaviour flags") : text.index("## What it reads")]
    block = re.findall(r"```python\n(.*?)```", section, re.S)[-1]
    code = "\n".join(line for line in block.splitlines() if not line.startswith("#"))
    said = ast.literal_eval("".join(line[2:] for line in block.splitlines() if line.startswith("# ")))
    *setup, last = code.strip().splitlines()
    names: dict = {}
    exec(
        "import ares_viewer\nfrom ares_viewer import fsdiff\nfrom ares_viewer.analysis import behaviours\n"
        + "\n".join(setup),
        names,
    )
    assert eval(last, names) == said  # the README's own example and its printed answer
