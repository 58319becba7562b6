"""Option types, one per input rule, used by every command: numbers finite and bounded, digits
ASCII, endpoints parsed, names printable.

click's ``FloatRange`` lets ``nan`` through (a NaN compares false with both bounds) and
``inf`` where no upper bound is set; its ``IntRange`` with no bound reads integers no database
can store (``results --limit 99999999999999999999999`` reached SQLite as an ``OverflowError``);
Python's ``int()`` and ``float()`` read full-width and other Unicode digits and ``1_0``. The
types here refuse all of these as a usage error (one line, exit 2) before anything runs, with
the number rules of ``-p`` values (:func:`perfsuite.engine.params.parse_int`,
:func:`~perfsuite.engine.params.parse_float`), so that a record states what was typed. A value
that arrives typed (a plan's TOML) is held to the same rules: a boolean is not an integer and
a fraction is not a count.
"""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
from typing import Any

import click

from perfsuite.engine.params import INT_MAX, INT_MIN, parse_float, parse_int
from perfsuite.engine.requests import MAX_SEED as MAX_SEED  # the seed's bound: the builder checks seed + repeat by it

# The bounds of the run options, stated where they are enforced.
MAX_REPEAT = 1000  # runs of one workload in one command (MLPerf asks for 5 to 10)
MAX_SECONDS = 30 * 24 * 3600.0  # a timeout or a minimum time of thirty days
MAX_CALLS = 2**31 - 1  # warm-up or timed calls of one run
MAX_PROCESSES = 4096  # ranks on one node
MAX_NODES = 65536
MAX_PORT = 65535

MAX_NUMBER_CHARS = 40  # no number these options take is written longer
MAX_NAME_CHARS = 200  # a label, a system or job name


def _length(value: Any, param: click.Parameter | None, ctx: click.Context | None, kind: click.ParamType) -> None:
    if isinstance(value, str) and len(value) > MAX_NUMBER_CHARS:
        kind.fail(f"a value of {len(value):,} characters is not a number it takes", param, ctx)


class FiniteFloat(click.ParamType):
    """A finite number in ``[low, high]`` (``low`` excluded where ``low_open``), written in ASCII."""

    name = "number"

    def __init__(self, low: float | None = None, high: float | None = None, low_open: bool = False) -> None:
        self.low, self.high, self.low_open = low, high, low_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        _length(value, param, ctx, self)
        if isinstance(value, str):
            try:
                number = parse_float(value)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
            if not math.isfinite(number):
                self.fail(f"{value!r} is not a finite number", param, ctx)
        else:
            self.fail(f"{value!r} is not a number", param, ctx)
        if self.low is not None and (number < self.low or (self.low_open and number == self.low)):
            self.fail(f"{value} is not {'above' if self.low_open else 'at least'} {self.low:g}", param, ctx)
        if self.high is not None and number > self.high:
            self.fail(f"{value} is above the limit of {self.high:g}", param, ctx)
        return number


class AsciiIntRange(click.IntRange):
    """click's ``IntRange`` for integers written in ASCII digits (no ``_``), bounded to 64 bits
    where no tighter bound is given (what SQLite, PostgreSQL's bigint and torch store)."""

    def __init__(self, min: int | None = None, max: int | None = None) -> None:
        super().__init__(min=INT_MIN if min is None else min, max=INT_MAX if max is None else max)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _length(value, param, ctx, self)
        if isinstance(value, str):
            try:
                value = parse_int(value)
            except ValueError as exc:
                if "64-bit" in str(exc):  # beyond any bound these options have
                    self.fail(f"{value.strip()} is not in the range {self._describe_range()}", param, ctx)
                self.fail(str(exc), param, ctx)
        elif isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{value!r} is not an integer", param, ctx)
        return super().convert(value, param, ctx)


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"  # one part of a host name (RFC 1123)
_HOST_NAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*\.?")


class Endpoint(click.ParamType):
    """``HOST:PORT``: a host name or IPv4 address, or an IPv6 address in brackets, and a port of
    1 to 65535 in ASCII digits. Checked here because torchrun, given a bad one, fails only after
    its own rendezvous timeout, and its traceback would become the run's error."""

    name = "host:port"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if not isinstance(value, str):
            self.fail(f"{value!r} is not HOST:PORT", param, ctx)
        host, sep, port = value.rpartition(":")
        if not sep or not host:
            self.fail(f"{value!r} is not HOST:PORT", param, ctx)
        if not (port.isascii() and port.isdigit()) or len(port) > 5 or not 1 <= int(port) <= MAX_PORT:
            self.fail(f"{value!r}: the port {port!r} is not a number from 1 to {MAX_PORT}", param, ctx)
        if host.startswith("[") and host.endswith("]"):
            try:
                ipaddress.IPv6Address(host[1:-1])
            except ValueError:
                self.fail(f"{value!r}: {host} is not an IPv6 address", param, ctx)
        elif not _HOST_NAME.fullmatch(host):
            self.fail(f"{value!r}: {host!r} is not a host name or address (an IPv6 address goes in [ ])", param, ctx)
        return value


def name_problem(value: str, limit: int = MAX_NAME_CHARS) -> str | None:
    """Why ``value`` cannot be a name (a label, a system or job name), or None: a name is
    printed in tables, written into files and command lines, so it holds no control character
    (a newline would split its line, an escape would drive the terminal) and is not empty."""
    if not value.strip():
        return "a name cannot be empty"
    if len(value) > limit:
        return f"a name of {len(value):,} characters (at most {limit})"
    bad = next((c for c in value if unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp")), None)
    if bad is not None:
        return f"{value!r} holds a control character ({ord(bad):#04x})"
    return None


class Name(click.ParamType):
    """A name given on the command line: printable, not empty, at most 200 characters."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if not isinstance(value, str):
            self.fail(f"{value!r} is not a name", param, ctx)
        problem = name_problem(value)
        if problem is not None:
            self.fail(problem, param, ctx)
        return value
