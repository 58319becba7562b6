"""Figures in units people read: ``0.000779 TFLOP/s`` is ``779 MFLOP/s``, ``41,840 us`` is
``41.8 ms``, ``16,280 images/s`` is ``16.3k images/s``, a fraction is a percentage.

A record states each metric in the unit its workload chose; a table keeps that unit where the
figure reads well in it (1 to 9,999) and moves to the next prefix only where it does not, so
that ``1,467 TFLOP/s`` stays as the field quotes it. Three significant figures, thousands
separated. Plain functions of (value, unit), used by every table and the exports' readers.
"""

from __future__ import annotations

import math
import re

# Decimal prefixes by power of ten; "u" and "µ" are both micro (records write "us").
_PREFIX_EXP = {"p": -12, "n": -9, "u": -6, "µ": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_EXP_PREFIX = {-12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}
# Units whose prefix scales: a prefix letter before one of these bases.
_SCALED_BASES = ("FLOP/s", "B/s", "s", "FLOP", "B", "W", "J", "Hz")
# Time never goes above seconds: "90 s", not "90 ks" (nor below picoseconds).
_LIMITS = {"s": (-12, 0)}
_KEEP_BELOW = 10_000.0  # a figure under this stays in its own unit
_RATE = re.compile(r"^(?P<prefix>[kMG]?)(?P<what>[a-z][a-z_ ]*/s)$")  # "images/s", "tokens/s", "kqueries/s"


def number(value: float) -> str:
    """Three significant figures, thousands separated: 779, 23.4, 1.47, 0.0123, 1,467, -5.20."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    a = abs(value)
    if a >= 100:
        return f"{value:,.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    digits = 2 - math.floor(math.log10(a))  # 0.0123 -> 4 decimals: three significant figures
    return f"{value:.{digits}f}"


def _split(unit: str) -> tuple[int, str, bool] | None:
    """(power of ten, base, whether the base takes a space before it) of a unit that scales."""
    for base in _SCALED_BASES:
        if unit.endswith(base):
            prefix = unit[: -len(base)]
            if prefix in _PREFIX_EXP:
                return _PREFIX_EXP[prefix], base, False
    m = _RATE.match(unit)
    if m:
        return _PREFIX_EXP[m["prefix"]], m["what"], True
    return None


def scale_for(value: float, unit: str) -> tuple[float, str]:
    """(factor, unit) that shows ``value`` (in ``unit``) well: ``value * factor`` in the new unit.
    Units that do not scale (``fraction``, ``W``-less names, counts) come back unchanged."""
    split = _split(unit)
    if split is None or value == 0 or not math.isfinite(value):
        return 1.0, unit
    exp, base, spaced = split
    lo, hi = _LIMITS.get(base, (-12, 15) if not spaced else (0, 9))
    new = exp
    a = abs(value)
    while a < 1 and new - 3 >= lo:
        a, new = a * 1000, new - 3
    while a >= _KEEP_BELOW and new + 3 <= hi:
        a, new = a / 1000, new + 3
    if new == exp:
        return 1.0, unit
    prefix = _EXP_PREFIX[new]
    shown = f"{prefix}{base}" if not spaced else (f"{prefix} {base}" if prefix else base)
    return 10.0 ** (exp - new), shown


def _count_prefix(shown: str) -> str:
    """The prefix letter of a count rate (``k`` of ``k images/s``), written on each number."""
    return shown[0] if shown[:2] in ("k ", "M ", "G ") else ""


def parts(value: float | None, unit: str) -> tuple[str, str]:
    """(number, unit) scaled, for a value column beside a unit column: ``("779", "MFLOP/s")``,
    ``("16.3k", "images/s")``, ``("74.1", "%")``; ``("", "")`` for no value."""
    if value is None:
        return "", ""
    if unit == "fraction":
        return number(value * 100), "%"
    factor, shown = scale_for(value, unit)
    prefix = _count_prefix(shown)
    if prefix:  # a count rate: the prefix on the number, "16.3k images/s"
        return f"{number(value * factor)}{prefix}", shown[2:]
    return number(value * factor), shown


def quantity(value: float | None, unit: str) -> str:
    """``value unit`` scaled: ``779 MFLOP/s``, ``41.8 ms``, ``16.3k images/s``, ``74.1%``."""
    num, shown = parts(value, unit)
    return num + shown if shown == "%" else f"{num} {shown}".strip()


def alike(x: float | None, value: float, unit: str) -> str:
    """``x`` in the unit :func:`parts` chose for ``value``, with the prefix it wrote on the number
    (a count rate's ``k``), so that a figure beside the value reads in the same unit: the mean
    ``171k`` beside ``175k images/s``, never ``171``. '' for None."""
    if x is None:
        return ""
    if unit == "fraction":
        return number(x * 100)
    factor, shown = scale_for(value, unit)
    return f"{number(x * factor)}{_count_prefix(shown)}"


def interval(low: float | None, high: float | None, value: float, unit: str) -> str:
    """A confidence interval in the unit :func:`quantity` chose for ``value``: ``770–790``
    (beside ``779 MFLOP/s``), ``171k–215k`` (beside ``175k images/s``: each end carries the
    prefix the value carries)."""
    if low is None or high is None:
        return ""
    if unit == "fraction":
        return f"{number(low * 100)}–{number(high * 100)}%"
    return f"{alike(low, value, unit)}–{alike(high, value, unit)}"
