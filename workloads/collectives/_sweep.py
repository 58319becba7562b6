"""The nccl-tests sweep, once for every collective of ``_ops``: sizes from ``min_bytes`` to
``max_bytes`` by ``step_factor``, out of place and in place, each timed over ``iters``
back-to-back calls after a warm-up, then checked element by element on fresh inputs.

What is nccl-tests' and kept so that figures compare with it:

- buffers sized for the largest size, allocated once; call ``i`` of a size uses the slice
  at offset ``i x size`` (modulo the buffer), so small sizes are not served from one hot
  cache line;
- warm-up: ``warmup`` calls at the largest and at the smallest size, then for each size
  and mode one untimed call and a barrier before the timed loop;
- time per call = mean over the loop; across ranks the mean by default (``-a 1``); of
  several loops (``repeats``), the median, as the cross-check takes nccl-tests' ``-N`` cycles;
- the correctness count is taken after the timed loop, from fresh rank-dependent inputs
  and one call; #wrong is summed over ranks.

Timing, as nccl-tests times it (``timing=loop``, the default): one interval around the
``iters`` back-to-back calls (a pair of CUDA events on the GPU, the host clock on the CPU,
where a gloo call returns when it is done), time per call = interval / iters; the loop is
run ``repeats`` times (each after a barrier) to give several samples for the statistics.
On the GPU the loop's calls are queued behind a stream hold (``perfsuite.measure.timing.StreamHold``),
so they run back to back as nccl-tests' C loop runs them; the host's time to issue each call
is recorded beside (``launch_us``), and the table's caption names the sizes where a Python
loop could not keep up. ``timing=host_loop`` is the same loop without the hold: what a
Python loop that issues one call after another sustains.
``timing=per_call`` times each call with its own pair of events instead: every sample
then also holds the launch skew between the ranks (65 us against nccl-tests' 12-18 us for
an 8-byte all_reduce on 2xH200), which is why it is an option, named as such in the record
and the table. With the run's ``--cuda-graph`` the loop of calls is captured once and each
replay timed the same way.

The plan of a sweep (sizes, modes, checks) is :mod:`._plan`; its table, :mod:`._report`.
"""

from __future__ import annotations

import functools
import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Check, distributed, dtypes
from perfsuite.workloads.collectives._ops import (
    DEFAULT_INJECTED_VALUE,
    INJECTED_VALUE,
    STEADY_VALUE,
    CallArgs,
    Counts,
    OpSpec,
    Views,
    values,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

from perfsuite.workloads.collectives._plan import MODE_LABELS, MODES, RANK_TIME_AGGREGATE, TIMINGS, Plan, plan

CHECK_CHUNK = 1 << 22  # elements compared at once: bounds the float64 scratch memory


HANG_SLEEP_S = 3600.0


HOLD_TRIES = 5  # a hold that ran out before the host issued every call doubles, at most this often


# -- timing -----------------------------------------------------------------------------
@dataclass
class Timed:
    """One size and mode's timing on this rank."""

    samples_s: list[float]  # seconds per call: one per timed loop, or one per call (per_call)
    launch_s: list[float]  # host seconds to issue one call, per timed loop (empty for per_call)
    unheld: int = 0  # loops whose hold ran out before every call was issued, after HOLD_TRIES


def time_calls(
    ctx: "RunContext", calls: list[Callable[[], None]], graph: bool, how: str, repeats: int, hold: Any = None
) -> Timed:
    """Seconds per call, through the run's timers (perfsuite.measure.timing). ``loop`` and ``host_loop``:
    one sample per repeat, the interval around all calls (or one replay of a CUDA graph of
    them) divided by their number, each repeat after a barrier, queued behind ``hold`` where
    there is one (the sweep makes one for ``loop`` on the GPU). ``per_call``: one sample per
    call (events around each call)."""
    n = len(calls)
    cycle = itertools.cycle(calls)

    def next_call() -> None:
        next(cycle)()

    if how == "per_call":
        return Timed(ctx.time_each(next_call, n), [])
    fn, per_fn = (_capture(calls), n) if graph else (next_call, 1)
    out = Timed([], [])
    for r in range(repeats):
        for attempt in range(HOLD_TRIES):
            if r or attempt:
                ctx.synchronize()
                _barrier()
            # One untimed call of the collective right before the start event (``before``):
            # the event then fires on every rank when the last rank has arrived, so the
            # interval holds no arrival skew between ranks (a host barrier releases processes
            # tens to hundreds of microseconds apart). nccl-tests -g N drives every GPU from
            # one thread and has no such skew.
            lt = ctx.time_loop(fn, n // per_fn, hold, before=calls[0])
            if hold is None or _all_held(lt.held):
                break
            if attempt < HOLD_TRIES - 1:
                hold.grow()
        else:
            out.unheld += 1
        out.samples_s.append(lt.seconds / n)
        out.launch_s.append(lt.launch_s / n)
    return out


def _all_held(held: bool | None) -> bool:
    """Whether every rank's hold outlasted its issuing of the calls: all ranks must agree,
    since a rank that retried alone would call one collective more than the others."""
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1 if held else 0], dtype=torch.int32, device="cuda")
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def _capture(calls: list[Callable[[], None]]) -> Callable[[], None]:
    """A CUDA graph of all calls, back to back; returns its replay."""
    import torch

    g = torch.cuda.CUDAGraph()
    # thread-local capture, as nccl-tests: NCCL's and torch's helper threads keep
    # working (watchdog queries, proxy allocations) while this thread captures.
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        for call in calls:
            call()
    torch.cuda.synchronize()
    _barrier()
    return g.replay


