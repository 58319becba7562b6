"""Which side of a collectives cross-check was launch-bound, size by size, and the verdict.

A collective's time per call has a fixed part (issuing the call, the kernel's start, the
ranks' handshake) and a part that grows with the bytes. Where one side of the cross-check
carries a larger fixed part than the other, their ratio measures the two sides' fixed costs,
not the interconnect: nccl-tests run as one process driving four GPUs from threads read the
same 40 µs for an all_gather of 3 MiB and of 6 MiB, and about 3 µs more than the suite (one
process per GPU) at every size up to 16 MiB, so the suite read 1.03-1.30 of its bus bandwidth
at 1-4 MiB while agreeing within 1% from 64 MiB up.

Everything below is measured from each side's own per-size times, per mode (out of place, in
place); nothing is set per GPU. Each side's **launch floor** is its shortest time per call at
the sizes up to ``FLOOR_MAX_BYTES`` (there a call moves too few bytes for the bytes to
matter). At each size a side is named launch-bound (``launch_bound``, with the reason in
``launch_bound_why``) by the first of these that holds:

1. **at its floor**: its time per call is at most ``LAUNCH_FACTOR`` times its own floor
   (``"reference"``, ``"suite"``, or ``"both"`` where both are);
2. **its fixed cost is the gap** (sizes that differ by more than ``AGREEMENT`` only, the slower
   side only): the slower side's floor is the higher one, and its time exceeds the faster
   side's by no more than the most it exceeded it at the floor sizes, give or take
   ``AGREEMENT`` of its own time. Equal bytes cost on both sides and a larger fixed cost
   (added to the bytes, or overlapping them as a host-bound launch does) give exactly this;
   a side that is slower at moving bytes does not, since its gap grows with the size;
3. **its time stays flat** (sizes that differ only, the slower side only): from the previous
   size to this one its time grew by at most ``FLAT_GROWTH`` in log-log terms (x1.41 for x4
   the bytes) while the other side's grew by more: something other than the bytes sets it.

Otherwise ``launch_bound`` is None (``"differs"``: a finding about the measurement, not about
launches; ``"differs, launch floors not measured"`` when the sweep has no size up to
``FLOOR_MAX_BYTES`` and rule 3 does not hold).

The verdict at a size is ``"agrees within 3%"`` where the two times per call are within
``AGREEMENT`` of each other, else ``"differs, <side> launch-bound"`` naming the side.
"""

from __future__ import annotations

import math
from typing import Any

AGREEMENT = 0.03  # two times per call within 3% of each other agree
LAUNCH_FACTOR = 1.25  # at most 1.25 x its own floor: the call's fixed part is at least 80% of it
FLOOR_MAX_BYTES = 64 << 10  # up to 64 KiB: under 0.2 µs of bytes at 400 GB/s, against a floor of several µs
# Time growing as size**0.25 or slower (x1.41 for x4 the bytes, x1.19 for x2) is flat: a side
# bound by its bytes grows close to size**1 once its fixed part is small.
FLAT_GROWTH = 0.25

REFERENCE, SUITE, BOTH = "reference", "suite", "both"
AGREES = "agrees within 3%"
SIDE_NAMES = {REFERENCE: "nccl-tests", SUITE: "the suite", BOTH: "both sides"}
MODE_NAMES = {"oop": "out of place", "ip": "in place"}
_TIME_KEYS = {SUITE: "suite_time_us", REFERENCE: "nccl_tests_time_us"}
_OTHER = {SUITE: REFERENCE, REFERENCE: SUITE}

RULE = (
    f"each side's launch floor is its shortest time per call at sizes up to {FLOOR_MAX_BYTES} B, per mode; "
    f"a side is launch-bound at a size where its time per call is at most {LAUNCH_FACTOR} x its own floor "
    f"('reference', 'suite', 'both' where both are); where the two differ by more than {AGREEMENT:.0%} and "
    f"neither is at its floor, the slower side is launch-bound where its floor is the higher one and its "
    f"time exceeds the other's by no more than the most it did at the floor sizes (give or take "
    f"{AGREEMENT:.0%} of its time), or where its time grew as size**{FLAT_GROWTH} or slower from the "
    f"previous size while the other's grew faster; a size agrees where the two times per call are within "
    f"{AGREEMENT:.0%}, else it differs, naming the launch-bound side where there is one"
)


def floors(compare: list[dict]) -> dict[str, dict[str, float | None]]:
    """Per mode, each side's launch floor (µs per call): its shortest time per call at the sizes
    up to ``FLOOR_MAX_BYTES``; None for a side with no such size."""
    out: dict[str, dict[str, float | None]] = {}
    for c in compare:
        mode = out.setdefault(c["mode"], {SUITE: None, REFERENCE: None})
        if c["size_bytes"] > FLOOR_MAX_BYTES:
            continue
        for side, key in _TIME_KEYS.items():
            t = c[key]
            if t > 0 and (mode[side] is None or t < mode[side]):
                mode[side] = t
    return out


