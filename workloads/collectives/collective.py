"""``collectives.<op>``: the nccl-tests measurements of the seven torch.distributed
collectives, NCCL on GPUs and gloo on CPUs. One class per collective, all driven by
``_sweep`` (planned by ``_plan``) from the op table in ``_ops``; ``perfsuite show`` prints nccl-tests' table.

Parameters mirror nccl-tests' flags: ``min_bytes`` (-b), ``max_bytes`` (-e),
``step_factor`` (-f), ``dtype`` (-d), ``redop`` (-o), ``root`` (-r), ``iters`` (-n),
``check`` (-c), ``rank_time`` (-a); ``timing`` says how the loop is timed (``loop``: one
interval around the ``iters`` calls, as nccl-tests, queued behind a stream hold on the GPU;
``host_loop``: the same without the hold; ``per_call``: events around each call)
and ``repeats`` how many timed loops give the samples; the warm-up count (-w) is the run's ``--warmup`` and
CUDA-graph capture (-G) the run's ``--cuda-graph``. ``inject`` is a self-test of the
harness, off by default: a wrong input element (the correctness count must catch it), a
rank that raises, or one that hangs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from perfsuite import Requirements, Workload, dtypes, param
from perfsuite.headlines import SWEEP
from perfsuite.workloads.collectives import _plan, _report, _sweep
from perfsuite.workloads.collectives._ops import OPS, REDOPS, OpSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class SweepParams:
    min_bytes: int = param(8, "smallest size in bytes (nccl-tests -b; K/M/G suffixes)")
    max_bytes: int = param(1 * GIB, "largest size in bytes (nccl-tests -e)")
    step_factor: int = param(2, "size multiplier between steps (nccl-tests -f)")
    dtype: str = param("fp32", "element type (nccl-tests -d)", choices=_plan.DTYPES)
    iters: int = param(20, "timed calls per size and mode (nccl-tests -n)")
    timing: str = param(
        "loop",
        "loop: one interval around the iters calls / iters (nccl-tests), queued behind a "
        "stream hold on the GPU; host_loop: the same as a Python loop issues them; per_call: "
        "events around each call",
        choices=tuple(_plan.TIMINGS),
    )
    repeats: int = param(5, "timed loops per size and mode (loop, host_loop): the samples of the statistics")
    in_place: str = param("both", "modes: out-of-place, in-place or both", choices=("both", "oop", "ip"))
    check: bool = param(True, "count wrong elements after each size's timed loop (nccl-tests -c)")
    rank_time: str = param(
        "mean",
        "time reported across ranks, as nccl-tests -a (mean is its default)",
        choices=tuple(_plan.RANK_TIME_AGGREGATE),
    )
    inject: str = param(
        "none",
        "self-test of the harness: wrong_element, raise or hang on inject_rank",
        choices=_plan.INJECTIONS,
        harness=True,
    )
    inject_rank: int = param(0, "the rank a self-test acts on", harness=True)

    def __post_init__(self) -> None:
        if self.min_bytes < 1 or self.max_bytes < self.min_bytes:
            raise ValueError("need 1 <= min_bytes <= max_bytes")
        if self.step_factor < 2:
            raise ValueError("step_factor must be at least 2")
        if self.iters < 1:
            raise ValueError("iters must be at least 1")
        if self.repeats < 1:
            raise ValueError("repeats must be at least 1")


@dataclass(frozen=True)
class ReducingParams(SweepParams):
    redop: str = param("sum", "reduction (nccl-tests -o)", choices=REDOPS)


@dataclass(frozen=True)
class RootedParams(SweepParams):
    root: int = param(0, "root rank (nccl-tests -r)")


@dataclass(frozen=True)
class RootedReducingParams(ReducingParams):
    root: int = param(0, "root rank (nccl-tests -r)")


QUICK = {"max_bytes": 1 * MIB, "iters": 10, "repeats": 3}


class Collective(Workload):
    """One collective's sweep; subclasses name the op."""

    category = "collectives"
    # 5: a rank's time per size is the median of its timed loops, not their mean; 4: the loop
    # queued behind a stream hold on the GPU (host launch beside); 3: an untimed aligning call
    # before each timed loop; 2: one interval around the loop, repeats
    version = 5
    op: ClassVar[OpSpec]
    Params = SweepParams
    quick: ClassVar[Mapping[str, Any]] = QUICK
    # One rank per GPU visible, as nccl-tests -g N; at world size 1 (one GPU) the sweep runs on a
    # group of one rank as nccl-tests -g 1 does (its bus factors then read 0 for most collectives).
    requirements = Requirements(devices=("cpu", "cuda"), packages=("torch",), rank_per_gpu=True)
    primary_metric = "busbw_gbps"
    # nccl-tests' figure: bus bandwidth at every size of the sweep, out of place and in place
    headline = SWEEP
    # The sweep times its own loops (iters per size, as nccl-tests): only these apply.
    controls_honoured = ("warmup", "cuda_graph")

    def footprint_bytes(self, world_size: int) -> int | None:
        """The send buffer (out of place) and the receive buffer, sized for the largest size."""
        pl = _plan.plan(self.op, self.params, world_size)
        if not pl.sizes:
            return None  # unmet says why
        span = max(c.span for _, c in pl.sizes) * dtypes.element_size(pl.dtype)
        return span * (2 if "oop" in pl.modes else 1)

    def unmet(self, ctx: "RunContext") -> str | None:
        p, op, n = self.params, self.op, ctx.world_size
        if ctx.controls.cuda_graph and ctx.device != "cuda":
            return "CUDA-graph capture (--cuda-graph) needs device cuda"
        if ctx.controls.cuda_graph and p.timing == "per_call":
            return "timing=per_call times each call; a CUDA graph replays the whole loop (use timing=loop)"
        if n == 1 and op.name == "send_recv" and ctx.device != "cuda":
            return (
                "a ring of one rank sends to itself, which gloo cannot (NCCL can, as nccl-tests' sendrecv -g 1): "
                "run it on 2 or more ranks (--nproc-per-node 2)"
            )
        pl = _plan.plan(op, p, n)
        if not pl.modes:
            return "; ".join(f"{_plan.MODE_LABELS[m]}: {why}" for m, why in pl.unavailable.items())
        if not pl.sizes:
            return f"no size in {p.min_bytes}..{p.max_bytes} B gives each of {n} ranks one {p.dtype} element"
        redop = getattr(p, "redop", None) if op.reduces else None
        if redop == "avg" and not _plan.is_float(p.dtype):
            return f"avg needs a floating-point dtype, not {p.dtype}"
        root = getattr(p, "root", 0)
        if not 0 <= root < n:
            return f"root {root} is not a rank of a world of {n}"
        if p.inject != "none" and not 0 <= p.inject_rank < n:
            return f"inject_rank {p.inject_rank} is not a rank of a world of {n}"
        return _plan.exactness_problem(op, p.dtype, redop, n) if p.check else None

    def execute(self, ctx: "RunContext") -> None:
        _sweep.run_collective(ctx, self.op, self.params)

    @classmethod
    def render_details(cls, record: Mapping[str, Any]) -> Any:
        return _report.render_table(dict(record))


