"""perfsuite's host: the public API that workload plugins build on.

Plugins import only what this module exports (``__all__``)::

    from suite import hookimpl, Workload, Case, Work, Check, Requirements, param
    from suite import RunContext         # the type of a workload's ``ctx`` (imported on first use)
    from suite import capture_graph      # a CUDA graph of one call, for drivers that replay their own
    from suite import copy_case          # a copy timed and verified bit-exact (memory, host, peer links)
    from suite.checks import close, equal, relative_error
    from suite import dtypes             # "bf16" -> torch.bfloat16, sizes, nccl-tests names
    from suite import fused_chain        # the bias+GELU+residual+LayerNorm chain: inputs, reference, tolerance
    from suite import distributed        # for multi-rank drivers: ranks, progress notes, NCCL version, topology
    from suite import datasets           # deterministic JPEG and .npy data sets, cached
    from suite import input_pipelines    # image batches through DataLoader, torchvision GPU decode, DALI
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from suite import datasets, distributed, dtypes, fused_chain, input_pipelines
from suite.cases import copy_case
from suite.hookspecs import hookimpl
from suite.timing import capture_graph
from suite.workload import Case, Check, Requirements, Work, Workload, param

if TYPE_CHECKING:  # pragma: no cover - typing only
    from suite.context import RunContext

__version__ = "0.1.0"

__all__ = ["hookimpl", "Workload", "Case", "Work", "Check", "Requirements", "param", "capture_graph",
           "copy_case", "RunContext", "dtypes", "fused_chain", "distributed", "datasets", "input_pipelines",
           "__version__"]


def __getattr__(name: str) -> Any:
    """``RunContext`` on first use: its module imports numpy, which ``perfsuite --help`` need not."""
    if name == "RunContext":
        from suite.context import RunContext

        return RunContext
    raise AttributeError(f"module 'suite' has no attribute {name!r}")
