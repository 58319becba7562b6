"""What a CUDA graph of torch.distributed all_reduce calls holds, and what each way of
capturing them costs per call: the suite's ``--cuda-graph`` loop read 9.4-12.0 us per
all_reduce below 64 KiB on 2xH200 where its held eager loop read 6.0 us and nccl-tests' own
graph (``-t 2 -g 1 -G 1``) 6.6-7.6 us in the same call. Each variant captures ``--calls``
in-place float32 sums of one small tensor in one graph, dumps the graph (rank 0, DOT) and
counts its nodes by kind, then times one replay per repeat the suite's way (behind a stream
hold, one untimed eager call before the start event), and lists what the GPU ran in one
loop (torch.profiler: operations, busy time, the gaps between them). Variants:

- ``sync``: ``dist.all_reduce(t)`` per call, as the suite's sweep captures them;
- ``async``: ``async_op=True`` per call and one ``wait()`` after the last;
- ``replays``: the ``sync`` graph replayed 10 times back to back in one timed loop;
- ``no_before``: the ``sync`` graph behind the hold with no untimed call before the start event;
- ``graph_before``: the untimed call before the start event is a one-call graph, not an eager
  call (no eager-to-graph switch inside the interval's neighbourhood);
- ``host``: the ``sync`` graph timed as nccl-tests times ``-G 1``: a barrier, the host clock
  around one replay and the stream's synchronisation, no hold, no call before;
- ``eager``: no graph, the held eager loop (the floor), 20 calls only.

Graphs of 20 and of 200 calls (``--calls``): a cost paid once per replay (graph launch, the
ranks' skew at its start) shrinks per call with the count, one paid per collective does not.
NCCL adds one EVENT_RECORD node after each captured kernel while ``NCCL_GRAPH_MIXING_SUPPORT``
is on (its default; nccl-tests' graph has it too): run the probe again with
``NCCL_GRAPH_MIXING_SUPPORT=0``, and again with ``NCCL_GRAPH_REGISTER=0`` (no user-buffer registration at capture).

    torchrun --nproc-per-node 2 tools/probes/graph_probe.py --out DIR   # DIR gets graph_probe.json, *.dot
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: bench.nccl_rank

VARIANTS = ("eager", "sync", "async", "replays", "no_before", "graph_before", "host")
REPLAYS = 10  # "replays": the sync graph launched this often back to back per timed loop
ENV_KNOBS = ("NCCL_GRAPH_MIXING_SUPPORT", "NCCL_GRAPH_REGISTER")  # recorded per row when set
EAGER_MAX_CALLS = 20  # an eager loop longer than this outruns the probe's 2 ms hold
NODE_KIND = re.compile(
    r"\b(KERNEL|MEMCPY|MEMSET|HOST|EMPTY|EVENT_RECORD|WAIT_EVENT|EVENT_WAIT|MEM_ALLOC|MEM_FREE|"
    r"GRAPH|EXT_SEMAS_SIGNAL|EXT_SEMAS_WAIT|BATCH_MEM_OP|CONDITIONAL)\b"
)


NODE_LABEL = re.compile(r'^"[^"]*_node_\d+"\[[^\n]*?label="(.*?)"\]', re.M | re.S)


def node_kinds(dot: str) -> dict[str, int]:
    """Nodes of a CUDA graph's DOT dump by kind: the first kind word of each node's label,
    which CUDA writes on the label's second line ("0 (topoId: 40)", then "EVENT_WAIT")."""
    counts: collections.Counter = collections.Counter()
    for label in NODE_LABEL.findall(dot):
        m = NODE_KIND.search(label)
        counts[m.group(1) if m else "other"] += 1
    kernels = re.findall(r"\b(ncclDevKernel\w*|ncclKernel\w*|\w*[Kk]ernel\w*)", dot)
    counts.update({f"kernel name {k}": 1 for k in sorted(set(kernels))[:6]})
    return dict(counts)


def dump_nodes(graph, path: Path) -> dict:
    """The graph's nodes by kind from its DOT dump, or why there is no dump."""
    try:
        graph.debug_dump(str(path))
    except Exception as exc:  # noqa: BLE001 - the probe reports it and goes on
        return {"dump_failed": f"{type(exc).__name__}: {exc}"}
    if not path.exists():
        return {"dump_failed": f"debug_dump wrote no {path.name}"}
    return node_kinds(path.read_text())


def gpu_trace(fn, per_loop: int, record: bool) -> dict | None:
    """One loop of ``fn`` under torch.profiler: the GPU's operations by name, their total
    time, and the idle gaps between consecutive ones (us). None on ranks that do not record."""
    import torch
    import torch.distributed as dist

    dist.barrier()
    torch.cuda.synchronize()
    if not record:
        for _ in range(per_loop):
            fn()
        torch.cuda.synchronize()
        return None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(per_loop):
            fn()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    names = collections.Counter(e.name[:60] for e in events)
    busy = sum(e.time_range.elapsed_us() for e in events)
    gaps = [b.time_range.start - a.time_range.end for a, b in itertools.pairwise(events)]
    return {
        "ops": dict(names.most_common(6)),
        "count": len(events),
        "busy_us": round(busy, 2),
        "span_us": round(events[-1].time_range.end - events[0].time_range.start, 2) if events else 0.0,
        "median_gap_us": round(statistics.median(gaps), 2) if gaps else None,
    }


