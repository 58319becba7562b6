"""The run context a workload receives: its parameters and controls, and the harness's
measuring, verifying and recording methods. Lives in the measuring process only."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite import crosscheck
from perfsuite.case import Case, Check, Work
from perfsuite.controls import Controls
from perfsuite.crosscheck import do_bench
from perfsuite.measure import nvml, nvml_sampler, stats, timing
from perfsuite.measure.roofline import roofline_metric_name
from perfsuite.measure.speedup import BaselineSpeedups

MIN_SAMPLES = 10
ESTIMATE_CALLS = 3
# Seconds without a power or thermal clock event before a burst: the GPU's rest since the loop
# before it (perfsuite.measure.nvml_sampler.wait_until_cool says why the event flag alone is not enough).
COOL_REST_S = 2.0


def throughput_metrics(work: Work) -> list[tuple[str, str, float, float]]:
    """(metric name, unit, scale from per-second work, work per call) for declared work."""
    out = []
    if work.flops:
        out.append(("tflops", "TFLOP/s", 1e-12, work.flops))
    if work.bytes:
        out.append(("gbps", "GB/s", 1e-9, work.bytes))
    if work.items:
        out.append(("items_per_s", f"{work.item_unit}/s", 1.0, work.items))
    return out


@dataclass
class Measurement:
    """What :meth:`RunContext.measure` timed of one case: the seconds of each timed call, the
    loop's wall time and energy, and what NVML saw during it."""

    label: str
    samples_s: list[float]
    wall_s: float
    energy_j: float | None  # over the whole timed loop, all calls
    iterations: int
    throttle: dict | None = None  # nvml_sampler.summarize of the timed loop (None without NVML)


