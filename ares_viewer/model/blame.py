"""Who an unsolved episode's failure belongs to: the agent, or the infrastructure it ran on.

A run whose only failures are model API timeouts or a container that died says nothing about the agent, yet
counted as failures they pull its success rate down. An episode that errored with an error of the
infrastructure (``INFRASTRUCTURE``: the model endpoint's errors, timeouts, rate limits and overloads, dropped,
reset or refused connections, TLS failures, the Docker engine's errors and a container that stopped under the
agent) is set beside the success rate, not in
it. Every other unsolved episode is the agent's: a wrong fix (completed, reward 0), the step limit (truncated),
format errors, its own time limit (harbor's ``AgentTimeoutError``), or an error nothing here recognises (the
rule counts only what it can name as the infrastructure's).

The rule is one regular expression over the episode's one-line error (``Episode.error``, the ``error`` column),
root cause included, so the index (DuckDB, RE2) and Python agree on every episode.
"""

from __future__ import annotations

import enum
import re

# Case-insensitive; RE2 and Python's re read it alike (no look-around, no back-references). By exception type (the
# model clients' own: openai, anthropic and litellm name their errors alike) and by message, each rule its own line.
_RULES = (
    # the model endpoint's errors by type (litellm.Timeout is the type litellm raises for a model call timing out)
    r"\b(APIError|APIConnectionError|APITimeoutError|APIStatusError|RateLimitError|InternalServerError"
    r"|ServiceUnavailableError|BadGatewayError|GatewayTimeoutError|OverloadedError|ModelEndpointError|Timeout)\b",
    # model API timeouts by message: litellm's "Connection timed out after 600.0 seconds", openai's "Request timed
    # out.", urllib3's "Read timed out."
    r"\b(connection|request|read) timed out\b",
    # rate limits and spent quotas: HTTP 429, "Rate limit reached", openai's insufficient_quota
    r"rate.?limit|too many requests|error code: 429\b|\b429 too many|exceeded your current quota",
    # provider errors: HTTP 5xx as the clients word them ("Error code: 503", "502 Bad Gateway"), Anthropic's 529
    # overloaded_error, "Service Unavailable"
    r"error code: 5[0-9][0-9]\b|\b5[0-9][0-9] (internal server error|bad gateway|service unavailable|gateway time.?out)"
    r"|\boverloaded|service.?unavailable|internal server error|bad gateway",
    # dropped, reset or refused connections; TLS failures
    r"\b(SSLError|SSLEOFError|SSLZeroReturnError|ConnectionError|ConnectionResetError|ConnectionRefusedError"
    r"|ConnectionAbortedError|RemoteDisconnected|ReadTimeout|ConnectTimeout|ReadTimeoutError|ConnectTimeoutError"
    r"|ProtocolError)\b|connection reset|connection refused|connection aborted|connection error\b"
    r"|server disconnected|reset before headers",
    # the Docker engine's errors and a container that stopped under the agent
    r"\b(DockerException|NotFound|EngineError|EngineUnreachableError)\b|container is not running|no such container"
    r"|OCI runtime",
)
INFRASTRUCTURE = "|".join(_RULES)
_INFRASTRUCTURE = re.compile(INFRASTRUCTURE, re.IGNORECASE)


class Blame(enum.StrEnum):
    """Whose failure an unsolved episode is."""

    AGENT = "agent"
    INFRASTRUCTURE = "infrastructure"


def is_infrastructure(error: str | None) -> bool:
    """Whether an episode's one-line error is one of the infrastructure's (``INFRASTRUCTURE``)."""
    return bool(error) and _INFRASTRUCTURE.search(error or "") is not None


def sql(error_column: str = "error") -> str:
    """The same rule as a DuckDB boolean expression over a column of one-line errors (false when null)."""
    pattern = INFRASTRUCTURE.replace("'", "''")
    return f"coalesce(regexp_matches({error_column}, '{pattern}', 'i'), false)"
