"""perfsuite's host: the public API that workload plugins build on.

Plugins import only what this module exports::

    from suite import hookimpl, Workload, Case, Work, Check, Requirements, param
    from suite import capture_graph      # a CUDA graph of one call, for drivers that replay their own
    from suite.checks import close, equal, relative_error
    from suite import dtypes             # "bf16" -> torch.bfloat16, sizes, nccl-tests names
    from suite import datasets           # deterministic JPEG and .npy data sets, cached
    from suite import input_pipelines    # image batches through DataLoader, torchvision GPU decode, DALI
"""
from __future__ import annotations

from suite import datasets, dtypes, input_pipelines
from suite.hookspecs import hookimpl
from suite.timing import capture_graph
from suite.workload import Case, Check, Requirements, Work, Workload, param

__version__ = "0.1.0"

__all__ = ["hookimpl", "Workload", "Case", "Work", "Check", "Requirements", "param", "capture_graph",
           "dtypes", "datasets", "input_pipelines", "__version__"]
