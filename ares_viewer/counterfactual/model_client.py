"""A model behind an OpenAI-compatible chat-completions endpoint, and the endpoint the user configured.

:func:`openai_client` turns an endpoint (vLLM, SGLang, llama.cpp's server, Ollama, a hosted API) into a
counterfactual client: ``client(messages, system_prompt) -> response text``. It POSTs
``{base_url}/chat/completions`` with the standard library's HTTP client, straight to the endpoint (no proxy), and
raises :class:`ModelEndpointError` naming the endpoint and what went wrong (never the key). The whole request
(connecting, sending, the answer's headers and body) has one wall-clock deadline, ``timeout_s``: at it the
connection is cut, so an endpoint trickling its answer a byte at a time cannot hold the client. A redirect is
never followed (it would carry the credentials, or the conversation, to wherever it points): it is an error
naming the status and the target (its password masked).

An endpoint behind HTTP Basic auth takes its credentials in the URL (``http://user:password@host:8000/v1``, both
percent-encoded as in any URL): they are sent in an ``Authorization: Basic`` header and removed from the URL
requested, and wherever the URL is shown (:func:`shown_url`: errors, the Sandbox page, a counterfactual's episode
file) the password is ``***``. When an API key is given too, the key's ``Authorization: Bearer`` header wins and
the URL's credentials are not sent (one request carries one ``Authorization`` header). A URL that cannot be read
as one endpoint (a password holding an unencoded ``/``, ``?``, ``#`` or ``@`` makes part of it look like a host or
a path) is refused with a message that does not quote it (:func:`malformed`).

:func:`configured` reads the endpoint the user set up, so the app (and a notebook) can offer it without asking:
environment variables first, then a TOML file (``ARES_VIEWER_MODEL_CONFIG``, else ``model.toml`` in the cache
folder). The API key itself is never in the configuration: it names the environment variable that holds the key,
read only when a request is made::

    # <cache folder>/model.toml
    url = "http://127.0.0.1:8000/v1"
    model = "Qwen/Qwen2.5-Coder-7B-Instruct"
    api_key_env = "MY_ENDPOINT_KEY"        # optional: the variable holding the key
    timeout_s = 120                        # optional: one request's time limit
    [request]                              # optional: more fields of every request
    temperature = 0.7
    max_tokens = 2048
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import http.client
import json
import os
import pathlib
import socket
import threading
import time
import tomllib
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ares_viewer.base import settings
from ares_viewer.counterfactual import completion
from ares_viewer.runs import index_cache

URL_ENV = settings.MODEL_URL.name
MODEL_ENV = settings.MODEL.name
API_KEY_ENV_ENV = settings.MODEL_API_KEY_ENV.name
TIMEOUT_ENV = settings.MODEL_TIMEOUT_S.name
CONFIG_ENV = settings.MODEL_CONFIG.name
CONFIG_FILENAME = "model.toml"
DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 3600.0
# An answer larger than this is refused: a chat completion is text, a few hundred kB at the very most.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# What an error message quotes of the endpoint's answer.
_QUOTED = 500
# Fields the client sets itself; a configuration may not override them.
_OWN_FIELDS = frozenset({"model", "messages", "stream"})
_MESSAGE_FIELDS = ("role", "content", "name", "tool_call_id")


class ModelEndpointError(RuntimeError):
    """The endpoint did not answer with a response: unreachable, too slow, an HTTP error or an unreadable body."""


class ConfigError(ValueError):
    """The model configuration is incomplete or invalid; the message names the variable or file and the fix."""


MASK = "***"


def _host_port(parts: urllib.parse.SplitResult) -> str:
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port: int | str | None
    try:
        port = parts.port
    except ValueError:  # not a number: shown as written (no secret lives there)
        port = parts.netloc.rpartition("@")[2].rpartition(":")[2] or None
    return f"{host}:{port}" if port else host


def malformed(url: str) -> str | None:
    """Why ``url`` cannot be read as one endpoint's URL, or None when it can; the reason never quotes the URL (a
    malformed URL's password would show in pieces where a host, port or path is expected)."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return "its host or port cannot be read (a user name or password must have ':', '/', '?', '#' and '@' "\
               "percent-encoded as %3A, %2F, %3F, %23 and %40)"
    if "@" in parts.path or "@" in parts.query or "@" in parts.fragment:
        return "an '@' follows the host: a user name or password holding '/', '?', '#' or '@' must have them " \
               "percent-encoded (%2F, %3F, %23, %40)"
    if parts.netloc and not parts.hostname:
        return "it names no host"
    if any(not 32 < ord(ch) < 127 for ch in urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname or ""))):
        return "it holds a space, a control character or a character beyond ASCII (percent-encode it)"
    del port
    return None