def _barrier() -> None:
    import torch.distributed as dist

    dist.barrier()


class Sweep:
    """Runs a plan on this rank: buffers, warm-up, timed loops, checks; then merges the
    ranks' figures into the nccl-tests table (on every rank, so all add the same metrics)."""

    def __init__(self, ctx: "RunContext", pl: Plan, p: Any) -> None:
        import torch
        import torch.distributed as dist

        self.ctx, self.plan, self.p = ctx, pl, p
        self.torch = torch
        self.rank, self.world = ctx.rank, ctx.world_size
        self.dt = dtypes.torch_dtype(pl.dtype)
        redop = (
            None
            if pl.redop is None
            else {
                "sum": dist.ReduceOp.SUM,
                "prod": dist.ReduceOp.PRODUCT,
                "min": dist.ReduceOp.MIN,
                "max": dist.ReduceOp.MAX,
                "avg": dist.ReduceOp.AVG,
            }[pl.redop]
        )
        self.args = CallArgs(self.rank, self.world, redop, pl.root)
        self.steady = STEADY_VALUE[pl.redop or "sum"]
        span = max(c.span for _, c in pl.sizes)
        dev = ctx.torch_device
        self.send = torch.full((span,), self.steady, dtype=self.dt, device=dev) if "oop" in pl.modes else None
        self.recv = torch.full((span,), self.steady, dtype=self.dt, device=dev)
        self.graph = ctx.controls.cuda_graph
        self.hold = ctx.stream_hold() if p.timing == "loop" else None

    # views and calls -----------------------------------------------------------------
    def views(self, mode: str, c: Counts, shift: int) -> Views:
        op = self.plan.op
        if mode == "oop":
            assert op.oop_views is not None and self.send is not None  # the plan has only modes the op has
            return op.oop_views(self.send[shift:], self.recv[shift:], c, self.rank)
        assert op.ip_views is not None
        return op.ip_views(self.recv[shift:], c, self.rank)

    def calls(self, mode: str, c: Counts, n: int) -> list[Callable[[], None]]:
        """``n`` calls, call i on the slice at offset i x span (modulo the buffers)."""
        steps = max(1, self.recv.numel() // c.span)
        out: list[Callable[[], None]] = []
        for i in range(n):
            v = self.views(mode, c, c.span * (i % steps))
            out.append(functools.partial(self.plan.op.call, v, self.args))
        return out

    def sync(self) -> None:
        self.ctx.synchronize()

    # the run -------------------------------------------------------------------------
    def run(self, first_round: bool = True) -> list[dict]:
        """This rank's raw figures: per size, per mode, seconds per call and #wrong. Rounds
        after the first (a cross-check's turns with nccl-tests) time again but neither check
        the outputs again nor inject a self-test's failure (#wrong is the first round's)."""
        pl = self.plan
        first = pl.modes[0]
        for _, c in (pl.sizes[-1], pl.sizes[0]):  # nccl-tests: warm up at the largest, then the smallest size
            for call in self.calls(first, c, self.ctx.controls.warmup):
                call()
        self.sync()
        rows = self._sizes(first_round)
        distributed.note_progress(f"{pl.op.name} sweep done")
        return rows

    def _sizes(self, first_round: bool) -> list[dict]:
        pl, p = self.plan, self.p
        rows = []
        steps = len(pl.sizes) * len(pl.modes)
        for i, (size, c) in enumerate(pl.sizes):
            row: dict[str, Any] = {"size_bytes": size, "modes": {}}
            for j, mode in enumerate(pl.modes):
                done = i * len(pl.modes) + j
                distributed.note_progress(f"{pl.op.name} {size} B {MODE_LABELS[mode]}", done, steps)
                if i == 0 and first_round:
                    self.inject_failure()
                calls = self.calls(mode, c, p.iters)
                calls[0]()  # untimed call, as nccl-tests' "sync" call before the loop
                self.sync()
                _barrier()
                timed = time_calls(self.ctx, calls, self.graph, p.timing, p.repeats, self.hold)
                wrong, checked = self.check(mode, c) if p.check and first_round else (None, None)
                row["modes"][mode] = {
                    "samples_s": timed.samples_s,
                    "launch_s": timed.launch_s,
                    "unheld": timed.unheld,
                    "wrong": wrong,
                    "checked": checked,
                }
            rows.append(row)
        return rows

    def inject_failure(self) -> None:
        """Self-tests of the harness (parameter ``inject``): this rank fails or hangs while
        the others are inside the first collective."""
        if self.rank != self.p.inject_rank:
            return
        if self.p.inject == "raise":
            raise RuntimeError(f"injected failure on rank {self.rank} (self-test: inject=raise)")
        if self.p.inject == "hang":
            distributed.note_progress("hanging on purpose (self-test: inject=hang)")
            while True:
                time.sleep(HANG_SLEEP_S)

    # the correctness count -------------------------------------------------------------
    def check(self, mode: str, c: Counts) -> tuple[int, int]:
        """Fresh inputs, one call, #wrong output elements on this rank and how many it
        compared; buffers back to the steady value afterwards."""
        v = self.views(mode, c, 0)
        self.recv[: c.span].fill_(self.steady)
        self._fill(v.inp)
        if self.p.inject == "wrong_element" and self.rank == self.p.inject_rank:
            v.inp[0] = INJECTED_VALUE.get(self.plan.redop or "", DEFAULT_INJECTED_VALUE)
        self.sync()
        self.plan.op.call(v, self.args)
        self.sync()
        mine = self.plan.op.checked(self.rank, self.plan.root)
        wrong = self._count_wrong(v.out, c) if mine else 0
        self.recv[: c.span].fill_(self.steady)
        if self.send is not None:
            self.send[: c.span].fill_(self.steady)
        return wrong, v.out.numel() if mine else 0

    def _fill(self, t: Any) -> None:
        torch = self.torch
        for start in range(0, t.numel(), CHECK_CHUNK):
            stop = min(start + CHECK_CHUNK, t.numel())
            k = torch.arange(start, stop, dtype=torch.int64, device=t.device)
            t[start:stop] = values(self.rank, k, self.plan.redop).to(self.dt)

    def _expected(self, k: Any, c: Counts) -> Any:
        torch = self.torch
        pl = self.plan
        src, idx = pl.op.source(k, self.rank, self.world, c, pl.root)
        if not pl.op.reduces:
            return values(src, idx, None).to(torch.float64)
        acc = values(0, idx, pl.redop).to(torch.float64)
        for j in range(1, self.world):
            x = values(j, idx, pl.redop).to(torch.float64)
            if pl.redop in ("sum", "avg"):
                acc += x
            elif pl.redop == "prod":
                acc *= x
            elif pl.redop == "min":
                acc = torch.minimum(acc, x)
            else:
                acc = torch.maximum(acc, x)
        return acc / self.world if pl.redop == "avg" else acc

    def _count_wrong(self, out: Any, c: Counts) -> int:
        torch = self.torch
        # avg divides by n: one rounding per step (NCCL pre-multiplies by 1/n for floats).
        tol = self.world * torch.finfo(self.dt).eps if self.plan.redop == "avg" else 0.0
        wrong = 0
        for start in range(0, out.numel(), CHECK_CHUNK):
            stop = min(start + CHECK_CHUNK, out.numel())
            k = torch.arange(start, stop, dtype=torch.int64, device=out.device)
            exp = self._expected(k, c)
            got = out[start:stop].to(torch.float64)
            ok = got == exp if tol == 0.0 else (got - exp).abs() <= tol * exp.abs()
            wrong += int((~ok).sum())
        return wrong


# -- merging the ranks' figures ------------------------------------------------------------
def rank_time_per_call(samples_s: list[float], timing: str) -> float:
    """One rank's time per call at one size and mode. Timed loops (``loop``, ``host_loop``)
    give one sample each, already the loop's interval / iters: their median (the lower middle
    one for an even count), as the cross-check folds nccl-tests' ``-N`` cycles
    (``perfsuite.crosscheck.nccl_tests.fold_cycles``), so that one slow loop moves neither side (on 2xH200 one
    of seven loops put a 16 MiB all_reduce's mean 3% above the other six). ``per_call``
    samples are single calls: their mean, the interval / iters of their one loop."""
    if timing == "per_call":
        return sum(samples_s) / len(samples_s)
    return statistics.median_low(samples_s)


def merge(pl: Plan, per_rank: list[list[dict]], rank_time: str, world: int, timing: str = "loop") -> list[dict]:
    """The nccl-tests table from every rank's raw figures (the same on every rank)."""
    factor = pl.op.bus_factor(world)
    rows = []
    for i, (size, c) in enumerate(pl.sizes):
        row: dict[str, Any] = {
            "size_bytes": size,
            "count": c.param,
            "dtype": dtypes.nccl_name(pl.dtype),
            "redop": pl.redop or "none",
            "root": pl.root,
        }
        for mode in MODES:
            if mode not in pl.modes:
                row[mode] = None
                continue
            means = [rank_time_per_call(r[i]["modes"][mode]["samples_s"], timing) for r in per_rank]
            t = distributed.aggregate(means, rank_time)
            wrongs = [r[i]["modes"][mode]["wrong"] for r in per_rank]
            checked = [r[i]["modes"][mode].get("checked") for r in per_rank]
            algbw = size / t / 1e9
            # the slowest rank's host time to issue a call: what bounds a loop of them
            launches = [r[i]["modes"][mode].get("launch_s") or [] for r in per_rank]
            launch = max((sum(x) / len(x) for x in launches if x), default=None)
            row[mode] = {
                "time_us": t * 1e6,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * factor,
                "wrong": None if any(w is None for w in wrongs) else int(sum(wrongs)),
                "checked": None if any(k is None for k in checked) else int(sum(checked)),
                "time_us_per_rank": [m * 1e6 for m in means],
                "launch_us": None if launch is None else launch * 1e6,
                "unheld_loops": sum(r[i]["modes"][mode].get("unheld", 0) for r in per_rank),
            }
        rows.append(row)
    return rows


def pool_rounds(rounds: list[list[dict]]) -> list[dict]:
    """One rank's raw figures of several rounds as one: per size and mode every round's
    timed loops (and host launch times) together, the loops whose hold ran out summed, #wrong
    from the first round (the only one checked)."""
    out = []
    for rows in zip(*rounds):
        row = {"size_bytes": rows[0]["size_bytes"], "modes": {}}
        for mode, first in rows[0]["modes"].items():
            each = [r["modes"][mode] for r in rows]
            row["modes"][mode] = {
                "samples_s": [s for e in each for s in e["samples_s"]],
                "launch_s": [s for e in each for s in e["launch_s"]],
                "unheld": sum(e["unheld"] for e in each),
                "wrong": first["wrong"],
                "checked": first.get("checked"),
            }
        out.append(row)
    return out


@contextmanager
def process_group(ctx: "RunContext") -> Iterator[str]:
    """The run's process group, and its backend. A run of one process (world size 1: one GPU
    visible, or ``--nproc-per-node 1``) joins none, so the sweep makes a group of one rank for its
    own calls, as nccl-tests -g 1 runs its collectives on one rank (NCCL on the GPU, gloo on the
    CPU), and leaves it afterwards."""
    import torch.distributed as dist

    if dist.is_initialized():
        yield str(dist.get_backend())
        return
    if ctx.world_size != 1:
        raise RuntimeError(f"a run of {ctx.world_size} ranks reached the sweep without a process group")
    backend = "nccl" if ctx.device == "cuda" else "gloo"
    bound = {"device_id": ctx.torch_device} if ctx.device == "cuda" else {}
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, **bound)
    try:
        yield backend
    finally:
        dist.destroy_process_group()


