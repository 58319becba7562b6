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

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Controls":
        return cls(**data)


QUICK_MIN_TIME_S = 0.2


def prepare_process_env(controls: Controls) -> None:
    """Environment that must be set before torch initialises CUDA."""
    if controls.deterministic:
        # cuBLAS needs a fixed workspace configuration for reproducible results.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ.setdefault("PYTHONHASHSEED", str(controls.seed))


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