class AllReduce(Collective):
    name = "collectives.all_reduce"
    description = "all_reduce sweep, nccl-tests style: time, algbw, busbw (x 2(n-1)/n), #wrong"
    op = OPS["all_reduce"]
    Params = ReducingParams


class AllGather(Collective):
    name = "collectives.all_gather"
    description = "all_gather sweep, nccl-tests style: time, algbw, busbw (x (n-1)/n), #wrong"
    op = OPS["all_gather"]


class ReduceScatter(Collective):
    name = "collectives.reduce_scatter"
    description = "reduce_scatter sweep, nccl-tests style: time, algbw, busbw (x (n-1)/n), #wrong"
    op = OPS["reduce_scatter"]
    Params = ReducingParams


class AllToAll(Collective):
    name = "collectives.all_to_all"
    description = "all_to_all sweep, nccl-tests style: time, algbw, busbw (x (n-1)/n), #wrong"
    op = OPS["all_to_all"]


class Broadcast(Collective):
    name = "collectives.broadcast"
    description = "broadcast sweep, nccl-tests style: time, algbw, busbw (x 1), #wrong"
    op = OPS["broadcast"]
    Params = RootedParams


class Reduce(Collective):
    name = "collectives.reduce"
    description = "reduce sweep, nccl-tests style: time, algbw, busbw (x 1), #wrong"
    op = OPS["reduce"]
    Params = RootedReducingParams


class SendRecv(Collective):
    name = "collectives.send_recv"
    description = "send/recv ring sweep, nccl-tests style: time, algbw, busbw (x 1), #wrong"
    op = OPS["send_recv"]


COLLECTIVES = (AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv)
