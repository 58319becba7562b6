"""perfsuite: a plugin-based, MLPerf-style benchmark suite for AI systems, with a results registry.

This module is the public API that workload plugins build on; they import only what it
exports (``__all__``) and the public modules named here::

    from perfsuite import hookimpl, Workload, Case, Work, Check, Requirements, param
    from perfsuite import Headline        # a workload's headline: per scenario, per size, figures beside
    from perfsuite.headlines import LOADGEN_LLM   # the families' standard headlines (LoadGen, sweep, training)
    from perfsuite import RunContext      # the type of a workload's ``ctx`` (imported on first use)
    from perfsuite import capture_graph   # a CUDA graph of one call, for drivers that replay their own
    from perfsuite import copy_case       # a copy timed and verified bit-exact (memory, host, peer links)
    from perfsuite.checks import close, equal, relative_error
    from perfsuite import dtypes          # "bf16" -> torch.bfloat16, sizes, nccl-tests names
    from perfsuite import fused_chain     # the bias+GELU+residual+LayerNorm chain: inputs, reference, tolerance
    from perfsuite import distributed     # for multi-rank drivers: ranks, progress notes, NCCL version, topology
    from perfsuite.inputs import datasets, images, tensors   # data sets; batches of images or tensors
    from perfsuite.inputs import cache    # the cache folder for what a run makes once (data sets, models)
    from perfsuite.testing import run_in_process       # a plugin's tests: run a workload here, get its outcome
    from perfsuite.convergence import verdict   # MLPerf-style reference convergence points: a run's verdict
    from perfsuite.serving_steady import no_steady_state   # a serving rate step: a steady-state figure or not
    from perfsuite.owned_output import publish_folder   # a folder a user names: never over what it did not write

For code that drives perfsuite (a notebook, a CI script): ``perfsuite.run(name, params=...,
controls=...)`` runs a workload as ``perfsuite run`` does and returns its stored record;
``perfsuite.load()`` returns the registry as a pandas DataFrame (``perfsuite.api`` says more).
Both import what they need when called: ``import perfsuite`` stays light.

The host behind it has one sub-package per wing: ``engine`` (running), ``measure`` (timing,
statistics, NVML), ``crosscheck`` (the reference tools), ``analysis`` (compare, history,
scores, tables), ``doctor`` (pre-flight), ``publish`` (submissions trees and the leaderboard),
``cli`` (the commands); and ``perfsuite.registry``, ``perfsuite.schemas``, ``perfsuite.workloads``
(the built-in workloads, a plugin like any other).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfsuite import distributed, dtypes, fused_chain, headlines, inputs
from perfsuite.case import Case, Check, Work
from perfsuite.copies import copy_case
from perfsuite.hookspecs import hookimpl
from perfsuite.measure.timing import capture_graph
from perfsuite.schemas.headline import Headline
from perfsuite.workload import Requirements, Workload, param

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite.context import RunContext

from perfsuite.version import __version__

__all__ = [
    "Case",
    "Check",
    "Headline",
    "Requirements",
    "RunContext",
    "Work",
    "Workload",
    "__version__",
    "capture_graph",
    "copy_case",
    "distributed",
    "dtypes",
    "fused_chain",
    "headlines",
    "hookimpl",
    "inputs",
    "load",
    "param",
    "run",
]


def run(name: str, params: Any = None, controls: Any = None, **options: Any) -> Any:
    """Run a workload as ``perfsuite run NAME`` does; returns its stored record
    (:class:`perfsuite.api.Record`). See :func:`perfsuite.api.run`."""
    from perfsuite import api

    return api.run(name, params, controls, **options)


def load(db: str | None = None, **filters: Any) -> Any:
    """The registry's results as a pandas DataFrame, one row per metric and case of each run.
    See :func:`perfsuite.api.load`."""
    from perfsuite import api

    return api.load(db, **filters)


def __getattr__(name: str) -> Any:
    """``RunContext`` on first use: its module imports numpy, which ``perfsuite --help`` need not."""
    if name == "RunContext":
        from perfsuite.context import RunContext

        return RunContext
    raise AttributeError(f"module 'perfsuite' has no attribute {name!r}")
