"""Writing files and folders so that a reader, or a writer killed at any moment, never leaves half of one.

A writer stages what it writes under ``.<name>.tmp-<pid>`` in the destination's own folder (the same
filesystem, so the rename into place is atomic) and renames it in. A writer killed (SIGKILL) before that leaves
its staging behind: every write into a folder first removes the stagings there of processes that are no longer
running (:func:`sweep`), so debris lives at most until the next write into its folder.

Replacing a folder (a re-captured step) exchanges the new one with the old in one step (Linux's
``renameat2(RENAME_EXCHANGE)``), then removes the old one, now under the staging name: a kill at any moment
leaves the old folder or the new one in place, never neither. Where the exchange is not available, the old folder
is renamed aside (``.<name>.old-<pid>``) right before the new one is renamed in, and a sweep puts an aside
folder back when its writer died between the two renames.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import pathlib
import re
import shutil
import uuid
from collections.abc import Iterator

_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)(?:-[0-9a-f]{12})?$")
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def staging(path: str | os.PathLike[str]) -> pathlib.Path:
    """Where this process stages ``path``: ``.<name>.tmp-<pid>`` beside it."""
    path = pathlib.Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove(path: pathlib.Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def sweep(folder: str | os.PathLike[str]) -> None:
    """Remove what writers that died left in ``folder``: their stagings, and their old folders set aside (put back
    when nothing replaced them). A running writer's staging is left alone."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = _LEFTOVER.match(entry.name)
        if match is None or _alive(int(match["pid"])):
            continue
        path, final = pathlib.Path(entry.path), pathlib.Path(folder) / match["name"]
        if match["kind"] == "old" and not final.exists():
            with contextlib.suppress(OSError):  # put back: its writer died before renaming the new one in
                os.rename(path, final)
            continue
        _remove(path)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> pathlib.Path:
    """Replace the file at ``path`` with ``data``: staged beside it, then renamed in (the folder swept first)."""
    path = pathlib.Path(path)
    sweep(path.parent)
    staged = staging(path)
    staged.write_bytes(data)
    os.replace(staged, path)
    return path


@contextlib.contextmanager
def written(path: str | os.PathLike[str]) -> Iterator[pathlib.Path]:
    """A staging path for the file ``path``, which the block writes whole by any means (DuckDB's ``COPY ... TO``, a
    download); renamed in when the block ends, removed when it raises. The folder is swept first. Each staging is
    the writer's own (``.<name>.tmp-<pid>-<random>``), so threads of one process may write one path at once: the
    last rename wins, and a reader sees one whole file or the other."""
    path = pathlib.Path(path)
    sweep(path.parent)
    staged = staging(path).with_name(f"{staging(path).name}-{uuid.uuid4().hex[:12]}")
    try:
        yield staged
        os.replace(staged, path)
    except BaseException:
        _remove(staged)
        raise


def _exchange(a: pathlib.Path, b: pathlib.Path) -> bool:
    """Swap two paths in one step; False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_dir(staged: str | os.PathLike[str], final: str | os.PathLike[str]) -> pathlib.Path:
    """Put the folder ``staged`` in place of ``final`` (which may not exist) so that ``final`` always holds the old
    folder or the new one; the old one is then removed."""
    staged, final = pathlib.Path(staged), pathlib.Path(final)
    if not final.exists():
        os.rename(staged, final)
    elif _exchange(staged, final):
        shutil.rmtree(staged)  # the old folder, under the staging name a sweep removes
    else:
        aside = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.rename(final, aside)
        os.rename(staged, final)
        shutil.rmtree(aside)
    return final
