"""Option types for numbers that a run cannot take as they come: every number finite, every
count bounded, every digit ASCII.

click's ``FloatRange`` lets ``nan`` through (a NaN compares false with both bounds) and
``inf`` where no upper bound is set; Python's ``int()`` and ``float()`` read full-width and
other Unicode digits. The types here refuse all three, as a usage error (one line, exit 2)
before anything runs: full-width digits are refused on purpose, as ``-p`` values are
(perfsuite.engine.params), so that a record states what was typed.
"""

from __future__ import annotations

import math
from typing import Any

import click

# The bounds of the run options, stated where they are enforced.
MAX_REPEAT = 1000  # runs of one workload in one command (MLPerf asks for 5 to 10)
MAX_SEED = 2**32 - 1  # numpy's seeders and PYTHONHASHSEED take no more
MAX_SECONDS = 30 * 24 * 3600.0  # a timeout or a minimum time of thirty days
MAX_CALLS = 2**31 - 1  # warm-up or timed calls of one run
MAX_PROCESSES = 4096  # ranks on one node
MAX_NODES = 65536


MAX_NUMBER_CHARS = 40  # no number these options take is written longer


def _ascii(value: Any, param: click.Parameter | None, ctx: click.Context | None, kind: click.ParamType) -> None:
    if not isinstance(value, str):
        return
    if len(value) > MAX_NUMBER_CHARS:
        kind.fail(f"a value of {len(value):,} characters is not a number it takes", param, ctx)
    if not value.isascii():
        kind.fail(f"{value!r} is not written in ASCII digits", param, ctx)


class FiniteFloat(click.ParamType):
    """A finite number in ``[low, high]`` (``low`` excluded where ``low_open``)."""

    name = "number"

    def __init__(self, low: float | None = None, high: float | None = None, low_open: bool = False) -> None:
        self.low, self.high, self.low_open = low, high, low_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        _ascii(value, param, ctx, self)
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.low is not None and (number < self.low or (self.low_open and number == self.low)):
            self.fail(f"{value} is not {'above' if self.low_open else 'at least'} {self.low:g}", param, ctx)
        if self.high is not None and number > self.high:
            self.fail(f"{value} is above the limit of {self.high:g}", param, ctx)
        return number


class AsciiIntRange(click.IntRange):
    """click's ``IntRange``, refusing digits that are not ASCII."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _ascii(value, param, ctx, self)
        return super().convert(value, param, ctx)
