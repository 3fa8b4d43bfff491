"""Where a run or a file is: a local path or an fsspec URL (``s3://bucket/run``, ``simplecache::s3://...``).

One :class:`Location` value answers what code used to ask by looking for ``"://"`` in a string: which protocol,
which path, whether it is on this machine, a child's location, and a form safe to show (a password in the URL is
``***``). The protocol is split by ``fsspec.core.split_protocol``; a chained URL (``simplecache::...``) is remote
even when its last part is a plain path.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import urllib.parse

from fsspec import core as fsspec_core

MASK = "***"
# A protocol chained onto what follows it (``simplecache::``), not a local file name holding ``::``.
_CHAINED = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")


@dataclasses.dataclass(frozen=True, slots=True)
class Location:
    """A location as the user gave it, split into protocol and path.

    Attributes:
        text: The location as given (``str()`` returns it).
        protocol: The URL's protocol (``s3``, ``simplecache::s3``), or None for a path on this machine.
        path: The rest: the path on the filesystem the protocol names (the whole text for a local path).
    """

    text: str
    protocol: str | None
    path: str

    @classmethod
    def of(cls, location: str | os.PathLike[str] | Location) -> Location:
        """The location of a path, URL or ``os.PathLike``."""
        if isinstance(location, Location):
            return location
        text = os.fspath(location)
        protocol, path = fsspec_core.split_protocol(text)
        if protocol is None and _CHAINED.match(text):  # chained onto a plain path: simplecache::/data/run
            protocol, path = text.split("::", 1)
        return cls(text, protocol, path)

    def __str__(self) -> str:
        return self.text

    @property
    def is_local(self) -> bool:
        """Whether this is a plain path on this machine (no protocol, not even ``file://``)."""
        return self.protocol is None

    @property
    def name(self) -> str:
        """The last part of the path (a file's or folder's name)."""
        return self.pure().name

    def pure(self, *, backslashes: bool = False) -> pathlib.PurePosixPath:
        """The path without its protocol, as a ``PurePosixPath`` (``backslashes``: ``\\`` separates parts too, for
        paths written on Windows)."""
        return pathlib.PurePosixPath(self.path.replace("\\", "/") if backslashes else self.path)

    def protocols(self) -> set[str]:
        """Every protocol of a (possibly chained: ``simplecache::s3://b/x``, ``zip://a::file:///b.zip``) URL, lower
        case; a last part without one is a local path (``file``). Empty for a local path."""
        if self.is_local:
            return set()
        parts = self.text.split("::")
        return {
            (fsspec_core.split_protocol(part)[0] or (part if i < len(parts) - 1 else "file")).lower()
            for i, part in enumerate(parts)
        }

    def joinpath(self, *names: str) -> Location:
        """A location inside this one (``/`` between parts for a URL, the OS's separator for a local path)."""
        if self.is_local:
            return Location.of(os.path.join(self.text, *names))
        return Location.of("/".join([self.text.rstrip("/"), *(n.strip("/") for n in names)]))

    def canonical(self) -> str:
        """The spelling a location is keyed by: a local path absolute with ``~`` expanded, a URL without a trailing
        slash."""
        return os.path.abspath(os.path.expanduser(self.text)) if self.is_local else self.text.rstrip("/")

    def display(self) -> str:
        """The location safe to show: the password of ``scheme://user:password@host`` is ``***``."""
        if self.is_local:
            return self.text
        return "::".join(_masked(part) for part in self.text.split("::"))


def _masked(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None or "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def is_local(location: str | os.PathLike[str] | Location) -> bool:
    """Whether ``location`` is a plain path on this machine (not a URL)."""
    return Location.of(location).is_local