def _refused(url: str) -> str | None:
    """The whole message refusing a URL that is malformed or not http(s), or None (the URL is usable)."""
    why = malformed(url)
    if why is not None:
        return f"the model endpoint URL is malformed: {why}; it is not shown, as it may hold a password"
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        return f"the model endpoint must be an http:// or https:// URL, not {shown_url(url.strip())!r}"
    return None


def shown_url(url: str) -> str:
    """A URL as a page, a log line, an error message or an episode file may show it: the password ``***``
    (``http://user:***@host/v1``), without a query string or fragment (they may hold secrets)."""
    parts = urllib.parse.urlsplit(url)
    netloc = _host_port(parts)
    if parts.username is not None:
        netloc = f"{parts.username}{':' + MASK if parts.password is not None else ''}@{netloc}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def url_credentials(url: str) -> tuple[str, str] | None:
    """The user name and password a URL carries (percent-decoded), or None when it carries none."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return None
    return urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")


def without_credentials(url: str) -> str:
    """The URL without its user name and password (what is requested)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def chat_completions_url(base_url: str) -> str:
    """The chat-completions URL of an endpoint's base URL (``.../v1`` → ``.../v1/chat/completions``); a URL that
    already ends in ``/chat/completions`` is kept."""
    parts = urllib.parse.urlsplit(base_url.strip())
    path = parts.path.rstrip("/")
    path = path if path.endswith("/chat/completions") else f"{path}/chat/completions"
    return urllib.parse.urlunsplit(parts._replace(path=path))


def _payload_messages(messages: list[dict[str, Any]], system_prompt: str | None) -> list[dict[str, Any]]:
    """The messages as the chat-completions API takes them: the system prompt first (unless the messages hold one)
    and only the fields the API knows (a recorded message may carry more)."""
    out = [{k: m[k] for k in _MESSAGE_FIELDS if m.get(k) is not None} for m in messages]
    for message in out:
        message.setdefault("content", "")
    if system_prompt and not (out and out[0].get("role") == "system"):
        out.insert(0, {"role": "system", "content": system_prompt})
    return out


def _quote(body: bytes) -> str:
    text = body[:_QUOTED].decode("utf-8", errors="replace").strip()
    return text + ("…" if len(body) > _QUOTED else "")


def _response_text(answer: Any, url: str) -> completion.Completion:
    try:
        message = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelEndpointError(f"{url} answered without choices[0].message: {str(answer)[:_QUOTED]}") from None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise ModelEndpointError(f"{url} answered a {type(content).__name__} as the message's content")
    return completion.Completion(content, completion.usage(answer))


class _UnreachableError(OSError):
    """The connection could not be made (its cause says why)."""


def _shown_target(url: str, location: str | None) -> str:
    if not location:
        return "nowhere (no Location header)"
    try:
        return repr(shown_url(urllib.parse.urljoin(url, location.strip())))
    except ValueError:
        return "an unreadable location"


