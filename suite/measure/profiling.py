"""Profiler traces on demand (``perfsuite run --profile torch|ncu``).

Profiling never touches the timed loop: after a case's samples are taken, a few extra
calls of the same function are captured, with the PyTorch profiler (Kineto: CPU and GPU
activity, a Chrome trace kept beside the record) or with Nsight Compute, which the
runner starts around the measuring process with ``--profile-from-start off`` so that
only the calls between ``cudaProfilerStart`` and ``cudaProfilerStop`` here are replayed.
The record keeps a summary: the top kernels or operators by total time and their share,
and for ncu the achieved memory throughput and SM utilisation of each kernel.
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROFILERS = ("torch", "ncu")
PROFILE_CALLS = 3  # extra calls captured after the timed loop
TOP_N = 10
NCU_METRICS = (
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
)


@dataclass
class Entry:
    """One operator or kernel in a profile summary."""

    name: str
    calls: int
    total_us: float
    share: float  # of the summed time of every entry in the capture
    memory_throughput_pct: float | None = None  # ncu: DRAM throughput, % of peak
    sm_throughput_pct: float | None = None  # ncu: SM throughput, % of peak


def unavailable_reason(tool: str, device: str) -> str | None:
    """Why ``--profile tool`` cannot run here, or None."""
    if tool not in PROFILERS:
        return f"unknown profiler {tool!r} (choose from {', '.join(PROFILERS)})"
    if tool == "ncu":
        if device != "cuda":
            return "Nsight Compute profiles CUDA kernels: needs --device cuda"
        if shutil.which("ncu") is None:
            return "ncu is not on the PATH"
    return None


def ncu_command(log_file: Path) -> list[str]:
    """The prefix that starts the measuring process under Nsight Compute. Clocks are left
    as they are (``--clock-control none``): the suite observes clocks, never sets them."""
    return [
        "ncu",
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--csv",
        "--log-file",
        str(log_file),
        "--metrics",
        ",".join(NCU_METRICS),
    ]


def _summarize(rows: dict[str, list[float]], extra: dict[str, dict] | None = None) -> list[dict]:
    total = sum(sum(v) for v in rows.values()) or 1.0
    entries = [Entry(name, len(v), sum(v), sum(v) / total, **(extra or {}).get(name, {})) for name, v in rows.items()]
    entries.sort(key=lambda e: -e.total_us)
    return [asdict(e) for e in entries[:TOP_N]]


def capture_torch(fn: Callable[[], Any], device: str, trace_path: Path, calls: int = PROFILE_CALLS) -> dict:
    """Profile ``calls`` calls of ``fn`` with the PyTorch profiler; write a Chrome trace and
    return the summary: top operators (GPU kernels on CUDA) by total time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_path))
    rows: dict[str, list[float]] = {}
    on_gpu = device == "cuda"
    for evt in prof.key_averages():
        us = (getattr(evt, "self_device_time_total", 0.0) or 0.0) if on_gpu else evt.self_cpu_time_total
        if us > 0:
            rows.setdefault(evt.key, []).extend([us / max(evt.count, 1)] * max(evt.count, 1))
    return {
        "tool": "torch",
        "calls": calls,
        "time_basis": "self GPU time" if on_gpu else "self CPU time",
        "top": _summarize(rows),
        "trace": trace_path.name,
    }


def capture_ncu(fn: Callable[[], Any], calls: int = PROFILE_CALLS) -> None:
    """Run ``calls`` calls between cudaProfilerStart and Stop, for the ncu around us."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    try:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    finally:
        torch.cuda.profiler.stop()


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[dict]:
    """Summarise ``ncu --csv`` output (one row per kernel and metric): per kernel name, the
    launches, the total duration in us, and the mean memory and SM throughput (% of peak).
    Lines before the CSV header (ncu's ``==PROF==`` notes) are skipped."""
    start = text.find('"ID"')
    if start < 0:
        raise ValueError('no ncu CSV header ("ID",...) in the output')
    by_launch: dict[tuple[str, str], dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        value = _number(row.get("Metric Value", ""))
        if value is None:
            continue
        unit = row.get("Metric Unit", "")
        if row["Metric Name"] == "gpu__time_duration.sum":
            value *= {
                "nsecond": 1e-3,
                "ns": 1e-3,
                "usecond": 1.0,
                "us": 1.0,
                "msecond": 1e3,
                "ms": 1e3,
                "second": 1e6,
                "s": 1e6,
            }.get(unit, 1.0)
        by_launch.setdefault((row["ID"], row["Kernel Name"]), {})[row["Metric Name"]] = value
    rows: dict[str, list[float]] = {}
    mem: dict[str, list[float]] = {}
    sm: dict[str, list[float]] = {}
    for (_, kernel), metrics in by_launch.items():
        rows.setdefault(kernel, []).append(metrics.get("gpu__time_duration.sum", 0.0))
        if NCU_METRICS[1] in metrics:
            mem.setdefault(kernel, []).append(metrics[NCU_METRICS[1]])
        if NCU_METRICS[2] in metrics:
            sm.setdefault(kernel, []).append(metrics[NCU_METRICS[2]])
    mean = lambda v: sum(v) / len(v) if v else None
    extra = {k: {"memory_throughput_pct": mean(mem.get(k, [])), "sm_throughput_pct": mean(sm.get(k, []))} for k in rows}
    return _summarize(rows, extra)
