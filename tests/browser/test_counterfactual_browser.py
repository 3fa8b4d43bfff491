"""A counterfactual from the Sandbox page in a real browser: a real chat-completions server on 127.0.0.1 as the
configured model, the real Docker engine, the result opened in Compare against its parent.

The parent is the bundled slugify-wrong-fix episode (it strips accents and earns 0). From step 1 (it has just read
textkit/slug.py) the user adds a hint to the last message; the scripted endpoint answers with the solved attempt's
fix, its test run and the submission.
"""

from __future__ import annotations

import json
import re
import time

import app_sandboxes
import chat_server
import pytest
from conftest import serve_app
from playwright.sync_api import expect

from ares_viewer.runs.run import load_episode

pytestmark = pytest.mark.browser

SOLVED = "48d3a704-23f6-46b7-aed6-fa19b678c0a6"
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"
HINT = "Hint: transliterate accented letters with unicodedata instead of dropping them."
KEY = "sk-browser-test-key"


@pytest.fixture
def sandboxes_removed(docker_client):
    """Remove any sandbox of the parent made during the test, whatever happens in the browser."""
    began = time.time() - 1
    yield
    app_sandboxes.remove_app_sandboxes(docker_client, WRONG_FIX, began)


def _metric(page, label: str):
    return page.locator('[data-testid="stMetric"]', has_text=label).locator('[data-testid="stMetricValue"]')


def test_a_counterfactual_from_step_1_through_a_configured_endpoint_opens_in_compare(
        page, runs_root, tmp_path, monkeypatch, docker_client, sandboxes_removed, wait_idle):
    demo = runs_root / "demo-run"
    if not (demo / f"{WRONG_FIX}.json").is_file() or not (demo / "tasks").is_dir():
        pytest.skip("the bundled sample runs (with snapshots and task recipes) are not there")
    solved = load_episode(demo / f"{SOLVED}.json")
    scripted = [solved.step(k).response for k in (5, 6, 7)]
    cache = tmp_path / "cache"
    with chat_server.serve(scripted) as model:
        for name, value in {"ARES_VIEWER_MODEL_URL": model.base_url, "ARES_VIEWER_MODEL": "scripted-coder",
                            "ARES_VIEWER_MODEL_API_KEY_ENV": "CF_TEST_KEY", "CF_TEST_KEY": KEY}.items():
            monkeypatch.setenv(name, value)
        with serve_app(runs_root, cache, tmp_path / "review.sqlite", tmp_path) as url:
            page.goto(f"{url}/sandbox?run=demo-run&episode={WRONG_FIX}&step=1")
            # The page says which endpoint and model it will call, and where the key comes from, not the key.
            expect(page.get_by_text("Asks model scripted-coder at")).to_be_visible()
            expect(page.get_by_text(f"{model.base_url}/chat/completions").first).to_be_visible()
            expect(page.get_by_text("$CF_TEST_KEY").first).to_be_visible()
            assert KEY not in page.content()

            wait_idle(page)
            box = page.get_by_label("The last message (user) as the model will see it")
            box.fill(box.input_value() + "\n\n" + HINT)
            page.get_by_label("At most this many actions").fill("5")
            wait_idle(page)
            page.get_by_role("button", name="Ask scripted-coder and continue").click()
            expect(page.get_by_text("Counterfactual from step 1: 3 action(s), written")).to_be_visible(timeout=240_000)
            expect(_metric(page, "Reward (verified)")).to_have_text("1")
            expect(_metric(page, "Parent's reward")).to_have_text("0")
            expect(page.get_by_text("Action 1: cat <<'EOF' > textkit/slug.py")).to_be_visible()
            assert KEY not in page.content()

            # The endpoint was asked with the edited messages, and the key went in the request's header.
            first = model.requests[0]
            assert first.headers["authorization"] == f"Bearer {KEY}" and first.body["model"] == "scripted-coder"
            assert first.body["messages"][-1]["content"].endswith(HINT)
            assert len(model.requests) == 3

            # The linked episode: in a folder of its own under the cache folder, never the run folder.
            [written] = list((cache / "counterfactuals").glob("*/*.json"))
            assert not list(demo.glob("**/counterfactuals"))
            new = load_episode(written)
            assert new.step(1).response == scripted[0]  # the first response is the scripted one
            assert new.context(1)[-1].content.endswith(HINT)
            link = new.metadata["counterfactual"]
            assert (link["episode_id"], link["step"]) == (WRONG_FIX, 1)
            # Its container continued from step 1's state: the fix applied there passes the tests; rewarded.
            assert new.step(2).returncode == 0 and "passed" in (new.step(2).output or "")
            assert new.total_reward == 1.0
            saved = json.loads(written.read_text())
            assert KEY not in json.dumps(saved)

            # It opens in Compare against its parent.
            wait_idle(page)
            page.get_by_role("link", name="Compare with the parent episode").click()
            expect(page.get_by_role("heading", name="Compare")).to_be_visible()
            expect(page.get_by_text("Episode B (another run)")).to_be_visible()
            expect(page.get_by_text(f"It is a counterfactual of episode {WRONG_FIX} from step 1")).to_be_visible()
            expect(page.get_by_text("aligned rows").first).to_be_visible()
            assert f"other={new.episode_id}" in page.url and "other_in=" in page.url
            expect(page.get_by_role("combobox", name="Episode B (another run)")).to_have_value(
                re.compile(f"3 actions · {new.episode_id[:8]}$"))
            expect(page.get_by_role("combobox", name="Episode A")).to_have_value(re.compile(f"{WRONG_FIX[:8]}$"))
