"""Writing where a user points a command, and only what the command owns there.

``export --out``, ``compare --junit``, ``history --plot`` write one file; ``leaderboard --out``
writes a folder. The path is the user's, and what is already there may be anything: their
project, their home, a mount point, a device node (``/dev/full``), a FIFO (opening it blocks
until a reader comes), a symlink to a file they care about. The rules, one mechanism for every
command:

- A file is written as a regular file: to a temporary sibling, created exclusively, then
  renamed into place, and only onto a regular file or onto nothing: a device, FIFO, socket,
  folder or symlink at the target is refused, never opened, replaced or written through. A
  failed write removes its sibling and leaves the target as it was.
- A missing parent folder is refused (naming it) unless the caller asked to create it
  (``--parents``), so that a typo does not grow a tree of folders somewhere.
- An output folder carries a manifest (:data:`MANIFEST_NAME`) of the files and folders
  perfsuite wrote into it. A folder that is neither new, nor empty, nor holding such a
  manifest is someone else's and is refused; a rebuild replaces and removes only the entries
  its manifest lists, so a file the user put inside survives. The current folder, a folder
  holding it, ``/``, the home folder (or one holding it) and a mount point are never an
  output folder: whatever they hold, they are not a command's to replace.

Every refusal is an :class:`OutputRefused` with a one-line reason, raised before anything is
changed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from perfsuite.registry.errors import RecordInvalid, RegistryError, one_line
from perfsuite.schemas.reading import kind, parse_json, read_regular

MANIFEST_NAME = ".perfsuite-manifest.json"
MANIFEST_FORMAT = "perfsuite-owned-output"
# A site of 100,000 records is some 4,000 files: their names are well under a megabyte.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
PARENTS_HINT = "--parents creates it"

T = TypeVar("T")


class OutputRefused(RegistryError):
    """A command may not write where it was pointed; nothing there was changed."""


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- one file -----------------------------------------------------------------------------------


def ensure_parent(path: Path, parents: bool) -> None:
    """Refuse a missing parent folder of ``path`` unless ``parents``, then create it."""
    folder = path.parent
    try:
        mode = os.stat(folder).st_mode  # symlinks above the target are the user's own choice
    except (FileNotFoundError, NotADirectoryError):
        if not parents:
            raise OutputRefused(f"folder {folder} does not exist ({PARENTS_HINT})") from None
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputRefused(one_line(f"cannot create folder {folder}: {_reason(exc)}")) from exc
        return
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot reach folder {folder}: {_reason(exc)}")) from exc
    if not stat.S_ISDIR(mode):
        raise OutputRefused(f"{folder} is {kind(mode)}, not a folder")


def check_file_target(path: Path) -> os.stat_result | None:
    """The target's ``lstat`` where it is a regular file, None where there is nothing; anything
    else (a symlink, a device, a FIFO, a socket, a folder) is refused without being opened."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot write {path}: {_reason(exc)}")) from exc
    if stat.S_ISLNK(st.st_mode):
        raise OutputRefused(f"{path} is a symlink: perfsuite writes regular files only, never through a symlink")
    if stat.S_ISDIR(st.st_mode):
        raise OutputRefused(f"{path} is a folder: name a file")
    if not stat.S_ISREG(st.st_mode):
        raise OutputRefused(f"{path} is {kind(st.st_mode)}: perfsuite writes regular files only, not replaced")
    return st


def _sibling(path: Path) -> tuple[int, Path]:
    """A new temporary file beside ``path``, readable as a file the user made (mkstemp's are private)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    return fd, Path(name)


def _place(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` onto ``path`` where that is a regular file or nothing, never anything else.

    Onto nothing, a hard link refuses a target planted since the check (``rename`` would
    replace it); a filesystem without hard links falls back to a checked rename."""
    if check_file_target(path) is not None:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        check_file_target(path)  # planted meanwhile: refused unless a regular file
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS):
            raise
        os.replace(tmp, path)
    else:
        os.unlink(tmp)