@dataclass
class RunContext:
    """What a workload's methods receive as ``ctx``, in the measuring process: the resolved
    ``params``, the run's ``controls`` (device, seed, iterations, timing options), its place
    in a multi-rank run (``rank``, ``world_size``, ``local_rank``), and the harness's methods.

    A case-based workload needs only ``ctx.torch_device`` (and ``ctx.skip_case``); the harness
    measures and verifies its cases. A driver (a workload that overrides ``execute``) times
    with :meth:`measure` or :meth:`time_fn`, records with :meth:`add_metric`,
    :meth:`record_work` and :meth:`add_check`, and keeps what the tables do not show in
    ``details`` (a JSON-ready dict stored in the record). ``metrics`` and ``checks`` are
    what the run recorded: what ``perfsuite.testing.run_in_process`` hands a test.
    """

    params: Any
    controls: Controls
    quick: bool = False
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    metrics: list[dict] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    dist_backend: str | None = None
    speedups: BaselineSpeedups = field(default_factory=BaselineSpeedups)
    artifact_root: str | None = None  # where this run's files beside its record go (runner-chosen)
    aborted: str | None = None  # set by :meth:`abort`: the run stopped short of its goal, and why

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda"``: the device this run measures (``--device``)."""
        return self.controls.device

    @property
    def torch_device(self) -> Any:
        """The ``torch.device`` to allocate on: this process's GPU, or the CPU (imports torch)."""
        import torch

        return torch.device("cuda", torch.cuda.current_device()) if self.device == "cuda" else torch.device("cpu")

    def log(self, message: str) -> None:
        """A line on stderr for the person running (prefixed with the rank when there are several)."""
        print(f"[rank {self.rank}] {message}" if self.world_size > 1 else message, file=sys.stderr, flush=True)

    def synchronize(self) -> None:
        """Wait for the GPU's queued work (a no-op on the CPU): before reading a host clock."""
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def barrier(self) -> None:
        """Wait for every rank (a no-op in a one-process run)."""
        if self.world_size > 1:
            import torch.distributed as dist

            dist.barrier()

    def artifact_dir(self) -> Path:
        """A folder kept beside the record, named after the run id, for a workload's own files
        (LoadGen's logs); created on first use. Outside a runner, a fresh temporary folder."""
        if self.artifact_root is None:
            import tempfile

            self.artifact_root = tempfile.mkdtemp(prefix="perfsuite-artifacts-")
        path = Path(self.artifact_root)
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- measuring -------------------------------------------------------------------
    def energy_j(self) -> float | None:
        """The measured GPU's total-energy counter in joules; None without a GPU, NVML or the counter.
        A driver reads it before and after what it measures."""
        gpu = self.nvml_index()
        mj = nvml.energy_mj(gpu) if gpu is not None else None
        return None if mj is None else mj / 1000.0

    def nvml_index(self) -> int | None:
        """NVML's index of the GPU this process measures on (matched by UUID)."""
        if self.device != "cuda" or nvml.init()[0] is None:
            return None
        import torch

        _, gpu = nvml.current_cuda_gpu(nvml.describe_gpus())
        return gpu["index"] if gpu is not None else torch.cuda.current_device()

    def abort(self, reason: str) -> None:
        """End the run as ``aborted`` (MLPerf's status for a run that did not reach its quality
        target within its budget): its metrics are recorded, and it is never ranked."""
        self.aborted = reason

    def l2_flush(self, case_flush: bool | None) -> bool:
        """Whether a timed loop flushes L2 between calls: the case's own choice, else the run's."""
        return self.controls.l2_flush if case_flush is None else case_flush

    def time_fn(
        self,
        fn: Callable[[], Any],
        *,
        label: str,
        l2_flush: bool | None = None,
        graph: bool | None = None,
        iterations: int | None = None,
    ) -> Measurement:
        """Warm up, choose the iteration count, and time each call of ``fn``."""
        c = self.controls
        use_graph = c.cuda_graph if graph is None else graph
        if self.device == "cuda" and use_graph:
            fn = timing.capture_graph(fn)
        for _ in range(c.warmup):
            fn()
        per_call = timing.estimate_call_s(fn, self.device, ESTIMATE_CALLS)
        n = iterations or c.iterations
        if n is None:
            n = math.ceil((c.min_time_s or 0.0) / max(per_call, 1e-9))
            n = min(max(n, MIN_SAMPLES), c.max_iterations)
        gpu = self.nvml_index()
        e0 = nvml.energy_mj(gpu) if gpu is not None else None
        with nvml_sampler.sample(gpu) as sampler:
            if self.device == "cuda":
                t = timing.CudaTimer(self.l2_flush(l2_flush)).time(fn, n)
            else:
                t = timing.time_cpu(fn, n)
        e1 = nvml.energy_mj(gpu) if gpu is not None else None
        energy = (e1 - e0) / 1000.0 if e0 is not None and e1 is not None and e1 > e0 else None
        return Measurement(label, t.samples_s, t.wall_s, energy, n, sampler.summary())

    def time_loop(
        self,
        fn: Callable[[], Any],
        iters: int,
        hold: "timing.StreamHold | None" = None,
        before: Callable[[], Any] | None = None,
    ) -> "timing.LoopTime":
        """``iters`` back-to-back calls timed as one interval (nccl-tests' way), for drivers
        that time their own loops: see ``perfsuite.measure.timing.time_loop``."""
        return timing.time_loop(fn, iters, self.device, hold, before)

    def stream_hold(self) -> "timing.StreamHold | None":
        """A calibrated ``perfsuite.measure.timing.StreamHold`` on the GPU; None on the CPU (nothing to hold)."""
        return timing.StreamHold() if self.device == "cuda" else None

    def time_each(self, fn: Callable[[], Any], n: int) -> list[float]:
        """Seconds of each of ``n`` calls (events around each call on the GPU), no warm-up."""
        if self.device == "cuda":
            return timing.CudaTimer(l2_flush=False).time(fn, n).samples_s
        return timing.time_cpu(fn, n).samples_s

    @property
    def crosscheck(self) -> "crosscheck.CrossCheck":
        """The reference tools for drivers that time their own loops (nccl-tests beside a
        collective sweep); cases measured through :meth:`measure` get do_bench beside them."""
        return crosscheck.CrossCheck(self)

    def gpu_sampler(self) -> nvml_sampler.Sampler:
        """A background NVML sampler of this process's GPU (a no-op without one), for drivers
        that time their own loops: ``with ctx.gpu_sampler() as s: ...; s.summary()``."""
        return nvml_sampler.sample(self.nvml_index())

    def wait_until_cool(self, max_s: float) -> dict:
        """Wait until NVML has shown no power or thermal clock event for ``COOL_REST_S`` on end
        (at most ``max_s``), so that a burst figure starts from a cool GPU; returns what was seen."""
        return nvml_sampler.wait_until_cool(self.nvml_index(), max_s, rest_s=COOL_REST_S)

    def measure(self, case: Case) -> Measurement:
        """Time a case and record its metrics: time per call, throughput from its declared
        work (with the ceiling it is judged against), and throughput per joule."""
        # Cross-checked, the suite's loop and do_bench each start from a GPU that NVML shows
        # free of power and thermal events: otherwise the second runs hotter than the first
        # (on an H200 a 20-call bf16 burst read 0.926 of a do_bench run straight after it).
        settle = (lambda: self.wait_until_cool(crosscheck.COOL_WAIT_S)) if self.device == "cuda" else None
        settled = settle() if crosscheck.requested() and settle is not None else None
        m = self.time_fn(case.fn, label=case.label, l2_flush=case.l2_flush, graph=None if case.graph_safe else False)
        self.record_measurement(case.label, m, case.work, case.roofline)
        if case.baseline:
            self.details["baseline_case"] = case.label
        for label, samples in self.speedups.note(case.label, case.baseline, m.samples_s):
            self.add_metric(label, "speedup", "x", samples, higher_is_better=True, aggregate="min")
        if crosscheck.requested():  # the same callable timed by the reference tool, same process
            self.details.setdefault("crosscheck", {})[case.label] = self._versus_do_bench(case, m, settle, settled)
        if self.controls.profile is not None and self.rank == 0:
            self.profile_case(case.label, case.fn)
        return m

    def _versus_do_bench(
        self, case: Case, m: Measurement, settle: Callable[[], dict] | None, settled: dict | None
    ) -> dict:
        """``case`` timed by do_bench and by this loop in turns, timed alike
        (``perfsuite.crosscheck.do_bench``): the suite's compared loops make ``m``'s number of
        calls with L2 flushed between them as do_bench does; ``m`` itself is round 1's suite side
        where it was timed that way."""
        graph = None if case.graph_safe else False
        recorded_flush = self.l2_flush(case.l2_flush)

        def suite_loop() -> do_bench.SuiteLoop:
            seen = settle() if settle is not None else None
            r = self.time_fn(case.fn, label=case.label, l2_flush=True, graph=graph, iterations=m.iterations)
            return do_bench.SuiteLoop(r.samples_s, r.wall_s, r.throttle, seen)

        return do_bench.versus_do_bench(
            case.fn,
            self.device,
            suite_loop,
            first=do_bench.SuiteLoop(m.samples_s, m.wall_s, m.throttle, settled) if recorded_flush else None,
            recorded_l2_flush=recorded_flush,
            n_rounds=crosscheck.rounds(),
            settle=settle,
            sampler=self.gpu_sampler,
            # do_bench makes as many calls before its timed ones as the suite did (its warm-up
            # and estimate): its default 25 ms heated an fp8 burst into the power cap (0.876 on an H200)
            warmup_calls=self.controls.warmup + ESTIMATE_CALLS,
        )

    def profile_case(self, label: str, fn: Callable[[], Any]) -> None:
        """``--profile``: a few extra calls of ``fn`` captured after its timed loop (never
        during it). torch: a Chrome trace kept beside the record and a summary in
        ``details["profile"][label]``; ncu: the calls between cudaProfilerStart and Stop, for
        the Nsight Compute the runner started around this process (it summarises the log)."""
        from perfsuite.measure import profiling

        if self.controls.profile == "torch":
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "case"
            trace = self.artifact_dir() / f"profile-{safe}.json"
            self.details.setdefault("profile", {})[label] = profiling.capture_torch(fn, self.device, trace)
        elif self.controls.profile == "ncu":
            profiling.capture_ncu(fn)
            self.details.setdefault("ncu_cases", []).append(label)
        else:
            raise ValueError(f"unknown profiler {self.controls.profile!r}")

    def record_work(self, label: str, work: Work) -> None:
        """The work one call of ``label`` does, kept in ``details["work"]`` (flops, bytes, items per
        call): ``perfsuite roofline`` places the case from it exactly (arithmetic intensity =
        flops / bytes). Every case measured through :meth:`measure` is recorded; a driver that
        times its own way records what it measured."""
        self.details.setdefault("work", {})[label] = {
            "flops": float(work.flops),
            "bytes": float(work.bytes),
            "items": float(work.items),
            "item_unit": work.item_unit,
        }

    def record_measurement(self, label: str, m: Measurement, work: Work, roofline: str | None) -> None:
        """Record a measurement as :meth:`measure` does: time per call, throughput from ``work``
        (judged against ``roofline``), power and throughput per joule when energy was read."""
        self.record_work(label, work)
        if m.throttle is not None:  # what NVML saw during the loop: clocks, power, throttling
            self.details.setdefault("throttle", {})[label] = m.throttle
        self.add_metric(label, "time_ms", "ms", [s * 1e3 for s in m.samples_s], higher_is_better=False, aggregate="max")
        for name, unit, scale, per_call in throughput_metrics(work):
            samples = [per_call / s * scale for s in m.samples_s if s > 0]
            res = roofline if roofline and roofline_metric_name(roofline) == name else None
            self.add_metric(label, name, unit, samples, higher_is_better=True, roofline=res, aggregate="min")
        if m.energy_j:
            watts = m.energy_j / m.wall_s
            self.add_metric(label, "power_w", "W", [watts], higher_is_better=False, aggregate="max")
            for name, _unit, _scale, per_call in throughput_metrics(work):
                per_j = {
                    "tflops": ("gflop_per_j", "GFLOP/J", 1e-9),
                    "gbps": ("gb_per_j", "GB/J", 1e-9),
                    "items_per_s": ("items_per_j", f"{work.item_unit}/J", 1.0),
                }[name]
                total = per_call * m.iterations
                self.add_metric(
                    label, per_j[0], per_j[1], [total / m.energy_j * per_j[2]], higher_is_better=True, aggregate="min"
                )

    def add_metric(
        self,
        case: str,
        name: str,
        unit: str,
        samples: list[float],
        *,
        higher_is_better: bool,
        roofline: str | None = None,
        aggregate: str = "rank0",
    ) -> dict:
        """Record a metric from raw samples; its value is their median."""
        summary = stats.summarize(samples)
        metric = {
            "case": case,
            "name": name,
            "unit": unit,
            "value": summary["median"],
            "higher_is_better": higher_is_better,
            "samples": [float(s) for s in samples],
            "statistics": summary,
            "aggregate": aggregate,
            "per_rank": None,
            "roofline": None
            if roofline is None
            else {
                "resource": roofline,
                "fraction": None,
                "ceiling": None,
                "ceiling_unit": None,
                "ceiling_run_id": None,
                "reason": "not yet resolved",
            },
        }
        self.metrics.append(metric)
        return metric

    # -- verifying ---------------------------------------------------------------------
    def verify(self, case: Case) -> Check | None:
        """Call the case's ``verify`` and record its :class:`~perfsuite.Check` (None: the case has none)."""
        if case.verify is None:
            return None
        check = case.verify()
        self.add_check(check)
        return check

    def skip_case(self, label: str, reason: str) -> None:
        """Record that case ``label`` did not run and why (``details["skipped_cases"]``), so
        that a requested case never disappears silently."""
        self.details.setdefault("skipped_cases", {})[label] = reason
        self.log(f"skipping case {label}: {reason}")

    def add_check(self, check: Check) -> None:
        """Record a verification. A failed one makes the run ``invalid``: kept, never ranked."""
        if not isinstance(check, Check):
            raise TypeError(f"verification must return perfsuite.Check, got {type(check).__name__}")
        self.checks.append(check)
