"""Writing files so that a reader never sees half of one: records, MLLOG twins, the
worker's result and the ranks' error and progress files.

A file is written to a temporary sibling and renamed into place. The sibling's name says
which process wrote it (``.<name>~<host>~<pid>.tmp``): a failed write removes its own
sibling, and a sibling left by a process that was killed mid-write (``kill -9``) is
recognised later by :func:`remove_stale_temporaries`, without touching a write that another
live process is making in the same folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from pathlib import Path

TMP_SUFFIX = ".tmp"
_SEP = "~"  # never in a host name


def temporary_sibling(path: Path) -> Path:
    """The name this process writes ``path`` under before renaming it into place."""
    return path.with_name(f".{path.name}{_SEP}{socket.gethostname()}{_SEP}{os.getpid()}{TMP_SUFFIX}")


def refuse_unless_regular(path: Path) -> None:
    """Raise ``FileExistsError`` where ``path`` is there and is not a regular file (a symlink,
    a device, a FIFO, a socket, a folder): a rename would replace what this process never
    wrote. Nothing there, or a regular file: return."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise FileExistsError(errno.EEXIST, "there and not a regular file: not replaced", str(path))


def write_atomic(path: Path, text: str | bytes, durable: bool = False) -> None:
    """Write ``text`` beside ``path`` and rename it into place (atomic on one filesystem).

    The sibling is created exclusively and never through a symlink, and renamed only onto a
    regular file or nothing (:func:`refuse_unless_regular`); on any failure (a full disk, a
    read-only remount, an interrupt) it is removed and the error raised. ``durable``: flush
    the file to the device before the rename, so that a crash of the machine cannot leave an
    empty file under the final name (records; not progress notes).
    """
    refuse_unless_regular(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    tmp = temporary_sibling(path)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # our own leftover (a pid reused after a kill -9)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        refuse_unless_regular(path)  # planted while the sibling was written
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _writer(name: str) -> tuple[str, int] | None:
    """(host, pid) of a temporary sibling's writer, or None for a name this module did not make."""
    if not (name.startswith(".") and name.endswith(TMP_SUFFIX)):
        return None
    parts = name[1 : -len(TMP_SUFFIX)].rsplit(_SEP, 2)
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary siblings in ``folder`` whose writer, a process of this host, is
    gone; return them. Siblings written from other hosts (a shared folder) are left alone."""
    host = socket.gethostname()
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        writer = _writer(entry.name)
        if writer is None or writer[0] != host or _running(writer[1]):
            continue
        try:
            os.unlink(entry.path)
        except OSError:
            continue  # gone meanwhile, or a folder that cannot be written: it stays, harmless
        removed.append(Path(entry.path))
    return removed
