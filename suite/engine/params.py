"""Typed workload parameters: parse ``k=v`` strings against a workload's Params dataclass.

One place defines each default (the dataclass); the ``quick`` preset overrides some,
and the command line overrides both.

Every value is checked before anything runs, whether it came as text (``-p lr=1e-3``) or
typed (a plan's TOML): a number must be finite (``nan``, ``inf`` refused: a record cannot
hold them, and nothing measured with them means anything), an integer must fit in 64 bits
(what torch, SQLite, PostgreSQL's bigint and every C library below take), and numbers are
written in ASCII digits alone: full-width or other Unicode digits and the ``_`` separators,
which Python's ``int()`` and ``float()`` would accept, are refused on purpose, so that what a
record states is what was typed. A list parameter names each item once (``ops=copy,copy``
would be recorded as two cases and measured as one).

The number rules (:func:`parse_int`, :func:`parse_float`) are the command line's too: its
option types (``perfsuite.cli._types``) call them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any


class ParamError(ValueError):
    """A parameter that does not exist or does not parse; the message is one line."""


INT_MIN, INT_MAX = -(2**63), 2**63 - 1


SHOWN_CHARS = 40  # of a refused value in its error line

# Numbers as they are written: a sign, ASCII digits, a point, an exponent; nothing else.
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


def _separators(text: str) -> str:
    """What a refusal adds where Python itself would have read the text (``1_000``)."""
    return " (ASCII digits only: no '_', no spaces)" if "_" in text or " " in text else ""


def parse_int(text: str) -> int:
    """An integer written in ASCII digits (an optional sign; surrounding spaces ignored) that fits
    in 64 bits; ``ValueError`` with the one-line reason otherwise."""
    t = text.strip()
    if not t.isascii():
        raise ValueError(f"{_shown(text)} is not written in ASCII digits")
    if not _INT_TEXT.fullmatch(t):
        raise ValueError(f"{_shown(text)} is not an integer{_separators(t)}")
    # Read only what can fit: Python refuses to read more than 4,300 digits, and 20 never fit.
    digits = t.lstrip("+-").lstrip("0") or "0"
    value = (int(digits) if len(digits) <= 20 else INT_MAX + 1) * (-1 if t.startswith("-") else 1)
    if not INT_MIN <= value <= INT_MAX:
        raise ValueError(f"{_shown(text)} is outside the 64-bit integer range")
    return value


def parse_float(text: str) -> float:
    """A finite number written in ASCII (sign, digits, point, exponent); ``nan`` and ``inf`` are
    refused as such; ``ValueError`` with the one-line reason otherwise."""
    t = text.strip()
    if not t.isascii():
        raise ValueError(f"{_shown(text)} is not written in ASCII digits")
    if t.lower() in _NON_FINITE:
        raise ValueError(f"{_shown(text)} is not a finite number")
    if not _FLOAT_TEXT.fullmatch(t):
        raise ValueError(f"{_shown(text)} is not a number{_separators(t)}")
    number = float(t)
    if not math.isfinite(number):  # 1e999: beyond a double
        raise ValueError(f"{_shown(text)} is not a finite number")
    return number


def _shown(text: str) -> str:
    """A refused value as its error line quotes it: a 5,000-digit value is not echoed whole."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text):,} characters)"


def _check_typed(kind: Any, value: Any, label: str) -> Any:
    """A value that arrived typed (from a plan or a record) checked as a parsed one would be."""
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ParamError(f"{label}: {value!r} is not a finite number")
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        if not INT_MIN <= value <= INT_MAX:
            raise ParamError(f"{label}: {value} is outside the 64-bit integer range")
        return value
    expected = {int: "an integer", float: "a number", bool: "a boolean"}
    if kind in expected and not (kind is bool and isinstance(value, bool)):
        raise ParamError(f"{label}: {value!r} is not {expected[kind]}")
    return value


def param_fields(params_cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(params_cls)}


def _field_type(params_cls: type, name: str) -> Any:
    return typing.get_type_hints(params_cls)[name]


def _parse_scalar(kind: Any, text: str, label: str) -> Any:
    if kind is bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ParamError(f"{label}: {_shown(text)} is not a boolean (true/false)")
    if kind is int:
        try:
            return _parse_size(text)
        except ValueError as exc:
            raise ParamError(f"{label}: {exc}") from None
    if kind is float:
        try:
            return parse_float(text)
        except ValueError as exc:
            raise ParamError(f"{label}: {exc}") from None
    if kind is str:
        return text
    raise ParamError(f"{label}: parameters of type {kind!r} cannot be set from the command line")


