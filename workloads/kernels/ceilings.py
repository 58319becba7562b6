"""``kernels.ceilings``: this device's own ceilings, the roof every other figure is judged by.

A ceiling is an upper bound: a workload that beats it shows the ceiling was measured wrong.
So each resource is measured over a few shapes and the best kept, in two regimes:

- *burst*: ``burst_iterations`` calls (after the warm-up) from a cool GPU, once NVML has
  shown no power or thermal clock event for two seconds (at most ``cool_wait_s`` of
  waiting), at every shape, and ``best_shape_bursts`` times more at the best one; for
  the matmuls once more at every shape with L2 flushed between calls (without, if the run
  flushes), the way ``do_bench`` and ``kernels.gemm --l2-flush`` run: the flush's memset
  gives the power budget a rest between GEMMs, and on an H200 an fp8 8192^3 GEMM read 1,489
  TFLOP/s so against 1,478 without, above a ceiling measured
  without it;
- *sustained*: back-to-back calls for ``sustained_s`` at the best burst shape, long enough
  to reach the power limit (an H200's bf16 GEMM: 790 TFLOP/s burst at 1980 MHz, 670
  sustained at 1455 MHz under "software power cap").

The ceiling metric of a resource (metric ``tflops`` for ``matmul.*``, ``gbps`` for the
rest, case label == resource, which the runner matches) holds the samples of the best of
all these measurements and, as its value, their fastest call; ``burst_<metric>`` and
``sustained_<metric>`` hold each regime's. A host<->device link's ceiling is its fastest
call too (``details["ceiling_statistic"]``).
``details["ceilings"][resource]`` says which shape and regime won, each regime's figure,
iterations and the clocks, power and clock events NVML saw during it.

Resources:

- ``matmul.fp32|tf32|bf16|fp16|fp8``: ``kernels.gemm``'s own matmul at each of
  ``matmul_shapes`` (``MxNxK``) in each precision the device has (CPU: fp32 and bf16);
- ``memory``: each of ``kernels.memory``'s access patterns (a device-to-device copy, one read
  and one write; STREAM's triad, two reads and a write) at each of ``copy_sizes`` (the bytes of
  one buffer), bytes read + written, the fastest pattern winning: on an H100 a 1 GiB triad ran at
  3,041 GB/s against the copies' 3,030, so a ceiling of copies alone was below a workload judged
  by it. The best over sizes bounds every workload judged against ``memory`` only if the sizes
  include theirs: the defaults (256 MiB and up, far beyond an H100/H200 L2) give HBM's
  bandwidth for the full-size runs; the quick preset goes down to 64 KiB because the quick
  workloads are cache-resident, and then the ceiling is a cache's;
- ``h2d.pinned|h2d.pageable|d2h.pinned|d2h.pageable``: host<->device copies of
  ``transfer_bytes`` from/to pinned or ordinary host memory, timed as the run's controls say.

A resource the device lacks is skipped with its reason in ``details["skipped_cases"]``.
Every case is verified like its workload (a sampled float64 grid, per element; copies bit-exact).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Case, param
from perfsuite.workloads.kernels._base import KernelWorkload
from perfsuite.workloads.kernels.gemm import (
    MATMUL_DTYPES,
    MatmulOperands,
    matmul_case,
    matmul_unsupported,
)
from perfsuite.workloads.kernels.memory import GIB, MIB, copy_case, triad_case

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

TRANSFERS = ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable")
# The CPU's ceilings (see DESIGN.md): fp16 matmul on a CPU is not a hardware peak worth
# a roofline, and tf32 / fp8 are GPU tensor-core modes.
CPU_MATMUL = ("fp32", "bf16")
REGIMES = ("burst", "sustained")
MIN_SUSTAINED_CALLS = 10


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"8192x8192x16384"`` -> (m, n, k)."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"matmul shape {text!r} is not MxNxK with positive integers (e.g. 8192x8192x8192)")
    m, n, k = (int(p) for p in parts)
    return m, n, k


@dataclass(frozen=True)
class CeilingsParams:
    matmul_shapes: tuple[str, ...] = param(
        ("4096x4096x4096", "4096x4096x16384", "8192x8192x8192", "8192x8192x16384"),
        "matmul shapes MxNxK measured for each precision; the best is kept",
    )
    matmul_dtypes: tuple[str, ...] = param(MATMUL_DTYPES, "matmul precisions to measure", choices=MATMUL_DTYPES)
    copy_sizes: tuple[int, ...] = param(
        (256 * MIB, 1 * GIB, 2 * GIB), "bytes of each buffer of the device-memory copies and triads; the best is kept"
    )
    transfer_bytes: int = param(1 * GIB, "bytes of each host<->device transfer")
    burst_iterations: int = param(20, "timed calls of a burst figure (after the warm-up, from a cool GPU)")
    sustained_s: float = param(2.0, "seconds of back-to-back calls of a sustained figure (reaches the power limit)")
    cool_wait_s: float = param(10.0, "longest wait for NVML to show no power/thermal event before a burst")
    best_shape_bursts: int = param(
        2, "bursts more at the best shape, each from a rested GPU; the fastest call of any counts"
    )

    def __post_init__(self) -> None:
        if not self.matmul_shapes or not self.copy_sizes:
            raise ValueError("matmul_shapes and copy_sizes need at least one entry each")
        for s in self.matmul_shapes:
            parse_shape(s)
        if min(self.copy_sizes) < 4 or self.transfer_bytes < 4:
            raise ValueError("copy_sizes and transfer_bytes must be at least 4 bytes")
        if self.burst_iterations < 1 or self.sustained_s < 0 or self.cool_wait_s < 0 or self.best_shape_bursts < 0:
            raise ValueError(
                "burst_iterations must be positive; sustained_s, cool_wait_s and best_shape_bursts not negative"
            )


def matmul_ceiling_unsupported(dtype: str, device: str) -> str | None:
    if device == "cpu" and dtype == "fp16":
        return f"not a CPU ceiling: on the CPU the matrix ceilings are {', '.join(CPU_MATMUL)}"
    return matmul_unsupported(dtype, device)


def metric_name(resource: str) -> str:
    """The throughput metric a resource's ceiling is (as perfsuite.measure.roofline reads it)."""
    return "tflops" if resource.startswith("matmul.") else "gbps"


