"""The Sandbox page in AppTest, on the bundled sample run and the real Docker engine: which step a link restores,
and the container panel once restored."""

from __future__ import annotations

import pathlib

import page_text
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
EXPLORER = "be6ff104-7fc4-4007-8a0c-fbcbb5c2bb80"  # steps 0 to 12, a snapshot for each


@pytest.fixture
def page(sandbox_page, docker_client):
    """``page(**query)``: the Sandbox page on the explorer episode of the bundled run, run."""
    if not (REPO / "sample_runs" / "demo-run" / f"{EXPLORER}.json").is_file():
        pytest.skip("the bundled sample run is not there")

    def make(**query: str):
        at = sandbox_page(REPO / "sample_runs", run="demo-run", episode=EXPLORER, **query).run(timeout=120)
        assert not at.exception
        return at

    return make


@pytest.mark.parametrize(("step", "said"), [
    ("99", "This episode has no step 99: its steps are 0 to 12."),
    ("abc", "“abc” is not a step number; this episode has steps 0 to 12."),
])
def test_a_step_the_episode_lacks_is_a_warning_naming_the_step_restored(page, step, said):
    at = page(step=step)
    assert [w.value for w in at.warning] == [f"{said} Showing step 0 instead (`step` in the link)."]
    assert at.selectbox(key="sandbox.step_pick").value == 0 and at.query_params["step"] == "0"


def test_the_container_panel_shows_its_facts_whole(page):
    at = page(step="12")
    assert not at.warning
    at.button(key="sandbox.restore").click().run(timeout=180)
    box = at.session_state["sandbox.box"]
    try:
        assert not at.exception
        # Text, not metrics: a metric cuts "ares-viewer/sample-base:1" to "ares-viewer/sample…".
        [panel] = [m.value for m in at.markdown if m.value.startswith("**Container**")]
        assert f"**Container** `{box.short_id}`" in panel and "**Image** `ares-viewer/sample-base:1`" in panel
        assert "**State** running" in panel and "**Filesystem** step 12" in panel
        assert not at.get("metric") or "Container" not in [m.label for m in at.get("metric")]
        assert "Network off" in page_text.of(at)
    finally:
        box.remove()
