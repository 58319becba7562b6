"""May perfsuite replace the one file a user pointed a command at? And writing it where it may.

``export --out``, ``history --plot``, ``roofline --out`` and ``compare --junit`` each write one
file at a path the user names. A regular file already there is either perfsuite's own earlier
output (the same export run again: replaced) or something of the user's that bears the name (a
notes.csv, a photo, a report they edited: refused, left byte for byte). This module tells the
two apart; :mod:`perfsuite.owned_output` does the writing (a regular file through a sibling
renamed into place, never onto a device, FIFO, socket, folder or symlink).

How perfsuite knows its own file: a small record beside it, ``.NAME.perfsuite.json``
(:func:`record_path`), holding the size and SHA-256 of the bytes perfsuite wrote there. The
file is perfsuite's while it holds exactly those bytes. Why a record beside the file rather
than a signature inside it:

- One rule for every format, and not one byte of the output changed for it. CSV and JSON Lines
  have no place for a signature (a ``#`` line is a data row to Excel, and to pandas unless told
  ``comment="#"``; a JSON Lines file is rows and nothing else); the nccl-tests JSON and JUnit
  XML are other tools' formats; PNG, SVG and Parquet could carry one, but three rules for
  three formats is two too many.
- A signature says who wrote a file once, not what it holds now: a perfsuite CSV the user then
  annotated by hand would still carry it, and a re-run would overwrite their notes. With the
  digest, a file changed since perfsuite wrote it is the user's.
- The record travels with the folder (a CI workspace kept between jobs, a results folder copied
  elsewhere), which a ledger in perfsuite's data folder would not.

A file perfsuite cannot recognise (no record, or other bytes than the record's) is refused
with the way out: another name, moving it away, or, where the command offers it, an explicit
``--replace`` (a file written before perfsuite kept these records, or whose record was not
copied with it). A record that is not one perfsuite wrote is refused the same way.

Order of writes: the record first names both the bytes there (perfsuite's) and the new ones,
then the file is placed, then the record names the new bytes only; a write cut off at any
point leaves a file the next run still recognises. A file swapped in between the check and the
rename is the one race left, as with any check-then-rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from perfsuite.owned_output import OutputRefused, check_file_target, ensure_parent, write_file
from perfsuite.registry.errors import RecordInvalid, one_line
from perfsuite.schemas.reading import parse_json, read_regular

RECORD_FORMAT = "perfsuite-owned-file"
RECORD_SUFFIX = ".perfsuite.json"
# A record names a file and a digest or two: a few hundred bytes.
MAX_RECORD_BYTES = 64 * 1024
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Content:
    """Bytes perfsuite wrote to a file: their count and SHA-256 (hex)."""

    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> Content:
        return cls(len(data), hashlib.sha256(data).hexdigest())

    def to_dict(self) -> dict:
        return {"bytes": self.size, "sha256": self.sha256}


def record_path(path: Path) -> Path:
    """Where the record of ``path`` lives: a hidden file beside it, ``.NAME.perfsuite.json``."""
    return path.with_name(f".{path.name}{RECORD_SUFFIX}")


def read_record(path: Path) -> tuple[Content, ...] | None:
    """The contents the record of ``path`` names, None where there is no record;
    :class:`OutputRefused` where something is at its name that perfsuite did not write."""
    record = record_path(path)
    if not os.path.lexists(record):
        return None
    try:
        document = parse_json(read_regular(record, MAX_RECORD_BYTES, "a record of a written file"), 3)
    except RecordInvalid as exc:
        raise OutputRefused(one_line(f"{record}: {exc}: {path} is not replaced")) from exc
    contents = document.get("contents") if isinstance(document, dict) else None
    if (
        not isinstance(document, dict)
        or document.get("format") != RECORD_FORMAT
        or document.get("file") != path.name
        or not isinstance(contents, list)
    ):
        raise OutputRefused(f"{record} is not a record perfsuite wrote: {path} is not replaced")
    found = []
    for entry in contents:
        size = entry.get("bytes") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if type(size) is not int or not isinstance(digest, str):
            raise OutputRefused(f"{record} is not a record perfsuite wrote: {path} is not replaced")
        found.append(Content(size, digest))
    return tuple(found)


def _record_text(path: Path, contents: list[Content], command: str) -> str:
    document = {
        "format": RECORD_FORMAT,
        "written_by": f"perfsuite {command}",
        "file": path.name,
        "note": f"perfsuite replaces {path.name} only while it holds these bytes; anything else there is yours",
        "contents": [c.to_dict() for c in contents],
    }
    return json.dumps(document, indent=1) + "\n"


def digest(path: Path) -> Content:
    """The size and SHA-256 of the regular file at ``path``, read in chunks (an output may be
    large), never through a symlink and never blocking on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OutputRefused(f"{path} was replaced while it was read: not replaced")
        h = hashlib.sha256()
        size = 0
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return Content(size, h.hexdigest())


def owned_content(path: Path, st: os.stat_result, contents: tuple[Content, ...] | None) -> Content | None:
    """Which of the record's ``contents`` the regular file at ``path`` (``st``: its lstat) holds,
    None where it holds none of them. A size that matches no entry is decided without reading."""
    sizes = {c.size for c in contents or ()}
    if st.st_size not in sizes:
        return None
    try:
        now = digest(path)
    except OSError as exc:
        raise OutputRefused(one_line(f"cannot read {path}: {exc.strerror or exc}: not replaced")) from exc
    return now if now in (contents or ()) else None


def write_owned_file(
    path: Path,
    data: str | bytes,
    *,
    command: str,
    parents: bool = False,
    replace: bool = False,
    replace_option: str | None = None,
) -> Path:
    """Write ``data`` to ``path`` where perfsuite may (see the module docstring) and record it;
    return the path. ``command`` names the writer in the record ("export"); ``replace``: the
    user said to replace a file perfsuite cannot recognise; ``replace_option``: the option that
    says so, named in the refusal where the command has one ("--replace").

    A refusal (:class:`OutputRefused`, one line) comes before anything is written."""
    path = Path(path).expanduser()
    if path.name in ("", ".", ".."):
        raise OutputRefused(f"{path} names a folder: name a file")
    ensure_parent(path, parents)
    st = check_file_target(path)
    try:
        contents = read_record(path)
    except OutputRefused:
        if not replace:
            raise
        contents = None
    ours = owned_content(path, st, contents) if st is not None else None
    if st is not None and ours is None and not replace:
        way_out = "name a new file or move it away"
        if replace_option:
            way_out += f", or give {replace_option} to replace it"
        if contents:
            raise OutputRefused(f"{path} was changed since perfsuite wrote it: not replaced; {way_out}")
        raise OutputRefused(f"{path} exists and perfsuite did not write it: not replaced; {way_out}")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    new = Content.of(payload)
    record = record_path(path)
    had_record = os.path.lexists(record)
    try:
        write_file(record, _record_text(path, [new] + ([ours] if ours and ours != new else []), command))
    except OutputRefused as exc:  # named by the file the user asked for, then the record's own reason
        raise OutputRefused(one_line(f"{path}: {exc}")) from exc
    try:
        write_file(path, payload)
    except OutputRefused:  # the file is as it was; a record made for it alone goes too
        if not had_record:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(record)
        raise
    if ours and ours != new:
        write_file(record, _record_text(path, [new], command))
    return path
