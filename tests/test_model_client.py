"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1, and the endpoint configuration."""

from __future__ import annotations

import base64
import socket
import time
import urllib.parse

import chat_server
import pytest

from ares_viewer import counterfactual
from ares_viewer.counterfactual import model_client
from ares_viewer.counterfactual.model_client import ConfigError, ModelEndpointError

MESSAGES = [{"role": "user", "content": "List the files.", "extra": "recorded only"},
            {"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "a.txt"}]


def test_a_request_has_the_chat_completions_shape_and_the_answer_is_the_text():
    with chat_server.serve(["```bash\ncat a.txt\n```"]) as server:
        client = counterfactual.openai_client(server.base_url, "tiny-coder", "sk-secret", temperature=0.0,
                                              max_tokens=64)
        assert client(MESSAGES, "You are a careful agent.") == "```bash\ncat a.txt\n```"
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "tiny-coder", "temperature": 0.0, "max_tokens": 64,
        "messages": [{"role": "system", "content": "You are a careful agent."},
                     *[{"role": m["role"], "content": m["content"]} for m in MESSAGES]],  # only the API's fields
    }


def test_no_key_no_authorization_and_a_full_url_is_kept():
    with chat_server.serve(["hi"]) as server:
        client = model_client.openai_client(server.base_url + "/chat/completions/", "m")
        assert client([{"role": "user", "content": "hello"}], None) == "hi"
    [request] = server.requests
    assert request.path == "/v1/chat/completions" and "authorization" not in request.headers
    assert request.body["messages"] == [{"role": "user", "content": "hello"}]  # no system prompt, none added


def test_http_500_is_an_error_naming_the_endpoint_and_status_never_the_key():
    with chat_server.serve([]) as server:
        server.status = 500
        client = model_client.openai_client(server.base_url, "m", "sk-secret")
        with pytest.raises(ModelEndpointError) as caught:
            client(MESSAGES, None)
    message = str(caught.value)
    assert f"{server.base_url}/chat/completions answered HTTP 500" in message
    assert "scripted failure" in message and "sk-secret" not in message


def test_an_error_never_holds_the_key_or_credentials_in_the_url():
    """An endpoint may quote the key back, and a URL may carry a token in its query: the message, which ends up on
    the page and in a counterfactual's episode file, holds neither."""
    with chat_server.serve([]) as server:
        server.status, server.error_message = 401, "Incorrect API key provided: sk-echoed-secret"
        port = server.base_url.split(":")[2].split("/")[0]
        client = model_client.openai_client(f"http://127.0.0.1:{port}/v1?token=tok-secret", "m", "sk-echoed-secret")
        with pytest.raises(ModelEndpointError) as caught:
            client(MESSAGES, None)
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}/v1/chat/completions answered HTTP 401" in message
    assert "Incorrect API key provided: ***" in message
    assert "sk-echoed-secret" not in message and "tok-secret" not in message
    # A 404 that quotes the path it was asked for, query and all.
    with chat_server.serve([]) as server, pytest.raises(ModelEndpointError) as caught:
        model_client.openai_client(f"{server.base_url}/elsewhere?token=tok-secret", "m")(MESSAGES, None)
    assert "HTTP 404" in str(caught.value) and "tok-secret" not in str(caught.value)


def _port(server) -> str:
    return server.base_url.split(":")[2].split("/")[0]


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_requested_or_shown():
    """``http://user:password@host/v1``: the user name and password, percent-decoded, go in an ``Authorization:
    Basic`` header; the URL requested and every place the URL is shown carry no password."""
    password = "p@ss:w/rd-7"
    with chat_server.serve(["```bash\nls\n```"]) as server:
        server.basic_auth = ("review er", password)
        url = f"http://review%20er:p%40ss%3Aw%2Frd-7@127.0.0.1:{_port(server)}/v1"
        client = model_client.openai_client(url, "tiny-coder")
        assert client(MESSAGES, None) == "```bash\nls\n```"
    [request] = server.requests
    assert request.path == "/v1/chat/completions" and request.headers["host"] == f"127.0.0.1:{_port(server)}"
    assert request.headers["authorization"] == "Basic " + base64.b64encode(f"review er:{password}".encode()).decode()
    assert client.endpoint == f"http://review%20er:***@127.0.0.1:{_port(server)}/v1/chat/completions"
    assert password not in client.__qualname__ and "p%40ss" not in client.__qualname__


