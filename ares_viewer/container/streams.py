"""Reading what comes out of a container as a stream: bounded memory, time linear in bytes, a wall-clock limit.

docker-py's ``exec_run(demux=True)`` joins the output frame by frame (quadratic in its size) and holds all of
it in memory. Everything here reads the engine's frames one at a time instead: into a temporary file on disk
(:func:`exec_to_file`, for captures and listings), or into a head and a tail of bounded size with the rest
only counted (:class:`HeadTail`, for command output). Every read has a deadline; past it the stream is
closed and :class:`StreamTimeoutError` raised.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import tempfile
import time
from collections.abc import Generator, Sequence
from typing import IO, Any

from ares_viewer.container.limits import ResourceLimits

# Spooled output stays in memory up to this many bytes, then moves to a temporary file (removed on close).
SPOOL_MEMORY_BYTES = 4 * 1024 * 1024


_TIME_HINT = "raise ResourceLimits.capture_timeout_s or ARES_VIEWER_CAPTURE_TIMEOUT_S"


class StreamError(Exception):
    """The engine's stream went past a limit (bytes or time) or could not be read."""


class StreamTimeoutError(StreamError):
    """The stream did not end within its wall-clock limit."""


class HeadTail:
    """The first and last bytes of a stream, up to ``limit`` in all; the bytes between are only counted."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes = 0
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self._tail_limit:
            self._tail.clear()
            data = bytes(data[-self._tail_limit :])
            self._tail_bytes = 0
        self._tail.append(data)
        self._tail_bytes += len(data)
        while self._tail_bytes - len(self._tail[0]) >= self._tail_limit:
            self._tail_bytes -= len(self._tail.popleft())

    @property
    def dropped(self) -> int:
        """Bytes counted but not kept (between the head and the tail)."""
        return self.total - len(self._head) - min(self._tail_bytes, self._tail_limit)

    def parts(self) -> tuple[bytes, bytes]:
        """The head and the tail kept."""
        tail = b"".join(self._tail)
        return bytes(self._head), tail[-self._tail_limit :] if self._tail_limit else b""


def exec_frames(
    api: Any, container_id: str, argv: Sequence[str], *, deadline: float, workdir: str | None = None,
    environment: dict[str, str] | None = None, idle_timeout_s: float | None = None,
) -> tuple[str, Generator[tuple[bytes | None, bytes | None], None, None]]:
    """Start ``argv`` in a container and return its exec id and its ``(stdout, stderr)`` frames as they come.

    ``deadline`` is a ``time.monotonic()`` instant: reading past it closes the stream and raises
    :class:`StreamTimeoutError`. Socket reads wait at most ``idle_timeout_s`` (default: until the deadline) for
    the next frame.
    """
    created = api.exec_create(container_id, list(argv), workdir=workdir, environment=environment or {})
    patient = copy.copy(api)  # a shallow copy with a longer socket timeout for this one call; shares the pool
    patient.timeout = max(1.0, idle_timeout_s if idle_timeout_s is not None else deadline - time.monotonic())
    stream = patient.exec_start(created["Id"], stream=True, demux=True)

    def frames() -> Generator[tuple[bytes | None, bytes | None], None, None]:
        try:
            for frame in stream:
                yield frame
                if time.monotonic() > deadline:
                    raise StreamTimeoutError("the stream did not end in time")
        finally:
            with contextlib.suppress(Exception):
                stream.close()

    return created["Id"], frames()


def exec_to_file(
    container: Any, argv: Sequence[str], *, timeout_s: float | None = None, max_bytes: int | None = None,
) -> tuple[int, IO[bytes], bytes]:
    """Run ``argv`` in ``container``; its stdout spooled to a temporary file, read back from the start.

    Returns:
        ``(exit code, stdout file positioned at 0, the last 4 KiB of stderr)``. The caller closes the file.

    Raises:
        StreamTimeoutError: Past ``timeout_s`` (default ``ResourceLimits().capture_timeout_s``).
        StreamError: When stdout passes ``max_bytes`` (default ``ResourceLimits().capture_max_bytes``), or the
            engine reports no exit code.
    """
    limits = ResourceLimits()
    timeout_s = limits.capture_timeout_s if timeout_s is None else timeout_s
    max_bytes = limits.capture_max_bytes if max_bytes is None else max_bytes
    api = container.client.api
    deadline = time.monotonic() + timeout_s
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 (handed to the caller)
    errors = HeadTail(4096)
    try:
        exec_id, frames = exec_frames(api, container.id, argv, deadline=deadline)
        written = 0
        for stdout, stderr in frames:
            if stdout:
                written += len(stdout)
                if written > max_bytes:
                    frames.close()
                    raise StreamError(f"{argv[0]} in {container.short_id} sent over {max_bytes} bytes")
                out.write(stdout)
            if stderr:
                errors.write(stderr)
        code = api.exec_inspect(exec_id).get("ExitCode")
        if code is None:
            raise StreamError(f"the engine reported no exit code for {argv[0]} in {container.short_id}")
    except StreamTimeoutError as exc:
        out.close()
        raise StreamTimeoutError(f"{argv[0]} in {container.short_id} did not finish within {timeout_s:g} s "
                                 f"({_TIME_HINT})") from exc
    except BaseException:
        out.close()
        raise
    out.seek(0)
    return int(code), out, b"".join(errors.parts())


def archive_to_file(container: Any, path: str, *, timeout_s: float | None = None,
                    max_bytes: int | None = None) -> IO[bytes]:
    """The engine's tar archive of ``path`` (``get_archive``), streamed to a temporary file positioned at 0.

    Raises:
        StreamTimeoutError, StreamError: Past the capture limits (``ResourceLimits``), as :func:`exec_to_file`.
    """
    limits = ResourceLimits()
    timeout_s = limits.capture_timeout_s if timeout_s is None else timeout_s
    max_bytes = limits.capture_max_bytes if max_bytes is None else max_bytes
    deadline = time.monotonic() + timeout_s
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 (handed to the caller)
    api = container.client.api
    try:
        # docker-py's get_archive leaves its response open when its reader stops early, holding one of the
        # pool's connections until the client's timeout: the request is made here so it can be closed.
        response = api._get(api._url("/containers/{0}/archive", container.id), params={"path": path}, stream=True,
                            headers={"Accept-Encoding": "identity"})
        try:
            api._raise_for_status(response)
            written = 0
            for chunk in response.raw.stream(1 << 20, decode_content=True):
                written += len(chunk)
                if written > max_bytes:
                    raise StreamError(f"archive of {path} in {container.short_id} exceeds {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise StreamTimeoutError(
                        f"archive of {path} in {container.short_id} took over {timeout_s:g} s ({_TIME_HINT})")
                out.write(chunk)
        finally:
            response.close()
    except BaseException:
        out.close()
        raise
    out.seek(0)
    return out
