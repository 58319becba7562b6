"""The seven collectives as data: for each, the buffer sizes nccl-tests uses, the
``torch.distributed`` call out of place and in place, nccl-tests' bus-bandwidth factor,
and what every element of the output must be. ``_sweep`` runs any of them.

Sizes follow nccl-tests (``*GetCollByteCount``): from a size in bytes, ``count`` elements;
the table's ``count`` column is the count argument of the NCCL call (all_gather: the
elements each rank sends; reduce_scatter: the elements each rank receives; all_to_all:
the elements sent to each peer) and ``size`` is the larger of the send and receive buffers.
algbw = size / time; busbw = algbw x factor(n):

    all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
    broadcast, reduce, send_recv 1.

Inputs are exact small integers that depend on the rank and the element (``values``), so
every expected output is exact in every supported dtype and a single wrong element shows.

Modes torch.distributed cannot express are not faked: all_reduce, broadcast and reduce
exist in place only (``dist.all_reduce(t)`` writes ``t``); all_to_all and send_recv have
no defined in-place form (nccl-tests does not check those either).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Multipliers of the element hash that picks each input value (any odd constants do).
_HASH_K = 2654435761
_HASH_R = 40503

REDOPS = ("sum", "prod", "min", "max", "avg")
# The value a reduction maps onto itself: timed loops run on it, so that in-place
# reductions feeding their output back stay finite and never become subnormal.
STEADY_VALUE = {"sum": 0, "prod": 1, "min": 1, "max": 1, "avg": 1}
# Largest input value, and the value a self-test writes into one input element: outside
# the normal range (and below it for min), so the element cannot come out right.
VALUE_MAX = {"prod": 2}
DEFAULT_VALUE_MAX = 3
INJECTED_VALUE = {"min": 0}
DEFAULT_INJECTED_VALUE = 7


@dataclass(frozen=True)
class Counts:
    """Elements for one size: the call's count argument, and each buffer's length."""

    param: int
    send: int
    recv: int

    @property
    def span(self) -> int:
        return max(self.send, self.recv)


@dataclass(frozen=True)
class Views:
    """The tensors one call uses: ``inp`` is read, ``out`` is checked (the same storage in
    place)."""

    inp: Any
    out: Any


@dataclass(frozen=True)
class OpSpec:
    name: str
    reduces: bool
    rooted: bool
    bus_factor: Callable[[int], float]
    counts: Callable[[int, int], Counts]  # (elements of the size, world) -> Counts
    # (send buffer, recv buffer, counts, rank) -> Views; None: the mode does not exist
    oop_views: Callable[[Any, Any, Counts, int], Views] | None
    ip_views: Callable[[Any, Counts, int], Views] | None
    no_oop: str  # why there is no out-of-place form (when oop_views is None)
    no_ip: str
    call: Callable[[Views, "CallArgs"], None]
    # expected values of output elements ``k`` on ``rank``: (sources, index) per element,
    # reduced over all ranks when ``reduces`` (sources is then None)
    source: Callable[[Any, int, int, Counts, int], tuple[Any, Any]]
    checked: Callable[[int, int], bool] = lambda rank, root: True  # reduce: the root only


@dataclass(frozen=True)
class CallArgs:
    rank: int
    world: int
    redop: Any  # torch.distributed.ReduceOp member, or None
    root: int


def values(rank: Any, index: Any, redop: str | None) -> Any:
    """Input value of element ``index`` on ``rank`` (int64 tensors or ints): 1..3 (1..2 for
    prod, so that a product over n ranks stays a power of two), well mixed over ranks and
    elements so that sums differ from element to element."""
    h = index * _HASH_K + (rank + 1) * _HASH_R
    h = h ^ (h >> 13)
    return 1 + (h >> 3) % VALUE_MAX.get(redop or "", DEFAULT_VALUE_MAX)


def _same(c: int, n: int) -> Counts:
    return Counts(c, c, c)


def _gather_counts(c: int, n: int) -> Counts:
    s = c // n
    return Counts(s, s, s * n)


def _scatter_counts(c: int, n: int) -> Counts:
    s = c // n
    return Counts(s, s * n, s)


def _a2a_counts(c: int, n: int) -> Counts:
    s = c // n
    return Counts(s, s * n, s * n)


def _oop(send: Any, recv: Any, c: Counts, rank: int) -> Views:
    return Views(send[: c.send], recv[: c.recv])


def _ip_whole(buf: Any, c: Counts, rank: int) -> Views:
    return Views(buf[: c.recv], buf[: c.recv])


def _ip_gather(buf: Any, c: Counts, rank: int) -> Views:
    # nccl-tests' in-place all_gather: each rank's input is its own slot of the output.
    return Views(buf[rank * c.param : (rank + 1) * c.param], buf[: c.recv])


def _ip_scatter(buf: Any, c: Counts, rank: int) -> Views:
    # in-place reduce_scatter: the output is this rank's slot of the input.
    return Views(buf[: c.send], buf[rank * c.param : (rank + 1) * c.param])


def _all_reduce(v: Views, a: CallArgs) -> None:
    import torch.distributed as dist

    dist.all_reduce(v.out, op=a.redop)


def _all_gather(v: Views, a: CallArgs) -> None:
    import torch.distributed as dist

    dist.all_gather_into_tensor(v.out, v.inp)


def _reduce_scatter(v: Views, a: CallArgs) -> None:
    import torch.distributed as dist

    dist.reduce_scatter_tensor(v.out, v.inp, op=a.redop)


def _all_to_all(v: Views, a: CallArgs) -> None:
    import torch.distributed as dist

    dist.all_to_all_single(v.out, v.inp)


def _broadcast(v: Views, a: CallArgs) -> None:
    import torch.distributed as dist

    dist.broadcast(v.out, src=a.root)


def _reduce(v: Views, a: CallArgs) -> None:
    import torch.distributed as dist

    dist.reduce(v.out, dst=a.root, op=a.redop)


def _send_recv(v: Views, a: CallArgs) -> None:
    """nccl-tests' sendrecv: a ring, each rank sends to the next and receives from the previous."""
    import torch.distributed as dist

    ops = [dist.P2POp(dist.isend, v.inp, (a.rank + 1) % a.world), dist.P2POp(dist.irecv, v.out, (a.rank - 1) % a.world)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


_NO_OOP_TORCH = "torch.distributed.{} writes its result into its input tensor: there is no out-of-place form"
_RACE = "sending from and receiving into one buffer at once is a race; nccl-tests does not check it either"

OPS: dict[str, OpSpec] = {
    "all_reduce": OpSpec(
        "all_reduce",
        reduces=True,
        rooted=False,
        bus_factor=lambda n: 2 * (n - 1) / n,
        counts=_same,
        oop_views=None,
        ip_views=_ip_whole,
        no_oop=_NO_OOP_TORCH.format("all_reduce"),
        no_ip="",
        call=_all_reduce,
        source=lambda k, r, n, c, root: (None, k),
    ),
    "all_gather": OpSpec(
        "all_gather",
        reduces=False,
        rooted=False,
        bus_factor=lambda n: (n - 1) / n,
        counts=_gather_counts,
        oop_views=_oop,
        ip_views=_ip_gather,
        no_oop="",
        no_ip="",
        call=_all_gather,
        source=lambda k, r, n, c, root: (k // c.param, k % c.param),
    ),
    "reduce_scatter": OpSpec(
        "reduce_scatter",
        reduces=True,
        rooted=False,
        bus_factor=lambda n: (n - 1) / n,
        counts=_scatter_counts,
        oop_views=_oop,
        ip_views=_ip_scatter,
        no_oop="",
        no_ip="",
        call=_reduce_scatter,
        source=lambda k, r, n, c, root: (None, r * c.param + k),
    ),
    "all_to_all": OpSpec(
        "all_to_all",
        reduces=False,
        rooted=False,
        bus_factor=lambda n: (n - 1) / n,
        counts=_a2a_counts,
        oop_views=_oop,
        ip_views=None,
        no_oop="",
        no_ip="all-to-all in place: " + _RACE,
        call=_all_to_all,
        source=lambda k, r, n, c, root: (k // c.param, r * c.param + k % c.param),
    ),
    "broadcast": OpSpec(
        "broadcast",
        reduces=False,
        rooted=True,
        bus_factor=lambda n: 1.0,
        counts=_same,
        oop_views=None,
        ip_views=_ip_whole,
        no_oop=_NO_OOP_TORCH.format("broadcast"),
        no_ip="",
        call=_broadcast,
        source=lambda k, r, n, c, root: (root, k),
    ),
    "reduce": OpSpec(
        "reduce",
        reduces=True,
        rooted=True,
        bus_factor=lambda n: 1.0,
        counts=_same,
        oop_views=None,
        ip_views=_ip_whole,
        no_oop=_NO_OOP_TORCH.format("reduce"),
        no_ip="",
        call=_reduce,
        source=lambda k, r, n, c, root: (None, k),
        checked=lambda rank, root: rank == root,
    ),
    "send_recv": OpSpec(
        "send_recv",
        reduces=False,
        rooted=False,
        bus_factor=lambda n: 1.0,
        counts=_same,
        oop_views=_oop,
        ip_views=None,
        no_oop="",
        no_ip="send/recv in place: " + _RACE,
        call=_send_recv,
        source=lambda k, r, n, c, root: ((r - 1) % n, k),
    ),
}
