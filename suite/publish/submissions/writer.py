"""Writing files inside a submissions tree, and nowhere else.

A tree is a folder other people commit to: a ``systems`` or ``results`` folder, or a
record's own path, may have been planted as a symlink to a file the submitter can write
(``~/.bashrc``). :class:`TreeWriter` checks every path before anything is written: each
part below the tree's root, where it exists, must be a real folder (the last a regular
file), never a symlink, and the whole must stay inside the root; each part is a plain name
(:func:`name_problem`: no separator, no control character). Only then are folders made (one
at a time, each checked again) and files written: to a temporary sibling opened exclusively
and without following symlinks, then renamed into place, so that a reader sees the old file
or the new one, never half of one. The writer remembers what it made, so that a submission
cut off half way (a full disk) can be taken back whole: :meth:`TreeWriter.undo`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import unicodedata
from pathlib import Path

from perfsuite.owned_output import PARENTS_HINT, OutputRefused
from perfsuite.schemas.reading import kind

# Unicode categories that are no printable part of a name: controls (a newline, ESC), format
# characters (a right-to-left override that shows a name backwards), line and paragraph separators.
_UNPRINTABLE = {"Cc", "Cf", "Zl", "Zp"}


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a folder or file name of a tree, or None where it can: a plain
    name, not hidden, with no path separator and no control character."""
    if name in ("", ".", ".."):
        return "is not a plain name"
    if name.startswith("."):
        return "starts with a dot (a hidden name)"
    if "/" in name or "\\" in name:
        return "holds a path separator"
    bad = next((c for c in name if unicodedata.category(c) in _UNPRINTABLE), None)
    if bad is not None:
        return f"holds the control character U+{ord(bad):04X}"
    return None


class TreeWriter:
    """Plan with :meth:`path` (refusing before anything is written), then :meth:`write`;
    :meth:`undo` takes back every file and folder this writer made.

    ``parents``: create missing folders above the root (else a missing one is refused, so that
    a mistyped ``--root`` does not grow a tree of folders somewhere)."""

    def __init__(self, root: Path, parents: bool = False) -> None:
        self.root = Path(root)
        self.parents = parents
        self._real_root = Path(os.path.realpath(self.root))  # the root itself may be a symlink: the user chose it
        self._made_folders: list[Path] = []
        self._written: list[tuple[Path, bytes | None]] = []

    def check_root(self) -> None:
        """Refuse a root that is not a folder, or whose parent folder is missing (unless ``parents``)."""
        try:
            mode = os.stat(self.root).st_mode
        except (FileNotFoundError, NotADirectoryError):
            if not self.parents and not self.root.absolute().parent.is_dir():
                raise OutputRefused(
                    f"folder {self.root.absolute().parent} does not exist ({PARENTS_HINT}): nothing written"
                ) from None
            return
        if not stat.S_ISDIR(mode):
            raise OutputRefused(f"{self.root} is {kind(mode)}, not a folder: nothing written")

    def path(self, *parts: str) -> Path:
        """``root/parts...``, or :class:`OutputRefused` when a part is not a plain name, an
        existing part is a symlink, a folder is not a folder, the file is not a regular file
        or the path leaves the tree."""
        path = self.root
        for i, part in enumerate(parts):
            if part in ("", ".", "..") or "/" in part or "\0" in part:
                raise OutputRefused(f"{part!r} is not a plain name: nothing written")
            problem = name_problem(part)
            if problem is not None:
                raise OutputRefused(f"{part!r} {problem}: nothing written")
            path = path / part
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue  # made by write()
            last = i == len(parts) - 1
            if stat.S_ISLNK(mode):
                raise OutputRefused(f"{path} is a symlink: submit writes real files only: nothing written")
            if not last and not stat.S_ISDIR(mode):
                raise OutputRefused(f"{path} is {kind(mode)}, not a folder: nothing written")
            if last and not stat.S_ISREG(mode):
                raise OutputRefused(f"{path} is {kind(mode)}, not a regular file: nothing written")
        if not Path(os.path.realpath(path)).is_relative_to(self._real_root):
            raise OutputRefused(f"{path} leaves the tree {self.root}: nothing written")
        return path

    def _mkdir(self, folder: Path) -> None:
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass
        else:
            self._made_folders.append(folder)

    def _make_folders(self, path: Path) -> None:
        missing = []
        above = self.root
        while not os.path.lexists(above):
            missing.append(above)
            above = above.parent
        for folder in reversed(missing):  # the root, and its parents where check_root allowed them
            self._mkdir(folder)
        folder = self.root
        for part in path.parent.relative_to(self.root).parts:
            folder = folder / part
            self._mkdir(folder)
            mode = os.lstat(folder).st_mode
            if not stat.S_ISDIR(mode):  # planted between the check and now
                raise OutputRefused(f"{folder} is {kind(mode)}, not a folder: not written into")

    def write(self, path: Path, data: bytes, previous: bytes | None = None) -> None:
        """Write ``data`` to ``path`` (from :meth:`path`) atomically, through no symlink.
        ``previous``: the file's bytes before (None where there was none), for :meth:`undo`."""
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
        self._written.append((path, previous))

    def undo(self) -> list[str]:
        """Take back what this writer wrote, newest first: a file that was new is removed, one
        that was there gets its previous bytes back, and each folder it made is removed where
        it is empty again. Returns what could not be taken back (one line each), else []."""
        left: list[str] = []
        for path, previous in reversed(self._written):
            try:
                if previous is None:
                    if stat.S_ISREG(os.lstat(path).st_mode):
                        os.unlink(path)
                else:
                    self.write(path, previous)
                    self._written.pop()  # the restore itself is not one to undo
            except OSError as exc:
                left.append(f"{path}: {exc.strerror or exc}")
        self._written.clear()
        for folder in reversed(self._made_folders):
            try:
                os.rmdir(folder)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    left.append(f"{folder}: {exc.strerror or exc}")
        self._made_folders.clear()
        return left