def probe(variant: str, size: int, calls: int, t, hold, args, rank: int, world: int, result: dict) -> None:
    """Capture (or not) ``calls`` all_reduces of ``t``, trace one loop, time ``repeats`` loops."""
    import torch
    import torch.distributed as dist

    from perfsuite.measure.timing import time_loop

    name = f"{variant} {size} B {calls} calls"
    replays = 1

    def eager_call() -> None:  # the suite's untimed call before the start event; the eager loop's call
        dist.all_reduce(t)

    before: Callable[[], None] | None = eager_call

    if variant == "eager":
        fn, per_loop = eager_call, calls
    else:
        g = torch.cuda.CUDAGraph(keep_graph=True)  # its template stays for debug_dump
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            if variant == "async":
                works = [dist.all_reduce(t, async_op=True) for _ in range(calls)]
                works[-1].wait()
            else:
                for _ in range(calls):
                    dist.all_reduce(t)
        torch.cuda.synchronize()
        if rank == 0 and calls <= EAGER_MAX_CALLS:
            result["graphs"][name] = dump_nodes(g, args.out / f"graph-{variant}-{size}B-{calls}.dot")
        g.replay()  # one untimed replay (instantiation, first-launch upload)
        torch.cuda.synchronize()
        # "replays": the same graph launched REPLAYS times back to back in one timed loop, so a
        # cost paid once per replay is spread over REPLAYS x calls collectives
        replays = REPLAYS if variant == "replays" else 1
        fn, per_loop = g.replay, replays
        if variant == "no_before":
            before = None
        elif variant == "graph_before":
            one = torch.cuda.CUDAGraph()
            with torch.cuda.graph(one, capture_error_mode="thread_local"):
                dist.all_reduce(t)
            one.replay()
            torch.cuda.synchronize()
            before = one.replay
    # what the GPU ran in one loop, with the gaps between its operations (rank 0 records it)
    result["traces"][name] = gpu_trace(fn, per_loop, rank == 0)
    samples, held = [], []
    for _ in range(args.repeats):  # (no retry: a rank retrying alone would desynchronise)
        torch.cuda.synchronize()
        dist.barrier()
        if variant == "host":  # nccl-tests -G 1: host clock from the barrier to the stream's sync
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) / calls)
            held.append(False)
            continue
        lt = time_loop(fn, per_loop, "cuda", hold, before=before)
        samples.append(lt.seconds / (calls * replays))
        held.append(bool(lt.held))
    mine = torch.tensor([statistics.median(samples)], device="cuda", dtype=torch.float64)
    dist.all_reduce(mine)
    row = {
        "variant": variant,
        "size_bytes": size,
        "calls": calls,
        "replays": replays,
        "time_us": float(mine[0]) / world * 1e6,
        "loops_held_on_rank0": sum(held),
        "env": {k: os.environ[k] for k in ENV_KNOBS if k in os.environ},
    }
    result["rows"].append(row)
    if rank == 0:
        print(
            f"{variant:7} {size:>7} B  {row['time_us']:7.2f} us per all_reduce ({calls} calls x {replays} "
            f"replays per loop, median of {args.repeats}) {row['env'] or ''}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,1024,65536", help="bytes, comma-separated")
    ap.add_argument("--calls", default="20,200", help="collectives per captured graph, comma-separated")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist

    from bench.nccl_rank import init_nccl_rank
    from perfsuite.measure.timing import StreamHold

    rank, world = init_nccl_rank()
    args.out.mkdir(parents=True, exist_ok=True)
    hold = StreamHold()
    result = {
        "world_size": world,
        "calls": args.calls,
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "rows": [],
        "graphs": {},
        "traces": {},
    }
    for size in (int(s) for s in args.sizes.split(",")):
        t = torch.zeros(max(1, size // 4), device="cuda")
        for _ in range(5):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        for calls in (int(c) for c in args.calls.split(",")):
            for variant in VARIANTS:
                if variant == "eager" and calls > EAGER_MAX_CALLS:
                    continue  # Python would outrun the hold: the held eager floor is the 20-call one
                probe(variant, size, calls, t, hold, args, rank, world, result)
    if rank == 0:
        for name, kinds in result["graphs"].items():
            print(f"graph {name}: {kinds}")
        for name, trace in result["traces"].items():
            print(f"trace {name}: {trace}")
        (args.out / "graph_probe.json").write_text(json.dumps(result, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    from bench.nccl_rank import run_rank

    run_rank(main, "graph_probe")
