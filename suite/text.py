"""Text that came from a run, a record or a plugin is data: never rich markup, never
terminal control.

Error messages from NCCL, gloo or a plugin hold ``[`` and ``]`` (``[/__w/pytorch/...]``
would be read as a closing markup tag) and may hold ANSI escapes or carriage returns
that rewrite the terminal. :func:`clean` makes such text inert; :func:`plain` wraps it
for rich so that a table cell or a print shows exactly the characters, with control
characters made visible (``\\x1b``) rather than obeyed.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls but tab and newline, DEL, and the C1 controls (U+0080-U+009F: 8-bit CSI etc.).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(value: Any) -> str:
    """``str(value)`` with every control character but tab and newline shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "" if value is None else str(value))


def plain(value: Any, style: str = ""):
    """A :class:`rich.text.Text` of ``clean(value)``: printed as is, no markup, no highlighting."""
    from rich.text import Text

    return Text(clean(value), style=style)
