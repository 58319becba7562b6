"""``triton.testing.do_bench``, the reference for kernel timings: the same callable timed by
do_bench in the same process, taking turns with the suite's loop, both medians and their ratio
stored in the record (``details["crosscheck"][case]``). See :mod:`perfsuite.crosscheck`.

The two are timed alike, so that they load the GPU alike and run in the same power state:

- the same L2 treatment: do_bench zeroes a 256 MiB buffer before every call, so the suite's
  compared loops do too (``--l2-flush``'s buffer is the same size). A flush gives the power
  budget a rest between calls: on an H200 an unflushed 1024x8192x8192 bf16 loop ran at a
  median SM clock of 1,515 MHz against do_bench's 1,680-1,890 (ratio 1.066), and at 8192^3
  an unflushed sustained fp8 loop at 1,380 MHz against 1,410 (1.016);
- the same calls from the same state: each side from a GPU rested the same way (``settle``),
  as many untimed calls first (``do_bench_warmup_ms``), and the same number of timed calls
  compared: do_bench is given a window a little longer than the suite's loop (``REP_MARGIN``)
  and returns every call's time (``return_mode="all"``), of which the first as many as the
  suite timed are compared (a power-capped GPU slows down along a loop: the first k calls of
  one side and all n of the other are not the same load). do_bench's own median over all its
  calls is recorded beside;
- the same clocks: NVML is sampled during each side of each round, and a round whose two
  median SM clocks differ by more than ``CLOCK_TOLERANCE`` (both from ``MIN_CLOCK_SAMPLES``
  readings or more: a loop long enough to have them) is not paired. The verdict is over
  the paired rounds; where no round paired, the record says which side ran at which clock
  instead of a bare disagreement (:func:`verdict`).
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfsuite.crosscheck import AGREEMENT, take_turns

DO_BENCH_MIN_REP_MS = 1.0  # do_bench runs at least one call whatever rep says
DO_BENCH_WARMUP_MS = 25.0  # do_bench's default
# untimed calls do_bench always makes before its warm-up (triton 3.x: one, then five to estimate)
DO_BENCH_OWN_CALLS = 6
# do_bench's window over the suite's loop: do_bench sizes its loop from five cool calls, and a
# GPU that power-caps later in the loop then runs fewer calls than the suite in the same time.
REP_MARGIN = 1.25
# Two timings are at the same clock when their median SM clocks differ by at most this share:
# half the agreement bar, so that the clocks alone cannot move a compute-bound ratio past it;
# or by one step of the SM clock (15 MHz on an H100 and an H200: 0.76% at 1,980 MHz, 1.03% at
# 1,455), which a power-capped clock's median moves by from loop to loop.
CLOCK_TOLERANCE = AGREEMENT / 2
CLOCK_STEP_MHZ = 15.0
# NVML readings a side needs before its median clock is trusted: the sampler reads every 20 ms and
# once at each end, and a reading at an end can catch an idle GPU's clock; a 20-call burst of a few
# tens of milliseconds has two or three readings, which cannot tell a clock from an idle moment.
MIN_CLOCK_SAMPLES = 5


@dataclass
class SuiteLoop:
    """One timed loop of the suite's side: per-call seconds, the loop's wall time, what NVML
    saw during it and what the rest before it saw (``settle``)."""

    samples_s: list[float]
    wall_s: float
    nvml: dict | None
    settled: dict | None = None


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
    suite_loop: Callable[[], SuiteLoop],
    *,
    first: SuiteLoop | None = None,
    recorded_l2_flush: bool = False,
    n_rounds: int = 1,
    settle: Callable[[], dict] | None = None,
    sampler: Callable[[], Any] | None = None,
    warmup_calls: int | None = None,
) -> dict:
    """``fn`` timed by do_bench and by the suite's loop in turns for ``n_rounds`` rounds
    (``take_turns``), as the module says: ``suite_loop`` times the suite's side once (L2
    flushed as do_bench flushes, after ``settle``); ``first``, the run's own loop where it was
    timed that way already (round 1 reuses it). ``recorded_l2_flush``: whether the loop whose
    figures the record holds flushed. ``settle`` runs before each do_bench as before each
    suite loop; ``sampler`` (a fresh ``perfsuite.measure.nvml_sampler.Sampler``) samples NVML
    during each do_bench; ``warmup_calls``: the calls the suite makes before its timed ones."""
    out: dict = {
        "tool": "triton.testing.do_bench",
        "suite_l2_flush": True,  # the compared loops: flushed as do_bench flushes
        "recorded_l2_flush": recorded_l2_flush,
        "reference_l2_flush": True,
    }
    why = do_bench_unavailable(device)
    if why:
        return {**out, "status": "skipped", "reason": why}
    import triton
    import triton.testing

    suite_first = first if first is not None else suite_loop()
    suite_ms = statistics.median(suite_first.samples_s) * 1e3
    rep_ms = max(DO_BENCH_MIN_REP_MS, REP_MARGIN * suite_first.wall_s * 1e3)
    warmup_ms = do_bench_warmup_ms(suite_ms, warmup_calls)

    def reference() -> dict:
        seen = settle() if settle is not None else None
        with sampler() if sampler is not None else contextlib.nullcontext() as s:
            times = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
        if not isinstance(times, list):
            raise RuntimeError(f"triton {triton.__version__}'s do_bench returned no per-call times (return_mode='all')")
        return {"samples_ms": [float(t) for t in times], "settled": seen, "nvml": s.summary() if s else None}

    turns = take_turns(n_rounds, suite_first, suite_loop, reference)
    rounds = [_round(t["order"], t["suite"], t["reference"]) for t in turns]
    return {
        **out,
        "status": "measured",
        "tool_version": triton.__version__,
        "settled": {"suite": turns[0]["suite"].settled, "reference": turns[0]["reference"]["settled"]},
        "rounds": rounds,
        "rep_ms": rep_ms,
        "warmup_ms": warmup_ms,
        **verdict(rounds),
    }


def _round(order: str, suite: SuiteLoop, reference: dict) -> dict:
    """One round: each side's median over the same number of calls from the start of its loop."""
    ref_ms = reference["samples_ms"]
    k = min(len(suite.samples_s), len(ref_ms))
    return {
        "order": order,
        "calls_compared": k,
        "suite_ms": statistics.median(suite.samples_s[:k]) * 1e3,
        "reference_ms": statistics.median(ref_ms[:k]),
        "reference_all_ms": statistics.median(ref_ms),  # do_bench's own median, over all its calls
        "reference_calls": len(ref_ms),
        "suite_clocks": _clocks(suite.nvml),
        "reference_clocks": _clocks(reference["nvml"]),
    }


