"""A real HTTP server on 127.0.0.1 answering OpenAI chat-completions requests with scripted responses.

``with chat_server.serve(["first answer", "second"]) as server:`` gives ``server.base_url``
(``http://127.0.0.1:PORT/v1``); ``server.requests`` holds every request received (path, headers, JSON body), in
order. Set ``server.status`` to answer that HTTP status instead (with ``server.error_message``), or
``server.delay_s`` to answer late, or ``server.trickle_s`` to send the answer (status line and headers too) one
byte at a time, that many seconds apart. Set ``server.basic_auth = (user, password)`` to require HTTP Basic auth: a
request without exactly that ``Authorization: Basic`` header is answered 401 (and recorded all the same). Set
``server.redirect = (status, location)`` to answer every request with that redirect. ``server.usage`` is the
``usage`` object every answer carries (None: answers carry none, as some endpoints do). A GET is answered as a POST
(as a hostile endpoint would, to a client that turned a redirected POST into a GET).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any


@dataclasses.dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ChatServer:
    def __init__(self, responses: list[str] | Callable[[dict[str, Any]], str]) -> None:
        self.responses = responses if callable(responses) else list(responses)
        self.requests: list[Received] = []
        self.status = 200
        self.error_message = "scripted failure"
        self.delay_s = 0.0
        self.trickle_s = 0.0
        self.redirect: tuple[int, str] | None = None
        self.basic_auth: tuple[str, str] | None = None
        self.usage: dict[str, int] | None = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        self.base_url = ""
        self._lock = threading.Lock()

    def answer(self, received: Received) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(received)
            index = len(self.requests) - 1
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.basic_auth is not None:
            expected = base64.b64encode(":".join(self.basic_auth).encode()).decode("ascii")
            if received.headers.get("authorization") != f"Basic {expected}":
                return 401, {"error": {"message": "wrong user name or password", "type": "invalid_request_error"}}
        if self.status != 200:
            return self.status, {"error": {"message": self.error_message, "type": "server_error"}}
        if callable(self.responses):  # a policy: the answer is a function of the request's body
            text = self.responses(received.body)
        elif index >= len(self.responses):
            return 400, {"error": {"message": f"no scripted response #{index + 1}"}}
        else:
            text = self.responses[index]
        answer = {"id": f"chatcmpl-{index}", "object": "chat.completion", "created": int(time.time()),
                  "model": received.body.get("model"),
                  "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}
        return 200, answer if self.usage is None else {**answer, "usage": self.usage}


def _handler(server: ChatServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            received = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            headers = {}
            if server.redirect is not None:
                server.requests.append(received)
                (status, headers["Location"]), payload = server.redirect, {}
            elif self.path.split("?")[0] != "/v1/chat/completions":
                status, payload = 404, {"error": {"message": f"no route {self.path}"}}
                server.requests.append(received)
            else:
                status, payload = server.answer(received)
            data = json.dumps(payload).encode()
            headers.update({"Content-Type": "application/json", "Content-Length": str(len(data))})
            try:
                if server.trickle_s:
                    self._trickle(status, headers, data)
                    return
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (a timeout test)
                pass

        def do_GET(self) -> None:
            self.do_POST()

        def _trickle(self, status: int, headers: dict[str, str], data: bytes) -> None:
            lines = [f"HTTP/1.1 {status} {self.responses[status][0]}", *(f"{k}: {v}" for k, v in headers.items())]
            whole = ("\r\n".join(lines) + "\r\n\r\n").encode() + data
            self.close_connection = True
            for i in range(len(whole)):
                self.wfile.write(whole[i:i + 1])
                self.wfile.flush()
                time.sleep(server.trickle_s)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def serve(responses: list[str] | Callable[[dict[str, Any]], str]) -> Iterator[ChatServer]:
    """A scripted chat-completions server on a free port of 127.0.0.1, stopped on exit; ``responses`` may be a
    function of each request's JSON body (a policy) instead of a list."""
    chat = ChatServer(responses)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(chat))
    httpd.daemon_threads = True
    chat.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, name="scripted-chat-server", daemon=True)
    thread.start()
    try:
        yield chat
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