@dataclass
class Candidate:
    """One shape (or size) of one resource."""

    resource: str
    shape: str
    case: Case


class Ceilings(KernelWorkload):
    name = "kernels.ceilings"
    # 8: a matmul burst with the other L2 setting at every shape, not only the best, and
    # 4096x4096x16384 among the default shapes (on an H100 and an H200 a GEMM of that shape and
    # an 8192^3 fp8 GEMM with L2 flushed read up to 2.7% above a v7 ceiling);
    # 7: the memory ceiling is the fastest of copy and triad (kernels.memory's access patterns);
    # 6: more bursts at the best shape, each from a GPU rested 2 s (perfsuite.context.COOL_REST_S);
    # 5: a matmul burst with the other L2 setting joins the candidates, and a link's ceiling is
    # its fastest call; 4: the fastest call of any run (3: of the best median's run; 2: median;
    # 1: one shape, one regime)
    version = 8
    description = "This device's ceilings: matmul per precision, memory copy, host<->device links"
    Params = CeilingsParams
    quick = {
        "matmul_shapes": ("128x128x128", "256x256x256", "512x512x512"),
        "copy_sizes": (64 * 1024, 1 * MIB, 16 * MIB),
        "transfer_bytes": 16 * MIB,
        "burst_iterations": 10,
        "sustained_s": 0.2,
        "cool_wait_s": 2.0,
    }

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        dev = ctx.torch_device
        self._groups: dict[str, list[Candidate]] = {}
        self._transfers: list[Case] = []
        self._skipped: dict[str, str] = {}
        for dtype in dict.fromkeys(p.matmul_dtypes):
            label = f"matmul.{dtype}"
            reason = matmul_ceiling_unsupported(dtype, ctx.device)
            if reason:
                self._skipped[label] = reason
                continue
            for shape in dict.fromkeys(p.matmul_shapes):
                ops = MatmulOperands.random(dtype, *parse_shape(shape), dev)
                case = matmul_case(ops, label=label, roofline=None, device=ctx.device, seed=ctx.controls.seed)
                self._groups.setdefault(label, []).append(Candidate(label, shape, case))

        for size in dict.fromkeys(p.copy_sizes):
            n = size // 4
            src, dst, other = torch.randn(n, device=dev), torch.empty(n, device=dev), torch.randn(n, device=dev)
            copy = copy_case(dst, src, label="memory", work_bytes=2.0 * n * 4, roofline=None)
            triad = triad_case(dst, src, other, label="memory", roofline=None, dtype="fp32")
            self._groups.setdefault("memory", []).extend(
                [Candidate("memory", f"copy {n * 4} B", copy), Candidate("memory", f"triad {n * 4} B", triad)]
            )

        if ctx.device != "cuda":
            for label in TRANSFERS:
                self._skipped[label] = "host<->device transfers need a CUDA device"
            return
        n = p.transfer_bytes // 4
        device_buf = {"h2d": torch.empty(n, device=dev), "d2h": torch.randn(n, device=dev)}
        for label in TRANSFERS:
            direction, kind = label.split(".")
            host = torch.empty(n, pin_memory=kind == "pinned")
            if direction == "h2d":
                host.copy_(device_buf["d2h"])  # random contents, made once on the device
                dst, src = device_buf["h2d"], host
            else:
                dst, src = host, device_buf["d2h"]
            # Asynchronous only from/to pinned memory, as an application would copy; the CUDA
            # events around the call time the copy on the stream either way. Pageable copies
            # cannot be captured in a CUDA graph, so no transfer case is (graph_safe=False).
            self._transfers.append(
                copy_case(
                    dst,
                    src,
                    label=label,
                    work_bytes=n * 4.0,
                    roofline=None,
                    fn=_transfer(dst, src, non_blocking=kind == "pinned"),
                    graph_safe=False,
                )
            )

    def cases(self, ctx: "RunContext") -> list[Case]:
        # A ceiling is the roof itself: no case names a roofline to be judged against.
        for label, reason in self._skipped.items():
            ctx.skip_case(label, reason)
        return [c.case for group in self._groups.values() for c in group] + self._transfers

    def execute(self, ctx: "RunContext") -> None:
        self.cases(ctx)
        ctx.details["ceilings"] = {}
        for resource, group in self._groups.items():
            self._measure_resource(ctx, resource, group)
            for c in group:
                ctx.verify(c.case)
        for case in self._transfers:
            ctx.measure(case)
            ctx.verify(case)
            # an upper bound, as every other ceiling: the fastest call, not the median (on an
            # H200 data.h2d's pinned copies read 55.41 GB/s against a median ceiling of 55.34)
            rate = next(m for m in reversed(ctx.metrics) if m["case"] == case.label and m["name"] == "gbps")
            rate["value"] = max(rate["samples"])
        if self._transfers:
            ctx.details["ceiling_statistic"] = {c.label: "fastest call" for c in self._transfers}

    def _measure_resource(self, ctx: "RunContext", resource: str, group: list[Candidate]) -> None:
        """Burst at every shape, sustained at the best burst shape; the best of all is the ceiling."""
        p = self.params
        name = metric_name(resource)

        def burst(cand: Candidate, label: str, l2_flush: bool) -> tuple[Any, dict | None]:
            """``burst_iterations`` calls of ``cand`` from a cool GPU: (their timing, what the
            wait for a cool GPU saw)."""
            cool = ctx.wait_until_cool(p.cool_wait_s)
            graph = None if cand.case.graph_safe else False
            timing = ctx.time_fn(
                cand.case.fn, label=label, l2_flush=l2_flush, graph=graph, iterations=p.burst_iterations
            )
            return timing, cool

        runs: list[tuple[str, Candidate, Any, dict | None]] = [
            ("burst", cand, *burst(cand, f"{resource} {cand.shape} burst", cand.case.l2_flush)) for cand in group
        ]
        # matmuls: every shape again with the other L2 setting
        flush = not ctx.l2_flush(group[0].case.l2_flush)
        other_regime = "burst" + (" (L2 flushed)" if flush else " (L2 kept)")
        between = f"L2 {'flushed' if flush else 'kept'} between calls"
        other_l2: list[tuple[str, Candidate, Any, dict | None]] = [
            (other_regime, cand, *burst(cand, f"{resource} {cand.shape} burst, {between}", flush))
            for cand in (group if resource.startswith("matmul.") else [])
        ]
        burst_best = max(runs, key=lambda r: _median_rate(r[1], r[2], name))
        best_cand, best_burst = burst_best[1], burst_best[2]
        # the best shape's burst again: a burst's fastest call varies with the GPU's state
        again: list[tuple[str, Candidate, Any, dict | None]] = [
            (
                "burst",
                best_cand,
                *burst(best_cand, f"{resource} {best_cand.shape} burst again", best_cand.case.l2_flush),
            )
            for _ in range(p.best_shape_bursts)
        ]
        calls = max(MIN_SUSTAINED_CALLS, math.ceil(p.sustained_s / max(statistics.median(best_burst.samples_s), 1e-9)))
        calls = min(calls, ctx.controls.max_iterations)
        m = ctx.time_fn(
            best_cand.case.fn,
            label=f"{resource} {best_cand.shape} sustained",
            l2_flush=best_cand.case.l2_flush,
            graph=None if best_cand.case.graph_safe else False,
            iterations=calls,
        )
        sustained = ("sustained", best_cand, m, None)
        # The ceiling's run: the one with the fastest single call, at any shape, in either regime.
        # The sustained run's first calls come at the full burst clock too, and there are
        # thousands of them: on an H200 the fp8 burst's fastest of 20 calls read
        # 1,459 TFLOP/s, under the 1,460-1,467 median of a later 20-call kernels.gemm, while
        # that GEMM's own sustained run reached 1,472 in its first calls.
        winner = max(
            runs + again + [sustained] + other_l2,
            key=lambda r: max(_rates(r[1], r[2], name), default=0.0),
        )

        unit = "TFLOP/s" if name == "tflops" else "GB/s"
        for label, (_regime, cand, meas, _) in (
            (name, winner),
            (f"burst_{name}", burst_best),
            (f"sustained_{name}", sustained),
        ):
            metric = ctx.add_metric(resource, label, unit, _rates(cand, meas, name), higher_is_better=True)
            if label == name:
                # The ceiling is an upper bound: the fastest call of any run, not a median. A
                # median of 20 calls sits a few tenths of a percent under what a later run of
                # the same GEMM reaches on a good clock (seen on an H200: ceilings' median
                # 792.4 TFLOP/s, kernels.gemm's median 794.1), which would put it above 100%.
                metric["value"] = max(metric["samples"])
        ctx.add_metric(resource, "time_ms", "ms", [s * 1e3 for s in winner[2].samples_s], higher_is_better=False)
        work = winner[1].case.work
        ctx.record_work(resource, work)
        if winner[2].throttle is not None:
            ctx.details.setdefault("throttle", {})[resource] = winner[2].throttle
        ctx.details["ceilings"][resource] = {
            "metric": name,
            "unit": unit,
            "regime": winner[0],
            "shape": winner[1].shape,
            "value": max(_rates(winner[1], winner[2], name)),  # fastest call: an upper bound
            "value_statistic": "fastest call of any run (every shape's burst, for matmuls with either L2 "
            "setting, the best shape's bursts again, the sustained run)",
            "burst": {
                "shape": best_cand.shape,
                "value": _median_rate(best_cand, best_burst, name),
                "iterations": best_burst.iterations,
                "cool_before": burst_best[3],
                "nvml": best_burst.throttle,
                "by_shape": {c.shape: _median_rate(c, mm, name) for _, c, mm, _ in runs},
                "again": [
                    {
                        "value": _median_rate(best_cand, mm, name),
                        "fastest": max(_rates(best_cand, mm, name), default=0.0),
                        "cool_before": cool,
                    }
                    for _, _, mm, cool in again
                ],
                "other_l2": None
                if not other_l2
                else {
                    "regime": other_regime,
                    "by_shape": {
                        c.shape: {
                            "value": _median_rate(c, mm, name),
                            "fastest": max(_rates(c, mm, name), default=0.0),
                            "cool_before": cool,
                            "nvml": mm.throttle,
                        }
                        for _, c, mm, cool in other_l2
                    },
                },
            },
            "sustained": {
                "shape": best_cand.shape,
                "value": _median_rate(best_cand, m, name),
                "iterations": m.iterations,
                "seconds": m.wall_s,
                "nvml": m.throttle,
            },
        }


def _rates(cand: Candidate, m: Any, name: str) -> list[float]:
    work = cand.case.work.flops * 1e-12 if name == "tflops" else cand.case.work.bytes * 1e-9
    return [work / s for s in m.samples_s if s > 0]


def _median_rate(cand: Candidate, m: Any, name: str) -> float:
    rates = _rates(cand, m, name)
    return statistics.median(rates) if rates else 0.0


def _transfer(dst: Any, src: Any, non_blocking: bool) -> Callable[[], None]:
    def fn() -> None:
        dst.copy_(src, non_blocking=non_blocking)

    return fn
