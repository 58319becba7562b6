"""Reading files that someone else put there: records to import, submissions trees to check.

A path given to ``perfsuite import`` or found in a tree may be a FIFO (opening it waits for
a writer for ever), a device, a socket, a symlink into a loop or out of the tree, or a JSON
document built to exhaust the parser (200,000 nested arrays, an integer of 5,000 digits).
:func:`read_regular` opens regular files only, checked with ``lstat`` before opening and
``fstat`` after (the path cannot be swapped in between unnoticed), never through a symlink
and never blocking; :func:`parse_json` bounds nesting and the size of integers. Each refusal
is a :class:`RecordInvalid` with a one-line reason.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import orjson

from .errors import RecordInvalid, one_line

# Integers in records and system files are counts, sizes, seeds and ids: 20 digits hold any
# 64-bit value; twice that is generous and keeps Python's int() far from its slow path.
MAX_INTEGER_DIGITS = 40
# A record file larger than this is refused before it is read. Real records are far
# smaller (a few hundred KiB with every raw sample of a long sweep); the limit keeps a
# stray or hostile file from filling memory and the database.
MAX_RECORD_BYTES = 64 * 1024 * 1024
# Deepest nesting of objects and arrays a record may have. Records nest about 8 deep; the
# limit stays well below where Python's recursive JSON and schema code would overflow.
MAX_RECORD_DEPTH = 64

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words ("a FIFO")."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def read_regular(path: str | os.PathLike, limit: int, what: str = "a record file") -> bytes:
    """The bytes of the regular file at ``path`` (``what`` it is, in messages), at most ``limit``.

    Refuses (:class:`RecordInvalid`) anything but a regular file (a symlink is not followed),
    a file over ``limit`` bytes, and a file that cannot be read.
    """
    path = Path(path)
    try:
        before = os.lstat(path)
        if not stat.S_ISREG(before.st_mode):
            raise RecordInvalid(f"{kind(before.st_mode)}, not a regular file: not opened")
        if before.st_size > limit:
            raise RecordInvalid(f"{before.st_size:,} bytes is over the {limit:,}-byte limit of {what}")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            after = os.fstat(fd)
            if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise RecordInvalid("replaced while it was opened: not read")
            with os.fdopen(fd, "rb", closefd=False) as f:
                # Asked for its size (not the limit: a read of 64 MiB allocates 64 MiB first, a third
                # of the time of reading a 9 KB record), then on to the limit if it grew meanwhile.
                data = f.read(min(limit, after.st_size) + 1)
                if len(data) > after.st_size:
                    data += f.read(limit + 1 - len(data))
        finally:
            os.close(fd)
    except OSError as exc:
        raise RecordInvalid(one_line(f"cannot read: {exc.strerror or exc}")) from exc
    if len(data) > limit:
        raise RecordInvalid(f"over the {limit:,}-byte limit of {what}")
    return data


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer of {digits:,} digits (at most {MAX_INTEGER_DIGITS})")
    return int(text)


def nesting_depth(document: Any, limit: int) -> int:
    """Depth of nested objects/arrays (a scalar is 0), counted without recursion; stops
    counting just past ``limit``."""
    if type(document) not in (dict, list):
        return 0
    deepest = 0
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if depth > limit:
                break
        for child in value.values() if type(value) is dict else value:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return deepest


def parse_json(data: bytes, max_depth: int) -> Any:
    """A JSON document from UTF-8 bytes, refusing (:class:`RecordInvalid`) text that is not
    UTF-8 or not JSON, integers over :data:`MAX_INTEGER_DIGITS` digits and nesting deeper than
    ``max_depth``. ``NaN`` and ``Infinity`` parse: the checks of what the document says name them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordInvalid(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc
    try:
        document = json.loads(text, parse_int=_bounded_int)
    except RecursionError:
        raise RecordInvalid(f"JSON nested too deeply to parse (at most {max_depth} levels)") from None
    except ValueError as exc:  # JSONDecodeError, or one of the refusals above
        raise RecordInvalid(one_line(f"not JSON: {exc}")) from exc
    if nesting_depth(document, max_depth) > max_depth:
        raise RecordInvalid(f"JSON nests objects or arrays more than {max_depth} deep")
    return document


def load_json_file(path: str | os.PathLike, limit: int, max_depth: int, what: str = "a JSON file") -> Any:
    """:func:`read_regular` then :func:`parse_json`."""
    return parse_json(read_regular(path, limit, what), max_depth)


def load_record_file(path: str | os.PathLike) -> Any:
    """:func:`read_record_file`'s document."""
    return read_record_file(path)[0]


def read_record_file(path: str | os.PathLike) -> tuple[Any, bool]:
    """Read and parse one record file, refusing (as :class:`RecordInvalid`) anything but a
    regular file (checked before it is opened: no FIFO, device or symlink), a file over
    :data:`MAX_RECORD_BYTES` (before reading it), text that is not UTF-8 and text that is not
    JSON (integer size and nesting bounded: :func:`parse_json`). The document is
    returned unchecked (pass it to ``perfsuite.schemas.seal.seal``), with whether orjson parsed it (then it
    holds no NaN or infinity: the ``finite`` of seal)."""
    data = read_regular(path, MAX_RECORD_BYTES)
    try:
        return orjson.loads(data), True
    except orjson.JSONDecodeError:
        pass  # json decides, with its own message (and what orjson refuses that json reads: big integers)
    return parse_json(data, MAX_RECORD_DEPTH), False
