"""Reading a user's input file within a bound: a trace, a set of scored questions.

Both are named by a parameter and read whole before a run starts; a path to a FIFO, a
device or a file of gigabytes must fail at once with a one-line error that names the
parameter, not block or exhaust memory. The size is checked before the read and again
after it (the file may grow between the two).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_capped(path: Path, limit: int, label: str, error: type[Exception], hint: str = "") -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); else ``error`` whose text
    starts with ``label`` and the path (``hint`` follows an error of ``stat``)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(f"{label} {path}: {exc.strerror or exc}{hint}") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{label} {path} is not a regular file")
    if st.st_size > limit:
        raise error(f"{label} {path} holds {st.st_size:,} bytes: at most {limit:,} are read")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise error(f"{label} {path} grew past {limit:,} bytes while it was read")
    return data
