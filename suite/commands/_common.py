"""Helpers shared by the registry commands: plain-text cells and verdict colours."""
from __future__ import annotations

VERDICT_COLOURS = {"faster": "green", "slower": "red", "no significant change": "yellow", "mixed": "magenta", "not tested (one sample)": "dim",
                   "reproduced": "green", "did not reproduce": "red"}


def text(value) -> "object":
    """A rich Text cell: record text is shown as characters, never read as markup."""
    from rich.text import Text

    return Text("" if value is None else str(value))


def verdict_text(verdict: str):
    from rich.text import Text

    return Text(verdict, style=f"bold {VERDICT_COLOURS.get(verdict, '')}".strip())


def pct(ratio: float) -> str:
    return f"{(ratio - 1.0) * 100:+.2f}%"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"
