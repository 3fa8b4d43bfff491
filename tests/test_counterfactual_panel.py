"""The Sandbox page's counterfactual panel without a browser (AppTest): how to configure an endpoint, a bad
configuration, which endpoint it will call, and the editor's validation. The run itself is in
tests/browser/test_counterfactual_browser.py."""

from __future__ import annotations

import pathlib

import chat_server
import pytest

from ares_viewer_app.views.sandbox import counterfactual_panel

REPO = pathlib.Path(__file__).resolve().parent.parent
WRONG_FIX = "aefe890e-4268-4666-90b5-dd09d3259e06"  # 4 actions: steps 0-4, the last one submits


@pytest.fixture
def panel(sandbox_page, docker_client, monkeypatch, tmp_path):
    """``panel(step)``: the Sandbox page on the wrong-fix episode at a step, run; no endpoint unless the test sets
    one (the model configuration file is the test's own)."""
    for name in ("ARES_VIEWER_MODEL_URL", "ARES_VIEWER_MODEL", "ARES_VIEWER_MODEL_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARES_VIEWER_MODEL_CONFIG", str(tmp_path / "model.toml"))

    def make(step: int = 1):
        at = sandbox_page(REPO / "sample_runs", run="demo-run", episode=WRONG_FIX, step=str(step)).run(timeout=120)
        assert not at.exception
        return at

    return make


def _errors(at) -> str:
    """The error messages as the page shows them (markdown escapes dropped)."""
    return " ".join(e.value for e in at.error).replace("\\", "")


def _go(at):
    return at.button(key="counterfactual.go")


def test_without_an_endpoint_the_panel_says_how_to_configure_one(panel, tmp_path):
    at = panel()
    [info] = [i.value for i in at.info if "No model endpoint is configured" in i.value]
    assert str(tmp_path / "model.toml") in info
    shown = " ".join(c.value for c in at.code)
    assert "ARES_VIEWER_MODEL_URL=" in shown and "ARES_VIEWER_MODEL_API_KEY_ENV=" in shown and "[request]" in shown
    assert not [b for b in at.button if b.key == "counterfactual.go"]


def test_a_bad_configuration_is_an_error_that_never_shows_the_key(panel, tmp_path):
    (tmp_path / "model.toml").write_text('url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "sk-in-a-file"\n')
    at = panel()
    errors = _errors(at)
    assert "The model configuration is not usable" in errors and "holds an API key" in errors
    assert "sk-in-a-file" not in errors


def test_a_configured_endpoint_is_named_and_the_json_editor_validates(panel, tmp_path, monkeypatch):
    (tmp_path / "model.toml").write_text('url = "http://user:pw@127.0.0.1:9/v1?token=t"\nmodel = "tiny-coder"\n'
                                         'api_key_env = "CF_PANEL_KEY"\n')
    monkeypatch.setenv("CF_PANEL_KEY", "sk-panel")
    at = panel()
    said = " ".join(m.value for m in at.markdown)
    assert "Asks model `tiny-coder` at `http://user:***@127.0.0.1:9/v1/chat/completions` with the API key from " \
           "`$CF_PANEL_KEY` (it wins over the URL's user name and password, which are not sent)" in said
    assert "pw" not in said and "token" not in said and "sk-panel" not in said
    assert not _go(at).disabled and _go(at).label == "Ask tiny\\-coder and continue"
    # The last message's text is there to edit.
    assert at.text_area[0].value.startswith("<returncode>0</returncode>")

    at.radio(key="counterfactual.mode").set_value("All messages (JSON)").run()
    editor = at.text_area[0]
    assert '"role": "user"' in editor.value
    editor.set_value('[{"role": "user", "content": "hi"},').run()
    assert "not valid JSON" in _errors(at) and _go(at).disabled
    at.text_area[0].set_value('[{"role": "robot", "content": "hi"}]').run()
    assert "message 1: role must be one of" in _errors(at) and _go(at).disabled
    at.text_area[0].set_value('[{"role": "user", "content": "hi"}]').run()
    assert not at.error and not _go(at).disabled