def fixed_excess(compare: list[dict]) -> dict[str, dict[str, float | None]]:
    """Per mode, the most each side's time per call exceeded the other's at the sizes up to
    ``FLOOR_MAX_BYTES`` (µs; 0 where it never did): how much more its fixed part costs, as its
    own floor-size times measured it. None for a mode with no such size."""
    out: dict[str, dict[str, float | None]] = {}
    for c in compare:
        mode = out.setdefault(c["mode"], {SUITE: None, REFERENCE: None})
        if c["size_bytes"] > FLOOR_MAX_BYTES:
            continue
        for side, other in _OTHER.items():
            gap = max(0.0, c[_TIME_KEYS[side]] - c[_TIME_KEYS[other]])
            mode[side] = gap if mode[side] is None else max(mode[side], gap)
    return out


def launch_bound(suite_at_floor: bool, reference_at_floor: bool) -> str | None:
    """Which side is launch-bound, from whether each is at its own floor."""
    if suite_at_floor and reference_at_floor:
        return BOTH
    if reference_at_floor:
        return REFERENCE
    if suite_at_floor:
        return SUITE
    return None


def growth(t_us: float, prev_t_us: float, size: int, prev_size: int) -> float | None:
    """How a side's time per call grew from the previous size: the exponent g in
    time ∝ size**g over that step (1: the bytes set it; 0: flat)."""
    if t_us <= 0 or prev_t_us <= 0 or size <= prev_size:
        return None
    return math.log(t_us / prev_t_us) / math.log(size / prev_size)


def row_verdict(time_ratio: float, bound: str | None, floors_known: bool) -> str:
    """One size's verdict from nccl-tests' time over the suite's and the launch-bound side."""
    if abs(time_ratio - 1.0) <= AGREEMENT:
        return AGREES
    if bound is not None:
        return f"differs, {SIDE_NAMES[bound]} launch-bound"
    return "differs" if floors_known else "differs, launch floors not measured"


def _us(t: float) -> str:
    return f"{t:.2f} µs"


def _judge(
    c: dict, prev: dict | None, fl: dict[str, float | None], excess: dict[str, float | None]
) -> tuple[str | None, str | None]:
    """One size's launch-bound side and why (rules 1-3 of the module's docstring)."""
    t = {side: c[key] for side, key in _TIME_KEYS.items()}
    over = {side: t[side] / f if f else None for side, f in fl.items()}
    if over[SUITE] is not None and over[REFERENCE] is not None:
        at = {side: over[side] <= LAUNCH_FACTOR for side in over}  # type: ignore[operator]
        bound = launch_bound(at[SUITE], at[REFERENCE])
        if bound is not None:
            sides = (SUITE, REFERENCE) if bound == BOTH else (bound,)
            why = "; ".join(f"{SIDE_NAMES[s]} at {over[s]:.2f} x its own floor ({_us(fl[s] or 0.0)})" for s in sides)
            return bound, f"{why} (at most {LAUNCH_FACTOR} x: its fixed part is most of its time)"
    if t[SUITE] <= 0 or abs(t[REFERENCE] / t[SUITE] - 1.0) <= AGREEMENT:
        return None, None
    slow = REFERENCE if t[REFERENCE] > t[SUITE] else SUITE
    fast = _OTHER[slow]
    gap, most = t[slow] - t[fast], excess[slow]
    floor_slow, floor_fast = fl[slow], fl[fast]
    higher = floor_slow is not None and floor_fast is not None and floor_slow > floor_fast
    if higher and most and gap <= most + AGREEMENT * t[slow]:
        return slow, (
            f"{SIDE_NAMES[slow]} slower by {_us(gap)}, no more than its fixed cost over {SIDE_NAMES[fast]}'s "
            f"(up to {_us(most)} at sizes up to {human_bytes(FLOOR_MAX_BYTES)}; floors {_us(floor_slow or 0.0)} "
            f"against {_us(floor_fast or 0.0)}) give or take {AGREEMENT:.0%} of its time: "
            "the bytes cost both sides the same"
        )
    if prev is not None:
        g = {side: growth(t[side], prev[key], c["size_bytes"], prev["size_bytes"]) for side, key in _TIME_KEYS.items()}
        g_slow, g_fast = g[slow], g[fast]
        if g_slow is not None and g_fast is not None and g_slow <= FLAT_GROWTH < g_fast:
            step = c["size_bytes"] / prev["size_bytes"]
            x_slow, x_fast = t[slow] / prev[_TIME_KEYS[slow]], t[fast] / prev[_TIME_KEYS[fast]]
            return slow, (
                f"{SIDE_NAMES[slow]} stayed flat: its time x{x_slow:.2f} for x{step:g} the bytes "
                f"(size**{g_slow:.2f}), {SIDE_NAMES[fast]}'s x{x_fast:.2f} (size**{g_fast:.2f})"
            )
    return None, None


