"""Tar safety: every archive a snapshot holds is untrusted, and is indexed and read in memory, never extracted.

Both kinds of snapshot read their archives through :func:`scan_archive`: a per-step snapshot's content blob
archives (``blobs.tar.gz``: plain files named by their sha256) and an episode-boundary snapshot's filesystem
tarball (``container_fs.tar.gz`` as a file: folders, files and links of a whole container). Anything unsafe or
unexpected (absolute names, ``..``, links leaving the archive, device files in a blob archive, duplicates,
enormous declared sizes, truncation, trailing data) raises :class:`SnapshotError` naming the snapshot.
"""

from __future__ import annotations

import gzip
import io
import pathlib
import posixpath
import re
import tarfile
import zlib
from typing import IO, cast

from ares_viewer.snapshots.base import SnapshotError

# Bounds that keep a hostile or broken archive from exhausting memory.
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 200_000
# Decompressed archives up to this size are kept in memory once scanned, so reads need no gzip reopening.
MAX_CACHED_ARCHIVE_BYTES = 32 * 1024 * 1024
# End-of-archive padding: two zero blocks, rounded up to tar's 20-block record by most writers.
_MAX_TAIL_BYTES = 64 * 1024
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def scan_archive(
    snapshot: pathlib.Path, archive_path: pathlib.Path, *, tree: bool = False
) -> tuple[dict[str, tarfile.TarInfo], bytes | None]:
    """Index a blob archive's members by name, rejecting anything but plain, bounded content blobs.

    Args:
        snapshot: The snapshot the archive belongs to (named in errors).
        archive_path: The archive.
        tree: Read a filesystem tarball instead (an episode-boundary snapshot's ``container_fs.tar.gz``): folders,
            regular files and links staying inside it are allowed, members are keyed by their absolute container
            path (``./usr/bin/x`` -> ``/usr/bin/x``), and the archive's root folder (``.``) is left out.

    Returns:
        The member index and, when the archive's tar stream is at most ``MAX_CACHED_ARCHIVE_BYTES``, the whole
        decompressed stream (members are then sliced out of it instead of reopening the gzip per read).
    """
    where = f"{archive_path.parent.name}/{archive_path.name}"
    members: dict[str, tarfile.TarInfo] = {}
    data: bytes | None = None
    try:
        with open(archive_path, "rb") as raw:
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
            data = stream.read(MAX_CACHED_ARCHIVE_BYTES + 1)
        if len(data) > MAX_CACHED_ARCHIVE_BYTES:
            data = None  # too big to keep: scan it as a stream, and reopen it for each read
        source = io.BytesIO(data) if data is not None else None
        with (
            tarfile.open(fileobj=source, mode="r:") if source is not None else tarfile.open(archive_path, "r:*")
        ) as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise SnapshotError(snapshot, f"{where} has more than {MAX_MEMBERS} members")
                problem = member_problem(member, tree=tree)
                if problem:
                    raise SnapshotError(snapshot, f"{where}: {problem}")
                key = tree_path(member.name) if tree else member.name
                if key == "/":
                    continue  # the archive's own root folder
                if key in members:
                    raise SnapshotError(snapshot, f"{where}: duplicate member {member.name!r}")
                members[key] = member
            # tarfile stops quietly at a cut-off header: require the end-of-archive marker (zero blocks) after
            # the last member, and check that every member's data is really there.
            tail_start = tar.offset
            fileobj = cast(IO[bytes], tar.fileobj)  # typeshed's _Fileobj names only what tarfile itself calls
            fileobj.seek(tail_start)
            tail = fileobj.read(_MAX_TAIL_BYTES + 1)
            end = fileobj.seek(0, io.SEEK_END)
    except SnapshotError:
        raise
    except (tarfile.TarError, OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise SnapshotError(snapshot, f"{where} is corrupt or truncated ({type(exc).__name__}: {exc})") from exc
    if len(tail) < 2 * tarfile.BLOCKSIZE or len(tail) > _MAX_TAIL_BYTES or tail.count(0) != len(tail):
        raise SnapshotError(snapshot, f"{where} is truncated or has trailing data after member {len(members)}")
    for member in members.values():
        if member.offset_data + member.size > end:
            raise SnapshotError(snapshot, f"{where} is truncated: member {member.name!r} runs past its end")
    return members, data


def tree_path(name: str) -> str:
    """A filesystem tarball's member name as an absolute container path (``./a/b/`` -> ``/a/b``)."""
    return posixpath.normpath("/" + name)


def _link_problem(member: tarfile.TarInfo, tree: bool) -> str | None:
    """Why a link member is refused: its target leaves the archive (a filesystem tarball's symlink may name a
    path of its container), or it is in a blob archive at all."""
    name, target = member.name, member.linkname
    # A symlink's target is relative to its folder, a hard link's to the archive's root.
    start = posixpath.dirname(name) if member.issym() else ""
    resolved = posixpath.normpath(posixpath.join(start, target))
    container_absolute = tree and member.issym() and target.startswith("/")
    if (target.startswith("/") and not container_absolute) or resolved == ".." or resolved.startswith("../"):
        return f"member {name!r} is a link pointing outside the archive ({target!r})"
    if tree:
        return None
    return f"member {name!r} is a link; blob archives hold only regular files"


def member_problem(member: tarfile.TarInfo, *, tree: bool = False) -> str | None:
    """Why a tar member is unsafe or unexpected (None when it is fine).

    Both kinds of archive refuse absolute names, ``..`` components, links whose target leaves the archive
    and enormous declared sizes. A blob archive (``tree=False``) holds only regular files named by their
    sha256: device files and FIFOs are refused. A filesystem tarball (``tree=True``) also holds folders and
    links; its symlinks are a container's own, so an absolute target names a path inside that container
    (``/usr/bin/python3``): recorded verbatim, never followed, never extracted. Its device files and FIFOs
    (a real container's ``/dev``) are let through to be recorded as ``other`` entries, never opened.
    """
    name = member.name
    if name.startswith("/"):
        return f"member {name!r} has an absolute path"
    if ".." in name.split("/"):
        return f"member {name!r} has a '..' component"
    if member.issym() or member.islnk():
        return _link_problem(member, tree)
    if tree and (member.ischr() or member.isblk() or member.isfifo()):
        return None
    if member.ischr() or member.isblk():
        kind = "character" if member.ischr() else "block"
        return f"member {name!r} is a {kind} device file"
    if member.isfifo():
        return f"member {name!r} is a FIFO"
    if tree and member.isdir():
        return None
    if not member.isreg():
        return f"member {name!r} is not a regular file"
    if member.size > MAX_MEMBER_BYTES:
        return f"member {name!r} declares {member.size} bytes, over the {MAX_MEMBER_BYTES} byte limit"
    if tree:
        return None
    if not SHA256_RE.match(name):
        return f"member {name!r} is not a content blob (its name should be a sha256)"
    return None