def _post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float,
          limit: int) -> tuple[int, str, str | None, bytes]:
    """POST ``body`` to ``url`` (no credentials in it) and read the answer: status, reason, ``Location`` header and
    body (at most ``limit + 1`` bytes; an error's body at most what a message quotes). No redirect is followed.

    The whole exchange has one deadline, ``timeout_s`` from now: a timer shuts the socket down at it, so no read,
    however slowly an endpoint trickles, outlives it.

    Raises:
        TimeoutError: the deadline passed.
        _UnreachableError: the connection could not be made.
        OSError, http.client.HTTPException: the connection failed during the exchange.
    """
    parts = urllib.parse.urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    if not parts.hostname:  # refused before any request (``_refused``): never a connection to no host
        raise _UnreachableError("the URL names no host")
    connection = kind(parts.hostname, parts.port, timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout_s, cut)
    timer.daemon = True
    timer.start()
    try:
        try:
            connection.connect()
        except TimeoutError:
            raise
        except OSError as exc:
            if expired.is_set():
                raise TimeoutError from exc
            raise _UnreachableError from exc
        if time.monotonic() >= deadline:
            raise TimeoutError
        path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        try:
            connection.request("POST", path, body=body, headers=dict(headers))
            response = connection.getresponse()
            most = limit + 1 if 200 <= response.status < 300 else _QUOTED + 1
            chunks, size = [], 0
            while size < most and not expired.is_set():
                chunk = response.read1(min(most - size, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise TimeoutError from exc
            raise
        if expired.is_set():
            raise TimeoutError
        return response.status, response.reason, response.getheader("Location"), b"".join(chunks)
    finally:
        timer.cancel()
        connection.close()


def openai_client(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    **request_fields: Any,
) -> Callable[[list[dict[str, Any]], str | None], str]:
    """A client of an OpenAI-compatible chat-completions endpoint: ``client(messages, system_prompt) -> text``.

    Args:
        base_url: the endpoint's base URL (``http://127.0.0.1:8000/v1``) or its full chat-completions URL; a user
            name and password in it (``http://user:password@host/v1``, percent-encoded) are sent as HTTP Basic auth
            (unless ``api_key`` is given) and never requested, shown or written.
        model: the ``model`` field of every request.
        api_key: sent as ``Authorization: Bearer ...`` when given; it wins over credentials in the URL.
        timeout_s: one request's time limit, on the wall clock (connecting, sending and reading the whole answer).
        max_response_bytes: a larger answer is refused.
        request_fields: more fields of every request (``temperature=0.0``, ``max_tokens=1024``, ...).

    The client raises :class:`ModelEndpointError` when the endpoint cannot be reached, does not answer in time,
    answers an HTTP error (its status and the start of its body are quoted), or answers something that is not a
    chat completion; a refused request (HTTP 401 or 403) says which credentials were sent. The message names the
    endpoint as :func:`shown_url` shows it and never holds the key or the password (a body that quotes them, or the
    URL's query, back has them replaced by ``***``), so it can be shown and written into an episode file. The
    client's ``endpoint`` and ``model`` attributes say what it calls (``endpoint`` as :func:`shown_url` shows it).
    Its answer is a ``completion.Completion``: the text, with the token usage the endpoint reported (or None).
    """
    refusal = _refused(base_url)
    if refusal is not None:
        raise ValueError(refusal)
    url = chat_completions_url(base_url)
    shown = shown_url(url)  # what messages name: never the password a URL may carry
    clash = _OWN_FIELDS & set(request_fields)
    if clash:
        raise ValueError(f"request fields {sorted(clash)} are set by the client itself")
    credentials = url_credentials(url)
    target = without_credentials(url)  # urllib would take user:password@host for the host
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    basic = None
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
        sent = "the API key"
    elif credentials is not None:
        basic = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {basic}"
        sent = f"the URL's user name {credentials[0]!r} and its password"
    else:
        sent = "no credentials"

    # What an endpoint may quote back in its error body (the key, the URL's password or query), never passed on.
    parts = urllib.parse.urlsplit(url)
    secrets = sorted({secret for secret in (api_key, parts.password, credentials and credentials[1], basic,
                                            parts.query) if secret}, key=len, reverse=True)

    def call(messages: list[dict[str, Any]], system_prompt: str | None) -> str:
        try:
            return ask(messages, system_prompt)
        except ModelEndpointError as exc:
            message = str(exc)
            if any(secret in message for secret in secrets):
                for secret in secrets:
                    message = message.replace(secret, "***")
                raise ModelEndpointError(message) from None
            raise

    def ask(messages: list[dict[str, Any]], system_prompt: str | None) -> str:
        body = {"model": model, "messages": _payload_messages(messages, system_prompt), **request_fields}
        try:
            status, reason, location, raw = _post(target, json.dumps(body).encode("utf-8"), headers, timeout_s,
                                                  max_response_bytes)
        except TimeoutError as exc:
            raise ModelEndpointError(f"{shown} did not answer within {timeout_s:g} s") from exc
        except _UnreachableError as exc:
            raise ModelEndpointError(f"cannot reach {shown}: {exc.__cause__}") from exc
        except (OSError, http.client.HTTPException) as exc:  # the connection dropped mid-answer
            raise ModelEndpointError(f"{shown} failed: {exc or type(exc).__name__}") from exc
        if 300 <= status < 400:
            raise ModelEndpointError(f"{shown} answered HTTP {status} {reason}, a redirect to "
                                     f"{_shown_target(url, location)}: redirects are not followed (the request's "
                                     "credentials and messages would go with it); configure the URL it points to")
        if status >= 400 or status < 200:
            refused = f" (the request sent {sent})" if status in (401, 403) else ""
            quoted = _quote(raw)
            raise ModelEndpointError(f"{shown} answered HTTP {status} {reason}{refused}"
                                     + (f": {quoted}" if quoted else ""))
        if len(raw) > max_response_bytes:
            raise ModelEndpointError(f"{shown} answered more than {max_response_bytes:,} bytes")
        try:
            answer_json = json.loads(raw)
        except ValueError:
            raise ModelEndpointError(f"{shown} answered something that is not JSON: {_quote(raw)}") from None
        return _response_text(answer_json, shown)

    call.__qualname__ = f"openai_client({model!r} at {shown})"
    vars(call).update(endpoint=shown, model=model)  # the client says where it sends and which model it asks
    return call


@dataclasses.dataclass(frozen=True)
class EndpointConfig:
    """The model endpoint the user configured (no key: only the name of the variable that holds it).

    Attributes:
        url: the chat-completions URL requests go to.
        model: the ``model`` field of every request.
        api_key_env: the environment variable holding the API key, or None (no key sent).
        timeout_s: one request's time limit.
        request: more fields of every request.
        source: where the configuration came from (the environment, a file, or both).
    """

    url: str = dataclasses.field(repr=False)  # may hold a password: the repr shows shown_url
    model: str
    api_key_env: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    request: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = "environment"

    @property
    def shown_url(self) -> str:
        """The URL as a page may show it (:func:`shown_url`)."""
        return shown_url(self.url)

    @property
    def url_user(self) -> str | None:
        """The user name of the URL's HTTP Basic credentials, or None when it carries none."""
        credentials = url_credentials(self.url)
        return None if credentials is None else credentials[0]

    def __repr__(self) -> str:
        return (f"EndpointConfig(shown_url={self.shown_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, "
                f"timeout_s={self.timeout_s!r}, request={dict(self.request)!r}, source={self.source!r})")

    def key_is_set(self, environ: Mapping[str, str] | None = None) -> bool:
        """Whether the key's variable is set (always True when no key is configured)."""
        environ = os.environ if environ is None else environ
        return self.api_key_env is None or bool(environ.get(self.api_key_env))

    def client(self, environ: Mapping[str, str] | None = None) -> Callable[[list[dict[str, Any]], str | None], str]:
        """The :func:`openai_client` of this endpoint, with the key read from its variable now."""
        environ = os.environ if environ is None else environ
        key = environ.get(self.api_key_env) if self.api_key_env else None
        return openai_client(self.url, self.model, key or None, timeout_s=self.timeout_s, **dict(self.request))


def config_path(environ: Mapping[str, str] | None = None) -> pathlib.Path:
    """The configuration file: ``ARES_VIEWER_MODEL_CONFIG``, else ``model.toml`` in the cache folder."""
    environ = os.environ if environ is None else environ
    named = settings.MODEL_CONFIG.get(environ)
    return pathlib.Path(named).expanduser() if named else index_cache.cache_dir() / CONFIG_FILENAME


def _read_file(path: pathlib.Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the model configuration: {exc}") from None
    if "api_key" in data:
        raise ConfigError(f"{path}: holds an API key; put the key in an environment variable and name that "
                          "variable in api_key_env instead")
    unknown = set(data) - {"url", "model", "api_key_env", "timeout_s", "request"}
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))} (known: url, model, "
                          "api_key_env, timeout_s, [request])")
    return data


