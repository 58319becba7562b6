"""``kernels.launch``: what launching one tiny kernel costs, from Python and from a CUDA graph.

One call is a chain of ``launches`` in-place additions ``x.add_(1)`` on a tiny tensor, so
the time per call divided by ``launches`` is the cost of a launch, not of the arithmetic.

- ``eager``: the chain from Python: interpreter, dispatcher and driver launch per op;
- ``graph`` (CUDA only): the same chain captured once in a ``torch.cuda.CUDAGraph`` and
  replayed: one host call launches all of them.

Both are timed without the harness's own graph capture (the graph case is already a
graph; the eager case would stop being eager). Metrics besides time: ``items_per_s``
(launches/s) and ``us_per_launch`` (microseconds per launch, lower is better).
Verified by the count: after a known number of calls, x = start + calls * launches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfsuite import Case, Check, Work, capture_graph, param
from perfsuite.checks import equal
from perfsuite.workloads.kernels._base import KernelWorkload

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

VERIFY_CALLS = 3


@dataclass(frozen=True)
class LaunchParams:
    launches: int = param(1000, "tiny kernels per call (x.add_(1) each)")
    numel: int = param(256, "elements of the tensor each kernel updates")

    def __post_init__(self) -> None:
        if self.launches < 1 or self.numel < 1:
            raise ValueError("launches and numel must be positive")


class Launch(KernelWorkload):
    name = "kernels.launch"
    version = 1
    description = "Per-launch overhead of tiny kernels: eager from Python vs one CUDA graph replay"
    Params = LaunchParams
    quick = {"launches": 100}
    primary_metric = "us_per_launch"

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        # Integers stored in float32 stay exact below 2^24, far above what verification adds.
        self.start = torch.randint(1, 1000, (p.numel,), device=ctx.torch_device).to(torch.float32)
        self.x = self.start.clone()
        self._fns: dict[str, Callable[[], None]] = {"eager": self.chain}
        self._skipped: dict[str, str] = {}
        if ctx.device == "cuda":
            self._fns["graph"] = capture_graph(self.chain)
        else:
            self._skipped["graph"] = "CUDA graphs need a CUDA device"

    def chain(self) -> None:
        x = self.x
        for _ in range(self.params.launches):
            x.add_(1)

    def _verify(self, label: str) -> Check:
        import torch

        fn = self._fns[label]
        self.x.copy_(self.start)  # in place: the graph replays on this very memory
        for _ in range(VERIFY_CALLS):
            fn()
        expected = self.start + float(VERIFY_CALLS * self.params.launches)
        check = equal(label, self.x, expected, method=f"x == start + {VERIFY_CALLS} calls x launches")
        if torch.equal(self.x, self.start):
            check.detail = "x unchanged: no kernel ran"
        return check

    def cases(self, ctx: "RunContext") -> list[Case]:
        work = Work(items=float(self.params.launches), item_unit="launches")
        built = [
            Case(
                label=label,
                fn=fn,
                work=work,
                verify=lambda label=label: self._verify(label),
                graph_safe=False,
                baseline=label == "eager",
            )
            for label, fn in self._fns.items()
        ]
        for label, reason in self._skipped.items():
            ctx.skip_case(label, reason)
        return built

    def execute(self, ctx: "RunContext") -> None:
        n = self.params.launches
        for case in self.cases(ctx):
            m = ctx.measure(case)
            ctx.add_metric(
                case.label,
                "us_per_launch",
                "us",
                [s * 1e6 / n for s in m.samples_s],
                higher_is_better=False,
                aggregate="max",
            )
            ctx.verify(case)

    def teardown(self, ctx: "RunContext") -> None:
        self.x = self.start = None
        self._fns = {}