def attribute(compare: list[dict]) -> tuple[list[dict], dict[str, Any]]:
    """The compared rows (``collectives.collective_vs_nccl_tests``), each with ``time_ratio``
    (nccl-tests' time per call over the suite's: above 1 where the suite is faster, the busbw
    ratio where both busbw are printed), each side's time over its own floor and its growth
    from the previous size, ``launch_bound``, ``launch_bound_why`` and ``verdict``; and the
    cross-check's verdict (``verdict``)."""
    fl, excess = floors(compare), fixed_excess(compare)
    previous: dict[str, dict] = {}
    judged: dict[int, dict] = {}
    for i, c in sorted(enumerate(compare), key=lambda ic: (ic[1]["mode"], ic[1]["size_bytes"])):
        f, prev = fl[c["mode"]], previous.get(c["mode"])
        known = f[SUITE] is not None and f[REFERENCE] is not None
        bound, why = _judge(c, prev, f, excess[c["mode"]])
        ratio = c["nccl_tests_time_us"] / c["suite_time_us"]
        g = {
            side: growth(c[key], prev[key], c["size_bytes"], prev["size_bytes"]) if prev else None
            for side, key in _TIME_KEYS.items()
        }
        judged[i] = {
            **c,
            "time_ratio": ratio,
            "suite_over_floor": c["suite_time_us"] / f[SUITE] if f[SUITE] else None,
            "nccl_tests_over_floor": c["nccl_tests_time_us"] / f[REFERENCE] if f[REFERENCE] else None,
            "suite_growth": g[SUITE],
            "nccl_tests_growth": g[REFERENCE],
            "launch_bound": bound,
            "launch_bound_why": why,
            "verdict": row_verdict(ratio, bound, known),
        }
        previous[c["mode"]] = c
    rows = [judged[i] for i in range(len(compare))]
    return rows, verdict(rows, fl, excess)


def _span(sizes: list[int]) -> str:
    lo, hi = min(sizes), max(sizes)
    return human_bytes(lo) if lo == hi else f"{human_bytes(lo)}-{human_bytes(hi)}"


def human_bytes(n: int) -> str:
    """8 B, 64 KiB, 3 MiB, 1 GiB: a size as nccl-tests' sweeps step it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def verdict(
    rows: list[dict], fl: dict[str, dict[str, float | None]], excess: dict[str, dict[str, float | None]] | None = None
) -> dict[str, Any]:
    """The cross-check's verdict over every size and mode: ``agrees`` (every size within
    ``AGREEMENT``), ``explained`` (every size that differs names its launch-bound side),
    ``agrees_from_bytes`` (the smallest size from which every larger one agrees, per mode),
    the sizes that differ grouped by launch-bound side, and ``summary``, one line."""
    differs = [r for r in rows if r["verdict"] != AGREES]
    by_side: dict[str, list[int]] = {}
    for r in differs:
        side = r["launch_bound"] or ("unmeasured" if r["verdict"].endswith("not measured") else "none")
        by_side.setdefault(side, []).append(r["size_bytes"])
    agrees_from: dict[str, int | None] = {}
    for mode in fl:
        mine = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["size_bytes"])
        start = None
        for r in reversed(mine):
            if r["verdict"] != AGREES:
                break
            start = r["size_bytes"]
        agrees_from[mode] = start
    if not differs:
        summary = AGREES
    else:
        parts = []
        for side, sizes in by_side.items():
            if side in SIDE_NAMES:
                parts.append(f"{SIDE_NAMES[side]} {'are' if side == BOTH else 'is'} launch-bound at {_span(sizes)}")
            elif side == "none":
                parts.append(f"neither side is launch-bound at {_span(sizes)}")
            else:
                unmeasured = f"no size up to {FLOOR_MAX_BYTES} B"
                parts.append(f"the launch floors were not measured ({unmeasured}) at {_span(sizes)}")
        froms = [s for s in agrees_from.values() if s is not None]
        every_mode = froms and len(froms) == len(agrees_from)
        head = f"agrees within 3% from {human_bytes(max(froms))} up; " if every_mode else ""
        summary = f"{head}differs where " + "; ".join(parts)
    return {
        "rule": RULE,
        "tolerance": AGREEMENT,
        "launch_factor": LAUNCH_FACTOR,
        "floor_max_bytes": FLOOR_MAX_BYTES,
        "flat_growth": FLAT_GROWTH,
        "floors_us": {mode: {"suite": f[SUITE], "nccl_tests": f[REFERENCE]} for mode, f in fl.items()},
        "fixed_excess_us": {
            mode: {"suite": e[SUITE], "nccl_tests": e[REFERENCE]} for mode, e in (excess or {}).items()
        },
        "agrees": not differs,
        "explained": all(r["launch_bound"] is not None for r in differs),
        "agrees_from_bytes": agrees_from,
        "differs": {side: sorted(set(sizes)) for side, sizes in by_side.items()},
        "summary": summary,
    }
