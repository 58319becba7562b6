"""Writing files so that a reader never sees half of one: records, MLLOG twins, the
worker's result and the ranks' error and progress files."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` beside ``path`` and rename it into place (atomic on one filesystem)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
