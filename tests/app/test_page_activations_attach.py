"""A capture kept where the user chose, attached by the CLI or on the page, opens beside its episode; without one,
both pages say where they looked; on an exposed server the page attaches only folders under the runs folder.
The captures are written without torch (``hostile_pt.tensor_file``)."""

from __future__ import annotations

import json
import pathlib

import page_text
import pytest
from hostile_pt import tensor_file

import ares_viewer
from ares_viewer import activations, cli
from testdata import synthetic

HOOKS = {"blocks.0.hook_resid_post": ((1, 4, 8), (32, 8, 1)), "blocks.1.hook_resid_post": ((1, 4, 8), (32, 8, 1)),
         "blocks.0.attn.hook_pattern": ((1, 2, 4, 4), (32, 16, 4, 1))}
IDS = list(range(100, 108))


def _capture(folder: pathlib.Path) -> pathlib.Path:
    folder.mkdir(parents=True)
    for i in range(3):
        tensor_file(folder / f"step_{i:04d}.pt", HOOKS)
    meta = {"model_name": "kept-elsewhere", "num_steps": 3, "n_ctx": 10, "max_new_tokens": 2,
            "step_metadata": [{"step": i + 1, "token_ids": [*IDS, 9], "prompt_length": 8} for i in range(3)]}
    (folder / "metadata.json").write_text(json.dumps(meta))
    return folder


@pytest.fixture
def runs(tmp_path, monkeypatch) -> dict[str, pathlib.Path]:
    """run-x under the runs folder with an episode and an (empty) activations/ folder; a capture inside the runs
    folder and one outside it; the cache folder of the test's own."""
    root = tmp_path / "runs"
    run = root / "run-x"
    run.mkdir(parents=True)
    synthetic.write_episode(run, synthetic.episode_dict(actions=3, seed=4, episode_id="ep"))
    (run / "activations").mkdir()
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    return {"run": run, "inside": _capture(root / "captures" / "episode_001"),
            "outside": _capture(tmp_path / "elsewhere" / "episode_001")}


def test_without_a_capture_both_pages_say_where_they_looked(runs, app):
    page = app("activations", run="run-x", episode="ep", step="1")
    assert not page.exception
    shown = page_text.of(page)
    assert f"{runs['run']}/activations/ep/ (not there)" in shown
    assert "folders attached with `ares-viewer activations attach`" in shown and "none for this episode" in shown
    assert page.text_input(key="activations.attach_folder") is not None
    episode = app("episode", run="run-x", episode="ep", step="2")
    assert not episode.exception
    assert "No activation capture found for this episode; looked in:" in page_text.of(episode)


def test_after_the_cli_attaches_a_folder_the_pages_open_its_capture(runs, app):
    assert cli.main(["activations", "attach", str(runs["run"]), "ep", str(runs["outside"])]) == 0
    page = app("activations", run="run-x", episode="ep", step="2")
    assert not page.exception
    shown = page_text.of(page)
    assert "Model `kept-elsewhere` · 3 model call(s)" in shown and str(runs["outside"]) in shown
    assert page.select_slider(key="activations.step").value == 2
    # The Episode page links to it and says the prompt was clipped, which end, and how it is known.
    episode = app("episode", run="run-x", episode="ep", step="2")
    assert not episode.exception
    assert any("Activations of step 2" in str(link.proto.label) for link in episode.get("page_link"))
    text = page_text.of(episode)
    assert "but the capture shows the prompt was clipped to 8 tokens: its end was cut, as" in text
    assert "ran on the same 8 token ids although the context grew" in text


def test_the_page_attaches_a_folder_typed_into_it(runs, app):
    page = app("activations", run="run-x", episode="ep", step="1")
    page.text_input(key="activations.attach_folder").input(str(runs["inside"]))
    _submit(page)
    assert not page.exception
    assert "Model `kept-elsewhere` · 3 model call(s)" in page_text.of(page)
    linked = activations.find(ares_viewer.open_run(str(runs["run"])).episode("ep"))
    assert linked is not None and linked.capture.folder == str(runs["inside"])


def test_an_exposed_server_attaches_only_folders_under_the_runs_folder(runs, app, exposed):
    page = app("activations", run="run-x", episode="ep", step="1")
    page.text_input(key="activations.attach_folder").input(str(runs["outside"]))
    _submit(page)
    assert not page.exception
    shown = page_text.of(page)
    assert "Not attached: This server is reachable from other machines" in shown and "outside it" in shown
    assert activations.find(ares_viewer.open_run(str(runs["run"])).episode("ep")) is None
    page.text_input(key="activations.attach_folder").input("../../elsewhere/episode_001")
    _submit(page)
    assert "Not attached" in page_text.of(page)
    assert activations.find(ares_viewer.open_run(str(runs["run"])).episode("ep")) is None
    page.text_input(key="activations.attach_folder").input(str(runs["inside"]))
    _submit(page)
    assert "Model `kept-elsewhere`" in page_text.of(page)


def _submit(page) -> None:
    (button,) = [b for b in page.get("button") if "Attach" in str(b.proto.label)]
    page.button(key=button.key).click().run() if button.key else button.click().run()