def same_clock(suite: dict | None, reference: dict | None, tolerance: float = CLOCK_TOLERANCE) -> bool | None:
    """Whether two timings ran at the same SM clock (their medians within ``tolerance`` of the
    higher, or one clock step apart); None where NVML cannot say: no clock for a side, or fewer
    than ``MIN_CLOCK_SAMPLES`` readings behind its median."""
    sides = [c or {} for c in (suite, reference)]
    if any(not c.get("sm_clock_mhz_median") or (c.get("samples") or 0) < MIN_CLOCK_SAMPLES for c in sides):
        return None
    a, b = (c["sm_clock_mhz_median"] for c in sides)
    return abs(a - b) <= max(tolerance * max(a, b), CLOCK_STEP_MHZ)


def verdict(rounds: list[dict], tolerance: float = AGREEMENT) -> dict:
    """The cross-check's figures and its one-line note from its rounds (each with ``suite_ms``,
    ``reference_ms`` and both sides' clocks, as :func:`_round` makes them): rounds at different
    clocks are not paired (each round gets ``paired``: True, False, or None where NVML could not
    say, which pairs); the ratio is of the medians over the paired rounds. Where none paired,
    the ratio is over every round, ``agrees`` is False and the note says which side ran at
    which clock: the two were not timed alike, which is not a disagreement of the timers."""
    for r in rounds:
        r["paired"] = same_clock(r["suite_clocks"], r["reference_clocks"])
    paired = [r for r in rounds if r["paired"] is not False]
    unpaired = [r for r in rounds if r["paired"] is False]
    used = paired or rounds
    suite_ms = statistics.median(r["suite_ms"] for r in used)
    ref_ms = statistics.median(r["reference_ms"] for r in used)
    ratio = suite_ms / ref_ms if ref_ms > 0 else None
    out = {
        "suite_median_ms": suite_ms,
        "reference_median_ms": ref_ms,
        "time_ratio": ratio,
        "tolerance": tolerance,
        "rounds_paired": len(paired),
    }
    if not paired:
        return {**out, "agrees": False, "note": "not timed alike: " + _clock_text(unpaired)}
    agrees = ratio is not None and abs(ratio - 1.0) <= tolerance
    if agrees:
        note = "agrees"
    else:
        at = _mhz([r["suite_clocks"] for r in paired])
        note = f"differs by {abs(ratio - 1.0):.1%}" + (f" at the same clock ({at} MHz)" if at else "") if ratio else ""
    if unpaired:
        note += f"; {len(unpaired)} of {len(rounds)} rounds not paired ({_clock_text(unpaired)})"
    return {**out, "agrees": agrees, "note": note}


def _clock_text(rounds: list[dict]) -> str:
    """'the suite ran at 1,515 MHz, do_bench at 1,680-1,890 MHz (both: software power cap)'."""
    suite = [r["suite_clocks"] for r in rounds]
    ref = [r["reference_clocks"] for r in rounds]
    events = [_events(suite), _events(ref)]
    if events[0] == events[1]:
        why = f" (both: {events[0]})" if events[0] else ""
    else:
        why = f" (suite: {events[0] or 'no clock event'}; do_bench: {events[1] or 'no clock event'})"
    return f"the suite ran at {_mhz(suite)} MHz, do_bench at {_mhz(ref)} MHz (median SM clocks){why}"


def _mhz(clocks: list[dict | None]) -> str:
    values = sorted(c["sm_clock_mhz_median"] for c in clocks if c and c.get("sm_clock_mhz_median"))
    if not values:
        return ""
    lo, hi = values[0], values[-1]
    return f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}-{hi:,.0f}"


def _events(clocks: list[dict | None]) -> str:
    return ", ".join(dict.fromkeys(e for c in clocks if c for e in c.get("clock_events") or []))


def _clocks(nvml: dict | None) -> dict | None:
    """What a round's NVML summary says of its clocks: SM MHz min and median, clock events."""
    if not nvml:
        return None
    return {
        "sm_clock_mhz_min": nvml.get("sm_clock_mhz_min"),
        "sm_clock_mhz_median": nvml.get("sm_clock_mhz_median"),
        "clock_events": nvml.get("clock_events") or [],
        "samples": nvml.get("samples"),
    }