_SUFFIXES = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _parse_size(text: str) -> int:
    """Integers (:func:`parse_int`), with K/M/G binary suffixes for sizes (``64M`` = 64 MiB)."""
    t = text.strip()
    if t and t[-1].lower() in _SUFFIXES:
        try:
            value = parse_int(t[:-1]) * _SUFFIXES[t[-1].lower()]
        except ValueError as exc:
            raise ValueError(str(exc).replace(_shown(t[:-1]), _shown(text), 1)) from None
        if not INT_MIN <= value <= INT_MAX:
            raise ValueError(f"{_shown(text)} is outside the 64-bit integer range")
        return value
    return parse_int(t)


def coerce(params_cls: type, name: str, value: Any, label: str) -> Any:
    """Turn a command-line string (or an already-typed value) into the field's type."""
    kind = _field_type(params_cls, name)
    origin = typing.get_origin(kind)
    if origin is tuple:
        (item,) = {a for a in typing.get_args(kind) if a is not Ellipsis}
        items = value.split(",") if isinstance(value, str) else list(value)
        out = tuple(
            _parse_scalar(item, v, label) if isinstance(v, str) else _check_typed(item, v, label)
            for v in items
            if v != ""
        )
        repeated = sorted({str(v) for i, v in enumerate(out) if v in out[:i]})
        if repeated:
            raise ParamError(f"{label}: {', '.join(repeated)} given more than once (each item once)")
    elif origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null", "")):
            return None
        out = _parse_scalar(args[0], value, label) if isinstance(value, str) else _check_typed(args[0], value, label)
    else:
        out = _parse_scalar(kind, value, label) if isinstance(value, str) else _check_typed(kind, value, label)
    choices = param_fields(params_cls)[name].metadata.get("choices")
    if choices is not None:
        for v in out if isinstance(out, tuple) else (out,):
            if v not in choices:
                raise ParamError(f"{label}: {v!r} is not one of {', '.join(map(str, choices))}")
    return out


def resolve(workload_cls: Any, overrides: Mapping[str, Any], quick: bool) -> Any:
    """Build the workload's Params: defaults, then the quick preset, then overrides."""
    fields = param_fields(workload_cls.Params)
    values: dict[str, Any] = {}
    layers = ([dict(workload_cls.quick)] if quick else []) + [dict(overrides)]
    for layer in layers:
        for key, raw in layer.items():
            if key not in fields:
                known = ", ".join(sorted(fields)) or "none"
                raise ParamError(f"unknown parameter {key!r} for {workload_cls.name} (known: {known})")
            values[key] = coerce(workload_cls.Params, key, raw, f"{workload_cls.name} parameter {key}")
    try:
        return workload_cls.Params(**values)
    except (TypeError, ValueError) as exc:
        raise ParamError(f"{workload_cls.name}: {exc}") from None


def to_dict(params: Any) -> dict[str, Any]:
    """JSON-ready resolved parameters (tuples become lists)."""
    out = {}
    for f in dataclasses.fields(params):
        v = getattr(params, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def from_dict(workload_cls: Any, data: Mapping[str, Any]) -> Any:
    """Rebuild Params from a record's resolved parameters (in the measuring process)."""
    return resolve(workload_cls, {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}, quick=False)


def parse_assignments(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``["m=1024", "dtype=bf16"]`` -> dict; a malformed item is a ParamError."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ParamError(f"--param {item!r} is not of the form key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def describe(params_cls: type) -> list[dict[str, Any]]:
    """One dict per parameter: name, type, default, help, choices (for listings)."""
    hints = typing.get_type_hints(params_cls)
    rows = []
    for f in dataclasses.fields(params_cls):
        kind = hints[f.name]
        rows.append(
            {
                "name": f.name,
                "type": getattr(kind, "__name__", str(kind).replace("typing.", "")),
                "default": list(f.default) if isinstance(f.default, tuple) else f.default,
                "help": f.metadata.get("help", ""),
                "choices": list(f.metadata["choices"]) if "choices" in f.metadata else None,
            }
        )
    return rows
