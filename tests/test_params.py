"""Typed parameters: defaults, quick preset, command-line strings, errors of one line."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from perfsuite import Workload, param
from perfsuite.engine.params import (
    ParamError,
    describe,
    from_dict,
    parse_assignments,
    resolve,
    to_dict,
)


@dataclass(frozen=True)
class P:
    size: int = param(1024, "elements")
    scale: float = param(1.5, "factor")
    dtypes: tuple[str, ...] = param(("bf16",), "dtypes", choices=("fp32", "bf16", "fp16"))
    causal: bool = param(False, "mask")
    name: str | None = param(None, "optional label")


class W(Workload):
    name = "test.params"
    category = "kernels"
    Params = P
    quick = {"size": 16}


def test_layers_defaults_quick_and_overrides():
    assert resolve(W, {}, quick=False) == P()
    assert resolve(W, {}, quick=True).size == 16
    p = resolve(W, {"size": "64M", "scale": "2", "dtypes": "fp32,fp16", "causal": "yes", "name": "x"}, quick=True)
    assert p == P(size=64 * 1024**2, scale=2.0, dtypes=("fp32", "fp16"), causal=True, name="x")
    assert from_dict(W, to_dict(p)) == p
    assert resolve(W, {"name": "none"}, quick=False).name is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"sizes": "1"}, "unknown parameter 'sizes' for test.params (known: causal, dtypes, name, scale, size)"),
        ({"size": "big"}, "test.params parameter size: 'big' is not an integer"),
        ({"dtypes": "fp8"}, "test.params parameter dtypes: 'fp8' is not one of fp32, bf16, fp16"),
        ({"causal": "maybe"}, "test.params parameter causal: 'maybe' is not a boolean (true/false)"),
    ],
)
def test_errors_are_one_clear_line(overrides, message):
    with pytest.raises(ParamError) as info:
        resolve(W, overrides, quick=False)
    assert str(info.value) == message


def test_assignments_and_description():
    assert parse_assignments(["a=1", "b = x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ParamError, match="key=value"):
        parse_assignments(["novalue"])
    rows = {r["name"]: r for r in describe(P)}
    assert rows["dtypes"]["choices"] == ["fp32", "bf16", "fp16"] and rows["dtypes"]["default"] == ["bf16"]
    assert rows["size"]["type"] == "int" and rows["size"]["help"] == "elements"