def test_an_endpoint_that_fails_partway_shows_why_and_the_actions_done_before(panel, monkeypatch, tmp_path):
    """A real chat-completions server with one answer: the second request gets HTTP 400. The action done is kept."""
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    with chat_server.serve(["```bash\necho kept > /testbed/kept.txt\n```"]) as server:
        monkeypatch.setenv("ARES_VIEWER_MODEL_URL", server.base_url)
        monkeypatch.setenv("ARES_VIEWER_MODEL", "one-answer")
        at = panel()
        _go(at).click().run(timeout=240)
    # AppTest runs the Sandbox page without the app's navigation, so the result's links to other pages cannot
    # resolve (the browser test follows them); everything before them is drawn.
    assert all("Could not find page" in e.message for e in at.exception) and len(server.requests) == 2
    errors = _errors(at)
    assert "It stopped on an error after 1 action(s), which are kept" in errors
    assert "answered HTTP 400" in errors and "no scripted response #2" in errors
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Actions"] == "1" and metrics["Outcome"] == "errored"
    [written] = list((tmp_path / "cache" / "counterfactuals").glob("*/*.json"))
    assert (written.parent / "snapshots").is_dir()


def test_a_wrong_password_in_the_url_is_shown_masked_and_the_page_never_shows_it(panel, monkeypatch, tmp_path):
    """An endpoint behind HTTP Basic auth, its credentials in the configured URL: the page names the user and masks
    the password; a wrong password is an HTTP 401 naming the URL without it, in the page and the episode file."""
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    with chat_server.serve(["```bash\necho never\n```"]) as server:
        server.basic_auth = ("reviewer", "the-right-one")
        port = server.base_url.split(":")[2].split("/")[0]
        monkeypatch.setenv("ARES_VIEWER_MODEL_URL", f"http://reviewer:panel-wrong-pw@127.0.0.1:{port}/v1")
        monkeypatch.setenv("ARES_VIEWER_MODEL", "guarded")
        at = panel()
        said = " ".join(m.value for m in at.markdown)
        assert f"at `http://reviewer:***@127.0.0.1:{port}/v1/chat/completions` with HTTP Basic auth as user " \
               "`reviewer` (the password in the URL)" in said
        _go(at).click().run(timeout=240)
    assert server.requests[0].headers["authorization"].startswith("Basic ")
    errors = _errors(at).replace("\u2060", "")  # the word joiners that keep a URL from becoming a link
    assert f"http://reviewer:***@127.0.0.1:{port}/v1/chat/completions answered HTTP 401" in errors
    everything = " ".join(str(getattr(e, "value", "")) for kind in ("markdown", "caption", "code", "error", "text")
                          for e in at.get(kind))
    assert "panel-wrong-pw" not in everything
    [written] = list((tmp_path / "cache" / "counterfactuals").glob("*/*.json"))
    assert "panel-wrong-pw" not in written.read_text() and "answered HTTP 401" in written.read_text()


def test_a_password_with_an_unencoded_slash_question_mark_or_hash_is_never_shown(panel, monkeypatch, tmp_path):
    """``p@ss/w?rd#x`` written as it is cuts the URL elsewhere (part of it would read as the host and the path):
    the page refuses the URL without quoting any of it, offers no run, and writes no counterfactual."""
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ARES_VIEWER_MODEL_URL", "http://reviewer:p@ss/w?rd#xq-secret@127.0.0.1:9/v1")
    monkeypatch.setenv("ARES_VIEWER_MODEL", "guarded")
    at = panel()
    errors = _errors(at)
    assert "The model configuration is not usable" in errors and "malformed" in errors
    everything = " ".join(str(getattr(e, "value", "")) for kind in ("markdown", "caption", "code", "error", "text")
                          for e in at.get(kind)).replace("\\", "")
    assert not [piece for piece in ("ss/w", "rd#x", "xq-secret", "127.0.0.1:9") if piece in everything]
    assert not [b for b in at.button if b.key == "counterfactual.go"]
    assert not (tmp_path / "cache" / "counterfactuals").exists()


def test_the_last_step_has_nothing_to_ask(panel, monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_MODEL_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ARES_VIEWER_MODEL", "m")
    at = panel(step=4)
    assert any("Step 4 ended the episode" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "counterfactual.go"]


@pytest.mark.parametrize(("text", "says"), [
    ("", "not valid JSON"),
    ("{}", "non-empty JSON list"),
    ("[]", "non-empty JSON list"),
    ('["hi"]', "message 1 is a str"),
    ('[{"role": "user", "content": "a"}, {"role": "user", "content": 3}]', "message 2: content must be text"),
])
def test_parse_messages_says_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=says):
        counterfactual_panel.parse_messages(text)


def test_parse_messages_keeps_valid_messages():
    assert counterfactual_panel.parse_messages('[{"role": "system", "content": "s"}, {"role": "user", '
                                               '"content": "u", "name": "n"}]') == [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u", "name": "n"}]