def run_collective(ctx: "RunContext", op: OpSpec, p: Any) -> None:
    """The driver behind every ``collectives.<op>`` workload's ``execute``. Cross-checked,
    the sweep and nccl-tests take turns for the cross-check's rounds (nccl-tests first in
    even rounds, ``perfsuite.crosscheck.take_turns``' order), each ``repeats`` loops or cycles
    per size, and both sides' figures are the medians over every round."""
    with process_group(ctx) as backend:
        _run_collective(ctx, op, p, backend)


def _run_collective(ctx: "RunContext", op: OpSpec, p: Any, backend: str) -> None:
    import torch.distributed as dist

    pl = plan(op, p, ctx.world_size)
    sweep = Sweep(ctx, pl, p)
    checking = ctx.crosscheck.requested
    n_rounds = ctx.crosscheck.rounds() if checking else 1
    nccl_sweep = dict(
        min_bytes=p.min_bytes,
        max_bytes=p.max_bytes,
        step_factor=p.step_factor,
        iters=p.iters,
        dtype=dtypes.nccl_name(pl.dtype),
        redop=pl.redop,
        root=pl.root if pl.op.rooted else None,
        check=p.check,
        cycles=1 if p.timing == "per_call" else p.repeats,
    )
    rounds, references = [], []
    with ctx.gpu_sampler() as sampler:  # every round, nccl-tests' turns included
        for r in range(1, n_rounds + 1):
            if checking and r % 2 == 0:
                references.append(ctx.crosscheck.nccl_tests(pl.op.name, **nccl_sweep))
            rounds.append(sweep.run(first_round=r == 1))
            if checking and r % 2 == 1:
                references.append(ctx.crosscheck.nccl_tests(pl.op.name, **nccl_sweep))
            if checking and not ctx.crosscheck.nccl_tests_measured(references[-1]):
                break  # nccl-tests cannot run here (skipped or failed): nothing to take turns with
    throttle = sampler.summary()
    mine = pool_rounds(rounds)
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, mine)
    rows = merge(pl, gathered, p.rank_time, ctx.world_size, p.timing)
    factor = op.bus_factor(ctx.world_size)
    single_node = distributed.local_world_size() == ctx.world_size
    roofline = "p2p" if ctx.device == "cuda" and single_node else None
    aggregate = RANK_TIME_AGGREGATE[p.rank_time]
    details = describe(ctx, pl, p, factor, backend)
    details["rows"] = rows
    if checking:  # nccl-tests' binary, same sweep, same call (perfsuite.crosscheck)
        details["crosscheck"] = ctx.crosscheck.compare_nccl_tests(references, rows)
        details["rounds"] = n_rounds
    if sweep.hold is not None:
        details["hold_s"] = sweep.hold.seconds  # the stream hold's final length (it doubles when it ran out)
    if throttle is not None:
        details["throttle"] = {"run": throttle}  # the whole sweep: every case
    bus_all = []
    for mode in pl.modes:
        label = MODE_LABELS[mode]
        # the size of peak bandwidth (algbw: the same size as busbw's wherever the bus factor is
        # not 0; at world size 1 nccl-tests' factors are 0 for most collectives)
        peak = max(range(len(rows)), key=lambda i: rows[i][mode]["algbw_gbps"])
        size = rows[peak]["size_bytes"]
        own = mine[peak]["modes"][mode]["samples_s"]
        ctx.add_metric(
            label,
            "busbw_gbps",
            "GB/s",
            [size / s / 1e9 * factor for s in own],
            higher_is_better=True,
            roofline=roofline,
            aggregate=aggregate,
        )
        bus = [r[mode]["busbw_gbps"] for r in rows]
        bus_all += bus
        ctx.add_metric(label, "avg_busbw_gbps", "GB/s", [sum(bus) / len(bus)], higher_is_better=True, aggregate="rank0")
        ctx.add_metric(
            label,
            "latency_us",
            "us",
            [s * 1e6 for s in mine[0]["modes"][mode]["samples_s"]],
            higher_is_better=False,
            aggregate=p.rank_time,
        )
        details["peak"][mode] = {
            "size_bytes": size,
            "busbw_gbps": rows[peak][mode]["busbw_gbps"],
            "algbw_gbps": rows[peak][mode]["algbw_gbps"],
        }
    details["avg_busbw_gbps"] = sum(bus_all) / len(bus_all)
    if p.check:
        bad = [(r["size_bytes"], MODE_LABELS[m], r[m]["wrong"]) for r in rows for m in pl.modes if r[m]["wrong"]]
        total = sum(w for _, _, w in bad)
        details["wrong_total"] = total
        compared = sum(r[m]["checked"] or 0 for r in rows for m in pl.modes)
        detail = "; ".join(f"{s} B {m}: {w}" for s, m, w in bad[:8]) + (" ..." if len(bad) > 8 else "")
        ctx.add_check(
            Check(
                label="correctness",
                passed=total == 0,
                error=float(total),
                tolerance=0.0,
                elements_checked=compared,
                elements_failed=total,
                method="nccl-tests data check: rank-dependent exact inputs, one call per size and "
                "mode after the timed loop, every output element against its expected value",
                detail=f"wrong elements (summed over ranks): {detail}" if bad else "",
            )
        )
    ctx.details.update(details)


