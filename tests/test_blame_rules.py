"""Whose failure an error is (``model.blame``), one test per rule, on error texts the model clients and the
infrastructure really print (openai, anthropic and litellm exception messages as reported in their users' issue
threads, urllib3's and Docker's), read alike by Python and by the index's DuckDB."""

from __future__ import annotations

import duckdb
import pytest

from ares_viewer.model import blame

# rule -> the one-line errors (``Episode.error``) it names as the infrastructure's
INFRASTRUCTURE = {
    "model API timeout": [
        # mini-swe-agent records the exception's type and message: ``Timeout: litellm.Timeout: ...``
        "Timeout: litellm.Timeout: Connection timed out after 600.0 seconds.",
        "litellm.exceptions.Timeout: litellm.Timeout: Connection timed out after None seconds.",
        "APITimeoutError: Request timed out.",
        "litellm.Timeout: APITimeoutError - Request timed out. Error_str: Request timed out. - timeout value=60.0, "
        "time taken=60.01 seconds",
        "ReadTimeoutError: HTTPSConnectionPool(host='api.openai.com', port=443): Read timed out. (read timeout=600)",
    ],
    "rate limit": [
        "RateLimitError: litellm.RateLimitError: RateLimitError: OpenAIException - Error code: 429 - {'error': "
        "{'message': 'You exceeded your current quota, please check your plan and billing details.', "
        "'type': 'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}",
        "Error: OpenAI API error (429): {\"code\":\"rate_limit_exceeded\",\"type\":\"rate_limit_error\","
        "\"message\":\"Rate limit exceeded. Please retry after a brief wait.\"}",
        "HTTPError: 429 Too Many Requests",
    ],
    "connection reset": [
        "ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))",
        "RuntimeError: provider connection reset",
        "ReadError: [Errno 54] Connection reset by peer",
        "APIConnectionError: Connection error.",
        "litellm.APIError: APIError: OpenAIException - Connection error.",
        "RemoteProtocolError: Server disconnected without sending a response.",
    ],
    "provider error (5xx, overloaded)": [
        "InternalServerError: Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error', "
        "'message': 'Overloaded'}}",
        "API Error (503 upstream connect error or disconnect/reset before headers. reset reason: remote connection "
        "failure, transport failure reason: delayed connect error: Connection refused)",
        "litellm.ServiceUnavailableError: ServiceUnavailableError: OpenAIException - 503 Service Unavailable",
        "openai.InternalServerError: Error code: 504 - {'error': 'gateway'}",
        "HTTPError: 502 Bad Gateway",
    ],
    "container": [
        "RuntimeError: Code agent task failed (root cause: APIError: 409 Client Error: Conflict (container is not "
        "running))",
        "NotFound: 404 Client Error: Not Found (\"No such container: 3f2a\")",
    ],
}
# the agent's own failures: these stay the agent's
AGENT = [
    "AgentTimeoutError: Agent execution timed out after 600 seconds",
    "LimitsExceeded: ",
    "FormatError: Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
    "ContextWindowExceededError: litellm.ContextWindowExceededError: the prompt is too long",
    "SyntaxError: invalid syntax",
    "TimeoutExpired: Command 'sleep 9' timed out after 2 seconds",
    "ValueError: no patch",
]


def _sql(error: str) -> bool:
    return bool(duckdb.execute(f"SELECT {blame.sql('e')} FROM (SELECT ?::VARCHAR AS e)", [error]).fetchall()[0][0])


@pytest.mark.parametrize("rule", sorted(INFRASTRUCTURE))
def test_each_rule_names_its_real_errors_as_the_infrastructures(rule):
    for error in INFRASTRUCTURE[rule]:
        assert blame.is_infrastructure(error), error
        assert _sql(error), f"DuckDB reads the rule otherwise than Python: {error}"


@pytest.mark.parametrize("error", AGENT)
def test_the_agents_own_failures_stay_the_agents(error):
    assert not blame.is_infrastructure(error)
    assert not _sql(error)
