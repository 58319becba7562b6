"""``triton.testing.do_bench``, the reference for kernel timings: the same callable timed by
do_bench in the same process, taking turns with the suite's loop, both medians and their ratio
stored in the record (``details["crosscheck"][case]``). See :mod:`perfsuite.crosscheck`."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from typing import Any

from perfsuite.crosscheck import AGREEMENT, take_turns

DO_BENCH_MIN_REP_MS = 1.0  # do_bench runs at least one call whatever rep says
DO_BENCH_WARMUP_MS = 25.0  # do_bench's default
# untimed calls do_bench always makes before its warm-up (triton 3.x: one, then five to estimate)
DO_BENCH_OWN_CALLS = 6


def do_bench_unavailable(device: str) -> str | None:
    """Why triton's do_bench cannot time a call here, or None."""
    if device != "cuda":
        return "triton.testing.do_bench times with CUDA events: it needs a CUDA device (this run is on the CPU)"
    try:
        import triton.testing  # noqa: F401
    except ImportError as exc:
        return f"triton is not installed ({exc})"
    return None


def do_bench_warmup_ms(call_ms: float, warmup_calls: int | None) -> float:
    """do_bench's ``warmup`` for as many calls before its timed ones as the suite made
    (``warmup_calls`` of ``call_ms`` each): do_bench makes ``DO_BENCH_OWN_CALLS`` of its own
    first and at least one warm-up call, so it is given the rest, plus half a call: it counts
    its calls as ``int(warmup / estimate)`` with an estimate that includes its L2 flush, a
    little longer than the call. None: do_bench's default."""
    if warmup_calls is None:
        return DO_BENCH_WARMUP_MS
    return call_ms * (max(warmup_calls - DO_BENCH_OWN_CALLS, 1) + 0.5)


def versus_do_bench(
    fn: Callable[[], Any],
    device: str,
    suite_samples_s: list[float],
    suite_wall_s: float,
    settle: Callable[[], dict] | None = None,
    suite_settled: dict | None = None,
    warmup_calls: int | None = None,
    suite_l2_flush: bool = False,
    suite_again: Callable[[], tuple[list[float], dict | None]] | None = None,
    n_rounds: int = 1,
    sampler: Callable[[], Any] | None = None,
    suite_nvml: dict | None = None,
) -> dict:
    """Time ``fn`` with do_bench for as long as the suite's loop ran; both medians and their
    ratio. ``settle`` (the GPU's wait until cool) runs right before each do_bench and each
    further suite loop, as it ran before the suite's first (``suite_settled``, what it saw
    then): every timing starts from the same state. ``warmup_calls``: the calls the suite
    made before its timed loop; do_bench makes as many before its own (``do_bench_warmup_ms``;
    default: do_bench's 25 ms). do_bench always overwrites a 256 MB buffer between calls (an
    L2 flush): ``suite_l2_flush`` says whether the suite's loop did too (``--l2-flush``),
    which is run the same way; without it the two loops load a power-capped GPU differently.
    ``suite_again`` times the suite's loop once more (its samples and NVML summary): with it,
    the two take ``n_rounds`` turns (``take_turns``) and each side's figure is the median of
    its rounds' medians. ``sampler`` (a fresh ``perfsuite.measure.nvml_sampler.Sampler``) samples NVML
    during each do_bench, as the suite's own loops are (``suite_nvml``: its first loop's): each
    round records both sides' SM clocks and clock events, so a round that ran slower shows
    whether it ran at a lower clock."""
    suite_ms = statistics.median(suite_samples_s) * 1e3
    out: dict = {
        "tool": "triton.testing.do_bench",
        "suite_median_ms": suite_ms,
        "suite_l2_flush": suite_l2_flush,
        "reference_l2_flush": True,
    }
    why = do_bench_unavailable(device)
    if why:
        return {**out, "status": "skipped", "reason": why}
    import triton
    import triton.testing

    rep_ms = max(DO_BENCH_MIN_REP_MS, suite_wall_s * 1e3)
    warmup_ms = do_bench_warmup_ms(suite_ms, warmup_calls)

    def reference() -> dict:
        seen = settle() if settle is not None else None
        with sampler() if sampler is not None else contextlib.nullcontext() as s:
            ms = float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
        return {"median_ms": ms, "settled": seen, "nvml": s.summary() if s is not None else None}

    def again() -> dict:
        seen = settle() if settle is not None else None
        samples, nvml = suite_again()
        return {"median_ms": statistics.median(samples) * 1e3, "settled": seen, "nvml": nvml}

    first = {"median_ms": suite_ms, "settled": suite_settled, "nvml": suite_nvml}
    turns = take_turns(n_rounds if suite_again is not None else 1, first, again, reference)
    suite_med = statistics.median(t["suite"]["median_ms"] for t in turns)
    ref_ms = statistics.median(t["reference"]["median_ms"] for t in turns)
    ratio = suite_med / ref_ms if ref_ms > 0 else None
    if settle is not None:  # what NVML showed before the first round's two timings
        out["settled"] = {"suite": suite_settled, "reference": turns[0]["reference"]["settled"]}
    return {
        **out,
        "status": "measured",
        "tool_version": triton.__version__,
        "suite_median_ms": suite_med,
        "reference_median_ms": ref_ms,
        "rounds": [
            {
                "order": t["order"],
                "suite_ms": t["suite"]["median_ms"],
                "reference_ms": t["reference"]["median_ms"],
                "suite_clocks": _clocks(t["suite"]["nvml"]),
                "reference_clocks": _clocks(t["reference"]["nvml"]),
            }
            for t in turns
        ],
        "rep_ms": rep_ms,
        "warmup_ms": warmup_ms,
        "time_ratio": ratio,
        "agrees": ratio is not None and abs(ratio - 1.0) <= AGREEMENT,
        "tolerance": AGREEMENT,
    }


def _clocks(nvml: dict | None) -> dict | None:
    """What a round's NVML summary says of its clocks: SM MHz min and median, clock events."""
    if not nvml:
        return None
    return {
        "sm_clock_mhz_min": nvml.get("sm_clock_mhz_min"),
        "sm_clock_mhz_median": nvml.get("sm_clock_mhz_median"),
        "clock_events": nvml.get("clock_events") or [],
    }
