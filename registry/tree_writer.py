"""Writing files inside a submissions tree, and nowhere else.

A tree is a folder other people commit to: a ``systems`` or ``results`` folder, or a
record's own path, may have been planted as a symlink to a file the submitter can write
(``~/.bashrc``). :class:`TreeWriter` checks every path before anything is written: each
part below the tree's root, where it exists, must be a real folder (the last a regular
file), never a symlink, and the whole must stay inside the root. Only then are folders made
(one at a time, each checked again) and files written: to a temporary sibling opened
exclusively and without following symlinks, then renamed into place, so that a reader sees
the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .errors import RegistryError
from .reading import kind


class TreeWriter:
    """Plan with :meth:`path` (refusing before anything is written), then :meth:`write`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._real_root = Path(os.path.realpath(self.root))  # the root itself may be a symlink: the user chose it

    def path(self, *parts: str) -> Path:
        """``root/parts...``, or :class:`RegistryError` when a part is not a plain name, an
        existing part is a symlink, a folder is not a folder, the file is not a regular file
        or the path leaves the tree."""
        path = self.root
        for i, part in enumerate(parts):
            if part in ("", ".", "..") or "/" in part or "\0" in part:
                raise RegistryError(f"{part!r} is not a plain name: nothing written")
            path = path / part
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue  # made by write()
            last = i == len(parts) - 1
            if stat.S_ISLNK(mode):
                raise RegistryError(f"{path} is a symlink: submit writes real files only: nothing written")
            if not last and not stat.S_ISDIR(mode):
                raise RegistryError(f"{path} is {kind(mode)}, not a folder: nothing written")
            if last and not stat.S_ISREG(mode):
                raise RegistryError(f"{path} is {kind(mode)}, not a regular file: nothing written")
        if not Path(os.path.realpath(path)).is_relative_to(self._real_root):
            raise RegistryError(f"{path} leaves the tree {self.root}: nothing written")
        return path

    def _make_folders(self, path: Path) -> None:
        relative = path.parent.relative_to(self.root).parts
        folder = self.root
        self.root.mkdir(parents=True, exist_ok=True)
        for part in relative:
            folder = folder / part
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder)
            mode = os.lstat(folder).st_mode
            if not stat.S_ISDIR(mode):  # planted between the check and now
                raise RegistryError(f"{folder} is {kind(mode)}, not a folder: not written into")

    def write(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` (from :meth:`path`) atomically, through no symlink."""
        self._make_folders(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, path)  # replaces a symlink planted at path itself, never writes through it
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