def write_file(path: Path, data: str | bytes, *, parents: bool = False) -> Path:
    """Write ``data`` to the regular file ``path`` (see the module docstring); return the path.

    A refusal or a failed write is an :class:`OutputRefused`; the target is as it was."""
    path = Path(path).expanduser()
    if path.name in ("", ".", ".."):
        raise OutputRefused(f"{path} names a folder: name a file")
    ensure_parent(path, parents)
    check_file_target(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp: Path | None = None
    try:
        fd, tmp = _sibling(path)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        _place(tmp, path)
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot write {path}: {_reason(exc)}")) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return path


# -- a folder -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    """What perfsuite wrote into an output folder: paths relative to it, POSIX style."""

    files: frozenset[str]
    folders: frozenset[str]

    def to_json(self, command: str) -> str:
        return (
            json.dumps(
                {
                    "format": MANIFEST_FORMAT,
                    "written_by": f"perfsuite {command}",
                    "note": "perfsuite replaces or removes only these entries; anything else here is yours",
                    "folders": sorted(self.folders),
                    "files": sorted(self.files),
                },
                indent=1,
            )
            + "\n"
        )


EMPTY = Manifest(frozenset(), frozenset())


def _plain_relative(entry: object) -> str | None:
    """``entry`` where it is a relative path inside the folder (no ``..``, no absolute, no NUL)."""
    if not isinstance(entry, str) or not entry or "\0" in entry or "\\" in entry:
        return None
    pure = PurePosixPath(entry)
    if pure.is_absolute() or any(part in ("", ".", "..") for part in entry.split("/")):
        return None
    return None if entry == MANIFEST_NAME else str(pure)


def read_manifest(folder: Path) -> Manifest:
    """The manifest of an output folder, or :class:`OutputRefused` where it is not one perfsuite wrote."""
    path = folder / MANIFEST_NAME
    try:
        document = parse_json(read_regular(path, MAX_MANIFEST_BYTES, "a manifest"), 4)
    except RecordInvalid as exc:
        raise OutputRefused(one_line(f"{path}: {exc}: the folder is not replaced")) from exc
    lists = {}
    if isinstance(document, dict) and document.get("format") == MANIFEST_FORMAT:
        for name in ("files", "folders"):
            entries = document.get(name)
            plain = [_plain_relative(e) for e in entries] if isinstance(entries, list) else [None]
            if None in plain:
                break
            lists[name] = frozenset(p for p in plain if p is not None)
    if len(lists) != 2:
        raise OutputRefused(f"{path} is not a manifest perfsuite wrote: the folder is not replaced")
    return Manifest(files=lists["files"], folders=lists["folders"])


def _holds(folder: str, inner: str) -> bool:
    return inner == folder or inner.startswith(folder.rstrip("/") + "/")


def check_output_folder(out: Path, parents: bool = False) -> Manifest | None:
    """Refuse an output folder the command does not own (see the module docstring). Returns the
    folder's manifest, :data:`EMPTY` for an empty folder, None where there is no folder yet."""
    real = os.path.realpath(out)
    if real == os.path.realpath(os.sep):
        raise OutputRefused(f"{out} is the root folder: name a folder of its own")
    if _holds(real, os.path.realpath(os.getcwd())):
        raise OutputRefused(f"{out} is the current folder or holds it: name a folder of its own")
    home = os.path.expanduser("~")
    if home != "~" and _holds(real, os.path.realpath(home)):
        raise OutputRefused(f"{out} is the home folder or holds it: name a folder of its own")
    try:
        st = os.lstat(out)
    except (FileNotFoundError, NotADirectoryError):
        ensure_parent(out, parents)
        return None
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot reach {out}: {_reason(exc)}")) from exc
    if stat.S_ISLNK(st.st_mode):
        raise OutputRefused(f"{out} is a symlink: name the folder itself")
    if not stat.S_ISDIR(st.st_mode):
        raise OutputRefused(f"{out} is {kind(st.st_mode)}, not a folder")
    if os.path.ismount(out):
        raise OutputRefused(f"{out} is a mount point: name a folder inside it")
    try:
        names = os.listdir(out)
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot read {out}: {_reason(exc)}")) from exc
    if not names:
        return EMPTY
    if MANIFEST_NAME not in names:
        raise OutputRefused(
            f"{out} holds files perfsuite did not write (there is no {MANIFEST_NAME}): name a new or empty folder"
        )
    return read_manifest(out)


def _listing(staging: Path) -> Manifest:
    files: set[str] = set()
    folders: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(staging):
        rel = Path(dirpath).relative_to(staging)
        folders.update(str(PurePosixPath(rel / d)) for d in dirnames)
        files.update(str(PurePosixPath(rel / f)) for f in filenames)
    files.discard(MANIFEST_NAME)
    return Manifest(frozenset(files), frozenset(folders))


def _in_the_way(out: Path, new: Manifest, old: Manifest) -> str | None:
    """The first entry of the new build whose place in ``out`` is taken by something not ours."""
    for rel in sorted(new.folders, key=lambda r: r.count("/")):
        with contextlib.suppress(FileNotFoundError):
            mode = os.lstat(out / rel).st_mode
            if not stat.S_ISDIR(mode):
                return f"{out / rel} is {kind(mode)} where the site has a folder"
    for rel in sorted(new.files):
        with contextlib.suppress(FileNotFoundError):
            mode = os.lstat(out / rel).st_mode
            if not stat.S_ISREG(mode):
                return f"{out / rel} is {kind(mode)} where the site has a file"
            if rel not in old.files:
                return f"{out / rel} is not in {MANIFEST_NAME}: perfsuite did not write it"
    return None


def _real_folders_to(out: Path, rel: str) -> bool:
    """Whether every folder between ``out`` and ``out/rel`` is a real folder, no symlink."""
    folder = out
    for part in PurePosixPath(rel).parts[:-1]:
        folder = folder / part
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return False
        except FileNotFoundError:
            return False
    return True


def _merge(staging: Path, out: Path, new: Manifest, old: Manifest, command: str) -> None:
    """Move the new build into ``out`` entry by entry, then remove what only the old one had."""
    write_file(out / MANIFEST_NAME, Manifest(new.files | old.files, new.folders | old.folders).to_json(command))
    for rel in sorted(new.folders, key=lambda r: r.count("/")):
        with contextlib.suppress(FileExistsError):
            os.mkdir(out / rel)
    for rel in sorted(new.files):
        os.replace(staging / rel, out / rel)
    for rel in sorted(old.files - new.files):
        if _real_folders_to(out, rel):
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.lstat(out / rel).st_mode):
                    os.unlink(out / rel)
    for rel in sorted(old.folders - new.folders, key=lambda r: r.count("/"), reverse=True):
        if _real_folders_to(out, rel + "/-"):
            try:
                os.rmdir(out / rel)
            except OSError as exc:  # only where empty: a file the user put there keeps its folder
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    raise
    write_file(out / MANIFEST_NAME, new.to_json(command))