def configured(environ: Mapping[str, str] | None = None) -> EndpointConfig | None:
    """The endpoint the user configured, or None when there is none.

    Environment variables (``ARES_VIEWER_MODEL_URL``, ``ARES_VIEWER_MODEL``, ``ARES_VIEWER_MODEL_API_KEY_ENV``,
    ``ARES_VIEWER_MODEL_TIMEOUT_S``) override the file's settings one by one (see the module's docstring).

    Raises:
        ConfigError: a setting is missing or invalid (a URL without a model, a key written in the file, ...).
    """
    environ = os.environ if environ is None else environ
    path = config_path(environ)
    data = _read_file(path)
    from_env = {name: value for name, setting in (("url", settings.MODEL_URL), ("model", settings.MODEL),
                                                  ("api_key_env", settings.MODEL_API_KEY_ENV),
                                                  ("timeout_s", settings.MODEL_TIMEOUT_S))
                if (value := setting.get(environ)) is not None}
    if not data and not from_env:
        return None
    where = {name: (var if name in from_env else str(path)) for name, var in (
        ("url", URL_ENV), ("model", MODEL_ENV), ("api_key_env", API_KEY_ENV_ENV), ("timeout_s", TIMEOUT_ENV))}
    values = {**data, **from_env}
    url, model = values.get("url"), values.get("model")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"no endpoint URL: set {URL_ENV} (e.g. http://127.0.0.1:8000/v1) or url in {path}")
    refusal = _refused(url)
    if refusal is not None:
        raise ConfigError(f"{where['url']}: {refusal}")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"no model name: set {MODEL_ENV} or model in {path} (the endpoint's model id)")
    key_env = values.get("api_key_env") or None
    if key_env is not None and (not isinstance(key_env, str) or not key_env.replace("_", "").isalnum()):
        raise ConfigError(f"{where['api_key_env']}: api_key_env names an environment variable (like "
                          f"OPENAI_API_KEY), not {key_env!r}")
    try:
        timeout = float(values.get("timeout_s", DEFAULT_TIMEOUT_S))
    except (TypeError, ValueError):
        timeout = float("nan")
    if not 0 < timeout <= MAX_TIMEOUT_S:
        raise ConfigError(f"{where['timeout_s']}: timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
    request = data.get("request", {})
    if not isinstance(request, dict):
        raise ConfigError(f"{path}: [request] must be a table of request fields")
    if _OWN_FIELDS & set(request):
        raise ConfigError(f"{path}: [request] may not set {', '.join(sorted(_OWN_FIELDS & set(request)))}")
    source = " and ".join(s for s in ("environment" if from_env else "", str(path) if data else "") if s)
    return EndpointConfig(url=chat_completions_url(url), model=model.strip(), api_key_env=key_env,
                          timeout_s=timeout, request=dict(request), source=source)
