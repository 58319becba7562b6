"""The suite's spelling of element types, shared by every workload's parameters:
``fp32``, ``bf16``, ``fp8``... -> the torch dtype, its size, and nccl-tests' type name.
Importing this module does not import torch."""

from __future__ import annotations

from typing import Any

# name -> (torch dtype attribute, nccl-tests' name, bytes per element).
# tf32 is fp32 storage with tensor-core math; fp8 means e4m3 (the forward-pass format).
DTYPES: dict[str, tuple[str, str, int]] = {
    "fp64": ("float64", "double", 8),
    "fp32": ("float32", "float", 4),
    "tf32": ("float32", "float", 4),
    "bf16": ("bfloat16", "bfloat16", 2),
    "fp16": ("float16", "half", 2),
    "fp8": ("float8_e4m3fn", "fp8_e4m3", 1),
    "int8": ("int8", "int8", 1),
    "uint8": ("uint8", "uint8", 1),
    "int32": ("int32", "int32", 4),
    "int64": ("int64", "int64", 8),
}


def torch_dtype(name: str) -> Any:
    """The torch dtype a parameter's dtype name stands for."""
    import torch

    return getattr(torch, DTYPES[name][0])


def element_size(name: str) -> int:
    """Bytes per element of a dtype name."""
    return DTYPES[name][2]


def nccl_name(name: str) -> str:
    """How nccl-tests' tables name the type."""
    return DTYPES[name][1]
