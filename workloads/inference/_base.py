"""What both LoadGen workloads share: their class attributes, building a float32 reference
and a measured copy of one transformers model with deterministic synthetic sequences, the
model details recorded with the run, handing a :class:`~workloads.inference.driver.Model`
to the driver, and the per-scenario table of ``perfsuite show``.

A workload of this family says only what differs: its transformers config and model, the
length range of its sequences, its two backends (measured and reference) and how LoadGen's
outputs are decoded and scored. No torch, transformers or LoadGen at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from perfsuite import Requirements, Workload
from perfsuite.headlines import LOADGEN

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext
    from perfsuite.workloads.inference._driver import Model


class LoadGenWorkload(Workload):
    """Base class of the inference workloads: a transformers model driven by MLPerf LoadGen."""

    category = "inference"
    version = 1
    controls_honoured = ()  # LoadGen decides how long and how often: none of the timing loop's controls apply
    # LoadGen's result per scenario, as MLPerf Inference reports it, with its VALID/INVALID verdict:
    # SingleStream the 90th-percentile latency (its early-stopping estimate where LoadGen gives one),
    # MultiStream the 99th, Server completed samples/s at a VALID target, Offline samples/s.
    headline = LOADGEN
    requirements = Requirements(
        devices=("cpu", "cuda"), max_world_size=1, packages=("torch", "transformers", "mlperf_loadgen")
    )
    backend: Any = None  # what LoadGen's SUT calls (the measured dtype)
    reference: Any = None  # the same weights in float32, for the accuracy check

    # -- what each workload says ------------------------------------------------------
    def build(self) -> tuple[Any, Callable[[], Any]]:
        """The transformers config and a function that builds the model from it (called
        after the hub is set offline, so transformers is imported here)."""
        raise NotImplementedError

    def sequence_lengths(self) -> tuple[int, int]:
        """The shortest and longest synthetic sequence (tokens)."""
        raise NotImplementedError

    def backends(self, ctx: "RunContext", measured: Any, reference: Any, samples: list) -> tuple[Any, Any]:
        """The measured and the reference backend over ``samples``."""
        raise NotImplementedError

    def model_details(self, ctx: "RunContext") -> Mapping[str, Any]:
        """Recorded in ``details["model"]`` after the fields every inference workload records."""
        return {}

    def model(self) -> "Model":
        """What the driver runs: backends, decoding and scoring of LoadGen's outputs."""
        raise NotImplementedError

    # -- the shared lifecycle -----------------------------------------------------------
    def setup(self, ctx: "RunContext") -> None:
        from perfsuite.workloads.inference._models import (
            float32_and_measured,
            offline_hub,
            synthetic_sequences,
        )

        offline_hub()
        p = self.params
        config, make = self.build()
        ref, measured = float32_and_measured(make, p.dtype, ctx.torch_device, p.model_seed)
        shortest, longest = self.sequence_lengths()
        samples = synthetic_sequences(p.num_samples, shortest, longest, p.vocab, p.model_seed)
        self.backend, self.reference = self.backends(ctx, measured, ref, samples)
        ctx.details["model"] = {
            "config": type(config).__name__,
            "parameters": sum(t.numel() for t in ref.parameters()),
            "dtype": p.dtype,
            "reference_dtype": "fp32",
            **self.model_details(ctx),
        }

    def execute(self, ctx: "RunContext") -> None:
        from perfsuite.workloads.inference._driver import Driver

        Driver(ctx, self.params, self.model()).run()

    def teardown(self, ctx: "RunContext") -> None:
        self.backend = self.reference = None

    @classmethod
    def render_details(cls, record: Mapping[str, Any]) -> Any:
        from perfsuite.workloads.inference._report import render_table

        return render_table(record)
