"""Timers for one call of a case: host clock on the CPU, CUDA events on the GPU, with
optional L2 flush between calls and optional CUDA-graph replay."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current L2 (H100 50 MB, H200 60 MB)


@dataclass
class Timing:
    samples_s: list[float]
    wall_s: float  # host time of the whole timed loop, for energy and power


def time_cpu(fn: Callable[[], Any], n: int) -> Timing:
    samples = []
    t_start = time.perf_counter_ns()
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) * 1e-9)
    return Timing(samples, (time.perf_counter_ns() - t_start) * 1e-9)


class CudaTimer:
    """Per-call CUDA events, recorded back to back and read after one synchronisation,
    so the host never stalls the device between calls (as triton's do_bench)."""

    def __init__(self, l2_flush: bool) -> None:
        import torch

        self.torch = torch
        self.flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda") if l2_flush else None

    def time(self, fn: Callable[[], Any], n: int) -> Timing:
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        torch.cuda.synchronize()
        t_start = time.perf_counter_ns()
        for i in range(n):
            if self.flush_buf is not None:
                self.flush_buf.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        wall = (time.perf_counter_ns() - t_start) * 1e-9
        return Timing([s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)], wall)


def capture_graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture one call of ``fn`` in a CUDA graph (after a warm-up on a side stream, as
    torch requires) and return the replay."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def estimate_call_s(fn: Callable[[], Any], device: str, calls: int) -> float:
    """Mean seconds per call over ``calls`` synchronised calls (also serves as warm-up)."""
    sync = _sync(device)
    sync()
    t0 = time.perf_counter()
    for _ in range(max(calls, 1)):
        fn()
    sync()
    return (time.perf_counter() - t0) / max(calls, 1)


def _sync(device: str) -> Callable[[], None]:
    if device == "cuda":
        import torch

        return torch.cuda.synchronize
    return lambda: None


@dataclass
class LoopTime:
    """One timed loop of back-to-back calls."""

    seconds: float  # the interval around the calls: CUDA events on the GPU, the host clock on the CPU
    launch_s: float  # host time to issue the calls (equals ``seconds`` on the CPU)
    held: bool | None  # behind a hold: whether it outlasted the issuing of the calls; None: no hold


class StreamHold:
    """nvbench's blocking kernel, for loops timed as one interval: a spin kernel holds the
    current CUDA stream while the host queues the loop's calls, so the GPU then runs them back
    to back and the interval measures the calls, not the host's rate of issuing them.

    Why: nccl-tests issues its calls from C, faster than a 1 MiB all_reduce runs on 2xH200;
    a Python loop needs 20-25 us per ``dist.all_reduce`` call, so without a hold every size
    below a few MiB measured Python (0.25-0.96 of nccl-tests' busbw at 1-8 MiB). The hold
    starts at ``INITIAL_S`` and doubles whenever it ran out before the host had issued every
    call (``LoopTime.held`` False), which the caller retries."""

    INITIAL_S = 2e-3
    CALIBRATION_CYCLES = 2_000_000  # ~1 ms at H100/H200 clocks

    def __init__(self) -> None:
        import torch

        self.torch = torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(self.CALIBRATION_CYCLES)  # warm: the first launch loads the kernel
        start.record()
        torch.cuda._sleep(self.CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
        self.cycles_per_s = self.CALIBRATION_CYCLES / (start.elapsed_time(end) * 1e-3)
        self.seconds = self.INITIAL_S

    def start(self) -> Any:
        """Queue the spin kernel on the current stream; returns the event that marks its end."""
        torch = self.torch
        torch.cuda._sleep(int(self.seconds * self.cycles_per_s))
        released = torch.cuda.Event()
        released.record()
        return released

    def grow(self) -> None:
        self.seconds *= 2


def time_loop(
    fn: Callable[[], Any],
    iters: int,
    device: str,
    hold: StreamHold | None = None,
    before: Callable[[], Any] | None = None,
) -> LoopTime:
    """``iters`` back-to-back calls of ``fn`` timed as one interval, as nccl-tests times its
    loop: one pair of CUDA events around the whole loop on the GPU, the host clock around the
    loop on the CPU (a gloo call returns when it is done). Per-call events would add each
    call's launch skew between ranks to every sample; one interval does not.

    ``hold`` (CUDA): queue everything behind a ``StreamHold``. ``before``: an untimed call
    issued right before the start event (behind the hold): for a collective it completes on
    every rank at once, so the interval holds no arrival skew between the ranks."""
    if device != "cuda":
        if before is not None:
            before()
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        seconds = (time.perf_counter_ns() - t0) * 1e-9
        return LoopTime(seconds, seconds, None)
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    released = hold.start() if hold is not None else None
    if before is not None:
        before()
    t0 = time.perf_counter_ns()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    launch_s = (time.perf_counter_ns() - t0) * 1e-9
    held = None if released is None else not released.query()
    end.synchronize()
    return LoopTime(start.elapsed_time(end) * 1e-3, launch_s, held)
