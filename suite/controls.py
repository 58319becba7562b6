"""Reproducibility controls: the one place their defaults live, and how they are applied
in the measuring process (seeds, deterministic algorithms)."""

from __future__ import annotations

import dataclasses
import os
import random
from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Controls:
    device: str = "cpu"
    seed: int = 0
    deterministic: bool = False
    warmup: int = 5  # untimed calls before the timed ones
    iterations: int | None = None  # a fixed count; None: run for min_time_s
    min_time_s: float | None = 1.0
    max_iterations: int = 10_000
    l2_flush: bool = False  # overwrite a buffer larger than L2 between timed calls (GPU)
    cuda_graph: bool = False  # time replays of a CUDA graph of the call
    timeout_s: float = DEFAULT_TIMEOUT_S
    repeat_index: int = 0
    repeat_count: int = 1
    profile: str | None = (
        None  # "torch" or "ncu": capture a few calls after each timed loop (perfsuite.measure.profiling)
    )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Controls":
        return cls(**data)


QUICK_MIN_TIME_S = 0.2

# The controls the harness's own timing loop (RunContext.time_fn) applies. A workload that
# times its own way (a driver) declares the ones it honours in Workload.controls_honoured;
# its records state the others as not applied (None) instead of as if they had been.
TIMING_CONTROLS = ("warmup", "iterations", "min_time_s", "max_iterations", "l2_flush", "cuda_graph")


def as_applied(controls: Controls, honoured: tuple[str, ...]) -> dict:
    """The record's ``controls``: every control, with the timing controls the workload does
    not honour set to None and named in ``not_applied``."""
    unknown = set(honoured) - set(TIMING_CONTROLS)
    if unknown:
        raise ValueError(f"controls_honoured names unknown timing controls {sorted(unknown)}")
    out = controls.to_dict()
    not_applied = [name for name in TIMING_CONTROLS if name not in honoured]
    for name in not_applied:
        out[name] = None
    out["not_applied"] = not_applied
    return out


def process_env(controls: Controls) -> dict[str, str]:
    """Environment of the measuring process, set when it is spawned: PYTHONHASHSEED only
    works from an interpreter's start, and cuBLAS reads its workspace setting when CUDA
    initialises."""
    env = {"PYTHONHASHSEED": str(controls.seed % 2**32)}  # its range is 0..4294967295
    if controls.deterministic:
        # cuBLAS needs a fixed workspace configuration for reproducible results.
        env["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return env


def apply_seeds(seed: int, deterministic: bool) -> None:
    """Seed python, numpy, torch and CUDA; switch deterministic algorithms on if asked."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # numpy is a core dependency; keep the message clear if it is gone
        raise RuntimeError("numpy is required to seed runs") from None
    try:
        import torch
    except ImportError:
        return  # workloads without torch have nothing more to seed
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