def publish_folder(
    out: Path, build: Callable[[Path], T], *, command: str, what: str = "the folder", parents: bool = False
) -> T:
    """Build into a staging folder beside ``out`` and move the result in, as the module
    docstring says; ``build(staging)`` writes the files. Returns what ``build`` returned.

    A new or empty ``out`` receives the whole build in one rename. A folder of an earlier
    build is updated entry by entry (each file atomically) and keeps every file it did not
    list. Refusals (:class:`OutputRefused`) come before anything is written; a failed build
    or write leaves ``out`` as it was and removes the staging folder. ``what`` the folder
    holds, in messages ("the site")."""
    out = Path(out).expanduser()
    old = check_output_folder(out, parents)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot write {what} to {out}: {_reason(exc)}")) from exc
    try:
        result = build(staging)
        new = _listing(staging)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)
        if old is None or old == EMPTY:
            write_file(staging / MANIFEST_NAME, new.to_json(command))
            os.rename(staging, out)  # onto nothing or an empty folder only: a file added meanwhile refuses it
            return result
        problem = _in_the_way(out, new, old)
        if problem:
            raise OutputRefused(f"{problem}: move it and build again")
        _merge(staging, out, new, old, command)
        return result
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot write {what} to {out}: {_reason(exc)}")) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging)