def describe(ctx: "RunContext", pl: Plan, p: Any, factor: float, backend: str) -> dict:
    """What a reader needs beside the table: how it was measured and on what."""
    return {
        "collective": pl.op.name,
        "backend": backend,
        "world_size": ctx.world_size,
        "local_world_size": distributed.local_world_size(),
        "nccl_version": distributed.nccl_version() if ctx.device == "cuda" else None,
        "topology": distributed.topology() if ctx.rank == 0 else None,  # only rank 0's details are kept
        "dtype": pl.dtype,
        "redop": pl.redop,
        "root": pl.root,
        "busbw_factor": factor,
        "modes": {
            MODE_LABELS[m]: "measured" if m in pl.modes else f"n/a: {pl.unavailable.get(m, 'not asked')}" for m in MODES
        },
        "warmup_iters": ctx.controls.warmup,
        "iters": p.iters,
        "timing": p.timing,
        "timing_method": TIMINGS[p.timing],
        "repeats": 1 if p.timing == "per_call" else p.repeats,
        "cuda_graph": ctx.controls.cuda_graph,
        "rank_time": p.rank_time,
        "skipped_sizes": pl.skipped_sizes,
        "check": p.check,
        "inject": p.inject if p.inject == "none" else f"{p.inject} on rank {p.inject_rank}",
        "peak": {},
        "metrics_note": (
            "busbw_gbps: samples (one per timed loop with timing=loop or host_loop, one per call with "
            "timing=per_call) at the size of peak table busbw, per rank, aggregated across ranks as "
            "declared; the table's time is each rank's time per call (the median of its timed loops; "
            "per_call: the mean of its calls) aggregated by rank_time (mean: nccl-tests' -a 1)"
        ),
    }
