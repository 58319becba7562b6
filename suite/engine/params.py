"""Typed workload parameters: parse ``k=v`` strings against a workload's Params dataclass.

One place defines each default (the dataclass); the ``quick`` preset overrides some,
and the command line overrides both.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any


class ParamError(ValueError):
    """A parameter that does not exist or does not parse; the message is one line."""


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
        raise ParamError(f"{label}: {text!r} is not a boolean (true/false)")
    if kind is int:
        try:
            return _parse_int(text)
        except ValueError:
            raise ParamError(f"{label}: {text!r} is not an integer") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise ParamError(f"{label}: {text!r} is not a number") from None
    if kind is str:
        return text
    raise ParamError(f"{label}: parameters of type {kind!r} cannot be set from the command line")


_SUFFIXES = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _parse_int(text: str) -> int:
    """Integers, with K/M/G binary suffixes for sizes (``64M`` = 64 MiB)."""
    t = text.strip()
    if t and t[-1].lower() in _SUFFIXES:
        return int(t[:-1]) * _SUFFIXES[t[-1].lower()]
    return int(t)


def coerce(params_cls: type, name: str, value: Any, label: str) -> Any:
    """Turn a command-line string (or an already-typed value) into the field's type."""
    kind = _field_type(params_cls, name)
    origin = typing.get_origin(kind)
    if origin is tuple:
        (item,) = {a for a in typing.get_args(kind) if a is not Ellipsis}
        items = value.split(",") if isinstance(value, str) else list(value)
        out = tuple(_parse_scalar(item, str(v), label) if isinstance(v, str) else v for v in items if v != "")
    elif origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if isinstance(value, str) and value.lower() in ("none", "null", ""):
            return None
        out = _parse_scalar(args[0], value, label) if isinstance(value, str) else value
    else:
        out = _parse_scalar(kind, value, label) if isinstance(value, str) else value
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
