"""What a collective sweep will run: the sizes from ``min_bytes`` to ``max_bytes`` by
``step_factor``, the modes (out of place, in place) each collective has, the element types,
reductions and timing modes a sweep takes, and whether the results can be checked exactly
(a sum of rank-dependent values that stays below the type's exact-integer limit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfsuite import dtypes
from perfsuite.workloads.collectives._ops import (
    DEFAULT_INJECTED_VALUE,
    Counts,
    OpSpec,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    pass


MODES = ("oop", "ip")


MODE_LABELS = {"oop": "out-of-place", "ip": "in-place"}


# The element types the collectives sweep (the exact-value check needs each one's EXACT_LIMIT).
DTYPES = ("fp32", "fp64", "bf16", "fp16", "int8", "uint8", "int32", "int64")


# Largest integer each dtype holds exactly (floats: 2^(significand bits)).
EXACT_LIMIT = {
    "fp32": 2**24,
    "fp64": 2**53,
    "bf16": 2**8,
    "fp16": 2**11,
    "int8": 127,
    "uint8": 255,
    "int32": 2**31 - 1,
    "int64": 2**63 - 1,
}


# Largest finite value: products of powers of two (and the injected 7) stay exact up to it.
FLOAT_MAX = {"fp32": 3.4e38, "fp64": 1.7e308, "bf16": 3.38e38, "fp16": 65504.0}


# rank_time parameter -> how the per-rank busbw metric is aggregated (mean time <-> mean,
# slowest rank's time <-> lowest bandwidth, fastest <-> highest).
RANK_TIME_AGGREGATE = {"mean": "mean", "max": "min", "min": "max", "rank0": "rank0"}


INJECTIONS = ("none", "wrong_element", "raise", "hang")


# timing parameter -> what the record and the table say about it
TIMINGS = {
    "loop": "one interval around the iters back-to-back calls, divided by iters (nccl-tests); on the GPU "
    "the calls are queued behind a stream hold so that they run back to back, as nccl-tests' C "
    "loop runs them, and the host's time to issue each call is recorded beside (launch_us)",
    "host_loop": "one interval around the iters calls as a Python loop issues them, divided by iters, no "
    "hold: host-bound wherever issuing a call takes longer than running it",
    "per_call": "each call timed with its own pair of events (includes launch skew between ranks)",
}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_MAX


def modes_requested(in_place: str) -> tuple[str, ...]:
    return {"both": MODES, "oop": ("oop",), "ip": ("ip",)}[in_place]


def mode_available(op: OpSpec, mode: str) -> str | None:
    """Why ``op`` has no ``mode`` form, or None when it has one."""
    if mode == "oop":
        return None if op.oop_views is not None else op.no_oop
    return None if op.ip_views is not None else op.no_ip


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def result_bound(op: OpSpec, redop: str | None, world: int) -> int:
    """The largest value an output element can take, a self-test's injected one included."""
    vmax = 2 if redop == "prod" else 3
    injected = max(DEFAULT_INJECTED_VALUE, vmax)
    if not op.reduces or redop in ("min", "max", "avg"):
        return injected
    if redop == "sum":
        return vmax * (world - 1) + injected
    return 2 ** (world - 1) * 8  # prod: 2^(n-1) times the injected 7, rounded up to 8


def exactness_problem(op: OpSpec, dtype: str, redop: str | None, world: int) -> str | None:
    """Why the expected values would not be exact in ``dtype`` at this world size, or None."""
    bound = result_bound(op, redop, world)
    if redop == "prod" and is_float(dtype):
        limit = FLOAT_MAX[dtype]
    else:
        limit = EXACT_LIMIT[dtype]
    if bound > limit:
        return (
            f"{op.name} {redop or ''} over {world} ranks reaches {bound}, beyond what {dtype} holds "
            f"exactly ({limit:g}); the correctness count needs exact values (use a wider dtype or check=false)"
        )
    return None


# -- the sweep ----------------------------------------------------------------------------
@dataclass
class Plan:
    """What one run sweeps, decided before any buffer exists."""

    op: OpSpec
    dtype: str
    redop: str | None
    root: int
    modes: tuple[str, ...]
    unavailable: dict[str, str]  # mode -> why torch.distributed has no such form
    sizes: list[tuple[int, Counts]]  # (size in bytes as measured, counts)
    skipped_sizes: list[int] = field(default_factory=list)  # too small to give each rank one element


def plan(op: OpSpec, p: Any, world: int) -> Plan:
    elem = dtypes.element_size(p.dtype)
    modes, unavailable = [], {}
    for m in modes_requested(p.in_place):
        why = mode_available(op, m)
        if why:
            unavailable[m] = why
        else:
            modes.append(m)
    measured, skipped = [], []
    for s in sizes(p.min_bytes, p.max_bytes, p.step_factor):
        c = op.counts(s // elem, world)
        if c.param == 0:
            skipped.append(s)
        else:
            measured.append((c.span * elem, c))
    return Plan(
        op,
        p.dtype,
        p.redop if op.reduces else None,
        p.root if op.rooted else -1,
        tuple(modes),
        unavailable,
        measured,
        skipped,
    )
