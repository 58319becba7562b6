"""Which side of a collectives cross-check was launch-bound, size by size, and the verdict.

A collective's time per call has a fixed part (issuing the call, the kernel's start, the
ranks' handshake) and a part that grows with the bytes. Where one side of the cross-check is
still at its fixed part and the other is not, their ratio measures the two sides' fixed costs,
not the interconnect: nccl-tests run as one process driving four GPUs from threads read the
same 40 µs for an all_gather of 3 MiB and of 6 MiB, and the suite, one process per GPU, read
1.02-1.35 of its bus bandwidth there while agreeing within 1.1% from 12 MiB up.

Each side's **launch floor** is its own shortest time per call at the sizes up to
``FLOOR_MAX_BYTES`` (there a call moves too few bytes for the bytes to matter), per mode (out
of place, in place): measured from that side's own table, never assumed. A side is **at its
floor** at a size where its time per call is at most ``LAUNCH_FACTOR`` times its floor. At each
size ``launch_bound`` is:

- ``"reference"`` where nccl-tests is at its floor and the suite is not,
- ``"suite"`` where the suite is at its floor and nccl-tests is not,
- ``"both"`` where both are,
- ``None`` where neither is, or where the sweep has no size small enough to measure the floors.

The verdict at a size is ``"agrees within 3%"`` where the two times per call are within
``AGREEMENT`` of each other, else ``"differs, <side> launch-bound"`` naming the side, else
``"differs"`` (neither side at its floor: a finding about the measurement, not about launches)
or ``"differs, launch floors not measured"`` when the sweep starts above ``FLOOR_MAX_BYTES``.
"""

from __future__ import annotations

from typing import Any

AGREEMENT = 0.03  # two times per call within 3% of each other agree
LAUNCH_FACTOR = 1.25  # at most 1.25 x its own floor: the call's fixed part is at least 80% of it
FLOOR_MAX_BYTES = 64 << 10  # up to 64 KiB: under 0.2 µs of bytes at 400 GB/s, against a floor of several µs

REFERENCE, SUITE, BOTH = "reference", "suite", "both"
AGREES = "agrees within 3%"
SIDE_NAMES = {REFERENCE: "nccl-tests", SUITE: "the suite", BOTH: "both sides"}
MODE_NAMES = {"oop": "out of place", "ip": "in place"}

RULE = (
    f"each side's launch floor is its shortest time per call at sizes up to {FLOOR_MAX_BYTES} B, per mode; "
    f"a side is launch-bound at a size where its time per call is at most {LAUNCH_FACTOR} x its own floor "
    f"('reference', 'suite', 'both' where both are); a size agrees where the two times per call are within "
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
        for side, key in ((SUITE, "suite_time_us"), (REFERENCE, "nccl_tests_time_us")):
            t = c[key]
            if t > 0 and (mode[side] is None or t < mode[side]):
                mode[side] = t
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


def row_verdict(time_ratio: float, bound: str | None, floors_known: bool) -> str:
    """One size's verdict from nccl-tests' time over the suite's and the launch-bound side."""
    if abs(time_ratio - 1.0) <= AGREEMENT:
        return AGREES
    if bound is not None:
        return f"differs, {SIDE_NAMES[bound]} launch-bound"
    return "differs" if floors_known else "differs, launch floors not measured"


def attribute(compare: list[dict]) -> tuple[list[dict], dict[str, Any]]:
    """The compared rows (``collectives.collective_vs_nccl_tests``), each with ``time_ratio``
    (nccl-tests' time per call over the suite's: above 1 where the suite is faster, the busbw
    ratio where both busbw are printed), each side's time over its own floor,
    ``launch_bound`` and ``verdict``; and the cross-check's verdict (``verdict``)."""
    fl = floors(compare)
    rows = []
    for c in compare:
        f = fl[c["mode"]]
        suite_floor, ref_floor = f[SUITE], f[REFERENCE]
        known = suite_floor is not None and ref_floor is not None
        suite_x = c["suite_time_us"] / suite_floor if suite_floor else None
        ref_x = c["nccl_tests_time_us"] / ref_floor if ref_floor else None
        bound = None
        if suite_x is not None and ref_x is not None:
            bound = launch_bound(suite_x <= LAUNCH_FACTOR, ref_x <= LAUNCH_FACTOR)
        ratio = c["nccl_tests_time_us"] / c["suite_time_us"]
        rows.append(
            {
                **c,
                "time_ratio": ratio,
                "suite_over_floor": suite_x,
                "nccl_tests_over_floor": ref_x,
                "launch_bound": bound,
                "verdict": row_verdict(ratio, bound, known),
            }
        )
    return rows, verdict(rows, fl)


def _span(sizes: list[int]) -> str:
    lo, hi = min(sizes), max(sizes)
    return human_bytes(lo) if lo == hi else f"{human_bytes(lo)}-{human_bytes(hi)}"


def human_bytes(n: int) -> str:
    """8 B, 64 KiB, 3 MiB, 1 GiB: a size as nccl-tests' sweeps step it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def verdict(rows: list[dict], fl: dict[str, dict[str, float | None]]) -> dict[str, Any]:
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
        "floors_us": {mode: {"suite": f[SUITE], "nccl_tests": f[REFERENCE]} for mode, f in fl.items()},
        "agrees": not differs,
        "explained": all(r["launch_bound"] is not None for r in differs),
        "agrees_from_bytes": agrees_from,
        "differs": {side: sorted(set(sizes)) for side, sizes in by_side.items()},
        "summary": summary,
    }