def test_a_wrong_password_is_a_clear_error_naming_the_url_without_the_password():
    with chat_server.serve(["never"]) as server:
        server.basic_auth = ("reviewer", "right-password")
        client = model_client.openai_client(f"http://reviewer:wrong-password@127.0.0.1:{_port(server)}/v1", "m")
        with pytest.raises(ModelEndpointError) as caught:
            client(MESSAGES, None)
    message = str(caught.value)
    assert message.startswith(f"http://reviewer:***@127.0.0.1:{_port(server)}/v1/chat/completions answered HTTP 401 "
                              "Unauthorized (the request sent the URL's user name 'reviewer' and its password): ")
    assert "wrong user name or password" in message
    assert "wrong-password" not in message and "right-password" not in message
    # A URL that is not http(s) is refused without quoting its password either.
    with pytest.raises(ValueError, match="ftp://reviewer:\\*\\*\\*@") as refused:
        model_client.openai_client("ftp://reviewer:wrong-password@127.0.0.1/v1", "m")
    assert "wrong-password" not in str(refused.value)


def test_an_api_key_wins_over_credentials_in_the_url():
    with chat_server.serve(["ok"]) as server:
        url = f"http://reviewer:url-password@127.0.0.1:{_port(server)}/v1"
        assert model_client.openai_client(url, "m", "sk-key")(MESSAGES, None) == "ok"
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer sk-key"


def test_a_configured_url_with_credentials_authenticates_and_never_shows_the_password(tmp_path):
    with chat_server.serve(["ok"]) as server:
        server.basic_auth = ("reviewer", "cfg-secret")
        env = {"ARES_VIEWER_MODEL_CONFIG": str(tmp_path / "absent.toml"), "ARES_VIEWER_MODEL": "m",
               "ARES_VIEWER_MODEL_URL": f"http://reviewer:cfg-secret@127.0.0.1:{_port(server)}/v1"}
        config = model_client.configured(env)
        assert config.client(env)(MESSAGES, None) == "ok"
    assert config.shown_url == f"http://reviewer:***@127.0.0.1:{_port(server)}/v1/chat/completions"
    assert config.url_user == "reviewer" and "cfg-secret" not in repr(config)
    bad = {**env, "ARES_VIEWER_MODEL_URL": "ftp://reviewer:cfg-secret@127.0.0.1/v1"}
    with pytest.raises(ConfigError, match="http:// or https://") as caught:
        model_client.configured(bad)
    assert "cfg-secret" not in str(caught.value)


def test_a_slow_endpoint_times_out_with_a_clear_error():
    with chat_server.serve(["late"]) as server:
        server.delay_s = 3
        client = model_client.openai_client(server.base_url, "m", timeout_s=0.5)
        began = time.monotonic()
        with pytest.raises(ModelEndpointError, match=r"did not answer within 0.5 s"):
            client(MESSAGES, None)
        assert time.monotonic() - began < 2.5


def test_an_unreachable_endpoint_and_a_non_chat_answer_are_errors():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ModelEndpointError, match="cannot reach"):
        model_client.openai_client(f"http://127.0.0.1:{port}/v1", "m", timeout_s=5)(MESSAGES, None)
    with chat_server.serve([]) as server, pytest.raises(ModelEndpointError, match="HTTP 404"):  # another path
            model_client.openai_client(f"{server.base_url}/elsewhere/chat/completions", "m")(MESSAGES, None)
    with pytest.raises(ValueError, match="http"):
        model_client.openai_client("file:///etc/passwd", "m")
    with pytest.raises(ValueError, match="set by the client"):
        model_client.openai_client("http://127.0.0.1:1/v1", "m", messages=[])


