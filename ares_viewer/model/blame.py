"""Who an unsolved episode's failure belongs to: the agent, or the infrastructure it ran on.

A run whose only failures are model API timeouts or a container that died says nothing about the agent, yet
counted as failures they pull its success rate down. An episode that errored with an error of the
infrastructure (``INFRASTRUCTURE``: the model endpoint's errors, dropped or refused connections, TLS failures,
the Docker engine's errors and a container that stopped under the agent) is set beside the success rate, not in
it. Every other unsolved episode is the agent's: a wrong fix (completed, reward 0), the step limit (truncated),
format errors, its own time limit (harbor's ``AgentTimeoutError``), or an error nothing here recognises (the
rule counts only what it can name as the infrastructure's).

The rule is one regular expression over the episode's one-line error (``Episode.error``, the ``error`` column),
root cause included, so the index (DuckDB, RE2) and Python agree on every episode.
"""

from __future__ import annotations

import enum
import re

# Case-insensitive; RE2 and Python's re read it alike (no look-around, no back-references).
INFRASTRUCTURE = (
    r"\b(APIError|APIConnectionError|APITimeoutError|APIStatusError|RateLimitError|InternalServerError"
    r"|ServiceUnavailableError|BadGatewayError|GatewayTimeoutError|OverloadedError|ModelEndpointError"
    r"|SSLError|SSLEOFError|SSLZeroReturnError|ConnectionError|ConnectionResetError|ConnectionRefusedError"
    r"|ConnectionAbortedError|RemoteDisconnected|ReadTimeout|ConnectTimeout|ReadTimeoutError|ConnectTimeoutError"
    r"|ProtocolError|DockerException|NotFound|EngineError|EngineUnreachableError)\b"
    r"|container is not running|no such container|OCI runtime|Read timed out|connection reset|connection refused"
)
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
