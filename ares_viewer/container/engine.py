"""The connection to the Docker engine, and the errors that say what is wrong with it and how to fix it.

Two different problems get two different errors: :class:`EngineUnreachableError` (no engine answers: start one)
and :class:`ImageUnavailableError` (the engine answers but lacks the image, or the reference is malformed). Both are
:class:`EngineError`, which ``sandbox.SandboxError`` names for sandbox callers.
"""

from __future__ import annotations

from typing import Any

from ares_viewer.container.limits import ResourceLimits

BUILD_HINT = "bash images/build-base.sh --offline"
ENGINE_HINT = (
    "start one with `dockerd &` (or `sudo systemctl start docker`), and check that DOCKER_HOST, if set, points at it"
)
# Seconds the client waits for the engine to answer a call by default (a command's own run may take longer: see
# sandbox); ``ResourceLimits.engine_timeout_s`` is the figure used.
DEFAULT_TIMEOUT_S = 60


class EngineError(Exception):
    """The engine cannot do what was asked; the message says why and what to do about it."""


class EngineUnreachableError(EngineError):
    """No Docker engine answers (no socket, refused, timed out, no SDK)."""


class ImageUnavailableError(EngineError):
    """The engine answers but does not have the image a snapshot names."""


def docker_errors() -> Any:
    """``docker.errors``, imported when first needed (importing this package needs no Docker SDK)."""
    import docker.errors

    return docker.errors


def connect(client: Any = None, *, timeout: float | None = None) -> Any:
    """A client of a reachable Docker engine (``client`` checked, or one from the environment).

    A client made here waits ``timeout`` seconds for each answer (``ResourceLimits().engine_timeout_s``,
    ``ARES_VIEWER_ENGINE_TIMEOUT_S``, when omitted).

    Raises:
        EngineUnreachableError: When no engine answers, with how to start one.
    """
    try:
        if client is None:
            import docker

            # the stubs say int; docker hands the timeout to requests, which takes seconds as a float
            client = docker.from_env(timeout=ResourceLimits().engine_timeout_s if timeout is None else timeout)  # type: ignore[arg-type]
        client.ping()
    except Exception as exc:  # no SDK, no socket, refused, timed out: the same advice applies
        raise EngineUnreachableError(
            f"the Docker engine is unreachable ({type(exc).__name__}: {exc}); {ENGINE_HINT}") from exc
    return client


def require_image(client: Any, image: str) -> Any:
    """The engine's image ``image``.

    Raises:
        ImageUnavailableError: When the engine does not have it (with how to build it).
        EngineUnreachableError: When the engine fails or goes away while looking.
    """
    errors = docker_errors()
    if not isinstance(image, str) or not image.strip():
        raise ImageUnavailableError(f"the snapshot names no usable image reference ({image!r:.80})")
    try:
        return client.images.get(image)
    except errors.ImageNotFound as exc:
        raise ImageUnavailableError(
            f"the base image {image} is not on this engine; build it with `{BUILD_HINT}`") from exc
    except errors.APIError as exc:
        if exc.is_client_error():  # the engine answered: the reference itself is unusable
            raise ImageUnavailableError(
                f"{image!r} is not a usable image reference ({exc.explanation or exc})") from exc
        raise EngineUnreachableError(f"the Docker engine failed to look up {image} ({exc}); {ENGINE_HINT}") from exc
    except (errors.NullResource, errors.InvalidArgument, errors.InvalidRepository) as exc:
        raise ImageUnavailableError(f"{image!r:.300} is not a usable image reference ({exc})") from exc
    except errors.DockerException as exc:
        raise EngineUnreachableError(f"the Docker engine failed to look up {image} ({exc}); {ENGINE_HINT}") from exc
    except Exception as exc:  # connection dropped between the ping and now
        raise EngineUnreachableError(
            f"the Docker engine is unreachable ({type(exc).__name__}: {exc}); {ENGINE_HINT}") from exc