# The configuration: environment variables and the file in the cache folder.


def test_nothing_configured_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path))
    assert model_client.configured({}) is None
    assert model_client.configured({"ARES_VIEWER_MODEL_CONFIG": str(tmp_path / "absent.toml")}) is None


def test_environment_variables_configure_an_endpoint_with_the_key_read_from_a_named_variable(tmp_path):
    env = {"ARES_VIEWER_MODEL_CONFIG": str(tmp_path / "absent.toml"),
           "ARES_VIEWER_MODEL_URL": "http://127.0.0.1:8000/v1", "ARES_VIEWER_MODEL": "qwen",
           "ARES_VIEWER_MODEL_API_KEY_ENV": "MY_KEY", "ARES_VIEWER_MODEL_TIMEOUT_S": "30"}
    config = model_client.configured(env)
    assert config.url == "http://127.0.0.1:8000/v1/chat/completions" and config.model == "qwen"
    assert config.api_key_env == "MY_KEY" and config.timeout_s == 30 and config.source == "environment"
    assert not config.key_is_set(env) and config.key_is_set({**env, "MY_KEY": "sk-x"})
    assert "sk-x" not in repr(config)
    with chat_server.serve(["ok"]) as server:
        env.update(ARES_VIEWER_MODEL_URL=server.base_url, MY_KEY="sk-from-env")
        assert model_client.configured(env).client(env)(MESSAGES, None) == "ok"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_the_file_in_the_cache_folder_configures_it_and_the_environment_overrides_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path))
    (tmp_path / "model.toml").write_text('url = "https://models.example.test/v1"\nmodel = "from-file"\n'
                                         'timeout_s = 45\n[request]\ntemperature = 0.2\n')
    env = {}
    config = model_client.configured(env)
    assert (config.url, config.model, config.timeout_s) == ("https://models.example.test/v1/chat/completions",
                                                            "from-file", 45)
    assert config.request == {"temperature": 0.2} and config.source == str(tmp_path / "model.toml")
    config = model_client.configured({**env, "ARES_VIEWER_MODEL": "from-env"})
    assert config.model == "from-env" and config.url.startswith("https://models.example.test")
    assert config.source == f"environment and {tmp_path / 'model.toml'}"


@pytest.mark.parametrize(("text", "env", "says"), [
    ('url = "http://127.0.0.1:8000/v1"\nmodel = "m"\napi_key = "sk-1"\n', {}, "holds an API key"),
    ('url = "http://127.0.0.1:8000/v1"\n', {}, "no model name"),
    ('model = "m"\n', {}, "no endpoint URL"),
    ('url = "ftp://host/v1"\nmodel = "m"\n', {}, "http:// or https://"),
    ('url = "http://h/v1"\nmodel = "m"\ntemperature = 1\n', {}, "unknown setting"),
    ('url = "http://h/v1"\nmodel = "m"\n[request]\nmodel = "x"\n', {}, "may not set model"),
    ('url = "http://h/v1"\nmodel = "m"\n', {"ARES_VIEWER_MODEL_TIMEOUT_S": "soon"}, "ARES_VIEWER_MODEL_TIMEOUT_S"),
    ('url = "http://h/v1"\nmodel = "m"\napi_key_env = "sk-abc def"\n', {}, "names an environment variable"),
    ('url = "http://h/v1\n', {}, "cannot read the model configuration"),
])
def test_a_bad_configuration_says_what_is_wrong(tmp_path, text, env, says):
    path = tmp_path / "model.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says) as caught:
        model_client.configured({"ARES_VIEWER_MODEL_CONFIG": str(path), **env})
    assert "sk-1" not in str(caught.value)


# Hostile endpoints: redirects, trickling answers, malformed URLs.


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_port_gets_no_credentials_and_its_answer_is_never_used(status):
    """The configured endpoint answers a redirect to another origin: nothing is sent there (neither the API key
    nor the URL's Basic credentials), no answer of it is used, and the error names the status and the target
    with its password masked and no query."""
    with chat_server.serve(["the other origin's answer"]) as elsewhere, chat_server.serve([]) as endpoint:
        target = f"http://someone:target-secret@127.0.0.1:{_port(elsewhere)}/v1/chat/completions?token=tok-secret"
        endpoint.redirect = (status, target)
        for key, url in (("sk-secret", endpoint.base_url),
                         (None, f"http://reviewer:url-secret@127.0.0.1:{_port(endpoint)}/v1")):
            client = model_client.openai_client(url, "m", key)
            with pytest.raises(ModelEndpointError) as caught:
                client(MESSAGES, None)
            message = str(caught.value)
            assert f"answered HTTP {status}" in message and "redirects are not followed" in message
            assert f"'http://someone:***@127.0.0.1:{_port(elsewhere)}/v1/chat/completions'" in message
            assert all(s not in message for s in ("tok-secret", "target-secret", "url-secret", "sk-secret"))
        assert elsewhere.requests == []
        assert len(endpoint.requests) == 2


def test_a_trickling_endpoint_is_cut_at_the_deadline():
    """One byte every 0.3 s keeps each read of the socket short, but the whole answer takes a minute: the
    request ends at its 2 s deadline with the usual message."""
    with chat_server.serve(["a long answer " * 5]) as server:
        server.trickle_s = 0.3
        client = model_client.openai_client(server.base_url, "m", timeout_s=2)
        began = time.monotonic()
        with pytest.raises(ModelEndpointError, match=r"did not answer within 2 s"):
            client(MESSAGES, None)
        assert time.monotonic() - began < 3.5


def test_a_trickle_within_the_deadline_is_an_answer():
    with chat_server.serve(["ok"]) as server:
        server.trickle_s = 0.001
        assert model_client.openai_client(server.base_url, "m", timeout_s=20)(MESSAGES, None) == "ok"


# A password holding an unencoded "/", "?", "#" or "@" cuts the URL elsewhere: parts of it would read as the host,
# the port, the path or the fragment.
MALFORMED = ["http://reviewer:s3cr/et-pw@127.0.0.1:9/v1", "http://reviewer:s3cr?et-pw@127.0.0.1:9/v1",
             "http://reviewer:s3cr#et-pw@127.0.0.1:9/v1", "http://reviewer:s3cr/et?pa#ss@127.0.0.1:9/v1",
             "http://reviewer:s3cr:et/pw@127.0.0.1:9/v1", "http://reviewer:s3cr-et-pw@127.0.0.1:9/v1 /x"]


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_url_is_refused_without_quoting_it(url, tmp_path):
    with pytest.raises(ValueError, match="malformed") as caught:
        model_client.openai_client(url, "m")
    env = {"ARES_VIEWER_MODEL_CONFIG": str(tmp_path / "absent.toml"), "ARES_VIEWER_MODEL": "m",
           "ARES_VIEWER_MODEL_URL": url}
    with pytest.raises(ConfigError, match="ARES_VIEWER_MODEL_URL: the model endpoint URL is malformed") as config:
        model_client.configured(env)
    for message in (str(caught.value), str(config.value)):
        assert not [piece for piece in ("s3cr", "et-pw", "pa#ss", "127.0.0.1") if piece in message]
    # Percent-encoded, the same password is fine.
    encoded = "http://reviewer:" + urllib.parse.quote("s3cr/et?pa#ss@x", safe="") + "@127.0.0.1:9/v1"
    assert model_client.openai_client(encoded, "m").endpoint == "http://reviewer:***@127.0.0.1:9/v1/chat/completions"
